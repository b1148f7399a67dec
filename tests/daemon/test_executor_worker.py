"""The executor's worker on its own (no daemon): the call files of an earlier release, the checkpoint
signal, the walltime warning and the array index."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import cloudpickle  # type: ignore[import-untyped]

from gridsched.api.executor import AGAIN
from gridsched.protocol.jobs import EXIT_CHECKPOINTED
from tests.conftest import wait_for
from tests.daemon.test_executor_checkpoint import Units, units_logged

ROOT = Path(__file__).resolve().parents[2]
WORKER = [sys.executable, "-m", "gridsched.job.executor_worker"]

OLD_SCRIPT = """\
import pickle
import sys


def triple(x):
    return 3 * x


if __name__ == "__main__":
    with open(sys.argv[1], "wb") as f:
        pickle.dump((triple, (14,), {}), f)  # by name, __main__.triple, as an earlier release sent it
"""


def env(**more: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **more}


def outcome(path: Path) -> tuple[object, ...]:
    return tuple(pickle.loads(path.read_bytes()))


def test_a_call_queued_by_an_earlier_release_with_its_script(tmp_path):
    """IN OUT MAIN: the worker runs MAIN as __mp_main__ first, so a function sent by name is found."""
    script = tmp_path / "old.py"
    script.write_text(OLD_SCRIPT)
    src, dst = tmp_path / "call-1.in", tmp_path / "call-1.out"
    subprocess.run([sys.executable, str(script), str(src)], check=True, env=env(), timeout=60)
    r = subprocess.run([*WORKER, str(src), str(dst), str(script)], env=env(), timeout=60, capture_output=True)
    assert r.returncode == 0, r.stderr
    assert outcome(dst)[:2] == (True, 42)
    assert subprocess.run([*WORKER, "a"], env=env(), timeout=60, capture_output=True).returncode == 2


def start(tmp_path: Path, *args: str, **more: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*WORKER, str(tmp_path / "call.in"), str(tmp_path / "call.out"), *args],
        env=env(**more),
        stderr=subprocess.PIPE,
    )


def test_the_checkpoint_signal_saves_the_call_and_a_new_run_resumes(tmp_path):
    log = tmp_path / "units.log"
    (tmp_path / "call.in").write_bytes(cloudpickle.dumps((Units(), (12, str(log)), {"pause": 0.05})))
    ckdir = tmp_path / "ck"
    p = start(tmp_path, "--signal=USR1", GS_CHECKPOINT_DIR=str(ckdir))
    wait_for(lambda: len(units_logged(log)) >= 3, 30, "three units")
    p.send_signal(signal.SIGUSR1)
    assert p.wait(30) == EXIT_CHECKPOINTED
    assert (ckdir / "call.pkl").exists() and not (tmp_path / "call.out").exists()
    p = start(tmp_path, "--signal=USR1", GS_CHECKPOINT_DIR=str(ckdir), GS_RESTART_COUNT="1")
    assert p.wait(30) == 0
    ok, value, _tb, info = outcome(tmp_path / "call.out")
    assert (ok, value, info) == (True, sum(range(12)), {"restarts": 1})
    assert units_logged(log) == [str(i) for i in range(12)]
    # a run of a job whose call has ended does nothing
    assert start(tmp_path, "--signal=USR1", GS_CHECKPOINT_DIR=str(ckdir)).wait(30) == 0


def test_the_walltime_warning_saves_the_call_for_a_new_job(tmp_path):
    log = tmp_path / "units.log"
    (tmp_path / "call.in").write_bytes(cloudpickle.dumps((Units(), (400, str(log)), {"pause": 0.05})))
    again = tmp_path / "call.again"
    p = start(tmp_path, "--signal=USR1", "--timeout-signal=USR2", f"--again={again}")
    wait_for(lambda: len(units_logged(log)) >= 2, 30, "two units")
    p.send_signal(signal.SIGUSR2)
    assert p.wait(30) == 0
    ok, value, _tb, _info = outcome(tmp_path / "call.out")
    assert (ok, value) == (AGAIN, str(again))
    fn, args, _kwargs = pickle.loads(again.read_bytes())
    assert fn.done == len(units_logged(log)) and args == (400, str(log))


def test_an_array_task_takes_its_own_files(tmp_path):
    for i in range(2):
        (tmp_path / f"call-{i}.in").write_bytes(cloudpickle.dumps((pow, (i + 2, 2), {})))
    base = {k: v for k, v in env().items() if k not in ("GS_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_ID")}
    for i, var in ((0, "GS_ARRAY_TASK_ID"), (1, "SLURM_ARRAY_TASK_ID")):
        argv = [*WORKER, str(tmp_path / "call-%a.in"), str(tmp_path / "call-%a.out"), "--array"]
        r = subprocess.run(argv, env={**base, var: str(i)}, timeout=60)
        assert r.returncode == 0
        assert outcome(tmp_path / f"call-{i}.out")[:2] == (True, (i + 2) ** 2)
