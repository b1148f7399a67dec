"""Floating resources and reservations in the core, on hand-made snapshots.

Expected values are worked out in the comments.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gridsched.core.policy import forecast, schedule
from gridsched.core.types import (
    Activate,
    HeadReservation,
    Params,
    Policy,
    Preempt,
    Resv,
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
ALL = [FCFS, EASY, CONS, CKPT]


def snap(running=(), pending=(), *, now=0.0, ncores=8, params=EASY, free=None, head=None, floating=None, resvs=()):
    return Snapshot(
        now=now,
        ncores=ncores,
        running=tuple(running),
        pending=tuple(pending),
        params=params,
        free=free,
        head=head,
        floating=floating or {},
        reservations=tuple(resvs),
    )


def flex(rid, ncpus, duration, res=()):
    """A waiting flexible reservation: its Resv and its queue entry."""
    return Resv(rid, ncpus, duration, res), W(rid, ncpus, duration, resources=res, flex=True)


# -- flexible reservations -----------------------------------------------------------


def test_flexible_job_keeps_its_place_in_the_queue():
    # 8 cores, A holds 4 until 100.  Queue: job 1 (2 cores, 50 s), flexible R2 (4 cores, 200 s),
    # job 3 (2 cores, 10 s).  Job 1 starts (2 free left); R2 needs 4: 2 free + job 1's 2 at 50,
    # so R2 is the head at 50.  easy backfills job 3 (ends at 10 <= 50); fcfs does not.
    r2, e2 = flex(2, 4, 200.0)
    running = [R(100, 4, -10.0, 110.0)]
    pending = [W(1, 2, 50.0), e2, W(3, 2, 10.0)]
    plan = schedule(snap(running, pending, resvs=[r2]))
    assert plan.starts == (Start(1), Start(3, backfilled=True))
    assert plan.activations == ()
    assert plan.head == HeadReservation(2, 50.0)
    plan = schedule(snap(running, pending, params=FCFS, resvs=[r2]))
    assert plan.starts == (Start(1),) and plan.head == HeadReservation(2, 50.0)


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_flexible_reservation_activates_when_free_and_bound_jobs_start_inside(params):
    # 8 free cores: R1 (4 cores, 100 s) is activated on the lowest cores 0-3 until now + 100;
    # its bound job 5 (2 cores, 50 s) starts in the same pass on R1's cores; job 6 (4 cores)
    # gets the other four.
    r1, e1 = flex(1, 4, 100.0)
    pending = [e1, W(5, 2, 50.0, bind=1), W(6, 4, 30.0)]
    plan = schedule(snap((), pending, now=10.0, params=params, free=frozenset(range(8)), resvs=[r1]))
    assert plan.activations == (Activate(1, (0, 1, 2, 3), 110.0),)
    starts = {s.job: s.cores for s in plan.starts}
    assert starts[6] == (4, 5, 6, 7)
    assert starts[5] == (0, 1)
    assert plan.decisions.index(plan.activations[0]) < plan.decisions.index(plan.starts[-1])


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_flexible_reservation_waits_until_free_for_its_whole_duration(params):
    # A fixed reservation F holds all 8 cores over [100, 200).  The flexible R (4 cores, 200 s)
    # fits now but would overlap F: it is not activated; its earliest time is 200.
    fixed = Resv(9, 8, 100.0, start=100.0)
    r1, e1 = flex(1, 4, 200.0)
    s = snap((), [e1], params=params, resvs=[fixed, r1])
    plan = schedule(s)
    assert plan.activations == ()
    assert forecast(s)[1] == 200.0
    assert plan.wake_at == 100.0  # the driver is called back at F's start


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_no_job_starts_on_an_active_reservations_cores(params):
    # R holds cores 0-3 (active); 4 cores are free.  A 6-core job waits, a 4-core job gets 4-7.
    active = Resv(1, 4, 100.0, active=True, cores=(0, 1, 2, 3), end=100.0)
    pending = [W(2, 6, 10.0), W(3, 4, 10.0)]
    plan = schedule(snap((), pending, params=params, free=frozenset(range(4, 8)), resvs=[active]))
    if params.policy is Policy.FCFS:
        assert plan.starts == ()  # the 6-core head blocks
    else:
        assert [(s.job, s.cores) for s in plan.starts] == [(3, (4, 5, 6, 7))]
    # the head (6 cores) gets its cores when R ends at 100 (count-only: same times)
    assert plan.head is not None and plan.head.job == 2 and plan.head.time == 100.0


def test_bound_job_waits_for_its_reservation_and_must_fit_inside():
    # R active with 4 cores until 50, its bound job 7 runs on 2 of them.  Bound job 8 (2 cores,
    # 30 s) fits; bound job 9 (2 cores) no longer fits; bound job 10 (1 core, 60 s) outlives R.
    # Job 11 bound to a waiting reservation waits.
    active = Resv(1, 4, 50.0, active=True, cores=(0, 1, 2, 3), end=50.0)
    waiting, entry = flex(2, 8, 10.0)
    running = [R(7, 2, 0.0, 40.0, (0, 1), bind=1)]
    pending = [entry, W(8, 2, 30.0, bind=1), W(9, 2, 10.0, bind=1), W(10, 1, 60.0, bind=1), W(11, 1, 5.0, bind=2)]
    plan = schedule(snap(running, pending, now=5.0, free=frozenset(range(4, 8)), resvs=[active, waiting]))
    assert [(s.job, s.cores) for s in plan.starts] == [(8, (2, 3))]
    assert forecast(snap(running, pending, now=5.0, free=frozenset(range(4, 8)), resvs=[active, waiting]))[11] == 50.0


# -- fixed reservations ----------------------------------------------------------------


@pytest.mark.parametrize("params", [EASY, CONS, CKPT], ids=lambda p: p.policy.value)
def test_fixed_reservation_is_respected_by_backfilling(params):
    # F: all 8 cores over [100, 200).  J1 (4 cores, 150 s) would still run at 100: it waits
    # until 200.  J2 (4 cores, 100 s) ends exactly at 100: it starts.
    fixed = Resv(9, 8, 100.0, start=100.0)
    pending = [W(1, 4, 150.0), W(2, 4, 100.0)]
    s = snap((), pending, params=params, resvs=[fixed])
    plan = schedule(s)
    assert [st.job for st in plan.starts] == [2]
    assert forecast(s)[1] == 200.0


def test_fixed_reservation_activates_at_its_start_until_its_end():
    fixed = Resv(9, 6, 100.0, start=100.0)
    plan = schedule(snap((), [], now=100.0, free=frozenset(range(8)), resvs=[fixed]))
    assert plan.activations == (Activate(9, (0, 1, 2, 3, 4, 5), 200.0),)
    # late (cores busy until 130): activated when free, still ending at 200
    late = snap(
        [R(1, 4, 0.0, 130.0, (0, 1, 2, 3))], [W(2, 4, 50.0)], now=100.0, free=frozenset(range(4, 8)), resvs=[fixed]
    )
    plan = schedule(late)
    assert plan.activations == () and plan.starts == ()  # job 2 would take what F waits for
    assert schedule(snap((), [], now=130.0, free=frozenset(range(8)), resvs=[fixed])).activations == (
        Activate(9, (0, 1, 2, 3, 4, 5), 200.0),
    )


def test_preempt_for_fixed_lets_checkpointable_jobs_run_until_the_start():
    params = Params(policy=Policy.EASY, preempt_for_fixed=True)
    fixed = Resv(9, 8, 100.0, start=100.0)
    pending = [W(1, 4, 150.0, preemptable=True), W(2, 4, 150.0)]
    plan = schedule(snap((), pending, params=params, resvs=[fixed]))
    assert [st.job for st in plan.starts] == [1]  # checkpointable: starts; job 2 does not
    # at the start, the job is preempted for the reservation
    running = [R(1, 4, 0.0, 150.0, preemptable=True)]
    plan = schedule(snap(running, [W(2, 4, 150.0)], now=100.0, params=params, resvs=[fixed]))
    assert plan.preempts == (Preempt(1),) and plan.activations == () and plan.starts == ()
    # without the setting the same job waits until after the reservation
    plan = schedule(snap((), pending, resvs=[fixed]))
    assert plan.starts == ()


# -- floating resources --------------------------------------------------------------------


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_a_job_waits_while_every_licence_is_held(params):
    # matlab = 2, both held by running jobs (ending at 50 and 100); plenty of cores.
    lic = (("matlab", 1),)
    running = [R(1, 1, 0.0, 50.0, resources=lic), R(2, 1, 0.0, 100.0, resources=lic)]
    s = snap(running, [W(3, 1, 10.0, resources=lic)], floating={"matlab": 2}, params=params)
    plan = schedule(s)
    assert plan.starts == ()
    assert plan.head == HeadReservation(3, 50.0)
    assert forecast(s)[3] == 50.0


def test_floating_resources_block_and_backfill_under_easy():
    # matlab = 3: one free now, one held until 50, one until 100.  Head A needs 3: shadow 100.
    # D (matlab=1, 40 s) ends by 100: backfills.  E (matlab=1, 200 s) would hold a licence at
    # 100: waits.  G (2 cores, no licence, 200 s) uses spare cores only: backfills.
    one, three = (("matlab", 1),), (("matlab", 3),)
    running = [R(1, 1, 0.0, 50.0, resources=one), R(2, 1, 0.0, 100.0, resources=one)]
    pending = [
        W(10, 1, 10.0, resources=three),
        W(11, 1, 200.0, resources=one),
        W(12, 1, 40.0, resources=one),
        W(13, 2, 200.0),
    ]
    plan = schedule(snap(running, pending, floating={"matlab": 3}))
    assert plan.head == HeadReservation(10, 100.0)
    assert [s.job for s in plan.starts] == [12, 13]


def test_unknown_or_too_large_floating_requests_never_block():
    pending = [W(1, 1, 10.0, resources=(("nosuch", 1),)), W(2, 1, 10.0, resources=(("matlab", 3),)), W(3, 1, 10.0)]
    s = snap((), pending, params=FCFS, floating={"matlab": 2})
    assert [st.job for st in schedule(s).starts] == [3]
    fc = forecast(s)
    assert fc[1] == math.inf and fc[2] == math.inf and fc[3] == 0.0


def test_reservation_holds_floating_units():
    # an active reservation holds matlab=2 of 2: a job asking for matlab waits until R's end
    active = Resv(1, 1, 100.0, (("matlab", 2),), active=True, end=100.0)
    s = snap((), [W(2, 1, 10.0, resources=(("matlab", 1),))], floating={"matlab": 2}, resvs=[active])
    assert schedule(s).starts == ()
    assert forecast(s)[2] == 100.0


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_a_reservation_is_placed_on_the_fewest_boards(params):
    # Two boards of four cores; a job runs on core 0.  A 4-core reservation, flexible or fixed
    # and due, takes the free board 1 whole, not cores 1-4 across both boards.
    from gridsched.core import topology

    machine = topology.make([topology.board(0, range(4)), topology.board(1, range(4, 8))], range(8))
    running = [R(100, 1, -10.0, 500.0, (0,))]
    r1, e1 = flex(1, 4, 100.0)
    s = snap(running, [e1], params=params, free=frozenset(range(1, 8)), resvs=[r1])
    plan = schedule(replace(s, machine=machine))
    assert plan.activations == (Activate(1, (4, 5, 6, 7), 100.0),)
    fixed = Resv(2, 4, 100.0, start=0.0)
    s = snap(running, [], params=params, free=frozenset(range(1, 8)), resvs=[fixed])
    plan = schedule(replace(s, machine=machine))
    assert plan.activations == (Activate(2, (4, 5, 6, 7), 100.0),)


def test_bound_jobs_that_cannot_run_together_get_different_predicted_starts():
    # R (4 cores, 100 s) waits for job 100 (8 cores, ends at 50).  Its bound jobs, all 4 cores:
    # a (30 s) at R's activation, b (30 s) when a ends, c (50 s) would end after R ends: never.
    r, e = flex(1, 4, 100.0)
    running = [R(100, 8, -10.0, 60.0)]
    pending = [e, W(2, 4, 30.0, bind=1), W(3, 4, 30.0, bind=1), W(4, 4, 50.0, bind=1)]
    fc = forecast(snap(running, pending, resvs=[r]))
    assert fc[1] == 50.0
    assert (fc[2], fc[3], fc[4]) == (50.0, 80.0, math.inf)
    # once active (cores 0-3 until 150) with job 2 running inside until 110: job 3 waits for it
    active = Resv(1, 4, 100.0, (), None, True, (0, 1, 2, 3), 150.0)
    inside = [R(2, 4, 80.0, 30.0, (0, 1, 2, 3), bind=1)]
    fc = forecast(snap(inside, [W(3, 4, 30.0, bind=1)], now=90.0, free=frozenset(range(4, 8)), resvs=[active]))
    assert fc[3] == 110.0
