"""An estimate shorter than the walltime counts only while it holds (gridsched.core.policy, "Estimates").

Hand-worked: four cores; job 1 holds one of them until 100 (its walltime) and the head (job 2) needs all
four, so its reservation time is 100.  Job 3 asks for one core with a walltime of 500 and its own
estimate of 50: it may backfill only on the estimate, and then runs on it.
"""

from __future__ import annotations

import pytest

from gridsched.core.end_time import soft_left
from gridsched.core.policy import forecast, schedule
from gridsched.core.types import Kill, Params, Policy, Preempt, Running, Snapshot, Start, Waiting

BACKFILLING = (Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE)
BUSY = Running(1, 1, 0.0, 100.0)
HEAD = Waiting(2, 4, 10.0)
SOFT = Waiting(3, 1, 50.0, hard=500.0)  # estimate 50, walltime 500


def snap(running=(), pending=(), *, now=0.0, policy=Policy.EASY, head=None, ncores=4):
    return Snapshot(
        now=now, ncores=ncores, running=tuple(running), pending=tuple(pending), params=Params(policy=policy), head=head
    )


def started(policy: Policy, job: Waiting = SOFT) -> tuple[Start, object]:
    plan = schedule(snap([BUSY], [HEAD, job], policy=policy))
    (s,) = plan.starts
    return s, plan.head


def soft_running(now: float, planned: float | None = 50.0, preemptable: bool = False) -> Running:
    """Job 3 started at 0 on its estimate, as the daemon shows it at ``now``."""
    return Running(3, 1, 0.0, soft_left(500.0, 50.0, now), backfilled=True, preemptable=preemptable, planned=planned)


@pytest.mark.parametrize("policy", BACKFILLING)
def test_a_backfill_that_relies_on_the_estimate_records_it_as_planned(policy):
    s, head = started(policy)
    assert (s.job, s.backfilled, s.planned) == (3, True, 50.0)
    assert head is not None and (head.job, head.time) == (2, 100.0)


@pytest.mark.parametrize("policy", BACKFILLING)
def test_a_job_that_would_fit_on_its_walltime_does_not_rely_on_its_estimate(policy):
    s, _ = started(policy, Waiting(3, 1, 50.0, hard=90.0))  # ends by 100 even on its walltime
    assert s.planned is None


@pytest.mark.parametrize("policy", BACKFILLING)
def test_an_overrunning_job_is_killed_when_the_head_s_time_comes(policy):
    _, head = started(policy)
    plan = schedule(snap([soft_running(100.0)], [HEAD], now=100.0, policy=policy, head=head))
    assert plan.decisions == (Kill(3, "overran the estimate it was backfilled on (50s) while job 2 waited"),)


@pytest.mark.parametrize("policy", BACKFILLING)
def test_a_checkpointable_overrunning_job_is_preempted_instead(policy):
    _, head = started(policy)
    plan = schedule(snap([soft_running(100.0, preemptable=True)], [HEAD], now=100.0, policy=policy, head=head))
    assert plan.decisions == (Preempt(3),)


@pytest.mark.parametrize("policy", BACKFILLING)
def test_within_its_estimate_a_job_is_left_alone_and_the_pass_wakes_at_its_end(policy):
    # job 1 ended early, at 40: the head waits for job 3, whose estimate holds until 50
    _, head = started(policy)
    plan = schedule(snap([soft_running(40.0)], [HEAD], now=40.0, policy=policy, head=head))
    assert plan.decisions == ()
    assert plan.wake_at == 50.0
    assert forecast(snap([soft_running(40.0)], [HEAD], now=40.0, policy=policy, head=head))[2] == 50.0


@pytest.mark.parametrize("policy", BACKFILLING)
def test_an_overrun_is_harmless_until_the_head_s_time(policy):
    # at 60 job 3 has overrun its estimate, but job 1 holds the head back until 100: nothing is stopped yet
    _, head = started(policy)
    plan = schedule(snap([BUSY, soft_running(60.0)], [HEAD], now=60.0, policy=policy, head=head))
    assert plan.decisions == ()
    assert plan.wake_at == 100.0 or policy is Policy.CONSERVATIVE  # (conservative passes again at job 1's end)


@pytest.mark.parametrize("policy", BACKFILLING)
def test_a_job_started_in_queue_order_is_never_stopped_for_its_estimate(policy):
    # started as the first job of the queue (not backfilled): its estimate plans, its walltime limits
    r = Running(3, 1, 0.0, soft_left(500.0, 50.0, 100.0), backfilled=False, planned=None)
    plan = schedule(snap([r], [HEAD], now=100.0, policy=policy))
    assert plan.decisions == ()


@pytest.mark.parametrize("policy", BACKFILLING)
def test_only_the_jobs_the_head_needs_are_stopped(policy):
    # eight cores: two overrunning one-core jobs, the head needs seven: one of them is enough
    a = Running(3, 1, 0.0, 100.0, backfilled=True, planned=50.0)
    b = Running(4, 1, 0.0, 100.0, backfilled=True, planned=50.0)
    head = Waiting(2, 7, 10.0)
    plan = schedule(snap([a, b], [head], now=100.0, policy=policy, ncores=8))
    assert len(plan.kills) == 1 and plan.starts == ()


def test_the_plain_fcfs_never_backfills_so_never_stops():
    plan = schedule(snap([BUSY], [HEAD, SOFT], policy=Policy.FCFS))
    assert plan.decisions == ()
