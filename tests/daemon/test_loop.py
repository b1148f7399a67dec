"""The daemon's loop in process, with the stub executor: a turn takes requests in, schedules, starts.

No process is forked; the stub records what would have run and ends the jobs
the test chooses.  These tests run in milliseconds and check the handlers,
the job table and the application of plans; the real-process tests stay as
the net beneath them.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import time

import pytest

from gridsched.daemon.loop import Daemon
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState
from tests.fuzz.test_requests import valid_job

CONFIG = """
[scheduler]
policy = "checkpoint-backfill"
p = 0.25
threshold = "5s"
[jobs]
kill_grace = "1s"
checkpoint_grace = "1s"
[machine]
cores = 8
[daemon]
autostart = false
"""


@pytest.fixture
def d(stub_daemon) -> Daemon:
    return stub_daemon(CONFIG)


def submit(d: Daemon, now: float, **fields: object) -> int:
    nid = d.spool.next_id()
    job = {**valid_job(nid), "submit_time": now, **fields}
    (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
    return nid


def request(d: Daemon, kind: str, uid: int | None = None, **fields: object) -> None:
    p = d.spool.incoming / f"{kind}-{len(os.listdir(d.spool.incoming))}-1.json"
    p.write_text(json.dumps({"type": kind, **fields}))
    if uid is not None:
        os.chown(p, uid, -1)


def state(d: Daemon, jid: int) -> str:
    rec = d.table.jobs.get(jid)
    return rec.state.value if rec is not None else d.db.job(jid)["state"]


def end(d: Daemon, jid: int, now: float, **result: object) -> None:
    rec = d.table.jobs[jid]
    d.ex.end(jid, rec.segment, end=now, **result)
    d.job_ended(jid)


def test_a_turn_takes_in_schedules_and_starts(d):
    t = time.time()
    a = submit(d, t, ncpus=4, walltime=60)
    b = submit(d, t, ncpus=8, walltime=60)
    d.turn(t, scan=True)
    assert [s.job_id for s in d.ex.started] == [a]
    assert state(d, a) == "RUNNING" and state(d, b) == "PENDING"
    assert d.ex.started[0].umask == 0o022 and len(d.ex.started[0].cpus) >= 1
    end(d, a, t + 5, exit_code=0)
    d.turn(t + 5)
    assert state(d, a) == "COMPLETED"
    assert [s.job_id for s in d.ex.started] == [a, b]
    end(d, b, t + 9, exit_code=3)
    assert state(d, b) == "FAILED" and d.db.job(b)["exit_code"] == 3


def test_walltime_is_enforced_with_sigterm_then_sigkill(d):
    t = time.time()
    a = submit(d, t, walltime=10)
    d.turn(t, scan=True)
    d.turn(t + 11)
    assert (a, signal.SIGTERM) in d.ex.signals
    d.turn(t + 13)
    assert (a, signal.SIGKILL) in d.ex.signals
    end(d, a, t + 13, signal=9)
    assert state(d, a) == "TIMEOUT"


def test_a_requeued_job_starts_again_from_the_daemons_own_files(d):
    """A requeue restarts the job from launch.json: a second start must not depend on what the owner can change."""
    if os.geteuid() != 0:
        print("skipped: a job of another user needs root")
        pytest.skip("needs root (a job of another user)")
    t = time.time()
    long = submit(d, t, ncpus=4, walltime=20, name="long")
    wide = submit(d, t, ncpus=8, walltime=10, name="wide")
    # another user's job (root submits for them): the daemon keeps its own copy of the job's private parts
    rq_job = submit(d, t, ncpus=4, walltime=60, checkpoint="requeue", name="rq", uid=65534, gid=65534)
    d.turn(t, scan=True)
    assert state(d, long) == "RUNNING" and state(d, rq_job) == "RUNNING", "backfilled into the hole"
    (d.spool.job_dir(rq_job) / "private.json").unlink()  # the owner may remove their copy
    d.turn(t + 20)  # the wide job's reservation time: the backfilled job is stopped
    assert (rq_job, signal.SIGTERM) in d.ex.signals
    end(d, rq_job, t + 20, signal=15)
    end(d, long, t + 20, exit_code=0)
    d.turn(t + 20)
    assert state(d, wide) == "RUNNING" and state(d, rq_job) == "PENDING"
    end(d, wide, t + 25, exit_code=0)
    d.turn(t + 25)
    assert state(d, rq_job) == "RUNNING"
    assert [s.job_id for s in d.ex.started].count(rq_job) == 2
    assert d.ex.started[-1].env["GS_JOBID"] == str(rq_job)


def test_cancel_hold_release_and_another_users_request(d):
    t = time.time()
    a = submit(d, t, ncpus=8, walltime=60)
    b = submit(d, t, ncpus=8, walltime=60)
    c = submit(d, t, ncpus=8, walltime=60)
    d.turn(t, scan=True)
    request(d, "hold", jobs=[b])
    request(d, "cancel", uid=65534, jobs=[c])  # not the owner's: refused, the job stays
    d.turn(t + 1, scan=True)
    assert state(d, b) == "HELD" and state(d, c) == "PENDING"
    request(d, "cancel", jobs=[a, c])
    d.turn(t + 2, scan=True)
    assert (a, signal.SIGTERM) in d.ex.signals and state(d, c) == "CANCELLED"
    end(d, a, t + 2, signal=15)
    assert state(d, a) == "CANCELLED"
    request(d, "release", jobs=[b])
    d.turn(t + 3, scan=True)
    assert state(d, b) == "RUNNING"


def test_admin_requests_from_others_change_nothing(d):
    t = time.time()
    request(d, "drain", uid=65534, cores="0-3", reason="x")
    request(d, "reload", uid=65534)
    d.turn(t, scan=True)
    assert d.drained == frozenset() and not d.reload_requested
    assert len(list(d.spool.quarantine.glob("*.why"))) == 2
    request(d, "drain", cores="0-3", reason="fan")
    d.turn(t + 1, scan=True)
    assert d.drained == frozenset(range(4))
    a = submit(d, t, ncpus=5)
    d.turn(t + 2, scan=True)
    assert state(d, a) == "PENDING"
    request(d, "undrain", cores="0-3")
    d.turn(t + 3, scan=True)
    assert d.drained == frozenset() and state(d, a) == "RUNNING"


def test_an_array_takes_its_task_ids_without_colliding(d):
    t = time.time()
    a = submit(d, t, array="0-3%2")
    waiting = a + 1
    (d.spool.incoming / rq.id_name(waiting)).write_text(
        json.dumps({"type": "submit", "job": {**valid_job(waiting), "submit_time": t}})
    )  # another submitter got a + 1
    d.turn(t, scan=True)
    rows = d.db.by_spec("array_id", a)
    ids = sorted(r["id"] for r in rows)
    # the tasks that may start soon are made: as many as the %2 throttle lets run, and one more
    assert len(ids) == 3 and waiting not in ids
    assert state(d, waiting) in ("PENDING", "RUNNING")
    assert sum(state(d, i) == "RUNNING" for i in ids) == 2, "the %2 throttle"
    assert not [n for n in os.listdir(d.spool.incoming) if n.startswith("submit-")], "claims released"


def test_a_job_ends_with_its_state_and_nothing_is_left(d):
    t = time.time()
    jobs = [submit(d, t, ncpus=2, walltime=30) for _ in range(6)]
    d.turn(t, scan=True)
    for j in jobs[:4]:
        end(d, j, t + 1, exit_code=0)
    d.turn(t + 1)
    for j in jobs[4:]:
        end(d, j, t + 2, exit_code=0)
    d.turn(t + 2)
    assert all(state(d, j) == JobState.COMPLETED.value for j in jobs)
    assert d.table.jobs == {} and d.table.queue == []


def test_a_job_that_can_never_start_is_said_so_and_has_no_predicted_start(d):
    t = time.time()
    request(d, "drain", cores="4-7", reason="fan")
    a = submit(d, t, ncpus=5)
    d.turn(t, scan=True)
    d.forecast()
    d.table.commit()
    row = d.db.job(a)
    assert row["predicted_start"] is None
    assert row["reason"] == "can never start while cores 4-7 are drained (see gctl topology)"
    request(d, "undrain", cores="4-7")
    d.turn(t + 1, scan=True)
    d.forecast()
    d.table.commit()
    assert state(d, a) == "RUNNING" and d.db.job(a)["reason"] == ""


def test_dependencies_are_judged_by_the_core_and_their_reason_recorded(d):
    t = time.time()
    a = submit(d, t, ncpus=8, walltime=60)
    b = submit(d, t, depend=f"afterok:{a}")
    c = submit(d, t, depend=f"afternotok:{a}")
    d.turn(t, scan=True)
    assert "waiting for dependency" in d.db.job(b)["reason"]
    end(d, a, t + 1, exit_code=0)
    d.turn(t + 1)
    assert state(d, b) == "RUNNING" and d.db.job(b)["reason"] == ""
    assert state(d, c) == "PENDING" and "never satisfied" in d.db.job(c)["reason"]


def test_a_board_job_waiting_behind_a_drained_board_is_told_so(stub_daemon, tmp_path):
    cpu = min(os.sched_getaffinity(0))
    topo = tmp_path / "topo.toml"
    topo.write_text(f'[[board]]\ncores = "0-3"\nhost_cpus = "{cpu}"\n[[board]]\ncores = "4-7"\nhost_cpus = "{cpu}"\n')
    d = stub_daemon(CONFIG.replace("cores = 8", f'topology = "{topo}"'))
    t = time.time()
    request(d, "drain", cores="4-7", reason="fan")
    small = submit(d, t, ncpus=1, walltime=60)
    d.turn(t, scan=True)
    assert state(d, small) == "RUNNING"
    big = submit(d, t, ncpus=4, place="board", walltime=60)
    d.turn(t, scan=True)
    d.forecast()
    d.table.commit()
    row = d.db.job(big)
    assert row["state"] == "PENDING" and row["predicted_start"] is not None
    assert row["reason"] == "waiting for cores, while cores 4-7 are drained (see gctl topology)"
    request(d, "undrain", cores="4-7")
    d.turn(t + 1, scan=True)
    d.forecast()
    d.table.commit()
    assert state(d, big) == "RUNNING" and d.db.job(big)["reason"] == ""
    assert {c // 4 for c in d.table.jobs[big].cores} == {1}


def test_a_bound_job_that_cannot_end_within_its_reservation_is_told_so(d):
    t = time.time()
    me = pwd.getpwuid(os.getuid())
    rid = d.spool.next_id()
    resv = {"id": rid, "uid": me.pw_uid, "user": me.pw_name, "ncpus": 4, "duration": 100, "create_time": t}
    (d.spool.incoming / rq.id_name(rid)).write_text(json.dumps({"type": "resv_create", "resv": resv}))
    d.turn(t, scan=True)
    a = submit(d, t, ncpus=4, walltime=60, reservation=rid)
    b = submit(d, t, ncpus=4, walltime=60, reservation=rid)
    d.turn(t, scan=True)
    d.forecast()
    d.table.commit()
    assert state(d, a) == "RUNNING"
    row = d.db.job(b)
    assert row["state"] == "PENDING" and row["predicted_start"] is None
    assert (
        row["reason"] == f"can never start in reservation {rid}: it would not end before the reservation ends its jobs"
    )


def test_a_job_whose_dependency_is_met_keeps_the_forecasts_reason_from_turn_to_turn(d):
    t = time.time()
    a = submit(d, t, ncpus=8, walltime=60)
    c = submit(d, t, ncpus=8, walltime=60)
    b = submit(d, t, ncpus=2, walltime=60, depend=f"after:{a}")
    d.turn(t, scan=True)
    d.forecast()
    d.table.commit()
    assert state(d, a) == "RUNNING"
    assert d.db.job(c)["reason"].startswith("Resources: ")
    # b's dependency is met (a started): it waits behind c, and says so however often the daemon schedules
    assert d.db.job(b)["reason"].startswith("Priority: ")
    submit(d, t, ncpus=1, walltime=600)
    d.turn(t + 1, scan=True)
    d.turn(t + 2, scan=True)
    d.table.commit()
    assert d.db.job(b)["reason"].startswith("Priority: ")
    end(d, a, t + 3, exit_code=0)
    d.turn(t + 3)
    assert state(d, c) == "RUNNING" and d.db.job(c)["reason"] == ""
