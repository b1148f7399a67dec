"""Memory per board in the plan (pure): the head's reservation, the forecast and the jobs backfilled before
the head count each board's memory, on a machine of two boards of 4 cores and 8 GiB (the pool 16 GiB)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import board_memory as bm
from gridsched.core.placement import assign
from gridsched.core.policy import forecast, schedule
from gridsched.core.topology import board, make
from gridsched.core.types import HeadReservation, Params, Policy, Preempt, Running, Snapshot, Waiting

GIB = 1024  # MiB
EASY = Params(policy=Policy.EASY)
CONS = Params(policy=Policy.CONSERVATIVE)
CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=100.0)
MACHINE = make([board(0, range(4), memory=8 << 30), board(1, range(4, 8), memory=8 << 30)], list(range(8)))


def mem(mib: int) -> tuple[tuple[str, int], ...]:
    return (("mem", mib),)


def run(jid: int, cores: tuple[int, ...], end: float, mib: int) -> Running:
    return Running(jid, len(cores), 0.0, end, cores=cores, resources=mem(mib))


def snap(running: list[Running], pending: list[Waiting], params: Params = EASY) -> Snapshot:
    busy = {c for r in running for c in r.cores}
    return Snapshot(
        now=0.0,
        ncores=8,
        running=tuple(running),
        pending=tuple(pending),
        params=params,
        free=frozenset(range(8)) - busy,
        machine=MACHINE,
        floating={"mem": 16 * GIB},
    )


# A (6 GiB, ends at 20) on board 0, B (6 GiB, ends at 40) on board 1, C (4 GiB, ends at 10) on a core of each:
# no memory is free; at 10 the pool has 4 GiB, 2 on each board; at 20 board 0 has 8.
SPREAD = [run(1, (0, 1), 20, 6 * GIB), run(2, (4, 5), 40, 6 * GIB), run(3, (2, 6), 10, 4 * GIB)]


@pytest.mark.parametrize("params", [EASY, CKPT, CONS], ids=["easy", "checkpoint-backfill", "conservative"])
def test_the_heads_reservation_waits_until_a_board_has_its_memory(params):
    h = Waiting(10, 1, 60, resources=mem(3 * GIB))  # the pool has 3 GiB at 10, board 0 at 20
    plan = schedule(snap(SPREAD, [h], params))
    assert plan.head is not None and plan.head.time == 20
    assert forecast(snap(SPREAD, [h], params))[10] == 20


def test_a_head_whose_memory_two_boards_share_is_reserved_when_both_have_their_part():
    h = Waiting(10, 2, 60, resources=mem(4 * GIB))  # at 10: a core and 2 GiB on each board
    plan = schedule(snap(SPREAD, [h]))
    assert plan.head is not None and plan.head.time == 10


def test_a_job_behind_the_head_is_forecast_where_a_board_has_its_memory():
    h = Waiting(10, 1, 60, resources=mem(3 * GIB))  # reserved at 20, when board 0 has 8 GiB
    j = Waiting(11, 1, 5, resources=mem(3 * GIB))  # the pool has 4 GiB from 10 to 20, no board has 3
    got = forecast(snap(SPREAD, [h, j]))
    assert got[10] == 20 and got[11] == 20


# A (6 GiB, ends at 10) on board 0, B (6 GiB, ends at 40) on board 1: 2 GiB free on each board.  The head H
# (2 cores, 7 GiB) is reserved at 10 on board 0, which alone will have 7 GiB.
TWO = [run(1, (0, 1), 10, 6 * GIB), run(2, (4, 5), 40, 6 * GIB)]
HEAD = Waiting(10, 2, 60, resources=mem(7 * GIB))


@pytest.mark.parametrize("params", [EASY, CKPT, CONS], ids=["easy", "checkpoint-backfill", "conservative"])
def test_a_job_that_would_take_the_heads_board_memory_is_not_backfilled(params):
    e = Waiting(11, 2, 60, resources=mem(3 * GIB))  # 1.5 GiB of each board, past 10: board 0 would keep 6.5
    plan = schedule(snap(TWO, [HEAD, e], params))
    assert plan.head is not None and plan.head.time == 10
    assert [s.job for s in plan.starts] == []


@pytest.mark.parametrize("params", [EASY, CONS], ids=["easy", "conservative"])
def test_jobs_that_leave_the_head_its_board_memory_are_backfilled(params):
    short = Waiting(11, 2, 5, resources=mem(3 * GIB))  # 1.5 GiB of each board, ending before 10
    small = Waiting(12, 2, 60, resources=mem(GIB))  # 0.5 GiB of each board: board 0 has 7.5 at 10
    plan = schedule(snap(TWO, [HEAD, short, small], params))
    assert plan.head is not None and plan.head.time == 10
    assert sorted(s.job for s in plan.starts) == [11, 12]


def test_a_job_refused_for_its_memory_does_not_turn_away_one_of_the_same_shape_asking_less():
    big = Waiting(11, 1, 60, resources=mem(3 * GIB))  # no board has 3 GiB now
    small = Waiting(12, 1, 60, resources=mem(GIB))
    plan = schedule(snap(TWO, [HEAD, big, small]))
    assert [s.job for s in plan.starts] == [12]


@pytest.mark.parametrize("keeps", [False, True], ids=["checkpointed", "suspended"])
def test_the_head_preempts_a_job_on_the_board_memory_it_needs_unless_it_would_keep_it(keeps):
    """checkpoint-backfill, the head H's time come (A has ended): board 0 has its 4 cores but 6.5 GiB of the 7 H
    needs, E (backfilled, checkpointable) holding 1.5; the pool has 7.  E is preempted for H; suspended, E
    would keep its memory: it is left running (preempting it would give H nothing)."""
    e = Running(
        3, 2, 0.0, 60, cores=(2, 6), backfilled=True, preemptable=True, resources=mem(3 * GIB), keeps_memory=keeps
    )
    s = snap([run(2, (4, 5), 40, 6 * GIB), e], [HEAD], CKPT)
    plan = schedule(replace(s, now=10.0, head=HeadReservation(10, 10.0)))
    assert [d for d in plan.decisions if isinstance(d, Preempt)] == ([] if keeps else [Preempt(3)])


# -- a property: the head's reservation is one the boards' memory can keep ---------------------------------


@st.composite
def machines_in_use(draw):
    """Running jobs on the two boards, each placed with its memory on the boards of its cores."""
    free = set(range(8))
    left = [8 * GIB, 8 * GIB]
    running: list[Running] = []
    for jid in range(1, draw(st.integers(0, 5)) + 1):
        cores = tuple(sorted(draw(st.sets(st.sampled_from(sorted(free)), min_size=1, max_size=3)))) if free else ()
        if not cores:
            break
        mib = draw(st.integers(0, 8 * GIB))
        sh = bm.shares(MACHINE, cores, mib)
        if any(k > left[b] for b, k in sh.items()):
            continue
        for b, k in sh.items():
            left[b] -= k
        free -= set(cores)
        running.append(run(jid, cores, draw(st.sampled_from([5, 10, 20, 30, 40])), mib))
    return running


def waiting_jobs(first: int):
    job = st.tuples(st.integers(1, 4), st.integers(0, 8 * GIB), st.sampled_from([5, 15, 60]))
    return st.lists(job, min_size=1, max_size=4).map(
        lambda js: [Waiting(first + i, n, est, resources=mem(mib)) for i, (n, mib, est) in enumerate(js)]
    )


@settings(max_examples=300, deadline=None)
@given(machines_in_use(), waiting_jobs(100), st.sampled_from([EASY, CKPT, CONS]))
def test_the_head_can_be_placed_with_its_memory_at_its_reservation(running, pending, params):
    """At the head's reservation time, the cores free then (free now, or of jobs that end by then, the jobs
    the pass starts among them) and the memory free then on each board (that of the running jobs and of
    those started that still run then taken) hold the head with its memory on the boards of its cores."""
    s = snap(running, pending, params)
    plan = schedule(s)
    if plan.head is None or not 0 < plan.head.time < math.inf:
        return
    t = plan.head.time
    head = next(w for w in pending if w.id == plan.head.job)
    ends = {w.id: w.estimate for w in pending}
    holders = [(r.cores, r.estimate, bm.mem_of(r.resources)) for r in running]
    holders += [
        (st_.cores, ends[st_.job], bm.mem_of(next(w for w in pending if w.id == st_.job).resources))
        for st_ in plan.starts
    ]
    cores = frozenset(range(8)).difference(*(c for c, end, _ in holders if end > t))
    left = [8 * GIB, 8 * GIB]
    for c, end, mib in holders:
        if end > t:
            for b, k in bm.shares(MACHINE, c, mib).items():
                left[b] -= k
    mib = bm.mem_of(head.resources)
    got = bm.fit(MACHINE, cores, left, mib, head.ncpus, lambda cs: assign(MACHINE, cs, head.ncpus))
    assert got is not None, (t, cores, left)
