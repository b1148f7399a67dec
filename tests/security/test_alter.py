"""galter and grequeue on a system daemon: a user changes and requeues only their own jobs, shortens a
running job's walltime but cannot lengthen it (root can), and a request written by hand gets no further."""

from __future__ import annotations

import json
import os
import time

from tests.conftest import wait_for
from tests.security.conftest import as_user, check_intact


def test_alter_and_requeue_only_as_the_owner_and_lengthen_only_as_root(system, targets):
    a, b = system.a, system.b
    run = system.gsub(a, "-t", "10:00", "--wrap", "sleep 300")
    held = system.gsub(a, "--hold", "-t", "10:00", "--wrap", "true")
    system.wait_state(run, "RUNNING")
    system.wait_state(held, "HELD")

    # another user's job: refused by the command, one line, and by the daemon when written by hand
    for args in (("galter", str(held), "-t", "1"), ("galter", str(run), "-t", "1"), ("grequeue", str(run))):
        r = system.cmd(b, *args)
        assert r.one_line_error(args[0]) is None, r
        assert "owned by" in r.stderr, r
    for kind, payload in (
        ("alter", {"jobs": [held, run], "changes": {"walltime": 1}}),
        ("requeue", {"jobs": [run]}),
    ):
        system.put(b, f"{kind}-{time.time_ns()}-{os.getpid()}.json", {"type": kind, **payload})
    system.settle()
    assert system.job(held)["walltime"] == 600 and system.job(run)["walltime"] == 600
    assert system.job(run)["state"] == "RUNNING" and system.job(run)["restarts"] == 0

    # the owner may not lengthen a running job's walltime: the command refuses, and so does the daemon
    r = system.cmd(a, "galter", str(run), "-t", "20:00")
    assert r.one_line_error("galter") is None, r
    assert "only an admin may lengthen its walltime" in r.stderr, r
    name = f"alter-{time.time_ns()}-{os.getpid()}.json"
    system.put(a, name, {"type": "alter", "jobs": [run], "changes": {"walltime": 1200}})
    system.settle()
    assert "only an admin may lengthen" in system.wait_why(name)
    assert system.job(run)["walltime"] == 600

    # the owner may shorten it and change the held job; root may lengthen it
    assert system.cmd(a, "galter", str(held), "-t", "2:00", "-N", "renamed").rc == 0
    assert system.cmd(a, "galter", str(run), "-t", "5:00").rc == 0
    wait_for(lambda: system.job(run)["walltime"] == 300, 15, "the owner's shorter walltime")
    wait_for(lambda: system.job(held)["name"] == "renamed", 15, "the owner's change of the held job")
    assert system.job(held)["walltime"] == 120
    assert system.cmd(None, "galter", str(run), "-t", "30:00").rc == 0
    wait_for(lambda: system.job(run)["walltime"] == 1800, 15, "root's longer walltime")

    # the owner may requeue it: it runs again (a new start, counted)
    assert system.cmd(a, "grequeue", str(run)).rc == 0
    wait_for(lambda: system.job(run)["restarts"] == 1, 30, "the requeued job's second start")
    assert system.job(run)["uid"] == a.uid
    assert system.cmd(a, "gdel", str(run), str(held)).rc == 0
    system.wait_state(run, "CANCELLED")
    check_intact(system, targets)


def test_only_root_raises_a_job_with_galter(system, targets):
    a = system.a
    jobs = [system.gsub(a, "--hold", "-t", "1:00", "--wrap", "true") for _ in range(2)]
    system.wait_state(jobs[1], "HELD")

    # a negative nice or a priority from the owner: refused by the command, one line, nothing sent
    for args, what in ((("--priority", "100"), "--priority"), (("--nice=-5",), "--nice -5")):
        r = system.cmd(a, "galter", str(jobs[0]), *args)
        assert r.one_line_error("galter") is None, r
        assert r.rc == 2 and f"{what}: only an admin may raise a job's priority" in r.stderr, r
    # and by the daemon when written by hand
    for changes, why in (
        ({"priority": 100}, "only an admin may set a job's priority"),
        ({"nice": -5}, "nice -5: only an admin may give a negative nice value"),
    ):
        name = f"alter-{time.time_ns()}-{os.getpid()}.json"
        system.put(a, name, {"type": "alter", "jobs": [jobs[0]], "changes": changes})
        system.wait_taken(name)
        assert why in system.wait_why(name)
    system.settle()
    spec = json.loads(system.job(jobs[0])["spec"])
    assert spec.get("priority") is None and spec.get("nice", 0) == 0, spec

    # the owner may lower a job (a positive nice); root may raise one
    assert system.cmd(a, "galter", str(jobs[0]), "--nice", "50").rc == 0
    assert system.cmd(None, "galter", str(jobs[1]), "--priority", "500").rc == 0
    r = system.cmd(None, "galter", str(jobs[0]), "--nice=-20")
    assert r.rc == 0, r

    def shown() -> dict[int, tuple[int, int | None]]:
        r = system.cmd(None, "gstat", "--priority", "--json", "-a")
        assert r.rc == 0, r
        return {x["id"]: (x["nice"], x["admin_priority"]) for x in json.loads(r.stdout)["jobs"] if x["id"] in jobs}

    wait_for(lambda: shown() == {jobs[0]: (-20, None), jobs[1]: (0, 500)}, 15, "root's changes in gstat --priority")
    assert system.cmd(a, "gdel", *map(str, jobs)).rc == 0
    system.wait_state(jobs[1], "CANCELLED")
    check_intact(system, targets)


def _client_alter(spool: str, config: str, jid: int, changes: dict) -> str:
    from gridsched.api.client import Client, GridschedError

    try:
        Client(spool=spool, config=config).alter(jid, **changes)
    except GridschedError as e:
        return f"refused: {e}"
    return "sent"


def test_the_python_client_raises_a_job_only_as_root(system, targets):
    # what the forked child runs is loaded here (the user may not be able to read the interpreter's files)
    import gridsched.api.client  # noqa: F401
    import gridsched.cli.galter  # noqa: F401
    import gridsched.host.topology  # noqa: F401

    a = system.a
    jid = system.gsub(a, "--hold", "-t", "1:00", "--wrap", "true")
    system.wait_state(jid, "HELD")
    args = (str(system.spool_dir), str(system.cfg), jid)
    for changes, why in (
        ({"priority": 5}, "alter: only an admin may set a job's priority (--priority)"),
        ({"nice": -1}, "alter: nice -1: only an admin may give a negative nice value"),
    ):
        assert as_user(a, _client_alter, *args, changes) == {"ok": f"refused: {why}"}
    assert as_user(a, _client_alter, *args, {"nice": 7}) == {"ok": "sent"}
    wait_for(lambda: json.loads(system.job(jid)["spec"]).get("nice") == 7, 15, "the owner's nice value")
    assert json.loads(system.job(jid)["spec"]).get("priority") is None
    assert system.cmd(a, "gdel", str(jid)).rc == 0
    system.wait_state(jid, "CANCELLED")
    check_intact(system, targets)


def test_account_and_cores_per_task_change_only_as_the_owner(system, targets):
    """galter -A and -c on a system daemon: B's, by the command or by hand, change nothing of A's job; a bad
    account written by hand is quarantined with why; A's own change is taken."""
    a, b = system.a, system.b
    held = system.gsub(a, "--hold", "-t", "1:00", "-n", "1", "--wrap", "true")
    system.wait_state(held, "HELD")
    r = system.cmd(b, "galter", str(held), "-A", "theirs", "-c", "2")
    assert r.one_line_error("galter") is None and "owned by" in r.stderr, r
    system.put(
        b,
        f"alter-{time.time_ns()}-{os.getpid()}.json",
        {"type": "alter", "jobs": [held], "changes": {"account": "theirs", "cpus_per_task": 2}},
    )
    name = f"alter-{time.time_ns()}-{os.getpid()}.json"
    system.put(a, name, {"type": "alter", "jobs": [held], "changes": {"account": " \t"}})
    system.settle()
    assert "account" in system.wait_why(name)
    job = system.job(held)
    assert (job["ncpus"], json.loads(job["spec"]).get("account")) == (1, None), job
    assert system.cmd(a, "galter", str(held), "-A", "mine", "-c", "2").rc == 0
    wait_for(lambda: system.job(held)["ncpus"] == 2, 15, "the owner's change")
    assert json.loads(system.job(held)["spec"]).get("account") == "mine"
    assert system.cmd(a, "gdel", str(held)).rc == 0
    check_intact(system, targets)
