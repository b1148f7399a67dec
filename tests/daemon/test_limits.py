"""Admin policy in the daemon, in process (stub executor): who may reserve, per-user limits, and a job that
overran the estimate it was backfilled on.

Refusals are one line: a reservation refused by the policy is recorded ENDED with ``refused: ...`` (as any
reservation the daemon refuses), a submission over a limit is quarantined and recorded under its id, where
``gsub --wait`` and ``gstat`` find it; nothing else changes and the daemon goes on serving.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import time

from gridsched.daemon import intake
from gridsched.daemon.loop import Daemon
from gridsched.protocol import requests as rq
from gridsched.protocol.reason_codes import code
from tests.daemon.test_loop import end, state, submit

BASE = """
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
[machine]
cores = 8
[daemon]
autostart = false
"""
ME = pwd.getpwuid(os.getuid())


def not_admin(d: Daemon) -> Daemon:
    """The daemon as a system daemon sees a user who is not its admin (here: the test's own uid)."""
    d.senders = intake.Senders(())
    return d


def reserve(d: Daemon, ncpus: int = 4, duration: int = 3600) -> dict:
    rid = d.spool.next_id()
    resv = {"id": rid, "uid": ME.pw_uid, "user": ME.pw_name, "ncpus": ncpus, "duration": duration}
    (d.spool.incoming / rq.id_name(rid)).write_text(json.dumps({"type": "resv_create", "resv": resv}))
    d.turn(time.time(), scan=True)
    return d.db.reservations([rid])[0]


def refused(d: Daemon, nid: int) -> str | None:
    rec = d.db.id_record(nid)
    return None if rec is None else rec["refused"]


def test_only_admins_reserve_by_default(stub_daemon):
    d = not_admin(stub_daemon(BASE))
    r = reserve(d)
    assert r["state"] == "ENDED"
    assert r["reason"] == (
        f"refused: {ME.pw_name} may not create reservations: only admins and the users of reservations.users may"
    )
    assert not d.book.resvs
    job = submit(d, time.time())
    d.turn(time.time(), scan=True)
    assert state(d, job) == "RUNNING", "the daemon goes on serving"
    # the admin (a personal daemon's owner, root) may
    d.senders = intake.Senders({os.getuid()})
    assert reserve(d)["state"] in ("WAITING", "ACTIVE")


def test_a_listed_user_reserves_within_the_caps(stub_daemon):
    caps = f"""
[reservations]
users = ["{ME.pw_name}"]
max_per_user = 2
max_cores_per_user = 6
max_duration_per_user = "2h"
"""
    d = not_admin(stub_daemon(BASE + caps))
    assert reserve(d, ncpus=4)["state"] in ("WAITING", "ACTIVE")
    r = reserve(d, ncpus=4)
    assert r["state"] == "ENDED" and r["reason"] == (
        f"refused: 4 cores more than {ME.pw_name}'s 4 reserved would be over 6 (reservations.max_cores_per_user)"
    )
    r = reserve(d, ncpus=1, duration=3 * 3600)
    assert r["state"] == "ENDED" and "reservations.max_duration_per_user" in r["reason"]
    assert reserve(d, ncpus=2)["state"] in ("WAITING", "ACTIVE")
    r = reserve(d, ncpus=1)
    assert r["state"] == "ENDED" and r["reason"] == (
        f"refused: {ME.pw_name} has 2 reservations: at most 2 (reservations.max_per_user)"
    )
    # admins have no caps
    d.senders = intake.Senders({os.getuid()})
    assert reserve(d, ncpus=8, duration=5 * 3600)["state"] in ("WAITING", "ACTIVE")


def test_submissions_over_the_limits_are_refused_in_one_line(stub_daemon):
    d = stub_daemon(BASE + "[limits]\nmax_submit_jobs_per_user = 3\nmax_array_tasks = 4\nmax_cpus_per_user = 6\n")
    t = time.time()
    big = submit(d, t, ncpus=7)
    arr = submit(d, t, array="0-4")
    d.turn(t, scan=True)
    assert refused(d, big) == "job of 7 cores: a user's running jobs may hold at most 6 (limits.max_cpus_per_user)"
    assert refused(d, arr) == "array of 5 tasks: at most 4 tasks per array (limits.max_array_tasks)"
    assert big not in d.table.jobs and arr not in d.table.jobs and d.db.job(big) is None
    ok = submit(d, t, array="0-1")  # two tasks
    one = submit(d, t)
    over = submit(d, t)
    d.turn(t, scan=True)
    assert refused(d, ok) is None and refused(d, one) is None
    assert refused(d, over) == (
        f"{ME.pw_name} has 3 jobs queued or running: one more would be over 3 (limits.max_submit_jobs_per_user)"
    )
    assert (d.spool.quarantine / rq.id_name(over)).exists()
    end(d, one, t + 1, exit_code=0)  # a job ends: there is room for one more
    again = submit(d, t + 1)
    d.turn(t + 1, scan=True)
    assert refused(d, again) is None and again in d.table.jobs


def test_running_cores_per_user_wait_with_slurm_s_reason(stub_daemon):
    d = stub_daemon(BASE + "[limits]\nmax_cpus_per_user = 4\n")
    t = time.time()
    jobs = [submit(d, t, ncpus=2) for _ in range(3)]
    d.turn(t, scan=True)
    d.forecast()
    d.table.commit()
    assert [state(d, j) for j in jobs] == ["RUNNING", "RUNNING", "PENDING"]
    reason = d.db.job(jobs[2])["reason"]
    assert reason == f"user core limit: {ME.pw_name}'s jobs hold 4 cores; 2 more would be over the 4 a user may hold"
    assert code("PENDING", reason) == "QOSMaxCpuPerUserLimit"
    end(d, jobs[0], t + 1, exit_code=0)
    d.turn(t + 1)
    assert state(d, jobs[2]) == "RUNNING"


def test_a_job_that_overran_the_estimate_it_was_backfilled_on_is_ended_for_the_head(stub_daemon):
    d = stub_daemon(BASE)
    t = time.time()
    blocker = submit(d, t, ncpus=4, walltime=100)
    head = submit(d, t, ncpus=8, walltime=60)
    soft = submit(d, t, ncpus=2, walltime=3600, estimate=30)
    d.turn(t, scan=True)
    assert [state(d, j) for j in (blocker, head, soft)] == ["RUNNING", "PENDING", "RUNNING"]
    assert d.table.jobs[soft].planned == 30
    d.turn(t + 50)  # past its estimate, before the head's time: left alone
    assert (soft, signal.SIGTERM) not in d.ex.signals
    end(d, blocker, t + 100, exit_code=0)
    d.turn(t + 100)
    assert (soft, signal.SIGTERM) in d.ex.signals and d.table.jobs[soft].stop == "overrun"
    end(d, soft, t + 101, signal=signal.SIGTERM)
    d.turn(t + 101)
    row = d.db.job(soft)
    assert row["state"] == "TIMEOUT"
    assert row["reason"] == f"overran the estimate it was backfilled on (30s) while job {head} waited"
    assert state(d, head) == "RUNNING"
