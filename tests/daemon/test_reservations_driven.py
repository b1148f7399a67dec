"""Reservations and floating resources in the daemon, in process: the stub executor, a driven clock.

A declared 8-core machine with two ``matlab`` licences.  A reservation's cores and its bound job's, with
real jobs, are tested in test_reservations.py.
"""

from __future__ import annotations

import pytest

from tests.daemon.driven import Driven
from tests.daemon.test_reservations import CONFIG


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(CONFIG))


def test_job_needing_a_licence_waits_while_both_are_held(dr):
    # a and b hold their licences until the test ends them
    a = dr.submit(None, resources={"matlab": 1}, walltime=60)
    b = dr.submit(None, resources={"matlab": 1}, walltime=60)
    c = dr.submit(0.1, resources={"matlab": 1}, walltime=30)
    free = dr.submit(0.1, walltime=30)  # no licence: starts at once
    assert dr.running(a) and dr.running(b)
    assert dr.state(free) in ("RUNNING", "COMPLETED")
    dr.run_to(1)
    assert dr.state(c) == "PENDING"
    dr.finish(a)
    dr.run_to(1.5)
    dr.finish(b)
    dr.run_until(lambda: dr.state(c) == "COMPLETED", 10)
    jc, ja = dr.job(c), dr.job(a)
    assert ja["state"] == "COMPLETED"
    assert jc["start_time"] >= ja["end_time"] - 0.2
    assert jc["spec"]["resources"] == {"matlab": 1}


def test_deleting_an_active_reservation_ends_its_running_jobs(dr):
    rid = dr.resv_create(2, 60)
    assert dr.resv(rid)["state"] == "ACTIVE"
    job = dr.submit(30, reservation=rid, ncpus=2, walltime=30)
    waiting = dr.submit(1, reservation=rid, wait_resv=True, ncpus=2, walltime=30)
    assert dr.running(job)
    assert dr.state(waiting) == "PENDING"
    dr.run_to(1)
    dr.request("resv_delete", id=rid, release=False)
    dr.run_until(lambda: dr.state(job) == "TIMEOUT", 15)
    assert dr.job(job)["reason"] == "reservation ended"
    dr.run_until(lambda: dr.state(waiting) == "CANCELLED", 15)
    assert "reservation" in dr.job(waiting)["reason"]
    assert dr.resv(rid)["state"] == "DELETED"


def test_no_kill_reservation_lets_its_jobs_outlive_it(dr):
    rid = dr.resv_create(2, 2, kill=False)
    assert dr.resv(rid)["state"] == "ACTIVE"
    job = dr.submit(4, reservation=rid, ncpus=1, walltime=30)
    assert dr.running(job)
    dr.run_until(lambda: dr.resv(rid)["state"] == "ENDED", 10)
    assert dr.state(job) == "RUNNING"
    dr.run_until(lambda: dr.state(job) == "COMPLETED", 15)
    assert dr.job(job)["exit_code"] == 0
