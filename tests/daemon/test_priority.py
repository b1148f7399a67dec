"""Job priorities on a real daemon: gsub --nice and --priority reorder the queue, fair share, gstat --priority,
and bad values refused by gsub and at the daemon's boundary."""

from __future__ import annotations

import json
import os
import time

import pytest

from gridsched.protocol import requests as rq
from gridsched.protocol.spool import Spool, atomic_write
from tests.conftest import wait_for
from tests.fuzz.test_requests import valid_job

pytestmark = pytest.mark.daemon

ONE_CORE = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
[machine]
cores = 1
[daemon]
autostart = false
"""

FAIRSHARE = (
    ONE_CORE
    + """
[priority]
weight_fairshare = 1000
half_life = "1h"
"""
)

BLOCK = "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"


def _starts(gs, ids: list[int]) -> list[int]:
    """``ids`` in the order they started (each waited for to complete)."""
    jobs = [gs.wait_state(j, "COMPLETED") for j in ids]
    return [j["id"] for j in sorted(jobs, key=lambda j: j["start_time"])]


def test_nice_puts_a_job_behind_later_ones(make_gs):
    gs = make_gs(ONE_CORE)
    blocker = gs.gsub("--wrap", BLOCK)
    gs.wait_state(blocker, "RUNNING")
    niced = gs.gsub("--nice", "100", "--wrap", "true")
    plain = gs.gsub("--wrap", "true")
    niced2 = gs.gsub("--nice=50", "--wrap", "true")
    assert gs.job(niced)["state"] == "PENDING"
    (gs.work / "go").touch()
    assert _starts(gs, [niced, plain, niced2]) == [plain, niced2, niced]


def test_an_admin_priority_and_a_negative_nice_go_first(make_gs):
    gs = make_gs(ONE_CORE)  # a personal spool: its owner is its admin
    blocker = gs.gsub("--wrap", BLOCK)
    gs.wait_state(blocker, "RUNNING")
    a = gs.gsub("--wrap", "true")
    b = gs.gsub("--nice=-10", "--wrap", "true")
    c = gs.gsub("--priority", "1000", "--wrap", "true")

    r = gs.run("gstat", "--priority", "--json", check=True)
    recs = json.loads(r.stdout)["jobs"]
    assert [x["id"] for x in recs] == [c, b, a]
    assert [(x["priority"], x["nice"], x["admin_priority"]) for x in recs] == [
        (1000, 0, 1000),
        (10, -10, None),
        (0, 0, None),
    ]
    text = gs.run("gstat", "--priority", check=True).stdout.splitlines()
    assert text[0].split() == ["JOBID", "USER", "PRIORITY", "AGE", "JOBSIZE", "FAIRSHARE", "NICE"]
    assert [int(line.split()[0]) for line in text[1:]] == [c, b, a]

    (gs.work / "go").touch()
    assert _starts(gs, [a, b, c]) == [c, b, a]


def test_directives_set_nice(make_gs):
    gs = make_gs(ONE_CORE)
    blocker = gs.gsub("--wrap", BLOCK)
    gs.wait_state(blocker, "RUNNING")
    (gs.work / "slurm.sh").write_text("#!/bin/sh\n#SBATCH --nice\ntrue\n")  # 100, as Slurm
    (gs.work / "pbs.sh").write_text("#!/bin/sh\n#PBS -p -20\ntrue\n")
    (gs.work / "up.sh").write_text("#!/bin/sh\n#PBS -p 7\ntrue\n")
    s = gs.gsub("slurm.sh")
    p = gs.gsub("pbs.sh")
    r = gs.run("gsub", "up.sh", check=True)
    assert "#PBS -p 7 ignored: only an admin raises a job's priority" in r.stderr
    recs = {x["id"]: x for x in json.loads(gs.run("gstat", "--priority", "--json", check=True).stdout)["jobs"]}
    assert (recs[s]["nice"], recs[p]["nice"], recs[int(r.stdout.split()[-1])]["nice"]) == (100, 20, 0)
    (gs.work / "go").touch()
    gs.wait_state(s, "COMPLETED")


@pytest.mark.parametrize(
    "args, line",
    [
        (["--nice", "10001"], "gsub: error: nice: 10001 is not between -10000 and 10000"),
        (["--nice=-10001"], "gsub: error: nice: -10001 is not between -10000 and 10000"),
        (["--nice", "x"], "gsub: error: nice: must be a whole number, not 'x'"),
        (["--priority=-1"], "gsub: error: priority: -1 is not between 0 and 1000000000"),
        (["--priority", "1e3"], "gsub: error: priority: must be a whole number, not '1e3'"),
    ],
)
def test_gsub_refuses_bad_values_in_one_line(gs, args, line):
    r = gs.run("gsub", *args, "--wrap", "true")
    assert r.returncode == 2
    assert r.stderr == line + "\n"


def test_gsub_refuses_a_bad_directive_in_one_line(gs):
    (gs.work / "bad.sh").write_text("#!/bin/sh\n#PBS -p 5000\ntrue\n")
    r = gs.run("gsub", "bad.sh")
    assert r.returncode != 0
    assert r.stderr == "gsub: error: bad.sh:2: #PBS -p 5000: must lie between -1024 and 1023\n"


def test_a_non_admin_cannot_raise_a_job_at_the_boundary():
    user = rq.Sender(1, "someone", frozenset({1}), admin=False)
    for extra, why in (
        ({"priority": 5}, "job: only an admin may set a job's priority (--priority)"),
        ({"nice": -1}, "job: nice -1: only an admin may give a negative nice value"),
    ):
        with pytest.raises(rq.Refused) as e:
            rq.parse({"type": "submit", "job": {**valid_job(7), "uid": 1, "gid": -1, **extra}}, rq.id_name(7), user)
        assert str(e.value) == why
    ok = rq.parse({"type": "submit", "job": {**valid_job(7), "uid": 1, "gid": -1, "nice": 10}}, rq.id_name(7), user)
    assert ok.job.nice == 10  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [10001, -10001, "5", 1.5, True])
def test_the_daemon_refuses_a_bad_nice_written_by_hand(stub_daemon, value):
    d = stub_daemon(ONE_CORE)
    nid = d.id_high + 1
    (d.spool.incoming / rq.id_name(nid)).write_text(
        json.dumps({"type": "submit", "job": {**valid_job(nid), "nice": value}})
    )
    d.ingest()
    assert nid not in d.table.jobs
    assert "nice" in (d.spool.quarantine / (rq.id_name(nid) + ".why")).read_text()
    assert d.db.id_record(nid)["refused"]


def test_fair_share_starts_the_lighter_user_first(stub_daemon):
    """Two users (root submits for another uid); the one with usage waits behind the one without."""
    d = stub_daemon(FAIRSHARE)
    now = time.time()
    heavy, light = os.getuid(), 1
    ids = []
    for uid in (heavy, light):
        nid = d.id_high + 1
        job = {**valid_job(nid), "uid": uid, "gid": -1, "submit_time": now}
        (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
        d.ingest()
        ids.append(nid)
    assert all(i in d.table.jobs for i in ids)
    d.table.usage.add(d.table.jobs[ids[0]].user, 3600.0, now, d.table.half_life)  # as if it had run an hour
    d.turn(now)
    assert [d.table.jobs[i].state.value for i in ids] == ["PENDING", "RUNNING"]


def test_gstat_priority_counts_ended_jobs_in_fair_share_across_a_restart(make_gs):
    gs = make_gs(FAIRSHARE)
    done = gs.gsub("-n", "1", "--wrap", "sleep 1")
    gs.wait_state(done, "COMPLETED")
    held = gs.gsub("--hold", "--wrap", "true")
    gs.wait_state(held, "HELD")

    def fairshare() -> float:
        recs = json.loads(gs.run("gstat", "--priority", "--json", check=True).stdout)["jobs"]
        return next(x["fairshare"] for x in recs if x["id"] == held)

    assert fairshare() == pytest.approx(0.5, abs=0.01)  # the only user, with all the usage: 2 ** -1
    gs.stop()
    gs.start()
    assert fairshare() == pytest.approx(0.5, abs=0.01)


NOBODY = 65534


def _as_nobody(gs, **fields: object) -> int:
    """A submission written by hand and owned by an ordinary user (the kernel's word for its sender)."""
    spool = Spool(gs.spool)
    jid = spool.next_id()
    spec = {
        **valid_job(jid),
        "user": "nobody",
        "uid": NOBODY,
        "gid": NOBODY,
        "stdout": "/dev/null",
        "stderr": "/dev/null",
        "submit_time": time.time(),
        **fields,
    }
    tmp = spool.incoming / f".{rq.id_name(jid)}"
    atomic_write(tmp, json.dumps({"type": "submit", "job": spec}).encode())
    os.chown(tmp, NOBODY, NOBODY)
    os.rename(tmp, spool.incoming / rq.id_name(jid))
    spool.wake()
    return jid


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"priority": 5}, "only an admin may set a job's priority (--priority)"),
        ({"nice": -1}, "nice -1: only an admin may give a negative nice value"),
    ],
)
def test_the_daemon_refuses_a_raise_from_an_ordinary_user(make_gs, fields, why):
    if os.getuid() != 0:
        pytest.skip("writing a request file owned by another user needs root")
    gs = make_gs(ONE_CORE)
    jid = _as_nobody(gs, **fields)
    note = Spool(gs.spool).quarantine / (rq.id_name(jid) + ".why")
    wait_for(note.exists, 15, "the request to be refused")
    assert why in note.read_text()
    assert gs.alive()
    r = gs.run("gstat", "-a", "--json", check=True)
    assert jid not in [j["id"] for j in json.loads(r.stdout)["jobs"]]
    ok = _as_nobody(gs, nice=5)  # a positive nice is anyone's
    assert gs.wait_state(ok, "COMPLETED", "FAILED")["start_time"] is not None


def test_fair_share_between_two_users_on_a_real_daemon(make_gs):
    """root has used the machine (an ended job, counted again after a restart); nobody has not:
    nobody's later job starts first."""
    if os.getuid() != 0:
        pytest.skip("writing a request file owned by another user needs root")
    gs = make_gs(FAIRSHARE)
    used = gs.gsub("--wrap", "sleep 1")
    gs.wait_state(used, "COMPLETED")
    gs.stop()
    gs.start()
    blocker = gs.gsub("--wrap", BLOCK)
    gs.wait_state(blocker, "RUNNING")
    mine = gs.gsub("--wrap", "true")
    theirs = _as_nobody(gs)
    gs.wait_state(theirs, "PENDING")
    (gs.work / "go").touch()
    first = gs.wait_state(theirs, "RUNNING", "COMPLETED", "FAILED")
    second = gs.wait_state(mine, "COMPLETED")
    assert first["start_time"] is not None and first["start_time"] <= second["start_time"]


def _queue(gs) -> list[tuple[int, int, int, int | None]]:
    """(id, priority, nice, admin priority) of the pending jobs, in the order gstat --priority gives."""
    recs = json.loads(gs.run("gstat", "--priority", "--json", check=True).stdout)["jobs"]
    return [(x["id"], x["priority"], x["nice"], x["admin_priority"]) for x in recs]


def test_galter_nice_and_priority_reorder_pending_jobs(make_gs):
    """An admin (a personal spool's owner) raises later jobs with galter: under fcfs they start first."""
    gs = make_gs(ONE_CORE)
    blocker = gs.gsub("--wrap", BLOCK)
    gs.wait_state(blocker, "RUNNING")
    a = gs.gsub("--wrap", "true")
    b = gs.gsub("--nice", "30", "--wrap", "true")
    c = gs.gsub("--wrap", "true")
    assert [x[0] for x in _queue(gs)] == [a, c, b]

    r = gs.run("galter", str(c), "--priority", "1000")
    assert r.returncode == 0 and r.stdout == f"job {c}: changing\n", r.stderr
    r = gs.run("galter", str(b), "--nice=-10")
    assert r.returncode == 0, r.stderr
    want = [(c, 1000, 0, 1000), (b, 10, -10, None), (a, 0, 0, None)]
    wait_for(lambda: _queue(gs) == want, 15, "gstat --priority to show the new order")
    # the change is kept in the state db: a restarted daemon orders the queue the same way
    gs.kill9()
    gs.start()
    assert _queue(gs) == want
    (gs.work / "go").touch()
    assert _starts(gs, [a, b, c]) == [c, b, a]


def test_galter_raises_the_pending_tasks_of_an_array(make_gs):
    gs = make_gs(ONE_CORE)
    blocker = gs.gsub("--wrap", BLOCK)
    gs.wait_state(blocker, "RUNNING")
    a = gs.gsub("--wrap", "true")
    arr = gs.gsub("-a", "1-2", "--wrap", "true")
    wait_for(lambda: len(_queue(gs)) == 3, 15, "the array's tasks to be queued")
    assert gs.run("galter", str(arr), "--nice=-5").returncode == 0
    wait_for(lambda: [x[2] for x in _queue(gs)] == [-5, -5, 0], 15, "the tasks' new nice value")
    tasks = [x[0] for x in _queue(gs)[:2]]
    assert a not in tasks
    (gs.work / "go").touch()
    assert _starts(gs, [a, *tasks])[-1] == a


def test_galter_nice_of_a_running_job_and_bad_values_are_refused(make_gs):
    gs = make_gs(ONE_CORE)
    blocker = gs.gsub("--wrap", BLOCK)
    gs.wait_state(blocker, "RUNNING")
    r = gs.run("galter", str(blocker), "--nice", "5")
    assert r.returncode == 1 and r.stderr == f"galter: error: job {blocker}: is RUNNING: only its walltime can change\n"
    for args, line in (
        (["--nice", "10001"], "galter: error: nice: 10001 is not between -10000 and 10000"),
        (["--priority=-1"], "galter: error: priority: -1 is not between 0 and 1000000000"),
    ):
        r = gs.run("galter", str(blocker), *args)
        assert r.returncode == 2 and r.stderr == line + "\n", r.stderr
    assert gs.alive()
    (gs.work / "go").touch()
    gs.wait_state(blocker, "COMPLETED")
