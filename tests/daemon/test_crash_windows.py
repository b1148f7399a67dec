"""The daemon dies after signalling a job and before recording why: the restart still gets it right.

The daemon sends a job its walltime SIGTERM, its cancel SIGTERM or its
checkpoint signal a moment before the job table says why.  Each test kills the
daemon with SIGKILL, sends the job the signal the dead daemon would have sent,
lets the job end while no daemon runs, and restarts the daemon: the job must
end (or be requeued) as if the daemon had lived.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "scripts" / "examples"
CONFIG = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
checkpoint_grace = "5s"
[machine]
cores = 4
[daemon]
autostart = false
"""


def signal_job_while_down(gs, jid: int, sig: int, after: float | None = None) -> None:
    """Kill the daemon once the job's shepherd is under way (RUNNING is shown from the start's decision on),
    then send ``sig`` to the job's process group (at time ``after``) and wait for its end."""
    jdir = gs.spool / "jobs" / str(jid)

    def naming_the_group() -> dict | None:  # written once the job's process is spawned, after the first version
        try:
            info = json.loads((jdir / "seg-1.pid").read_text())
        except (FileNotFoundError, ValueError):
            return None
        return info if "pgid" in info else None

    wait_for(naming_the_group, 15, "the job's shepherd to name the job's process group")
    gs.kill9()
    info = json.loads((jdir / "seg-1.pid").read_text())
    if after is not None:
        wait_for(lambda: time.time() >= after, 30, "the walltime to pass")
    os.killpg(info["pgid"], sig)
    wait_for((jdir / "seg-1.exit").exists, 20, "the job to end while the daemon is down")


def test_checkpoint_signal_unrecorded(make_gs):
    gs = make_gs(CONFIG)
    gs.env["UNIT_SECONDS"] = "0.2"
    jid = gs.gsub("--checkpoint", "signal", "-t", "1m", str(EXAMPLES / "checkpoint_counter.sh"), "25")
    gs.wait_state(jid, "RUNNING")
    units = gs.work / "units.log"
    wait_for(lambda: units.exists() and len(units.read_text().split("\n")) > 5, 20, "a few units of work")
    signal_job_while_down(gs, jid, signal.SIGUSR1)
    gs.start()
    j = gs.wait_state(jid, "COMPLETED", timeout=40)
    assert (j["preemptions"], j["checkpoints"], j["restarts"]) == (1, 1, 1)
    assert units.read_text().split("\n")[:-1] == [f"unit {i}" for i in range(1, 26)]  # each unit once


def test_walltime_signal_unrecorded(make_gs):
    gs = make_gs(CONFIG)
    jid = gs.gsub("-t", "2s", "--wrap", "sleep 30")
    j = gs.wait_state(jid, "RUNNING")
    signal_job_while_down(gs, jid, signal.SIGTERM, after=j["start_time"] + 2.05)
    gs.start()
    j = gs.wait_state(jid, "TIMEOUT")
    assert j["exit_signal"] == signal.SIGTERM and j["reason"] == "reached its walltime"


def test_cancel_signal_unrecorded(make_gs):
    gs = make_gs(CONFIG)
    jid = gs.gsub("--wrap", "sleep 30")
    gs.wait_state(jid, "RUNNING")
    jdir = gs.spool / "jobs" / str(jid)
    wait_for((jdir / "seg-1.pid").exists, 15, "the job's shepherd to be under way")
    gs.kill9()
    assert gs.run("gdel", str(jid)).returncode == 0  # the request waits in the spool
    os.killpg(json.loads((jdir / "seg-1.pid").read_text())["pgid"], signal.SIGTERM)
    wait_for((jdir / "seg-1.exit").exists, 20, "the job to end while the daemon is down")
    gs.start()
    j = gs.wait_state(jid, "CANCELLED")
    assert j["exit_signal"] == signal.SIGTERM


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_requeue_signal_unrecorded(make_gs, sig):
    gs = make_gs(CONFIG)
    ledger = gs.work / "ledger"
    jid = gs.gsub("--checkpoint", "requeue", "--wrap", f"echo run >> {ledger}; sleep 2")
    gs.wait_state(jid, "RUNNING")
    wait_for(ledger.exists, 10, "the job to start")
    signal_job_while_down(gs, jid, sig)
    gs.start()
    j = gs.wait_state(jid, "COMPLETED" if sig == signal.SIGTERM else "FAILED", timeout=30)
    if sig == signal.SIGTERM:  # the daemon's requeue signal: run again from the start
        assert (j["preemptions"], j["restarts"]) == (1, 1)
        assert ledger.read_text().split() == ["run", "run"]
    else:  # SIGKILL is never the daemon's first signal: someone else killed it
        assert j["exit_signal"] == signal.SIGKILL and j["restarts"] == 0
        assert ledger.read_text().split() == ["run"]
