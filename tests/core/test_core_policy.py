"""Each policy on hand-made snapshots; expected values are worked out in the comments."""

from __future__ import annotations

import math

import pytest

from gridsched.core.policy import forecast, free_count, pick, schedule
from gridsched.core.predict import history_mean, make_predictor, user_history
from gridsched.core.types import (
    BackfillOrder,
    HeadReservation,
    Params,
    Plan,
    Policy,
    Predictor,
    Preempt,
    Running,
    Snapshot,
    Start,
    Waiting,
)

R, W = Running, Waiting
FCFS = Params(policy=Policy.FCFS)
EASY = Params(policy=Policy.EASY)
CONS = Params(policy=Policy.CONSERVATIVE)
CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=100.0)
NAIVE = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=100.0, cascade=True)


def snap(running=(), pending=(), *, now=0.0, ncores=8, params=EASY, free=None, head=None, history=None):
    return Snapshot(
        now=now,
        ncores=ncores,
        running=tuple(running),
        pending=tuple(pending),
        params=params,
        free=free,
        head=head,
        history=history or {},
    )


def started(plan: Plan) -> list[int]:
    return [s.job for s in plan.starts]


# -- helpers kept for other modules ------------------------------------------------


def test_free_count_and_pick():
    s = snap([R(1, 3, 0, 10)], ncores=8)
    assert free_count(s) == 5
    assert free_count(snap(free=frozenset({1, 5}))) == 2
    assert pick(frozenset({7, 2, 5, 3}), 2) == (2, 3)
    assert pick(None, 3) == ()


# -- fcfs ------------------------------------------------------------------------------


def test_fcfs_stops_at_first_that_does_not_fit():
    # 8 cores, 2 busy until 50: free 6.  Job 1 (4) starts, free 2; job 2 (4) does not
    # fit, so job 3 (1 core) waits although it would fit.
    plan = schedule(snap([R(9, 2, 0, 50)], [W(1, 4, 10), W(2, 4, 10), W(3, 1, 10)], params=FCFS))
    assert started(plan) == [1]
    # job 2 needs 4: 2 free now, +4 at 10 (job 1 ends) -> shadow 10
    assert plan.head == HeadReservation(2, 10.0)
    assert plan.preempts == ()


def test_fcfs_places_on_lowest_cores():
    plan = schedule(snap([], [W(1, 2, 10), W(2, 1, 10)], params=FCFS, free=frozenset({3, 1, 6, 7})))
    assert plan.starts == (Start(1, (1, 3)), Start(2, (6,)))


@pytest.mark.parametrize("params", [FCFS, EASY, CONS, CKPT])
def test_job_larger_than_machine_neither_starts_nor_blocks(params):
    plan = schedule(snap([], [W(1, 9, 10), W(2, 8, 10)], params=params))
    assert started(plan) == [2]
    assert forecast(snap([], [W(1, 9, 10), W(2, 8, 10)], params=params)) == {1: math.inf, 2: 0.0}


# -- easy ------------------------------------------------------------------------------

# 8 cores.  Running: A (id 90) 4 cores until 100, B (id 91) 2 cores until 50.  Free 2.
BUSY = [R(90, 4, 0, 100), R(91, 2, 0, 50)]


def test_easy_shadow_and_ends_by_shadow():
    # Head job 1 needs 6: 2 free, +2 at 50 -> 4, +4 at 100 -> 8 >= 6: shadow 100,
    # extra 8 - 6 = 2.  Job 2 (2 cores, 40 s) ends at 40 <= 100: starts.  No cores left.
    plan = schedule(snap(BUSY, [W(1, 6, 10), W(2, 2, 40), W(3, 1, 5)]))
    assert plan.head == HeadReservation(1, 100.0)
    assert plan.starts == (Start(2, (), True, None),)
    assert plan.wake_at is None


def test_easy_extra_cores_are_used_once():
    running = [R(90, 4, 0, 100), R(91, 2, 0, 50)]
    # 10 cores: free 4.  Head job 1 needs 7: 4, +2 at 50 -> 6, +4 at 100 -> 10: shadow 100,
    # extra 3.  Job 2 (2 cores, 500 s): extra -> 1.  Job 3 (2 cores, 500 s): extra 1 < 2 and
    # it ends after 100: waits.  Job 4 (1 core, 500 s): extra 1: starts.
    plan = schedule(snap(running, [W(1, 7, 10), W(2, 2, 500), W(3, 2, 500), W(4, 1, 500)], ncores=10))
    assert plan.head == HeadReservation(1, 100.0)
    assert started(plan) == [2, 4]


def test_easy_never_shortens_and_never_preempts():
    running = [R(90, 4, 0, 100), R(91, 2, 0, 50, backfilled=True, preemptable=True)]
    plan = schedule(snap(running, [W(1, 6, 10), W(2, 2, 4000, preemptable=True)], now=100.0))
    # at 100 job 90 has ended by estimate (counted now): the head has its 6 cores at
    # 100 = now, but job 90 has not exited; EASY waits and preempts nothing.
    assert plan.preempts == ()
    assert plan.head == HeadReservation(1, 100.0)


def test_easy_starts_in_queue_order_before_the_head():
    plan = schedule(snap(BUSY, [W(1, 1, 10), W(2, 1, 10), W(3, 4, 10), W(4, 1, 1)]))
    # free 2: jobs 1 and 2 start (not backfilled); job 3 is the head; no core left.
    assert plan.starts == (Start(1), Start(2))
    # job 3 needs 4: 0 free, +2 at 10 (jobs 1, 2 end), +2 at 50 -> 4: shadow 50
    assert plan.head == HeadReservation(3, 50.0)


def test_shortest_backfill_order_tries_short_jobs_first():
    # Head job 1 needs 7: shadow 100, extra 1; free 2.  Jobs 2 (2 cores, 90 s) and 3 (2 cores,
    # 30 s) both end by the shadow time, but only one fits in the 2 free cores.  In queue order
    # job 2 starts; shortest first, job 3 does.  Job 4 (1 core, 500 s) fits neither way (no core
    # left).  The head's reservation is the same.
    pending = [W(1, 7, 10), W(2, 2, 90), W(3, 2, 30), W(4, 1, 500)]
    queue = schedule(snap(BUSY, pending))
    shortest = schedule(snap(BUSY, pending, params=Params(policy=Policy.EASY, backfill_order=BackfillOrder.SHORTEST)))
    assert started(queue) == [2]
    assert started(shortest) == [3]
    assert queue.head == shortest.head == HeadReservation(1, 100.0)


def test_shortest_backfill_order_keeps_queue_order_among_equals_and_reads_the_estimate():
    # 12 cores, BUSY holds 6: free 6; head 1 needs 9: shadow 100, extra 3.  Under
    # checkpoint-backfill (p 0.1, threshold 100) job 2 (3 cores, 900 s, checkpointable) is
    # predicted at 90 and job 3 (3 cores, 95 s) ends by 100 on its estimate; job 4 has job 3's
    # estimate.  Shortest first by estimate: 3 (95), 4 (95, after 3 in the queue), then 2 (900):
    # 3 and 4 take the 6 free cores and 2 waits; in queue order 2 and 3 start.
    ckpt = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=100.0)
    pending = [W(1, 9, 10), W(2, 3, 900, True), W(3, 3, 95), W(4, 3, 95)]
    assert started(schedule(snap(BUSY, pending, ncores=12, params=ckpt))) == [2, 3]
    shortest = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=100.0, backfill_order=BackfillOrder.SHORTEST)
    assert started(schedule(snap(BUSY, pending, ncores=12, params=shortest))) == [3, 4]


# -- conservative -----------------------------------------------------------------------


def test_conservative_protects_every_reservation():
    # 4 cores; job 90 holds 3 until 10; free 1.
    # Job 1 (2 cores, 10 s): earliest 10 -> [10, 20).  Profile: [0,10):1 [10,20):2 [20,..):4
    # Job 2 (4 cores, 10 s): earliest 20 -> [20, 30).  Profile: [20,30):0 [30,..):4
    # Job 3 (1 core, 100 s): [0,100) crosses [20,30) with 0 -> earliest 30: waits.
    # EASY starts job 3: head 1 has shadow 10 with extra 4 - 2 = 2 >= 1.
    running = [R(90, 3, 0, 10)]
    pending = [W(1, 2, 10), W(2, 4, 10), W(3, 1, 100)]
    assert started(schedule(snap(running, pending, ncores=4, params=CONS))) == []
    assert started(schedule(snap(running, pending, ncores=4, params=EASY))) == [3]
    assert forecast(snap(running, pending, ncores=4, params=CONS)) == {1: 10.0, 2: 20.0, 3: 30.0}
    # Job 4 (1 core, 10 s) fits the hole [0, 10): starts now, backfilled.
    plan = schedule(snap(running, pending + [W(4, 1, 10)], ncores=4, params=CONS))
    assert plan.starts == (Start(4, (), True),)
    assert plan.head == HeadReservation(1, 10.0)


def test_conservative_does_not_start_on_stopping_cores():
    # 4 cores, job 90 (4 cores) is stopping: it counts as ending now, but its cores are
    # not free yet.  Job 1 (2 cores) has its reservation now and does not start.
    plan = schedule(snap([R(90, 4, 0, 100, stopping=True)], [W(1, 2, 10)], ncores=4, params=CONS, now=5.0))
    assert plan.starts == ()
    assert plan.head == HeadReservation(1, 5.0)


# -- checkpoint-backfill ----------------------------------------------------------------


def test_checkpointable_long_job_backfills_on_shortened_estimate():
    # Head job 1 needs 6: shadow 100 (as in the easy tests), extra 2.  Use 7 to have
    # extra 1 (8 - 7).  Job 2 (2 cores, 900 s, checkpointable): 900 > threshold 100,
    # prediction 90: 0 + 90 <= 100 -> starts with planned 90.  Job 3 has the same
    # shape but is not checkpointable: waits (not by shadow, 2 > extra 1).
    pending = [W(1, 7, 10), W(3, 2, 900), W(2, 2, 900, preemptable=True)]
    plan = schedule(snap(BUSY, pending, params=CKPT))
    assert plan.head == HeadReservation(1, 100.0)
    assert plan.starts == (Start(2, (), True, 90.0),)
    # the reservation time (a checkpointable backfilled job now runs) and its planned end
    # 90 are the times the plan may change: the earlier one
    assert plan.wake_at == 90.0
    # under plain EASY neither starts
    assert started(schedule(snap(BUSY, pending))) == []


def test_shortening_respects_threshold_and_head():
    # Head job 1 needs 8: 2 free, +2 at 50, +4 at 100 -> shadow 100, extra 0.
    # Job 2: 100 s is not above the threshold 100, so not shortened, but it ends by the
    # shadow time (0 + 100 <= 100): starts with planned None.  Job 3: 1010 s -> 101,
    # which ends after 100, and there are no extra cores: waits.
    pending = [W(1, 8, 10), W(2, 1, 100, preemptable=True), W(3, 1, 1010, preemptable=True)]
    plan = schedule(snap(BUSY, pending, params=CKPT))
    assert plan.starts == (Start(2, (), True, None),)
    # the head itself is never shortened: a 6-core checkpointable head of 10000 s just waits
    plan = schedule(snap(BUSY, [W(1, 6, 10000, preemptable=True)], params=CKPT))
    assert plan.starts == () and plan.head == HeadReservation(1, 100.0)


def test_order_of_backfill_rules():
    # 12 cores, BUSY holds 6: free 6.  Head 1 needs 9: 6, +2 at 50 -> 8, +4 at 100 -> 12:
    # shadow 100, extra 3.
    # Job 2 (1 core, 50 s, checkpointable): ends by 100 on its own estimate: planned None.
    # Job 3 (1 core, 900 s, checkpointable): prediction 90 ends by 100: planned 90; it
    #   does not use the extra cores (extra stays 3).
    # Job 4 (3 cores, 900 s, not checkpointable): 3 <= extra 3: starts, planned None.
    pending = [W(1, 9, 10), W(2, 1, 50, True), W(3, 1, 900, True), W(4, 3, 900)]
    plan = schedule(snap(BUSY, pending, ncores=12, params=CKPT))
    assert plan.starts == (Start(2, (), True, None), Start(3, (), True, 90.0), Start(4, (), True, None))


def test_overrun_backfilled_job_counts_at_user_estimate():
    # 8 cores.  Job 90: 4 cores until 1000.  Job 91: backfilled, checkpointable, 4 cores,
    # started 0, estimate 1000, planned 100.  At now=150 it has outlived its plan.
    # Head job 1 needs 8: default reading counts 91 at 0 + 1000 -> shadow 1000; nothing
    # is preempted now.  The naive reading counts 91 as ending now -> shadow 150 = now:
    # job 91 is preempted (still not enough: 90 is not preemptable -> nothing, so use
    # a head of 4 cores).
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=True, planned=100.0)]
    pending = [W(1, 4, 10)]
    calm = schedule(snap(running, pending, params=CKPT, now=150.0))
    assert calm.head == HeadReservation(1, 1000.0)
    assert calm.preempts == ()
    naive = schedule(snap(running, pending, params=NAIVE, now=150.0))
    assert naive.head == HeadReservation(1, 150.0)
    assert naive.preempts == (Preempt(91),)


def test_planned_end_in_future_counts_and_is_a_wake_time():
    # Same machine at now=50: job 91's planned end 100 is ahead: shadow for a 4-core head
    # is 100, and at 100 the plan may need preemption: wake_at 100.
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=True, planned=100.0)]
    plan = schedule(snap(running, [W(1, 4, 10)], params=CKPT, now=50.0))
    assert plan.head == HeadReservation(1, 100.0)
    assert plan.wake_at == 100.0
    # at 100 job 91 is still running: the head preempts it
    plan = schedule(snap(running, [W(1, 4, 10)], params=CKPT, now=100.0, head=plan.head))
    assert plan.preempts == (Preempt(91),)
    assert plan.head == HeadReservation(1, 100.0)


def test_head_memo_never_moves_later_while_it_can_be_met():
    # At now=150 job 91 overran its plan: fresh shadow 1000, but the memo says 100 and it
    # can still be met by preempting 91: the head keeps 100 (<= now) and preempts.
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=True, planned=100.0)]
    plan = schedule(snap(running, [W(1, 4, 10)], params=CKPT, now=150.0, head=HeadReservation(1, 100.0)))
    assert plan.head == HeadReservation(1, 100.0)
    assert plan.preempts == (Preempt(91),)
    # a memo for another job is ignored
    plan = schedule(snap(running, [W(1, 4, 10)], params=CKPT, now=150.0, head=HeadReservation(7, 100.0)))
    assert plan.head == HeadReservation(1, 1000.0) and plan.preempts == ()


def test_head_memo_moves_earlier():
    # memo 500, fresh shadow 100 (job 91 planned to end at 100): reservation 100.
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=True, planned=100.0)]
    plan = schedule(snap(running, [W(1, 4, 10)], params=CKPT, now=50.0, head=HeadReservation(1, 500.0)))
    assert plan.head == HeadReservation(1, 100.0)


def test_head_memo_recomputed_when_it_cannot_be_met():
    # Job 91 is backfilled but not checkpointable: the memo 100 cannot be met even by
    # preempting everything preemptable (nothing): recompute -> 91 ends at 1000.
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=False)]
    plan = schedule(snap(running, [W(1, 4, 10)], params=CKPT, now=150.0, head=HeadReservation(1, 100.0)))
    assert plan.head == HeadReservation(1, 1000.0)
    assert plan.preempts == ()


def test_naive_reading_ignores_the_memo():
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=False)]
    plan = schedule(snap(running, [W(1, 4, 10)], params=NAIVE, now=50.0, head=HeadReservation(1, 10.0)))
    assert plan.head == HeadReservation(1, 1000.0)


def test_preemption_order_and_amount():
    # 16 cores, now 200, head job 1 needs 9 and its reservation time (memo 200) is now.
    # Free 1.  Job 80: 4 cores, stopping (coming free).  Need 9 - 1 - 4 = 4 more.
    # Candidates: 81 (2 cores, start 10), 82 (3 cores, start 20), 83 (3 cores, start 30),
    # 84 (2 cores, not preemptable), 85 (1 core, not backfilled).
    # Most cores first, ties most recent: 83 (3) -> short 1, then 82 (3) -> done.
    running = [
        R(80, 4, 0, 1000, backfilled=True, preemptable=True, stopping=True),
        R(81, 2, 10, 1000, backfilled=True, preemptable=True),
        R(82, 3, 20, 1000, backfilled=True, preemptable=True),
        R(83, 3, 30, 1000, backfilled=True, preemptable=True),
        R(84, 2, 0, 1000, backfilled=True, preemptable=False),
        R(85, 1, 0, 1000, preemptable=True),
    ]
    s = snap(running, [W(1, 9, 10), W(2, 1, 5)], ncores=16, params=CKPT, now=200.0, head=HeadReservation(1, 200.0))
    plan = schedule(s)
    assert plan.preempts == (Preempt(83), Preempt(82))
    # free 1 + stopping 4 + preempted 6 = 11: extra 2 at the reservation; job 2 (1 core,
    # ends after "now" = the shadow) starts on the one core truly free now.
    assert plan.starts == (Start(2, (), True, None),)
    assert plan.wake_at is None  # the reservation time has come; exits are events


def test_no_preemption_if_not_enough():
    # Head needs 8 of 8; job 90 (4 cores) is not preemptable: preempting 91 alone cannot
    # make 8, so nothing is preempted (and the memo is dropped: recompute -> 1000).
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=True, planned=100.0)]
    plan = schedule(snap(running, [W(1, 8, 10)], params=CKPT, now=150.0, head=HeadReservation(1, 100.0)))
    assert plan.preempts == ()
    assert plan.head == HeadReservation(1, 1000.0)


def test_no_more_preemption_for_cores_already_stopping():
    running = [
        R(90, 4, 0, 1000, backfilled=True, preemptable=True, stopping=True),
        R(91, 4, 0, 1000, backfilled=True, preemptable=True),
    ]
    plan = schedule(snap(running, [W(1, 4, 10)], params=CKPT, now=150.0, head=HeadReservation(1, 100.0)))
    assert plan.preempts == ()
    assert plan.starts == ()


def test_requeued_job_does_not_take_the_head_place():
    # Job 5 was just preempted and requeued ahead of head job 1 (its original place).
    # The machine has 4 free cores (job 5's).  Under the memo, job 1 is still the head,
    # fits, and starts first; job 5 then becomes the head.  Naive: job 5 simply restarts.
    running = [R(90, 4, 0, 1000)]
    pending = [W(5, 4, 900, preemptable=True, elapsed=100.0), W(1, 4, 10)]
    plan = schedule(snap(running, pending, params=CKPT, now=150.0, head=HeadReservation(1, 100.0)))
    assert plan.starts == (Start(1),)
    assert plan.head == HeadReservation(5, 160.0)  # job 1 ends at 150 + 10
    naive = schedule(snap(running, pending, params=NAIVE, now=150.0, head=HeadReservation(1, 100.0)))
    assert naive.starts == (Start(5),)
    assert naive.head == HeadReservation(1, 1000.0)


def test_jobs_ahead_of_a_waiting_memo_head_are_backfill_candidates():
    # 8 cores: job 90 holds 6 until 100, free 2.  Memo head 1 (needs 4, reservation 100).
    # Job 5 ahead of it (2 cores, 500 s) would fit now but would hold 2 of the head's
    # cores at 100 (extra = 8 - 4 = 4 -> it fits the extra cores: starts as backfill).
    # Job 6 ahead of it, 2 cores: no cores left.
    running = [R(90, 6, 0, 100)]
    pending = [W(5, 2, 500), W(6, 2, 5), W(1, 4, 10)]
    plan = schedule(snap(running, pending, params=CKPT, now=10.0, head=HeadReservation(1, 100.0)))
    assert plan.head == HeadReservation(1, 100.0)
    assert plan.starts == (Start(5, (), True, None),)


def test_wake_at_none_without_checkpointable_backfill():
    plan = schedule(snap(BUSY, [W(1, 7, 10), W(2, 1, 5000)], params=CKPT))
    # job 2 fits in the extra core (planned None, not checkpointable): nothing can be
    # preempted, no planned end: no wake-up needed
    assert plan.starts == (Start(2, (), True, None),)
    assert plan.wake_at is None


def test_placement_mode_gives_lowest_free_cores_without_overlap():
    free = frozenset({2, 3, 6, 7})
    running = [R(90, 4, 0, 100, cores=(0, 1, 4, 5))]
    pending = [W(1, 1, 10), W(2, 6, 10), W(3, 2, 50), W(4, 1, 500)]
    plan = schedule(snap(running, pending, params=CKPT, free=free))
    # job 1 starts on 2; head job 2 needs 6: 3 free, +1 at 10, +4 at 100 -> shadow 100,
    # extra 8 - 6 = 2; job 3 ends by 100 -> (3, 6); job 4 on extra -> (7,)
    assert plan.starts == (Start(1, (2,)), Start(3, (3, 6), True), Start(4, (7,), True))


# -- user-history predictor --------------------------------------------------------------


def test_history_mean_uses_last_two():
    assert history_mean(()) is None
    assert history_mean((50.0,)) == 50.0
    assert history_mean((1000.0, 30.0, 50.0)) == 40.0


def test_user_history_prediction():
    # mean 40, threshold 10
    assert user_history(W(1, 1, 500), 40.0, 10.0) == 40.0
    assert user_history(W(1, 1, 500, elapsed=15.0), 40.0, 10.0) == 25.0  # 40 - 15
    assert user_history(W(1, 1, 500, elapsed=45.0), 40.0, 10.0) is None  # outlived it
    # checkpointed exactly at its predicted length (up to rounding): outlived it too
    assert user_history(W(1, 1, 500, elapsed=28.599999999999994), history_mean((0.5, 56.699999999999996)), 1.0) is None
    assert user_history(W(1, 1, 30), 40.0, 10.0) is None  # capped by the estimate
    assert user_history(W(1, 1, 8), 4.0, 10.0) is None  # not above the threshold
    assert user_history(W(1, 1, 500), None, 10.0) is None  # no history: own estimate


def test_user_history_predictor_in_the_policy():
    params = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.5, threshold=10.0, predictor=Predictor.USER_HISTORY)
    # head 1 needs 7: shadow 100, extra 1.  ann: mean of (60, 80) = 70 -> 70 <= 100:
    # starts planned 70.  bob: no history: own estimate 900: waits (2 > extra 1), even
    # though the scaled rule (450) would not have helped either.
    pending = [W(1, 7, 10), W(2, 2, 900, True, user="bob"), W(3, 2, 900, True, user="ann")]
    plan = schedule(snap(BUSY, pending, params=params, history={"ann": (5.0, 60.0, 80.0)}))
    assert plan.starts == (Start(3, (), True, 70.0),)
    pred = make_predictor(params, {"ann": (60.0, 80.0)})
    assert pred(W(9, 1, 900, True, user="ann")) == 70.0
    assert pred(W(9, 1, 900, True, user="bob")) is None


# -- forecast --------------------------------------------------------------------------


def test_forecast_easy():
    # Head 1 at 100 (see above); job 2 starts now.  Profile after: free 0 until 40, 2 on
    # [40, 50), 4 on [50, 100), 8 - 6 = 2 on [100, 110), 8 after.
    # Job 3 (2 cores, 60 s): [40, 100) has >= 2 -> 40.  Job 4 (1 core, 5 s): at 40 job 3
    # took the 2 -> 0; at 50: 2 -> 50.
    f = forecast(snap(BUSY, [W(1, 6, 10), W(2, 2, 40), W(3, 2, 60), W(4, 1, 5)]))
    assert f == {1: 100.0, 2: 0.0, 3: 40.0, 4: 50.0}


def test_forecast_fcfs_keeps_order():
    # nothing overtakes: job 1 at 100; job 2 (2 cores) not before 100 -> 100; job 3 (1
    # core, 5 s): 8 - 6 - 2 = 0 on [100, 110) -> 110.
    f = forecast(snap(BUSY, [W(1, 6, 10), W(2, 2, 40), W(3, 1, 5)], params=FCFS))
    assert f == {1: 100.0, 2: 100.0, 3: 110.0}


def test_forecast_counts_planned_ends():
    running = [R(90, 4, 0, 1000), R(91, 4, 0, 1000, backfilled=True, preemptable=True, planned=100.0)]
    f = forecast(snap(running, [W(1, 4, 10), W(2, 4, 10)], params=CKPT, now=50.0))
    # job 1 at 100 (91's planned end) holds those 4 cores on [100, 110); job 2 gets
    # them at 110
    assert f == {1: 100.0, 2: 110.0}


def test_unknown_policy_is_an_error():
    with pytest.raises(ValueError):
        schedule(snap(params=Params(policy="lottery")))  # type: ignore[arg-type]


def test_nothing_starts_on_cores_the_head_waits_for():
    # 7 cores, naive reading, now 20.55.  Job 11: 1 core, backfilled, past its planned
    # end (counted as ending now).  Job 12: 1 core, backfilled, checkpointable, started
    # now.  Free 5.  Head job 2 needs 6: 5 + 1 (job 11 "now") -> shadow now.  Preempt:
    # short 6 - 5 = 1 -> most cores, then most recent: job 12.  Cores truly coming: 5 + 1
    # = 6 = the need: extra 0, so job 14 (1 core) must not start on a free core (job
    # 11's core, counted as ending now, is not really coming free).
    running = [
        R(11, 1, 20.0, 11.0, backfilled=True, preemptable=True, planned=0.55),
        R(12, 1, 20.55, 0.75, backfilled=True, preemptable=True),
    ]
    plan = schedule(snap(running, [W(2, 6, 1), W(14, 1, 1.0, True)], ncores=7, params=NAIVE, now=20.55))
    assert plan.preempts == (Preempt(12),)
    assert plan.starts == ()
