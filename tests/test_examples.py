"""The example job scripts do what their comments promise, as real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

COUNTER = Path(__file__).resolve().parents[1] / "scripts" / "examples" / "checkpoint_counter.sh"


def _wait_for_units(ledger: Path, n: int, proc: subprocess.Popen[bytes], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if ledger.exists() and len(ledger.read_text().split("\n")) > n:
            return
        assert proc.poll() is None, "the counter ended before doing any work"
        time.sleep(0.01)
    raise AssertionError(f"no {n} units within {limit} s")


def test_checkpoint_counter_saves_its_state_when_asked_again_and_again(tmp_path):
    """A burst of checkpoint signals to the whole job (as a restarted daemon may send) loses no unit."""
    ckpt = tmp_path / "checkpoint"
    ckpt.mkdir()
    ledger = tmp_path / "units"
    env = dict(os.environ, GS_CHECKPOINT_DIR=str(ckpt), LEDGER=str(ledger), UNIT_SECONDS="0.02")
    for burst in range(5):
        p = subprocess.Popen(["sh", str(COUNTER), "100000"], env=env, start_new_session=True, stdout=subprocess.DEVNULL)
        try:
            _wait_for_units(ledger, 3 * burst + 3, p)
            for _ in range(40):  # keeps coming while the state is saved
                try:
                    os.killpg(p.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    break
                time.sleep(0.0005)
            assert p.wait(30) == 75
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        done = [int(line.split()[1]) for line in ledger.read_text().split("\n") if line]
        assert done == list(range(1, len(done) + 1)), "a unit was done twice or skipped"
        assert int((ckpt / "progress").read_text()) == len(done), "saved state is not the work done"
    # and the last restart finishes the work from there
    n = len(done) + 3
    r = subprocess.run(["sh", str(COUNTER), str(n)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    done = [int(line.split()[1]) for line in ledger.read_text().split("\n") if line]
    assert done == list(range(1, n + 1))
    assert not (ckpt / "progress").exists()
