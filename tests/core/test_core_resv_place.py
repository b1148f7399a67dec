"""Placed reservations in the core: a reservation's own mapping requirement, and jobs bound to it.

Machine: two boards of four cores, SMT pairs: board 0 = cores 0-3 (physical 0-1, 2-3),
board 1 = cores 4-7 (physical 4-5, 6-7).  Expected values are worked out in the comments.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import topology
from gridsched.core.placement import Reason, Request, free_map, status_maps
from gridsched.core.policy import forecast, schedule
from gridsched.core.types import Activate, Lent, Params, Policy, Resv, Running, Snapshot, Start, Waiting

R, W = Running, Waiting
ALL = [Params(policy=p) for p in Policy]
MACHINE = topology.make(
    [topology.board(0, range(4), [(0, 1), (2, 3)]), topology.board(1, range(4, 8), [(4, 5), (6, 7)])], range(8)
)
EVERY = frozenset(range(8))


def snap(running=(), pending=(), *, resvs=(), free=None, now=0.0, params=ALL[1]):
    running = tuple(running)
    if free is None:
        busy = set().union(*(set(r.cores) | r.held for r in running)) if running else set()
        for rv in resvs:
            if rv.active:
                busy |= set(rv.cores)
        free = EVERY - busy
    return Snapshot(
        now=now,
        ncores=8,
        running=running,
        pending=tuple(pending),
        params=params,
        free=frozenset(free),
        reservations=tuple(resvs),
        machine=MACHINE,
    )


def placed(rid, ncpus, duration, place="pack", tpc=0, excl=False, start=None):
    """A waiting reservation with a requirement: its Resv and (flexible) its queue entry."""
    req = Request(ncpus, place, tpc, excl)
    return Resv(rid, ncpus, duration, start=start, place=req), W(rid, ncpus, duration, flex=True, place=req)


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_place_board_waits_for_a_whole_board(params):
    # jobs on core 0 (until 100) and core 4 (until 50): six cores free, but no board has four.
    # An unplaced 4-core reservation would start now; --place board waits for board 1 at 50.
    running = [R(100, 1, 0.0, 100.0, (0,)), R(101, 1, 0.0, 50.0, (4,))]
    r, e = placed(1, 4, 200.0, "board")
    s = snap(running, [e], resvs=[r], params=params)
    assert schedule(s).activations == ()
    assert forecast(s)[1] == 50.0
    later = snap(running[:1], [e], resvs=[r], params=params, now=50.0)
    assert schedule(later).activations == (Activate(1, (4, 5, 6, 7), 250.0),)
    unplaced = Resv(1, 4, 200.0), W(1, 4, 200.0, flex=True)
    assert schedule(snap(running, [unplaced[1]], resvs=[unplaced[0]], params=params)).activations != ()


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_place_spread_takes_cores_round_robin_over_the_boards(params):
    # spread: one core of each board in turn, one thread of each physical core first: 0, 4, 2, 6
    r, e = placed(1, 4, 100.0, "spread")
    assert schedule(snap((), [e], resvs=[r], params=params)).activations == (Activate(1, (0, 2, 4, 6), 100.0),)


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_threads_per_core_reservation_holds_the_siblings(params):
    # tpc 1, 2 cores: one thread of each of board 0's physical cores (0, 2); it holds 1 and 3,
    # so the 2-core job queued after it goes to board 1, not onto the idle siblings
    r, e = placed(1, 2, 100.0, tpc=1)
    plan = schedule(snap((), [e, W(2, 2, 50.0)], resvs=[r], params=params))
    assert plan.activations == (Activate(1, (0, 2), 100.0),)
    assert plan.starts == (Start(2, (4, 5)),)


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_exclusive_board_reservation_takes_its_board_whole(params):
    r, e = placed(1, 2, 100.0, excl=True)
    plan = schedule(snap((), [e, W(2, 2, 50.0)], resvs=[r], params=params))
    assert plan.activations == (Activate(1, (0, 1), 100.0),)
    assert plan.starts == (Start(2, (4, 5)),)
    # with a job on each board no board is whole: it waits
    running = [R(100, 1, 0.0, 30.0, (3,)), R(101, 1, 0.0, 60.0, (7,))]
    s = snap(running, [e], resvs=[r], params=params)
    assert schedule(s).activations == ()
    assert forecast(s)[1] == 30.0


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_due_fixed_reservation_is_activated_only_where_it_can_be_placed(params):
    fixed, _ = placed(1, 4, 100.0, "board", start=0.0)
    assert schedule(snap([R(100, 1, 0.0, 500.0, (0,))], (), resvs=[fixed], params=params)).activations == (
        Activate(1, (4, 5, 6, 7), 100.0),
    )
    blocked = snap([R(100, 1, 0.0, 500.0, (0,)), R(101, 1, 0.0, 500.0, (5,))], (), resvs=[fixed], params=params)
    assert schedule(blocked).activations == ()


def test_preempt_for_fixed_frees_a_board_for_a_placed_reservation():
    # a due fixed --place board reservation of 4; checkpointable jobs on cores 0 and 4: freeing
    # either one gives a board, so one is preempted (most cores first, ties: latest start) -- not both
    params = Params(policy=Policy.EASY, preempt_for_fixed=True)
    fixed, _ = placed(1, 4, 100.0, "board", start=0.0)
    running = [R(100, 1, -5.0, 500.0, (0,), preemptable=True), R(101, 1, -1.0, 500.0, (4,), preemptable=True)]
    plan = schedule(snap(running, (), resvs=[fixed], params=params))
    assert len(plan.preempts) == 1 and plan.activations == ()


def test_bound_jobs_are_placed_inside_with_their_own_requirement():
    # R is active, spread over cores 0, 1, 4, 5 (two of each board)
    active = Resv(1, 4, 100.0, active=True, cores=(0, 1, 4, 5), end=100.0, place=Request(4, "spread"))
    # a --place board job of 4 never fits inside; one of 2 fits on either board's pair
    s = snap((), [W(2, 4, 10.0, bind=1, place=Request(4, "board")), W(3, 2, 10.0, bind=1, place=Request(2, "board"))])
    s = snap((), s.pending, resvs=[active])
    assert schedule(s).starts == (Start(3, (0, 1)),)
    # a bound job runs on core 0: a --threads-per-core 1 job never takes its sibling 1
    inside = [R(4, 1, 0.0, 50.0, (0,), bind=1)]
    s = snap(inside, [W(5, 1, 10.0, bind=1, place=Request(1, threads_per_core=1))], resvs=[active])
    assert schedule(s).starts == (Start(5, (4,)),)
    # a --threads-per-core 1 job inside holds core 1 idle: a plain job takes 4, not 1
    inside = [R(4, 1, 0.0, 50.0, (0,), bind=1, held=frozenset({1}))]
    s = snap(inside, [W(6, 1, 10.0, bind=1)], resvs=[active])
    assert schedule(s).starts == (Start(6, (4,)),)


def test_a_threads_per_core_job_fits_in_a_threads_per_core_reservation():
    # R holds cores 0 and 2 (tpc 1; siblings 1 and 3 held idle): a tpc-1 job of 2 runs on 0 and 2,
    # and a plain job never runs on the held siblings
    active = Resv(1, 2, 100.0, active=True, cores=(0, 2), end=100.0, place=Request(2, threads_per_core=1))
    free = frozenset(range(4, 8))
    s = snap((), [W(2, 2, 10.0, bind=1, place=Request(2, threads_per_core=1))], resvs=[active], free=free)
    assert schedule(s).starts == (Start(2, (0, 2)),)
    s = snap((), [W(3, 3, 10.0, bind=1)], resvs=[active], free=free)
    assert schedule(s).starts == ()


def test_status_maps_are_the_free_map_the_core_is_given():
    running = [
        R(10, 1, 0.0, 50.0, (0,), held=frozenset({1})),  # tpc 1: holds its sibling
        R(11, 1, 0.0, 50.0, (2,), backfilled=True, preemptable=True),
        R(12, 2, 0.0, 50.0, (6, 7)),  # yields core 7
    ]
    resv = Resv(1, 1, 100.0, active=True, cores=(4,), end=100.0, place=Request(1, threads_per_core=1))
    maps = status_maps(MACHINE, running, [resv], drained=[3], lent=[Lent(12, frozenset({7}))])
    by = {(m.reason, m.owner): m.cores for m in maps}
    assert by == {
        (Reason.ALLOCATED, 10): {0},
        (Reason.HELD, 10): {1},
        (Reason.BACKFILL, 11): {2},
        (Reason.ALLOCATED, 12): {6},
        (Reason.LENT, 12): {7},
        (Reason.RESERVED, 1): {4, 5},
        (Reason.DRAINED, ""): {3},
    }
    assert free_map(MACHINE, maps) == frozenset()


def test_a_bound_job_the_reservations_cores_can_never_hold_is_forecast_never():
    active = Resv(1, 4, 100.0, active=True, cores=(0, 1, 4, 5), end=100.0, place=Request(4, "spread"))
    pending = [W(2, 4, 10.0, bind=1, place=Request(4, "board")), W(3, 2, 10.0, bind=1, place=Request(2, "board"))]
    fc = forecast(snap((), pending, resvs=[active]))
    assert fc[2] == math.inf and fc[3] == 0.0


def _meets(cores: tuple[int, ...], req: Request, free: frozenset[int]) -> bool:
    """Whether ``cores`` (all in ``free``) lay out as ``req`` asks, what they hold free too."""
    from gridsched.core.placement import claimed

    boards = {MACHINE.board_of(c).id for c in cores}
    phys = [MACHINE.siblings(c) for c in cores]
    return (
        len(cores) == req.ncpus
        and claimed(MACHINE, cores, req) <= free
        and (req.place != "board" or len(boards) == 1)
        and (req.threads_per_core != 1 or len(set(phys)) == len(phys))
    )


REQS = st.builds(
    Request,
    st.integers(1, 5),
    st.sampled_from(["pack", "spread", "board"]),
    st.sampled_from([0, 1]),
    st.booleans(),
)


@st.composite
def placed_snapshots(draw):
    """Random running jobs (some holding SMT siblings) and a placed reservation waiting, flexible
    or fixed and due, with jobs bound to an active placed reservation."""
    taken: set[int] = set()
    running = []
    for i in range(draw(st.integers(0, 4))):
        c = draw(st.sampled_from(sorted(EVERY - taken) or [None]))
        if c is None:
            break
        held = frozenset({c ^ 1} - taken) if draw(st.booleans()) else frozenset()
        taken |= {c} | held
        running.append(R(100 + i, 1, 0.0, draw(st.sampled_from([10.0, 50.0])), (c,), held=held))
    act_req = draw(REQS)
    from gridsched.core.placement import assign

    got = assign(MACHINE, EVERY - frozenset(taken), act_req.ncpus, act_req)
    resvs = []
    pending = []
    if got is not None:
        cores, held = got
        taken |= held
        resvs.append(Resv(1, act_req.ncpus, 100.0, active=True, cores=cores, end=100.0, place=act_req))
        pending += [W(10 + k, r.ncpus, 10.0, bind=1, place=r) for k, r in enumerate(draw(st.lists(REQS, max_size=3)))]
    req = draw(REQS)
    if draw(st.booleans()):
        rv, e = placed(2, req.ncpus, 50.0, req.place, req.threads_per_core, req.exclusive_board)
        pending.insert(0, e)
    else:
        rv, _ = placed(2, req.ncpus, 50.0, req.place, req.threads_per_core, req.exclusive_board, start=0.0)
    resvs.append(rv)
    return snap(running, pending, resvs=resvs, free=EVERY - frozenset(taken), params=draw(st.sampled_from(ALL)))


@settings(max_examples=300, deadline=None)
@given(placed_snapshots())
def test_placed_reservations_and_bound_jobs_meet_their_requirements_and_share_no_core(s):
    from gridsched.core.placement import claimed

    plan = schedule(s)
    free = s.free
    resv = {r.id: r for r in s.reservations}
    for a in plan.activations:
        r = resv[a.resv]
        assert _meets(a.cores, r.place, free), (a, r.place)
        free = free - claimed(MACHINE, a.cores, r.place)
    active = [r for r in s.reservations if r.active]
    inside = frozenset().union(*(r.cores for r in active)) if active else frozenset()
    extra = frozenset().union(*(claimed(MACHINE, r.cores, r.place) for r in active)) - inside if active else frozenset()
    pend = {w.id: w for w in s.pending}
    for st_ in plan.starts:
        w = pend[st_.job]
        assert w.bind == 1 and set(st_.cores) <= inside
        assert _meets(st_.cores, w.place, inside | extra)
        used = claimed(MACHINE, st_.cores, w.place)
        assert not used & (s.free - free) and used <= inside | extra
        inside, extra = inside - used, extra - used
