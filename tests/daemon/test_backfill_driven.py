"""The checkpoint-based backfill scenario of test_backfill.py, in process: the stub executor, a driven clock.

A declared 8-core machine.  A (2 cores, walltime 12 s, really 11 s) and B
(2 cores, long) run; C, the head, needs 6 cores, which are free only when A
ends: its reservation is A's walltime end.  D and E (2 cores each) have a 30 s
walltime, longer than the hole before C's reservation; D really takes 2 s, E
takes longer than the hole.  With threshold 10 s and p = 0.2 both count as
6 s, which fits.  ``easy`` backfills neither; ``checkpoint-backfill``
backfills both, D ends before C's reservation, E is preempted at that moment
(checkpointed, suspended or requeued, as its mode says), C starts on time, and
E goes on later.  The scenario with real processes (the example checkpointing
jobs) stays in test_backfill.py.
"""

from __future__ import annotations

from tests.daemon.driven import Driven
from tests.daemon.test_backfill import config


def scenario(stub_daemon, policy: str, e_mode: str = "signal", a_secs: int = 12, units: int = 40):
    dr = Driven(stub_daemon(config(policy)))
    a = dr.submit(a_secs - 1, name="A", ncpus=2, walltime=a_secs)
    b = dr.submit(None, name="B", ncpus=2, walltime=600)
    assert dr.running(a) and dr.running(b)
    dr.run_to(0.2)  # the commands take a moment
    c = dr.submit(2, name="C", ncpus=6, walltime=60)
    d = dr.submit(2, name="D", ncpus=2, walltime=30, checkpoint="signal")
    e = dr.submit(units * 0.5, name="E", ncpus=2, walltime=max(30, units // 2 + 10), checkpoint=e_mode)
    return dr, (a, b, c, d, e)


def test_checkpoint_backfill_scenario(stub_daemon):
    dr, (a, b, c, d, e) = scenario(stub_daemon, "checkpoint-backfill")
    jd, je = dr.job(d), dr.job(e)
    assert jd["state"] in ("RUNNING", "COMPLETED") and je["state"] == "RUNNING"
    assert dr.state(c) == "PENDING"
    assert jd["backfilled"] and je["backfilled"]
    dr.run_until(lambda: dr.state(c) in ("RUNNING", "COMPLETED"), 40)
    jc = dr.job(c)
    ja = dr.job(a)
    reservation = ja["start_time"] + 12
    dr.run_until(lambda: dr.state(d) == "COMPLETED", 40)
    jd = dr.job(d)
    assert jd["end_time"] < reservation  # D really fit the hole
    assert jc["start_time"] >= reservation - 0.5  # the head was not started early on overrun cores...
    assert jc["start_time"] <= reservation + 4  # ...and it started on time: E checkpointed at once
    je = dr.job(e)
    assert je["preemptions"] == 1 and je["checkpoints"] == 1
    dr.run_until(lambda: dr.state(e) == "COMPLETED", 100)
    je = dr.job(e)
    assert je["restarts"] == 1
    assert dr.work[e].done == 20  # all its work, none of it done twice: it resumed from its checkpoint
    assert je["elapsed"] >= 20
    assert dr.state(c) == "COMPLETED"


def test_easy_backfills_neither(stub_daemon):
    dr, (a, b, c, d, e) = scenario(stub_daemon, "easy")
    dr.run_until(lambda: dr.state(c) in ("RUNNING", "COMPLETED"), 40)
    jc = dr.job(c)
    jd, je = dr.job(d), dr.job(e)
    for j in (jd, je):
        assert j["start_time"] is None or j["start_time"] >= jc["start_time"]
        assert not j["backfilled"]
    ja = dr.job(a)
    assert jc["start_time"] >= ja["end_time"] - 0.5  # C starts when A's cores come free


def test_suspend_mode_stops_and_continues_the_job(stub_daemon):
    dr, (a, b, c, d, e) = scenario(stub_daemon, "checkpoint-backfill", e_mode="suspend")
    assert dr.state(e) == "RUNNING"
    dr.run_until(lambda: dr.state(e) == "SUSPENDED", 40)
    dr.run_until(lambda: dr.state(c) in ("RUNNING", "COMPLETED"), 60)
    jc = dr.job(c)
    dr.run_until(lambda: dr.state(e) == "COMPLETED", 100)
    je = dr.job(e)
    assert je["preemptions"] == 1 and je["checkpoints"] == 0
    assert [s.job_id for s in dr.d.ex.started].count(e) == 1  # the same process went on: never restarted
    assert dr.work[e].done >= 20  # all 40 units of work
    assert jc["start_time"] is not None


def test_requeue_mode_reruns_from_scratch(stub_daemon):
    # a longer hole than the other scenarios (A holds its cores 30 s), and a longer E (80 units of 0.5 s),
    # so that it is still running at C's reservation
    dr, (a, b, c, d, e) = scenario(stub_daemon, "checkpoint-backfill", e_mode="requeue", a_secs=30, units=80)
    dr.run_until(lambda: dr.state(c) in ("RUNNING", "COMPLETED"), 60)
    dr.run_until(lambda: dr.state(e) == "COMPLETED", 180)
    je = dr.job(e)
    assert je["preemptions"] == 1 and je["restarts"] == 1
    assert [s.job_id for s in dr.d.ex.started].count(e) == 2  # run again...
    assert je["lost"] > 0  # ...from the start: the first run's work was lost and done again
