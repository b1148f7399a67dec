"""A real daemon runs real jobs: pinning, environment, walltime, cancel, failures.

The queue's order on a full machine and gdel of a pending job are tested in process, on a driven clock, in
test_queue_driven.py."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from gridsched.core import cpuset
from tests.conftest import wait_for


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs: the module's daemon serves them all."""
    return shared_gs


HOST = sorted(os.sched_getaffinity(0))


def test_job_sees_exactly_its_cores_and_environment(make_gs):
    gs = make_gs(f"""
[scheduler]
policy = "fcfs"
[machine]
cores = {len(HOST)}
[daemon]
autostart = false
""")
    script = gs.work / "aff.sh"
    script.write_text(
        "#!/bin/sh\n"
        'grep Cpus_allowed_list /proc/self/status | cut -f2 > "$GS_JOBID.aff"\n'
        "sh -c 'grep Cpus_allowed_list /proc/self/status' | cut -f2 > \"$GS_JOBID.child\"\n"
        'echo "$GS_JOBID $GS_JOBNAME $GS_NCPUS $GS_CORES $OMP_NUM_THREADS $GS_SUBMIT_DIR" > "$GS_JOBID.env"\n'
    )
    ids = [gs.gsub("-n", "1", "-N", f"a{i}", str(script)) for i in range(len(HOST))]
    cores_seen = []
    for jid in ids:
        j = gs.wait_state(jid, "COMPLETED")
        aff = cpuset.parse((gs.work / f"{jid}.aff").read_text())
        child = cpuset.parse((gs.work / f"{jid}.child").read_text())
        assert len(aff) == 1, aff
        assert child == aff  # children inherit the pinning
        assert aff == {HOST[int(j["cores"])]}
        env = (gs.work / f"{jid}.env").read_text().split()
        assert env[:5] == [str(jid), f"a{ids.index(jid)}", "1", j["cores"], "1"]
        assert env[5] == str(gs.work)
        cores_seen.append(j["cores"])
    assert all(c for c in cores_seen)


def test_declared_cores_map_onto_host_cpus(gs):
    script = gs.work / "aff.sh"
    script.write_text(
        "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status | cut -f2 > out.$GS_JOBID\n"
        "echo $GS_CORES >> out.$GS_JOBID\n"
        "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n"
    )
    a = gs.gsub("-n", "3", str(script))
    b = gs.gsub("-n", "5", str(script))
    gs.wait_state(a, "RUNNING")
    gs.wait_state(b, "RUNNING")  # both at once: 3 + 5 of the 8 declared cores
    (gs.work / "go").touch()
    ja, jb = gs.wait_state(a, "COMPLETED"), gs.wait_state(b, "COMPLETED")
    ca, cb = cpuset.parse(ja["cores"]), cpuset.parse(jb["cores"])
    assert len(ca) == 3 and len(cb) == 5 and not (ca & cb)  # 8 declared cores, none given twice
    for jid, cores in ((a, ca), (b, cb)):
        aff_line, gs_cores = (gs.work / f"out.{jid}").read_text().split()
        assert cpuset.parse(gs_cores) == cores
        assert cpuset.parse(aff_line) == {HOST[c % len(HOST)] for c in cores}


def test_walltime_kills_a_job_that_ignores_sigterm(gs):
    t0 = time.monotonic()
    jid = gs.gsub("-t", "2s", "--wrap", "trap '' TERM; echo started; while true; do sleep 0.2; done")
    j = gs.wait_state(jid, "TIMEOUT", timeout=30)
    took = time.monotonic() - t0
    assert j["exit_signal"] == 9  # it ignored SIGTERM, so the grace ended in SIGKILL
    assert 2.0 <= took < 20
    assert "started" in open(j["stdout"]).read()


def test_gdel_kills_the_whole_tree_even_a_child_in_its_own_session(gs):
    jid = gs.gsub(
        "--wrap",
        "setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' & sleep 300 & echo $! > plain.pid; wait",
    )
    gs.wait_state(jid, "RUNNING")
    escaped = wait_for(lambda: _read_pid(gs.work / "escaped.pid"), 10, "escaped.pid")
    plain = wait_for(lambda: _read_pid(gs.work / "plain.pid"), 10, "plain.pid")
    assert psutil.pid_exists(escaped) and psutil.pid_exists(plain)
    assert os.getsid(escaped) != os.getsid(plain)
    r = gs.run("gdel", str(jid))
    assert r.returncode == 0, r.stderr
    j = gs.wait_state(jid, "CANCELLED")
    assert j["state"] == "CANCELLED"
    wait_for(lambda: not _alive(escaped) and not _alive(plain), 10, "the job's processes to go")


def _read_pid(p):
    try:
        return int(p.read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_exit_codes_and_a_script_that_cannot_start(gs):
    ok = gs.gsub("--wrap", "exit 0")
    bad = gs.gsub("--wrap", "exit 3")
    script = gs.work / "nointerp.sh"
    script.write_text("#!/nonexistent/interpreter\necho never\n")
    noint = gs.gsub(str(script))
    assert gs.wait_state(ok, "COMPLETED")["exit_code"] == 0
    assert gs.wait_state(bad, "FAILED")["exit_code"] == 3
    j = gs.wait_state(noint, "FAILED")
    assert "/nonexistent/interpreter" in j["reason"]
    assert "/nonexistent/interpreter" in open(j["stderr"]).read()
    after = gs.gsub("--wrap", "true")
    gs.wait_state(after, "COMPLETED")  # the daemon went on


def test_script_without_interpreter_line_runs_with_sh(gs):
    script = gs.work / "plain.sh"
    script.write_text("echo plain-$GS_JOBID > plain.out\n")
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    assert (gs.work / "plain.out").read_text().strip() == f"plain-{jid}"
