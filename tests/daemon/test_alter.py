"""galter against a real daemon: a pending job takes its new values, a running one its new walltime, and
what cannot be changed is refused in one line, by galter and by the daemon."""

from __future__ import annotations

import json
import time

import pytest

from gridsched import requests as rq
from tests.conftest import wait_for

pytestmark = pytest.mark.daemon

FOUR = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
[machine]
cores = 4
[daemon]
autostart = false
"""
GATE = "i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"


def test_a_pending_job_starts_with_its_new_values(make_gs):
    gs = make_gs(FOUR)
    blocker = gs.gsub("-n", "4", "--wrap", GATE)
    job = gs.gsub("-n", "2", "-t", "10", "-N", "before", "--wrap", 'echo "$GS_NCPUS $GS_JOBNAME"')
    gs.wait_state(blocker, "RUNNING")
    r = gs.run("galter", str(job), "-n", "3", "-t", "5", "-N", "after")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"job {job}: changing name, ncpus, walltime\n"
    j = wait_for(lambda: x if (x := gs.job(job))["ncpus"] == 3 else None, 15, "the change")
    assert (j["name"], j["walltime"], j["state"]) == ("after", 300, "PENDING")
    (gs.work / "go").touch()
    done = gs.wait_state(job, "COMPLETED")
    assert open(done["stdout"]).read() == "3 after\n"


def test_a_running_job_times_out_at_its_shortened_walltime(make_gs):
    gs = make_gs(FOUR)
    job = gs.gsub("-t", "10", "--wrap", "sleep 120")
    gs.wait_state(job, "RUNNING")
    t0 = time.monotonic()
    r = gs.run("galter", str(job), "-t", "3s")
    assert r.returncode == 0, r.stderr
    row = gs.wait_state(job, "TIMEOUT", timeout=30)
    assert time.monotonic() - t0 < 20 and row["walltime"] == 3
    # a finished job is refused, in one line
    r = gs.run("galter", str(job), "-t", "1m")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"galter: error: job {job}: already TIMEOUT: only a queued or running job can be changed\n"


def test_what_cannot_be_changed_is_refused(make_gs):
    gs = make_gs(FOUR)
    blocker = gs.gsub("-n", "4", "--wrap", GATE)
    a = gs.gsub("--wrap", "true")
    b = gs.gsub("-d", f"afterok:{a}", "--wrap", "true")
    gs.wait_state(blocker, "RUNNING")
    cases = [
        ((str(a), "-n", "5"), f"job {a}: can never run: it asks for 5 cores, the machine has 4"),
        ((str(a), "-d", f"afterok:{b}"), f"job {a}: depend: a cycle: {a} -> {b} -> {a}"),
        ((str(a), "-d", f"afterok:{a}"), f"job {a}: depend: a cycle: {a} -> {a}"),
        ((str(a), "-d", "afterok:999"), f"job {a}: depend: job 999: no such job"),
        ((str(blocker), "-n", "2"), f"job {blocker}: it is running: only its walltime (-t) may change"),
        (("999", "-t", "1m"), "job 999: no such job"),
        ((str(a), "--mem", "300T"), f"job {a}: can never run: it asks for 300T of memory, the machine has"),
    ]
    for args, words in cases:
        r = gs.run("galter", *args)
        assert r.returncode == 1 and r.stdout == "", (args, r)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"galter: error: {words}"), (args, r.stderr)
    for args, words in [
        ((str(a),), "galter: error: nothing to change: give one of --walltime, --ncpus"),
        ((str(a), "-t", "-5"), "galter: error: "),
        ((str(a), "--begin", "someday"), "galter: error: "),
        (("x1", "-t", "1m"), "galter: error: 'x1': not a job id"),
    ]:
        r = gs.run("galter", *args)
        assert r.returncode == 2 and r.stderr.startswith(words) and len(r.stderr.splitlines()) == 1, (args, r)
    assert gs.job(a)["ncpus"] == 1 and gs.job(a)["state"] == "PENDING"
    (gs.work / "go").touch()
    assert gs.wait_state(b, "COMPLETED")  # its dependency unchanged: it ran after a


def test_the_daemon_refuses_what_galter_refuses(make_gs):
    """Requests written by hand, past galter: the daemon keeps the job as it was and keeps serving."""
    gs = make_gs(FOUR)
    blocker = gs.gsub("-n", "4", "--wrap", GATE)
    a = gs.gsub("--wrap", "true")
    b = gs.gsub("-d", f"afterok:{a}", "--wrap", "true")
    gs.wait_state(blocker, "RUNNING")
    incoming = gs.spool / "incoming"
    bad = [
        {"type": "alter", "jobs": [a], "ncpus": 5},
        {"type": "alter", "jobs": [a], "depend": f"afterok:{b}"},
        {"type": "alter", "jobs": [blocker], "ncpus": 1},
        {"type": "alter", "jobs": [a]},
        {"type": "alter", "jobs": [a], "walltime": -1},
        {"type": "alter", "jobs": [a], "name": "x/y"},
    ]
    for k, req in enumerate(bad):
        (incoming / f"alter-{k}-{time.time_ns()}.json").write_bytes(rq.encode(req))
    (incoming / f"alter-ok-{time.time_ns()}.json").write_bytes(rq.encode({"type": "alter", "jobs": [a], "name": "ok"}))
    wait_for(lambda: gs.job(a)["name"] == "ok", 15, "the good change")
    assert gs.alive()
    j = gs.job(a)
    assert (j["ncpus"], j["state"]) == (1, "PENDING") and "depend" not in json.dumps(j.get("reason"))
    log = gs.log()
    assert f"alter of job {a} by uid" in log and "refused: can never run: it asks for 5 cores" in log
    assert f"depend: a cycle: {a} -> {b} -> {a}" in log
    assert f"alter of job {blocker} by uid" in log and "only its walltime may change" in log
    (gs.work / "go").touch()
    assert gs.wait_state(b, "COMPLETED")


def test_arrays_and_a_restart(make_gs):
    gs = make_gs(FOUR)
    blocker = gs.gsub("-n", "4", "--wrap", GATE)
    arr = gs.gsub("--array", "1-3", "--wrap", "true")
    gs.wait_state(blocker, "RUNNING")
    r = gs.run("galter", str(arr), "-t", "7m")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"job {arr}_{i}: changing walltime" for i in (1, 2, 3)]
    r = gs.run("galter", f"{arr}_2", "-N", "second")
    assert r.stdout == f"job {arr}_2: changing name\n"

    def tasks() -> list[dict]:
        out = json.loads(gs.run("gstat", "-a", "--json", check=True).stdout)["jobs"]
        return [j for j in out if j.get("array_id") == arr]

    wait_for(lambda: [t["walltime"] for t in tasks()] == [420] * 3 and "second" in [t["name"] for t in tasks()])
    gs.kill9()
    gs.start()
    assert [t["walltime"] for t in tasks()] == [420] * 3  # kept in the state db
    assert sorted(t["name"] for t in tasks()).count("second") == 1
    (gs.work / "go").touch()
    for t in tasks():
        gs.wait_state(t["id"], "COMPLETED")
