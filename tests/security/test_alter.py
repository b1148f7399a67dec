"""galter in system mode: B cannot change A's jobs, and A may shorten but not lengthen a running job."""

from __future__ import annotations

import time

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, check_intact


def test_b_cannot_alter_a_s_jobs(system, targets):
    a, b = system.a, system.b
    held = system.gsub(a, "--hold", "-t", "1m", "--wrap", "true")
    running = system.gsub(a, "-t", "1m", "--wrap", "sleep 60")
    system.wait_state(held, "HELD")
    system.wait_state(running, "RUNNING")
    before = {j: (system.job(j)["walltime"], system.job(j)["ncpus"], system.job(j)["name"]) for j in (held, running)}
    r = system.cmd(b, "galter", str(held), "-t", "5m", "-n", "2", "-N", "mine")
    assert (
        r.rc == 1
        and r.one_line_error("galter") is None
        and r.stderr == f"galter: error: job {held}: owned by {a.name}\n"
    )
    r = system.cmd(b, "galter", str(running), "-t", "30m")
    assert r.rc == 1 and "owned by" in r.stderr, r
    n = time.time_ns()
    system.put(b, f"alter-{n}-1.json", {"type": "alter", "jobs": [held, running], "walltime": 3000, "name": "mine"})
    system.put(b, f"alter-{n}-2.json", {"type": "alter", "jobs": [held], "depend": f"afterok:{running}"})
    system.settle()
    after = {j: (system.job(j)["walltime"], system.job(j)["ncpus"], system.job(j)["name"]) for j in before}
    assert after == before, f"B changed A's jobs: {before} -> {after}"
    system.cmd(a, "gdel", str(held), str(running))
    system.wait_state(running, *TERMINAL, timeout=20)
    check_intact(system, targets)


def test_an_owner_shortens_but_does_not_lengthen_a_running_job(system, targets):
    a = system.a
    running = system.gsub(a, "-t", "2m", "--wrap", "sleep 100")
    system.wait_state(running, "RUNNING")
    r = system.cmd(a, "galter", str(running), "-t", "5m")
    assert r.rc == 1 and r.one_line_error("galter") is None, r
    assert r.stderr == (
        f"galter: error: job {running}: only an admin (root or the spool's owner) may lengthen the walltime "
        "of a running job\n"
    )
    system.put(a, f"alter-{time.time_ns()}-1.json", {"type": "alter", "jobs": [running], "walltime": 3000})
    system.settle()
    assert system.job(running)["walltime"] == 120
    r = system.cmd(a, "galter", str(running), "-t", "3s")
    assert r.rc == 0, r
    row = system.wait_state(running, *TERMINAL, timeout=30)
    assert row["state"] == "TIMEOUT" and row["walltime"] == 3, row
    # root may lengthen: a new job, lengthened by root's galter
    job = system.gsub(a, "-t", "1m", "--wrap", "sleep 30")
    system.wait_state(job, "RUNNING")
    r = system.cmd(None, "galter", str(job), "-t", "10m")
    assert r.rc == 0, r
    wait_for(lambda: system.job(job)["walltime"] == 600, 15, "root's change")
    system.cmd(a, "gdel", str(job))
    system.wait_state(job, *TERMINAL, timeout=20)
    check_intact(system, targets)
