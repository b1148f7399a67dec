"""A job's own estimate (PBS soft_walltime, gsub --estimate): the time the core plans with in place of the
walltime (:func:`gridsched.core.end_time.soft_left`), and the backfill decisions that follow from it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gridsched.core.end_time import soft_left
from gridsched.core.policy import forecast, schedule
from gridsched.core.types import Params, Policy, Running, Snapshot, Waiting

EASY = Params(policy=Policy.EASY)
CONS = Params(policy=Policy.CONSERVATIVE)


def snap(running=(), pending=(), *, now=0.0, ncores=4, params=EASY):
    return Snapshot(now=now, ncores=ncores, running=tuple(running), pending=tuple(pending), params=params)


def test_soft_left():
    assert soft_left(100.0, None, 0.0) == 100.0  # no estimate: the walltime
    assert soft_left(100.0, 150.0, 0.0) == 100.0  # never beyond the walltime
    assert soft_left(100.0, 30.0, 0.0) == 30.0  # waiting, or started just now
    assert soft_left(100.0, 30.0, 29.0) == 30.0
    assert soft_left(100.0, 30.0, 30.0) == 60.0  # outlived: one estimate more, as PBS extends a soft walltime
    assert soft_left(100.0, 30.0, 95.0) == 100.0  # ... never beyond the walltime


@given(st.floats(1, 1e6), st.floats(1, 1e6), st.floats(0, 2e6))
def test_soft_left_is_ahead_and_within_the_walltime(wall, soft, ran):
    e = soft_left(wall, soft, ran)
    assert e <= wall and (e > ran or e == wall) and e >= min(soft, wall)


# One core of four is busy until 100 (its walltime) and the head needs all four: its shadow time is 100,
# with no extra cores.  A one-core job with a walltime of 500 does not fit before it; planned at 50 it does.
BUSY = Running(1, 1, 0.0, 100.0)
HEAD = Waiting(2, 4, 10.0)


def test_a_shorter_estimate_lets_a_job_backfill_that_its_walltime_would_not():
    assert [s.job for s in schedule(snap([BUSY], [HEAD, Waiting(3, 1, 500.0)])).starts] == []
    est = soft_left(500.0, 50.0, 0.0)
    assert [s.job for s in schedule(snap([BUSY], [HEAD, Waiting(3, 1, est)])).starts] == [3]


def test_a_running_job_is_planned_to_end_at_its_estimate():
    # the running job's walltime is 500, its estimate 60: the head is forecast at 60, not 500
    r = Running(1, 2, 0.0, soft_left(500.0, 60.0, 10.0))
    assert forecast(snap([r], [HEAD], now=10.0, params=CONS))[2] == 60.0
    # past its estimate (at 70) it is planned to run one estimate more: until 120
    r = Running(1, 2, 0.0, soft_left(500.0, 60.0, 70.0))
    assert forecast(snap([r], [HEAD], now=70.0, params=CONS))[2] == 120.0
