"""The core's decisions on what ends with time or with another job: reservations, yields, subtrees; holds and
begin times; the walltime of a parent that lends its cores."""

from __future__ import annotations

import pytest

from gridsched.core import endings
from gridsched.core.eligible import eligibility, not_before
from gridsched.core.policy import forecast, schedule
from gridsched.core.tree import credit_limit, credit_spans, walltime_credit
from gridsched.core.types import (
    CancelSubtree,
    Ended,
    EndReservation,
    HoldSubtree,
    Lent,
    Params,
    Policy,
    Reclaim,
    Resume,
    Resv,
    Running,
    Snapshot,
    Start,
    Waiting,
)

EASY = Params(policy=Policy.EASY)


def snap(**kw) -> Snapshot:
    kw.setdefault("now", 100.0)
    kw.setdefault("ncores", 8)
    kw.setdefault("running", ())
    kw.setdefault("pending", ())
    kw.setdefault("params", EASY)
    return Snapshot(**kw)


# -- reservations ----------------------------------------------------------------------------


def test_an_active_reservation_ends_at_its_end_and_kills_its_bound_jobs():
    rv = Resv(9, 4, 50.0, active=True, cores=(0, 1, 2, 3), end=100.0, kill=True)
    s = snap(
        running=(
            Running(1, 2, 60.0, 300.0, (0, 1), bind=9),
            Running(2, 1, 60.0, 300.0, (2,), bind=9, stopping=True),  # already stopping: not again
            Running(3, 2, 60.0, 300.0, (4, 5)),
        ),
        pending=(Waiting(4, 1, 10.0, bind=9), Waiting(5, 1, 10.0)),
        reservations=(rv,),
        free=frozenset({6, 7}),
    )
    assert endings.reservation_endings(s) == (EndReservation(9, (1,), (4,), ""),)
    plan = schedule(s)
    # the pass ends it and decides nothing else: the driver passes again at once
    assert plan.decisions == (EndReservation(9, (1,), (4,), ""),)
    assert plan.wake_at == 100.0


def test_a_reservation_made_not_to_kill_lets_its_jobs_go_on():
    rv = Resv(9, 4, 50.0, active=True, cores=(0, 1, 2, 3), end=90.0, kill=False)
    s = snap(running=(Running(1, 2, 60.0, 300.0, (0, 1), bind=9),), reservations=(rv,))
    assert endings.reservation_endings(s) == (EndReservation(9, (), (), ""),)


def test_a_reservation_before_its_end_goes_on_and_its_end_wakes_the_driver():
    rv = Resv(9, 4, 50.0, active=True, cores=(0, 1, 2, 3), end=130.0)
    s = snap(reservations=(rv,), pending=(Waiting(5, 8, 10.0),), free=frozenset({4, 5, 6, 7}))
    assert endings.reservation_endings(s) == ()
    plan = schedule(s)
    assert not any(isinstance(d, EndReservation) for d in plan.decisions)
    assert plan.wake_at == 130.0


def test_a_fixed_reservation_whose_time_passed_unused_ends_with_the_reason():
    fixed = Resv(9, 4, 50.0, start=40.0)
    later = Resv(10, 4, 50.0, start=80.0)  # still within its time
    s = snap(reservations=(fixed, later), pending=(Waiting(4, 1, 10.0, bind=9),))
    assert endings.reservation_endings(s) == (EndReservation(9, (), (4,), endings.NEVER_CAME),)


# -- yielding parents --------------------------------------------------------------------------


def tree_snap(lent: Lent, tasks: tuple[Running, ...] = ()) -> Snapshot:
    parent = Running(1, 2, 0.0, 1000.0, (0, 1))
    return snap(
        running=(parent, *tasks),
        parents={t.id: 1 for t in tasks},
        lent=(lent,),
        free=frozenset(range(2, 8)),
    )


def test_a_parent_whose_awaited_jobs_ended_asks_back_and_is_resumed_once_clear():
    busy = tree_snap(Lent(1, frozenset({0, 1}), awaiting=()), (Running(2, 1, 10.0, 50.0, (0,)),))
    moves, lent = endings.resumes(busy)
    assert moves == (Reclaim(1),)
    assert lent == (Lent(1, frozenset({0, 1}), True, ()),)
    clear = tree_snap(Lent(1, frozenset({0, 1}), awaiting=()))
    assert endings.resumes(clear) == ((Resume(1, implicit=True),), ())


def test_a_parent_still_awaiting_jobs_or_without_a_resume_keeps_lending():
    for le in (Lent(1, frozenset({0, 1}), awaiting=(7,)), Lent(1, frozenset({0, 1}))):
        assert endings.resumes(tree_snap(le)) == ((), (le,))


def test_an_asked_resume_completes_only_when_no_task_is_above_the_parent():
    le = Lent(1, frozenset({0, 1}), resuming=True)
    busy = tree_snap(le, (Running(2, 1, 10.0, 50.0, (1,)),))
    assert endings.resumes(busy) == ((), (le,))
    plan = schedule(tree_snap(le))
    assert plan.decisions[0] == Resume(1)


def test_a_resumed_parent_lends_nothing_in_the_same_pass():
    le = Lent(1, frozenset({0, 1}), awaiting=())
    s = snap(
        running=(Running(1, 2, 0.0, 1000.0, (0, 1)),),
        pending=(Waiting(3, 2, 10.0),),
        parents={3: 1},
        lent=(le,),
        free=frozenset(),
    )
    plan = schedule(s)
    assert plan.decisions == (Resume(1, implicit=True),)  # the child does not start on the parent's cores


# -- subtrees ------------------------------------------------------------------------------------


def subtree_snap(ended: Ended) -> Snapshot:
    # 1 ended; its children 2 (running) and 3 (pending); 4 (pending) is 2's child; 5 is unrelated
    return snap(
        running=(Running(2, 1, 0.0, 100.0, (0,)),),
        pending=(Waiting(3, 1, 10.0), Waiting(4, 1, 10.0), Waiting(5, 1, 10.0)),
        parents={4: 2},
        ended=(ended,),
        free=frozenset(range(1, 8)),
    )


def test_a_failed_parent_has_its_live_subtree_cancelled_and_none_of_it_starts():
    s = subtree_snap(Ended(1, "FAILED", (2, 3)))
    assert endings.subtree_endings(s) == (CancelSubtree(1, (2, 3, 4), "parent 1 ended FAILED"),)
    plan = schedule(s)
    assert plan.decisions[0] == CancelSubtree(1, (2, 3, 4), "parent 1 ended FAILED")
    assert [d.job for d in plan.decisions if isinstance(d, Start)] == [5]


def test_a_recoverable_parent_has_its_waiting_descendants_held():
    s = subtree_snap(Ended(1, "TIMEOUT", (2, 3), recoverable=True))
    why = "parent 1 ended TIMEOUT: subtree held (gresume-tree)"
    assert endings.subtree_endings(s) == (HoldSubtree(1, (3, 4), why),)
    plan = schedule(s)
    assert [d.job for d in plan.decisions if isinstance(d, Start)] == [5]


@pytest.mark.parametrize("state", ["COMPLETED", "CANCELLED"])
def test_only_a_bad_end_touches_the_subtree(state):
    decided = endings.subtree_endings(subtree_snap(Ended(1, state, (2, 3))))
    assert (decided == ()) == (state == "COMPLETED")


# -- holds and begin times -------------------------------------------------------------------------


def test_a_held_job_waits_with_its_hold_and_a_begin_time_with_the_number():
    s = snap(
        pending=(
            Waiting(1, 1, 10.0, held="held by its owner (grls releases it)"),
            Waiting(2, 1, 10.0, begin=250.0),
            Waiting(3, 1, 10.0, begin=50.0),  # its time has come
            Waiting(4, 1, 10.0),
        )
    )
    pending, reasons, _ = eligibility(s)
    assert [w.id for w in pending] == [3, 4]
    assert reasons == {1: "held by its owner (grls releases it)", 2: not_before(250.0)}
    assert not_before(250.0) == "not before 250"
    plan = schedule(s)
    assert [d.job for d in plan.starts] == [3, 4]
    assert plan.wake_at == 250.0  # the earliest begin time still ahead
    assert set(forecast(s)) == {3, 4}


def test_a_held_job_holds_no_place_for_a_singleton():
    from gridsched.core import depend

    s = snap(
        pending=(
            Waiting(1, 1, 10.0, user="u", name="x", held="held"),
            Waiting(2, 1, 10.0, user="u", name="x", deps=depend.parse("singleton")),
        )
    )
    assert [d.job for d in schedule(s).starts] == [2]


# -- walltime of a yielding parent ------------------------------------------------------------------


def test_the_walltime_credit_is_the_time_earned_and_at_most_its_limit():
    assert walltime_credit((), 50.0) == 0.0
    assert walltime_credit(((10.0, 20.0), (30.0, None)), 50.0) == 30.0
    assert walltime_credit(((10.0, 20.0), (30.0, None)), 25.0) == 10.0  # nothing after now
    assert walltime_credit(((60.0, None),), 50.0) == 0.0
    assert walltime_credit(((10.0, 20.0), (30.0, None)), 50.0, limit=12.0) == 12.0
    assert walltime_credit(((10.0, 20.0),), 50.0, limit=-3.0) == 0.0
    # a run of 100 s under a longest walltime of 250 s may earn 150 s; one of 300 s nothing
    assert credit_limit(100.0, 250.0) == 150.0 and credit_limit(300.0, 250.0) == 0.0
    # a run started ahead of a waiting job earns nothing: the reservation counted on its walltime
    assert credit_limit(100.0, 250.0, backfilled=True) == 0.0


def test_credit_spans_open_and_close_with_the_fact_the_driver_sees():
    spans = credit_spans((), False, 5.0)
    assert spans == ()  # yields, but no child runs: nothing earned
    spans = credit_spans(spans, True, 10.0)
    assert spans == ((10.0, None),)
    assert credit_spans(spans, True, 12.0) == spans  # still earning
    spans = credit_spans(spans, False, 15.0)
    assert spans == ((10.0, 15.0),)
    assert credit_spans(spans, False, 20.0) == spans
    spans = credit_spans(spans, True, 30.0)
    assert credit_spans(spans, False, 25.0) == ((10.0, 15.0), (30.0, 30.0))  # never closed before it opened
    assert walltime_credit(credit_spans(spans, False, 34.0), 100.0) == 9.0


def test_forecasts_count_lent_cores_and_a_lending_parents_moved_end():
    # parent 1 holds both cores and lends them; its child 2 fits on them now; job 3 (not of the tree)
    # waits for the parent's end, which the driver moved later by the 40 s it has lent its cores
    credit = walltime_credit(((60.0, None),), 100.0)
    s = snap(
        ncores=2,
        running=(Running(1, 2, 0.0, 150.0 + credit, (0, 1)),),
        pending=(Waiting(2, 2, 10.0), Waiting(3, 2, 10.0)),
        parents={2: 1},
        lent=(Lent(1, frozenset({0, 1})),),
        free=frozenset(),
    )
    pred = forecast(s)
    assert pred[2] == 100.0
    assert pred[3] == 190.0
