"""Skipping passes changes nothing: the fast simulator equals one that schedules after every event batch."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridsched.core.types import Params, Policy, Predictor
from gridsched.sim.engine import Mode, simulate
from gridsched.sim.swf import Trace

NCORES = 8


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    n = draw(st.integers(1, 25))
    t = 0
    tr = Trace("<random>", NCORES, NCORES, None)
    for i in range(n):
        t += draw(st.sampled_from([0, 0, 1, 5, 20, 60, 300]))  # many simultaneous arrivals
        run = draw(st.sampled_from([0, 1, 10, 30, 100, 500, 2000, 4000]))
        wall = max(run, draw(st.sampled_from([0, 10, 100, 1000, 2500, 5000, 10000])))
        tr.ids.append(i + 1)
        tr.submit.append(float(t))
        tr.size.append(draw(st.integers(1, NCORES)))
        tr.walltime.append(float(wall))
        tr.run.append(float(run))
        tr.user.append(draw(st.sampled_from(["a", "b", "c"])))
    return tr


def outcome(tr: Trace, params: Params, mode: Mode, overhead: float, fast: bool):  # type: ignore[no-untyped-def]
    r = simulate(tr, params, overhead=overhead, mode=mode, fast=fast)
    return r.start, r.end, r.checkpoints, r.segments, r.overhead_cs, r.lost_cs


SETTINGS = [
    (Params(policy=Policy.FCFS), Mode.CHECKPOINT, 120.0),
    (Params(policy=Policy.EASY), Mode.CHECKPOINT, 120.0),
    (Params(policy=Policy.CONSERVATIVE), Mode.CHECKPOINT, 120.0),
    (Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=600), Mode.CHECKPOINT, 120.0),
    (Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.5, threshold=0), Mode.CHECKPOINT, 0.0),
    (Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=600), Mode.REQUEUE, 0.0),
    (Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=600, cascade=True), Mode.CHECKPOINT, 120.0),
    (Params(policy=Policy.CHECKPOINT_BACKFILL, threshold=60, predictor=Predictor.USER_HISTORY), Mode.CHECKPOINT, 120.0),
    (Params(policy=Policy.CHECKPOINT_BACKFILL, threshold=60, predictor=Predictor.USER_RATIO), Mode.CHECKPOINT, 120.0),
]


@pytest.mark.parametrize(
    "params, mode, overhead", SETTINGS, ids=lambda v: v.policy.value if isinstance(v, Params) else str(v)
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tr=traces())
def test_fast_equals_every_event(tr: Trace, params: Params, mode: Mode, overhead: float) -> None:
    assert outcome(tr, params, mode, overhead, True) == outcome(tr, params, mode, overhead, False)


def test_fast_path_skips_passes() -> None:
    # 2 cores: job 1 holds both for 100 s; jobs 2-4 arrive while it runs and each needs 2.
    tr = Trace(
        "<t>",
        2,
        2,
        None,
        ids=[1, 2, 3, 4],
        submit=[0.0, 1.0, 2.0, 3.0],
        size=[2, 2, 2, 2],
        walltime=[100.0] * 4,
        run=[100.0] * 4,
        user=["a"] * 4,
    )
    for policy in Policy:
        fast = simulate(tr, Params(policy=policy), fast=True)
        slow = simulate(tr, Params(policy=policy), fast=False)
        # jobs 3 and 4 arrive to a blocked queue and the end of job 4 leaves an empty one
        # (skipped); job 2 arrives to no free core: skipped where that cannot start or
        # preempt anything, a pass under checkpoint-backfill (it may preempt)
        skips = 3 if policy is Policy.CHECKPOINT_BACKFILL else 4
        assert fast.skipped == skips and slow.skipped == 0, policy
        assert fast.passes == slow.passes - skips
        assert (fast.start, fast.end) == (slow.start, slow.end) == ([0, 100, 200, 300], [100, 200, 300, 400])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tr=traces())
def test_plain_easy_straight_equals_schedule(tr: Trace) -> None:
    """A plain easy replay takes each pass straight to the core's easy pass of a plain snapshot; one with a
    per-user limit that never binds goes through all of ``schedule``: the same starts and ends."""
    straight = outcome(tr, Params(policy=Policy.EASY), Mode.CHECKPOINT, 120.0, True)
    through = outcome(tr, Params(policy=Policy.EASY, max_cpus_per_user=10**6), Mode.CHECKPOINT, 120.0, True)
    assert straight == through
