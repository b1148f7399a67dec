"""A job ends when its script ends, with the script's status, as in Slurm.

Whatever the script leaves running (a background child, a grandchild, a
process that ignores SIGTERM or left the session) is killed then, and the
job's cores are freed at once, not at its walltime.
"""

from __future__ import annotations

import os
import sys

import psutil
import pytest

from tests.conftest import wait_for


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs: the module's daemon serves them all."""
    return shared_gs


PY = sys.executable


def left_running(gs, *cmdline: str) -> list[psutil.Process]:
    """The live processes of this spool's jobs whose command line is ``cmdline``."""
    out = []
    for p in gs.processes():
        try:
            if p.cmdline() == list(cmdline) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def read_pid(path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def test_script_that_exits_with_a_background_child_completes_at_once(gs):
    # the background sh waits for its sleep: the sleep is a grandchild of the script
    jid = gs.gsub("-t30s", "--wrap", 'sh -c "sleep 1004; :" & sleep 1; exit 0')
    j = gs.wait_state(jid, "COMPLETED", "FAILED", "TIMEOUT", timeout=20)  # the walltime is 30 s
    assert j["state"] == "COMPLETED", j
    assert j["exit_code"] == 0 and j["exit_signal"] is None
    assert j["elapsed"] < 10
    assert not left_running(gs, "sleep", "1004")


def test_failing_script_with_a_background_child_fails_with_its_code(gs):
    jid = gs.gsub("-t30s", "--wrap", 'sh -c "sleep 1005; :" & sleep 1; exit 3')
    j = gs.wait_state(jid, "COMPLETED", "FAILED", "TIMEOUT", timeout=20)
    assert j["state"] == "FAILED", j
    assert j["exit_code"] == 3 and j["exit_signal"] is None
    assert j["elapsed"] < 10
    assert not left_running(gs, "sleep", "1005")


LEFTOVER = f"""#!/bin/sh
{PY} -c '
import os, signal, subprocess, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork():
    os._exit(0)  # orphaned at once
os.setsid()
subprocess.Popen(["sleep", "1006"])  # a child of its own, ignoring SIGTERM too
with open("left.tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename("left.tmp", "left.pid")
time.sleep(1006)
'
while [ ! -e go ]; do sleep 0.1; done
exit 0
"""


def test_leftover_that_ignores_sigterm_and_leaves_the_session_is_killed(gs):
    script = gs.work / "leftover.sh"
    script.write_text(LEFTOVER)
    jid = gs.gsub("-t60s", str(script))
    pid = wait_for(lambda: read_pid(gs.work / "left.pid"), 20, "the leftover to start")
    leftover = psutil.Process(pid)
    sleep = wait_for(lambda: left_running(gs, "sleep", "1006"), 10, "the leftover's sleep")[0]
    assert os.getsid(pid) == pid and os.getsid(pid) != os.getsid(0)
    sig_ign = int(next(ln for ln in open(f"/proc/{pid}/status") if ln.startswith("SigIgn:")).split()[1], 16)
    assert sig_ign & (1 << (15 - 1))  # SIGTERM is ignored
    assert gs.job(jid)["state"] == "RUNNING"

    (gs.work / "go").touch()
    j = gs.wait_state(jid, "COMPLETED", "FAILED", "TIMEOUT", timeout=20)
    assert j["state"] == "COMPLETED", j
    assert j["exit_code"] == 0
    for p in (leftover, sleep):
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, p
    assert not left_running(gs, "sleep", "1006")
