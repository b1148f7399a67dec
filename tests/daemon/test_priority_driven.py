"""Job priorities in the daemon, in process (stub executor, driven clock): gsub --nice and --priority and
galter reorder the queue, gstat --priority shows it, fair share counts ended jobs across a restart and puts
a user without usage first, raises written by an ordinary user are refused.

The commands run in process on the daemon's spool; a request of another user is a file it owns (as root can
write one; elsewhere those tests are skipped).
"""

from __future__ import annotations

import json
import os

import pytest

from gridsched.protocol import requests as rq
from tests.daemon.driven import Driven
from tests.daemon.test_priority import FAIRSHARE, NOBODY, ONE_CORE


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(ONE_CORE))


def blocker(dr: Driven) -> int:
    jid = dr.gsub("--wrap", "wait for go", work=None)
    assert dr.running(jid)
    return jid


def starts(dr: Driven, ids: list[int]) -> list[int]:
    """``ids`` in the order they started (each run to completion)."""
    dr.run_until(lambda: all(dr.state(j) == "COMPLETED" for j in ids), 60)
    return [s.job_id for s in dr.d.ex.started if s.job_id in ids]


def queue(dr: Driven) -> list[tuple[int, int, int, int | None]]:
    """(id, priority, nice, admin priority) of the pending jobs, in the order gstat --priority gives."""
    recs = json.loads(dr.command("gstat", "--priority", "--json", turn=False).stdout)["jobs"]
    return [(x["id"], x["priority"], x["nice"], x["admin_priority"]) for x in recs]


def test_nice_puts_a_job_behind_later_ones(dr):
    b = blocker(dr)
    niced = dr.gsub("--nice", "100", "--wrap", "true")
    plain = dr.gsub("--wrap", "true")
    niced2 = dr.gsub("--nice=50", "--wrap", "true")
    assert dr.state(niced) == "PENDING"
    dr.finish(b)
    assert starts(dr, [niced, plain, niced2]) == [plain, niced2, niced]


def test_an_admin_priority_and_a_negative_nice_go_first(dr):
    b = blocker(dr)  # a personal spool: its owner is its admin
    a = dr.gsub("--wrap", "true")
    bb = dr.gsub("--nice=-10", "--wrap", "true")
    c = dr.gsub("--priority", "1000", "--wrap", "true")
    recs = json.loads(dr.command("gstat", "--priority", "--json").stdout)["jobs"]
    assert [x["id"] for x in recs] == [c, bb, a]
    assert [(x["priority"], x["nice"], x["admin_priority"]) for x in recs] == [
        (1000, 0, 1000),
        (10, -10, None),
        (0, 0, None),
    ]
    text = dr.command("gstat", "--priority").stdout.splitlines()
    assert text[0].split() == ["JOBID", "USER", "PRIORITY", "AGE", "JOBSIZE", "FAIRSHARE", "NICE"]
    assert [int(line.split()[0]) for line in text[1:]] == [c, bb, a]
    dr.finish(b)
    assert starts(dr, [a, bb, c]) == [c, bb, a]


def test_directives_set_nice(dr, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    b = blocker(dr)
    (tmp_path / "slurm.sh").write_text("#!/bin/sh\n#SBATCH --nice\ntrue\n")  # 100, as Slurm
    (tmp_path / "pbs.sh").write_text("#!/bin/sh\n#PBS -p -20\ntrue\n")
    (tmp_path / "up.sh").write_text("#!/bin/sh\n#PBS -p 7\ntrue\n")
    s = dr.gsub("slurm.sh")
    p = dr.gsub("pbs.sh")
    r = dr.command("gsub", "up.sh")
    assert "#PBS -p 7 ignored: only an admin raises a job's priority" in r.stderr
    recs = {x["id"]: x for x in json.loads(dr.command("gstat", "--priority", "--json").stdout)["jobs"]}
    assert (recs[s]["nice"], recs[p]["nice"], recs[int(r.stdout.split()[-1])]["nice"]) == (100, 20, 0)
    dr.finish(b)
    dr.run_until(lambda: dr.state(s) == "COMPLETED", 10)


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
def test_gsub_refuses_bad_values_in_one_line(dr, args, line):
    r = dr.command("gsub", *args, "--wrap", "true", check=False)
    assert r.exit_code == 2
    assert r.stderr == line + "\n"


def test_gsub_refuses_a_bad_directive_in_one_line(dr, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.sh").write_text("#!/bin/sh\n#PBS -p 5000\ntrue\n")
    r = dr.command("gsub", "bad.sh", check=False)
    assert r.exit_code != 0
    assert r.stderr == "gsub: error: bad.sh:2: #PBS -p 5000: must lie between -1024 and 1023\n"


def test_gstat_priority_counts_ended_jobs_in_fair_share_across_a_restart(stub_daemon):
    dr = Driven(stub_daemon(FAIRSHARE))
    done = dr.gsub("-n", "1", "--wrap", "sleep 1", work=1)
    dr.run_until(lambda: dr.state(done) == "COMPLETED", 5)
    held = dr.gsub("--hold", "--wrap", "true")
    assert dr.state(held) == "HELD"

    def fairshare() -> float:
        recs = json.loads(dr.command("gstat", "--priority", "--json", turn=False).stdout)["jobs"]
        return next(x["fairshare"] for x in recs if x["id"] == held)

    assert fairshare() == pytest.approx(0.5, abs=0.01)  # the only user, with all the usage: 2 ** -1
    dr.restart(stub_daemon)
    assert fairshare() == pytest.approx(0.5, abs=0.01)


def as_nobody(dr: Driven, **fields: object) -> int:
    """A submission written by hand and owned by an ordinary user (the kernel's word for its sender)."""
    spec = {"user": "nobody", "uid": NOBODY, "gid": NOBODY, "stdout": "/dev/null", "stderr": "/dev/null"}
    jid = dr.submit(0.0, turn=False, **{**spec, **fields})
    os.chown(dr.d.spool.incoming / rq.id_name(jid), NOBODY, NOBODY)
    dr.turn()
    return jid


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"priority": 5}, "only an admin may set a job's priority (--priority)"),
        ({"nice": -1}, "nice -1: only an admin may give a negative nice value"),
    ],
)
def test_the_daemon_refuses_a_raise_from_an_ordinary_user(dr, fields, why):
    if os.getuid() != 0:
        pytest.skip("writing a request file owned by another user needs root")
    jid = as_nobody(dr, **fields)
    assert why in (dr.refusal(rq.id_name(jid)) or "")
    r = dr.command("gstat", "-a", "--json")
    assert jid not in [j["id"] for j in json.loads(r.stdout)["jobs"]]
    ok = as_nobody(dr, nice=5)  # a positive nice is anyone's
    dr.run_until(lambda: dr.state(ok) == "COMPLETED", 5)
    assert dr.job(ok)["start_time"] is not None


def test_fair_share_between_two_users_across_a_restart(stub_daemon):
    """root has used the machine (an ended job, counted again after a restart); nobody has not: nobody's
    later job starts first."""
    if os.getuid() != 0:
        pytest.skip("writing a request file owned by another user needs root")
    dr = Driven(stub_daemon(FAIRSHARE))
    used = dr.gsub("--wrap", "sleep 1", work=1)
    dr.run_until(lambda: dr.state(used) == "COMPLETED", 5)
    dr.restart(stub_daemon)
    b = blocker(dr)
    mine = dr.gsub("--wrap", "true")
    theirs = as_nobody(dr)
    row = dr.job(theirs)
    assert row["state"] == "PENDING" and (row["uid"], row["user"]) == (NOBODY, "nobody")
    dr.finish(b)
    assert starts(dr, [mine, theirs]) == [theirs, mine]
    assert dr.job(theirs)["start_time"] <= dr.job(mine)["start_time"]


def test_galter_nice_and_priority_reorder_pending_jobs(dr, stub_daemon):
    """An admin (a personal spool's owner) raises later jobs with galter: under fcfs they start first."""
    b = blocker(dr)
    a = dr.gsub("--wrap", "true")
    bb = dr.gsub("--nice", "30", "--wrap", "true")
    c = dr.gsub("--wrap", "true")
    assert [x[0] for x in queue(dr)] == [a, c, bb]
    r = dr.command("galter", str(c), "--priority", "1000")
    assert r.exit_code == 0 and r.stdout == f"job {c}: changing\n", r.stderr
    r = dr.command("galter", str(bb), "--nice=-10")
    assert r.exit_code == 0, r.stderr
    want = [(c, 1000, 0, 1000), (bb, 10, -10, None), (a, 0, 0, None)]
    assert queue(dr) == want
    # the change is kept in the state db: a restarted daemon orders the queue the same way
    dr.restart(stub_daemon)
    assert queue(dr) == want
    dr.finish(b)
    assert starts(dr, [a, bb, c]) == [c, bb, a]


def test_galter_raises_the_pending_tasks_of_an_array(dr):
    b = blocker(dr)
    a = dr.gsub("--wrap", "true")
    arr = dr.gsub("-a", "1-2", "--wrap", "true")
    dr.run_until(lambda: len(queue(dr)) == 3, 5)
    assert dr.command("galter", str(arr), "--nice=-5").exit_code == 0
    assert [x[2] for x in queue(dr)] == [-5, -5, 0]  # the tasks' new nice value
    tasks = [x[0] for x in queue(dr)[:2]]
    assert a not in tasks
    dr.finish(b)
    assert starts(dr, [a, *tasks])[-1] == a


def test_galter_nice_of_a_running_job_and_bad_values_are_refused(dr):
    b = blocker(dr)
    r = dr.command("galter", str(b), "--nice", "5", check=False)
    assert r.exit_code == 1 and r.stderr == f"galter: error: job {b}: is RUNNING: only its walltime can change\n"
    for args, line in (
        (["--nice", "10001"], "galter: error: nice: 10001 is not between -10000 and 10000"),
        (["--priority=-1"], "galter: error: priority: -1 is not between 0 and 1000000000"),
    ):
        r = dr.command("galter", str(b), *args, check=False)
        assert r.exit_code == 2 and r.stderr == line + "\n", r.stderr
    dr.finish(b)
    assert dr.state(b) == "COMPLETED"


CKPT_FOUR = """
[scheduler]
policy = "checkpoint-backfill"
[machine]
cores = 4
[daemon]
autostart = false
"""


def test_a_job_of_higher_priority_submitted_after_the_head_starts_before_it(stub_daemon):
    """Under checkpoint-backfill, the remembered head gives way to a job of higher priority submitted later:
    when the cores free, that job starts first (it used to start after the head it came behind)."""
    dr = Driven(stub_daemon(CKPT_FOUR))
    blocker = dr.gsub("-n", "4", "-t", "30", "--wrap", "long", work=20.0)
    low = dr.gsub("-n", "4", "--nice", "500", "--wrap", "low", work=1.0)
    dr.run_to(2.0)
    high = dr.gsub("-n", "4", "--priority", "750", "--wrap", "high", work=1.0)
    assert dr.running(blocker) and dr.state(low) == dr.state(high) == "PENDING"
    dr.run_until(lambda: dr.state(low) == "COMPLETED" and dr.state(high) == "COMPLETED", 120)
    order = [s.job_id for s in dr.d.ex.started if s.job_id in (low, high)]
    assert order == [high, low], order


def test_a_flexible_reservation_takes_its_place_among_the_jobs_by_its_priority(stub_daemon):
    """gresv create --priority puts a flexible reservation ahead of jobs of lower priority submitted before
    it; gstat --priority lists it (R<id>) with the jobs, in the order the pass uses."""
    dr = Driven(stub_daemon(CKPT_FOUR))
    blocker = dr.gsub("-n", "4", "-t", "30", "--wrap", "long", work=10.0)
    job = dr.gsub("-n", "4", "--wrap", "first", work=1.0)
    r = dr.command("gresv", "create", "-n", "4", "-t", "60", "--priority", "900")
    rid = int(r.stdout.strip())
    low = dr.command("gresv", "create", "-n", "4", "-t", "60", "--nice", "100")
    lid = int(low.stdout.strip())
    recs = json.loads(dr.command("gstat", "--priority", "--json", turn=False).stdout)["jobs"]
    assert [(x["id"], x.get("reservation", False)) for x in recs] == [(rid, True), (job, False), (lid, True)]
    out = dr.command("gstat", "--priority", turn=False).stdout
    assert f"R{rid}" in out and f"R{lid}" in out
    dr.run_until(lambda: dr.resv(rid)["state"] == "ACTIVE", 60)
    assert dr.running(blocker) is False and dr.state(job) == "PENDING", "the reservation went first"


def test_only_an_admin_raises_a_reservation(stub_daemon):
    from gridsched.protocol import requests as rq

    user = rq.Sender(1000, "u", frozenset(), False)
    for extra, why in (({"priority": 5}, "only an admin may set"), ({"nice": -5}, "only an admin may give")):
        resv = {"id": 7, "ncpus": 1, "duration": 60, "uid": 1000, "user": "u", **extra}
        with pytest.raises(rq.Refused) as e:
            rq.parse({"type": "resv_create", "resv": resv}, rq.id_name(7), user)
        assert why in str(e.value)


def test_gresv_update_moves_a_waiting_reservation_among_the_jobs(stub_daemon):
    """gresv update changes a waiting flexible reservation's nice and priority: the daemon ranks it so from its
    next pass (gstat --priority shows the order the pass uses), and it is activated before the job it now comes
    before; a user other than its owner changes nothing."""
    from gridsched.protocol import requests as rq

    dr = Driven(stub_daemon(CKPT_FOUR))
    blocker = dr.gsub("-n", "4", "-t", "30", "--wrap", "long", work=10.0)
    job = dr.gsub("-n", "4", "--wrap", "first", work=1.0)
    rid = int(dr.command("gresv", "create", "-n", "4", "-t", "60", "--nice", "100").stdout.strip())

    def order() -> list[int]:
        return [x["id"] for x in json.loads(dr.command("gstat", "--priority", "--json", turn=False).stdout)["jobs"]]

    assert order() == [job, rid]
    dr.command("gresv", "update", str(rid), "--priority", "900")
    assert (dr.resv(rid)["nice"], dr.resv(rid)["priority"]) == (100, 900) and order() == [rid, job]
    dr.command("gresv", "update", str(rid), "--no-priority", "--nice", "50")
    assert (dr.resv(rid)["nice"], dr.resv(rid)["priority"]) == (50, None) and order() == [job, rid]
    assert not dr.d.actions.alter_resv(rq.ResvAlter(rid, nice=-500), 4242)  # not its owner: nothing changes
    assert dr.resv(rid)["nice"] == 50
    dr.command("gresv", "update", str(rid), "--nice", "-10")
    assert order() == [rid, job]
    dr.run_until(lambda: dr.resv(rid)["state"] == "ACTIVE", 60)
    assert dr.running(blocker) is False and dr.state(job) == "PENDING", "the reservation went first"
    r = dr.command("gresv", "update", str(rid), "--nice", "1", check=False)
    assert r.exit_code == 1 and f"reservation {rid}: is ACTIVE" in r.stderr


def test_the_boundary_lets_only_an_admin_raise_a_reservation_by_update(stub_daemon):
    from gridsched.protocol import requests as rq

    user = rq.Sender(1000, "u", frozenset(), False)
    name = "resv_alter-1-1.json"
    assert rq.parse({"type": "resv_alter", "id": 7, "nice": 5}, name, user) == rq.ResvAlter(7, nice=5)
    for extra, why in (
        ({"priority": 5}, "only an admin may set"),
        ({"unset_priority": True}, "only an admin may set"),
        ({"nice": -5}, "only an admin may give"),
        ({}, "nothing to change"),
        ({"nice": 20000}, "nice"),
    ):
        with pytest.raises(rq.Refused) as e:
            rq.parse({"type": "resv_alter", "id": 7, **extra}, name, user)
        assert why in str(e.value)
    admin = rq.Sender(0, "root", frozenset(), True)
    got = rq.parse({"type": "resv_alter", "id": 7, "priority": 5, "nice": -5}, name, admin)
    assert got == rq.ResvAlter(7, nice=-5, priority=5)
    with pytest.raises(rq.Refused, match="together"):
        rq.parse({"type": "resv_alter", "id": 7, "priority": 5, "unset_priority": True}, name, admin)
