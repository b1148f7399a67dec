"""No process of a job outlives it, whatever the job does to hide; --mem is enforced.

A job's shepherd is a child subreaper: a process that goes to the background
(``nohup ... &``), leaves the job's process group (``setpgid``) or session
(``setsid``), ignores SIGTERM, or is orphaned by a double fork with an empty
environment stays below it, and is killed at the walltime, at gdel, and when
the job's script ends.  Every check looks the processes up with psutil by a
tag in their command line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from gridsched.daemon import cgroup
from tests.conftest import wait_for


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs: the module's daemon serves them all."""
    return shared_gs


PY = sys.executable
SLEEPER = "import time; time.sleep(300)"
OWN_GROUP = "import os, signal, time; os.setpgid(0, 0); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"

HIDING = f"""#!/bin/sh
T=gs-track-$GS_SPOOL-$GS_JOBID
nohup {PY} -c '{SLEEPER}' $T-nohup > /dev/null 2>&1 &
setsid {PY} -c '{SLEEPER}' $T-setsid &
{PY} -c '{OWN_GROUP}' $T-pgid &
sh -c 'env -i {PY} -c "{SLEEPER}" '$T'-orphan & exit 0'
trap '' TERM
echo ready > ready.$GS_JOBID
"""
KINDS = ("nohup", "setsid", "pgid", "orphan")


def tagged(gs, jid: int) -> list[psutil.Process]:
    """The live processes whose command line carries the job's tag."""
    tag = f"gs-track-{gs.spool}-{jid}-"
    out = []
    for p in psutil.process_iter():
        try:
            if any(a.startswith(tag) for a in p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def start_hiding_job(gs, *args: str, tail: str) -> tuple[int, list[psutil.Process]]:
    script = gs.work / "hide.sh"
    script.write_text(HIDING + tail)
    jid = gs.gsub(*args, str(script))
    wait_for(lambda: (gs.work / f"ready.{jid}").exists(), 20, "the job to start its hiding children")

    def hidden() -> list[psutil.Process] | None:
        ps = tagged(gs, jid)
        try:
            sessions = {os.getsid(p.pid) for p in ps}
            groups = {os.getpgid(p.pid) for p in ps}
        except OSError:
            return None
        # all four up, one in a session of its own, one in a process group of its own
        return ps if len(ps) == len(KINDS) and len(sessions) >= 2 and len(groups) >= 3 else None

    procs = wait_for(hidden, 20, "all four processes to hide")
    orphan = next(p for p in procs if p.cmdline()[-1].endswith("-orphan"))
    assert orphan.environ() == {} or "GS_JOBID" not in orphan.environ()
    return jid, procs


def assert_all_gone(gs, jid: int) -> None:
    wait_for(lambda: not tagged(gs, jid), 15, "every process of the job to be gone")


def test_walltime_kills_every_hiding_process(gs):
    jid, _ = start_hiding_job(gs, "-t", "3s", tail="sleep 300\n")
    j = gs.wait_state(jid, "TIMEOUT", timeout=30)
    assert j["exit_signal"] == 9  # the script ignores SIGTERM: killed after the grace
    assert_all_gone(gs, jid)


def test_gdel_kills_every_hiding_process(gs):
    jid, _ = start_hiding_job(gs, tail="sleep 300\n")
    r = gs.run("gdel", str(jid))
    assert r.returncode == 0, r.stderr
    gs.wait_state(jid, "CANCELLED", timeout=30)
    assert_all_gone(gs, jid)


def test_processes_left_behind_die_when_the_script_ends(gs):
    jid, _ = start_hiding_job(gs, tail="while [ ! -e go ]; do sleep 0.1; done\nexit 0\n")
    assert gs.job(jid)["state"] == "RUNNING"
    (gs.work / "go").touch()
    assert gs.wait_state(jid, "COMPLETED", timeout=30)["exit_code"] == 0
    assert_all_gone(gs, jid)


# -- memory ----------------------------------------------------------------------

HOG = (
    f"#!/bin/sh\nexec {PY} -c 'import sys; x = bytearray(int(sys.argv[1]) << 20); "
    f'x[::4096] = bytes(len(x[::4096])); print("survived")\' "$1"\n'
)


def exit_record(gs, jid: int) -> dict:
    return json.loads(Path(gs.spool, "jobs", str(jid), "seg-1.exit").read_text())


def cgroup_dirs(h: cgroup.Hierarchy) -> list[str]:
    return sorted(p.name for p in h.base.iterdir() if p.is_dir() and p.name.startswith("gridsched-"))


@pytest.fixture
def memory_cgroup():
    h = cgroup.hierarchy()
    if h is None:
        print("no writable memory cgroup on this host: --mem falls back to RLIMIT_AS")
        pytest.skip("no writable memory cgroup on this host (v2 with memory, or v1 memory)")
    return h


def test_mem_over_the_limit_is_killed_with_a_clear_reason(gs, memory_cgroup):
    before = cgroup_dirs(memory_cgroup)
    hog = gs.work / "hog.sh"
    hog.write_text(HOG)
    big = gs.gsub("--mem", "50M", str(hog), "200")
    small = gs.gsub("--mem", "200M", str(hog), "20")
    jb = gs.wait_state(big, "OUT_OF_MEMORY", timeout=30)
    assert jb["exit_signal"] == 9
    assert exit_record(gs, big)["reason"] == "out of memory (limit 50M)"
    assert "survived" not in open(jb["stdout"]).read()
    js = gs.wait_state(small, "COMPLETED", timeout=30)
    assert "reason" not in exit_record(gs, small)
    assert "survived" in open(js["stdout"]).read()
    wait_for(lambda: cgroup_dirs(memory_cgroup) == before, 10, "the jobs' cgroups to be removed")


def test_out_of_memory_is_the_reason_gstat_shows_an_end_for_gtail_and_a_finish_for_grequeue(gs, memory_cgroup):
    hog = gs.work / "hog.sh"
    hog.write_text("#!/bin/sh\necho started\n" + HOG.split("\n", 1)[1])
    jid = gs.gsub("--mem", "50M", str(hog), "200")
    j = gs.wait_state(jid, "OUT_OF_MEMORY", timeout=30)
    assert "out of memory (limit 50M)" in j["reason"]
    # gtail follows a job until it has ended: an end for want of memory is one (it used to follow for ever)
    t = gs.run("gtail", str(jid), timeout=30)
    assert t.stdout == "started\n"
    assert t.stderr.strip() == f"gtail: job {jid} ended: OUT_OF_MEMORY (signal 9)"
    assert t.returncode != 0
    # grequeue takes it as a finished job, as scontrol requeue does: it runs again, and ends so again
    r = gs.run("grequeue", str(jid))
    assert r.returncode == 0, r.stderr
    wait_for(lambda: gs.job(jid)["restarts"] == 1 and gs.job(jid)["state"] == "OUT_OF_MEMORY", 30, "the rerun")


def test_gctl_info_says_how_mem_is_enforced(gs):
    r = gs.run("gctl", "info", "--json", check=True)
    h = cgroup.hierarchy()
    said = json.loads(r.stdout)["memory_limit"]
    assert said.startswith(f"cgroup v{h.version} ({h.base})" if h else "RLIMIT_AS"), said
    assert f"--mem enforced by: {said}" in gs.run("gctl", "info", check=True).stdout
