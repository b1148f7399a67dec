"""The checkpoint-backfill pass of the plainest snapshots (:func:`gridsched.core.policy.quick.ckpt_plain`)
decides what the general pass (:func:`gridsched.core.policy.backfill.backfill`) decides, and leaves every
other snapshot, and every pass where the head's time has come, to it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.policy import schedule
from gridsched.core.policy.backfill import backfill
from gridsched.core.policy.quick import ckpt_pass, ckpt_plain
from gridsched.core.types import (
    BackfillOrder,
    HeadReservation,
    Params,
    Policy,
    Predictor,
    Running,
    Snapshot,
    Start,
    Waiting,
)

CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=60.0)
NOW = 1000.0
# few distinct times, so ends, estimates, planned ends and shadow times often coincide
TIMES = st.sampled_from([0.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 3600.0])
LONG = st.sampled_from([200.0, 2000.0, 5000.0])  # long jobs, shortened into the holes
PARAMS = st.sampled_from(
    [
        CKPT,
        Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.5, threshold=600.0, backfill_order=BackfillOrder.SHORTEST),
        Params(policy=Policy.CHECKPOINT_BACKFILL, predictor=Predictor.USER_RATIO, threshold=60.0),
        Params(
            policy=Policy.CHECKPOINT_BACKFILL,
            predictor=Predictor.USER_HISTORY,
            threshold=0.0,
            backfill_order=BackfillOrder.SHORTEST,
        ),
    ]
)


@st.composite
def plain_snapshots(draw: st.DrawFn, extras: bool = False) -> Snapshot:
    ncores = draw(st.integers(1, 24))
    size = st.integers(1, 4) | st.integers(1, ncores + 2)  # small jobs mostly, some too large for the machine
    running: list[Running] = []
    held = 0
    for k in range(draw(st.integers(0, 8))):
        n = min(draw(st.integers(0, 8)), ncores - held)
        held += n
        ran = draw(TIMES)  # (a job past its walltime counts as ending now)
        backfilled = draw(st.booleans())
        planned = draw(st.none() | TIMES) if backfilled else None  # (ahead or overrun)
        preemptable = draw(st.booleans())
        running.append(
            Running(
                100 + k,
                n,
                NOW - ran,
                ran + draw(TIMES),
                backfilled=backfilled,
                preemptable=preemptable,
                planned=planned,
            )
        )
    users = st.sampled_from(["a", "b", "c"])
    pending = [
        Waiting(k, draw(size), draw(TIMES | LONG), draw(st.booleans()), draw(users))
        for k in range(draw(st.integers(0, 14)))
    ]
    head = None
    if pending and draw(st.booleans()):  # the previous pass's head, remembered at a time past, now or ahead
        head = HeadReservation(draw(st.sampled_from(pending)).id, NOW + draw(st.sampled_from([-10.0, 0.0, 50.0])))
    if extras:  # a few entries that ask for more than cores, or running jobs that stop
        for k in draw(st.lists(st.integers(0, len(pending) - 1), min_size=1, max_size=3)) if pending else ():
            w = pending[k]
            pending[k] = draw(
                st.sampled_from(
                    [
                        Waiting(w.id, w.ncpus, w.estimate, True, resources=(("lic", 1),)),
                        Waiting(w.id, w.ncpus, w.estimate, True, hard=w.estimate + 100.0),
                        Waiting(w.id, w.ncpus, w.estimate, True, bind=99),
                    ]
                )
            )
        if running and draw(st.booleans()):
            r = running[0]
            running[0] = Running(r.id, r.ncpus, r.start, r.estimate, backfilled=True, preemptable=True, stopping=True)
    history = {"a": (30.0, 700.0), "b": (5.0,)}
    ratios = {"a": (0.1, 0.5, 1.0), "c": (0.05,)}
    return Snapshot(
        NOW,
        ncores,
        tuple(running),
        tuple(pending),
        draw(PARAMS),
        head=head,
        history=history,
        gated=False,
        splitting=False,
        ratios=ratios,
    )


@settings(max_examples=800, deadline=None)
@given(snap=plain_snapshots())
def test_the_quick_pass_decides_as_the_general_one(snap: Snapshot) -> None:
    plan = ckpt_plain(snap)
    general = backfill(snap, True, False)[0]
    if plan is not None:  # (None: the head's time has come, left to the general pass)
        assert plan == general
    else:
        assert snap.head is not None or any(r.planned is not None for r in snap.running) or general.head is not None
    assert schedule(snap) == general


@settings(max_examples=400, deadline=None)
@given(snap=plain_snapshots())
def test_a_driver_keeping_the_running_jobs_apart_gets_the_same_pass(snap: Snapshot) -> None:
    # the jobs counted at their walltime alone given as (start + estimate, cores), the cores free now
    # given; entries vouched plain: the same plan as the pass reading every running job
    def alone(r: Running) -> bool:
        return r.planned is None and not (r.backfilled and r.preemptable)

    fixed = [(r.start + r.estimate, r.ncpus) for r in snap.running if alone(r)]
    others = [r for r in snap.running if not alone(r)]
    free = snap.ncores - sum(r.ncpus for r in snap.running)
    args = (snap.now, snap.ncores, snap.running, snap.pending, snap.params, snap.head, snap.history, snap.ratios)
    whole = ckpt_pass(*args)
    assert whole == ckpt_plain(snap)
    assert ckpt_pass(*args, True) == whole
    assert ckpt_pass(snap.now, snap.ncores, others, *args[3:], True, fixed, free) == whole


@settings(max_examples=400, deadline=None)
@given(snap=plain_snapshots(extras=True))
def test_entries_asking_for_more_than_cores_are_decided_as_by_the_general_pass(snap: Snapshot) -> None:
    plan = ckpt_plain(snap)
    if plan is not None:
        assert plan == backfill(snap, True, False)[0]


def test_the_quick_pass_shortens_a_checkpointable_job_into_the_hole() -> None:
    """Two of eight cores free until t=1100 (a job of 6 ends then): the head (4 cores) is reserved then; the
    checkpointable 2-core job of 500 s behind it is backfilled on p * 500 = 100 s, which ends by then, and
    the plan asks for a pass at the reservation time (the job may have to make room)."""
    running = (Running(9, 6, 0.0, 1100.0),)
    pending = (Waiting(1, 4, 100.0, True), Waiting(2, 2, 500.0, True))
    snap = Snapshot(NOW, 8, running, pending, CKPT, gated=False, splitting=False)
    plan = ckpt_plain(snap)
    assert plan is not None
    assert plan.decisions == (Start(2, (), True, 100.0),)
    assert plan.head == HeadReservation(1, 1100.0)
    assert plan.wake_at == 1100.0
    assert plan == backfill(snap, True, False)[0]


@pytest.mark.parametrize(
    "change",
    [
        {"free": frozenset(range(2))},
        {"floating": {"lic": 2}},
        {"splitting": True},
        {"params": Params(policy=Policy.CHECKPOINT_BACKFILL, cascade=True)},
        {"params": Params(policy=Policy.CHECKPOINT_BACKFILL, early_room=True)},
        {"pending": (Waiting(1, 4, 100.0, resources=(("lic", 1),)),)},
        {"running": (Running(9, 6, 0.0, 1100.0, stopping=True),)},
        # the head's time has come, and a checkpointable backfilled job holds its cores: room is made for it
        {"head": HeadReservation(1, NOW), "running": (Running(9, 6, 0.0, 1100.0, backfilled=True, preemptable=True),)},
    ],
)
def test_any_other_snapshot_is_left_to_the_general_pass(change: dict[str, Any]) -> None:
    fields: dict[str, Any] = {"running": (Running(9, 6, 0.0, 1100.0),), "pending": (Waiting(1, 4, 100.0),)}
    fields.update({"params": CKPT, "gated": False, "splitting": False}, **change)
    assert ckpt_plain(Snapshot(NOW, 8, **fields)) is None
