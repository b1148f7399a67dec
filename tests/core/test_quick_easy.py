"""The easy pass of the plainest snapshots (:func:`gridsched.core.policy.quick.easy_plain`) decides what the
general pass (:func:`gridsched.core.policy.backfill.backfill`) decides, and leaves every other snapshot to it."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.policy import schedule
from gridsched.core.policy.backfill import backfill
from gridsched.core.policy.quick import easy_plain, easy_sorted
from gridsched.core.types import BackfillOrder, HeadReservation, Params, Policy, Running, Snapshot, Start, Waiting

EASY = Params(policy=Policy.EASY)
SJF = Params(policy=Policy.EASY, backfill_order=BackfillOrder.SHORTEST)  # backfilled shortest first
NOW = 1000.0
# few distinct times, so ends, estimates and shadow times often coincide
TIMES = st.sampled_from([0.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 3600.0])


@st.composite
def plain_snapshots(draw: st.DrawFn, extras: bool = False) -> Snapshot:
    ncores = draw(st.integers(1, 24))
    size = st.integers(1, 4) | st.integers(1, ncores + 2)  # small jobs mostly, some too large for the machine
    running: list[Running] = []
    held = 0
    for k in range(draw(st.integers(0, 8))):
        n = min(draw(st.integers(0, 8)), ncores - held)
        held += n
        stopping = draw(st.integers(0, 9)) == 0
        ran = draw(TIMES)  # (a job past its walltime, or stopping, counts as ending now)
        running.append(Running(100 + k, n, NOW - ran, ran + draw(TIMES), stopping=stopping))
    pending = [Waiting(k, draw(size), draw(TIMES), draw(st.booleans())) for k in range(draw(st.integers(0, 14)))]
    if extras:  # a few jobs that ask for more than cores: the general pass decides where the quick one would
        for k in draw(st.lists(st.integers(0, len(pending) - 1), min_size=1, max_size=4)) if pending else ():
            w = pending[k]
            pending[k] = draw(
                st.sampled_from(
                    [
                        Waiting(w.id, w.ncpus, w.estimate, resources=(("lic", 1),)),
                        Waiting(w.id, w.ncpus, w.estimate, resources=(("lic", 0),)),
                        Waiting(w.id, w.ncpus, w.estimate, hard=w.estimate + 100.0),
                        Waiting(w.id, w.ncpus, w.estimate, bind=99),
                    ]
                )
            )
    params = draw(st.sampled_from([EASY, SJF]))
    return Snapshot(NOW, ncores, tuple(running), tuple(pending), params, gated=False, splitting=False)


@settings(max_examples=500, deadline=None)
@given(snap=plain_snapshots())
def test_the_quick_pass_decides_as_the_general_one(snap: Snapshot) -> None:
    plan = easy_plain(snap)
    general = backfill(snap, False, False)[0]
    if plan is not None:  # (None: a head that would fit but for stopping jobs, left to the general pass)
        assert plan == general
    assert schedule(snap) == general


@settings(max_examples=600, deadline=None)
@given(snap=plain_snapshots(extras=True))
def test_jobs_asking_for_more_than_cores_are_decided_as_by_the_general_pass(snap: Snapshot) -> None:
    plan = easy_plain(snap)
    general = backfill(snap, False, False)[0]
    if plan is not None:
        assert plan == general
    assert schedule(snap) == general


def test_the_quick_pass_answers_a_plain_snapshot() -> None:
    """Two of eight cores free until t=1100 (a job of 6 ends then): the head (4 cores) is reserved then;
    the 2-core job of 50 s behind it ends before that and is backfilled, and the third finds no core left."""
    running = (Running(9, 6, 0.0, 1100.0),)
    pending = (Waiting(1, 4, 100.0, True), Waiting(2, 2, 50.0, True), Waiting(3, 2, 500.0, True))
    snap = Snapshot(NOW, 8, running, pending, EASY, gated=False, splitting=False)
    plan = easy_plain(snap)
    assert plan is not None
    assert plan.decisions == (Start(2, (), True),)
    assert plan.head == HeadReservation(1, 1100.0)
    assert plan.wake_at == 1100.0
    assert plan == backfill(snap, False, False)[0]


@pytest.mark.parametrize(
    "change",
    [
        {"free": frozenset(range(2))},
        {"floating": {"lic": 2}},
        {"splitting": True},
        {"pending": (Waiting(1, 4, 100.0, resources=(("lic", 1),)),)},
        {"pending": (Waiting(1, 4, 100.0, hard=200.0),)},
        {"running": (Running(9, 6, 0.0, 1100.0, planned=50.0),)},
    ],
)
def test_any_other_snapshot_is_left_to_the_general_pass(change: dict[str, Any]) -> None:
    fields: dict[str, Any] = {"running": (Running(9, 6, 0.0, 1100.0),), "pending": (Waiting(1, 4, 100.0),)}
    fields.update({"params": EASY, "gated": False, "splitting": False}, **change)
    assert easy_plain(Snapshot(NOW, 8, **fields)) is None


def test_the_cores_left_beside_the_head_are_used_up_in_queue_order() -> None:
    """Four of eight cores free until t=1100; the head asks for 6, so 2 are left beside it then: the first
    long 2-core job takes them, the second long one would take the head's, and the short one ends in time."""
    running = (Running(9, 4, 0.0, 1100.0),)
    pending = (
        Waiting(1, 6, 100.0),
        Waiting(2, 2, 500.0),
        Waiting(3, 2, 500.0),
        Waiting(4, 1, 50.0),
    )
    snap = Snapshot(NOW, 8, running, pending, EASY, gated=False, splitting=False)
    plan = easy_plain(snap)
    assert plan is not None
    assert [d.job for d in plan.decisions] == [2, 4]
    assert plan.wake_at is None  # nothing started that could be preempted
    assert plan == backfill(snap, False, False)[0]


@settings(max_examples=600, deadline=None)
@given(snap=plain_snapshots())
def test_the_pass_on_sorted_ends_decides_as_the_quick_one(snap: Snapshot) -> None:
    """:func:`easy_sorted`, given the running jobs' ends sorted and the queue as job numbers, starts the jobs
    :func:`easy_plain` starts (the first ``front`` in queue order, the rest backfilled) and reserves the same
    head at the same time, or leaves the same passes to the general one."""
    now = snap.now
    ends = sorted((now if r.stopping else r.start + r.estimate, r.ncpus) for r in snap.running if r.ncpus)
    free = snap.ncores - sum(r.ncpus for r in snap.running)
    size = {w.id: w.ncpus for w in snap.pending}
    estimate = {w.id: w.estimate for w in snap.pending}
    queue = [w.id for w in snap.pending]
    plan = easy_plain(snap)
    shortest = snap.params.backfill_order is BackfillOrder.SHORTEST
    got = easy_sorted(now, snap.ncores, free, ends, queue, size, estimate, shortest)  # type: ignore[arg-type]
    if plan is None:
        assert got is None
        return
    assert got is not None
    started, front, head, shadow = got
    assert [(d.job, d.backfilled) for d in plan.decisions] == [(j, k >= front) for k, j in enumerate(started)]
    assert (head, shadow) == ((plan.head.job, plan.head.time) if plan.head is not None else (-1, math.inf))
