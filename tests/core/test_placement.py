"""Placement on hand-made machine maps, free maps from status maps, and placement properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.placement import (
    Reason,
    Request,
    StatusMap,
    claimed,
    free_map,
    never_fits,
    place,
    usable,
)
from gridsched.core.topology import MachineMap, board, make

# Two boards of four cores; cores (0,1) (2,3) (4,5) (6,7) are SMT pairs.
M = make([board(0, range(4), [(0, 1), (2, 3)]), board(1, range(4, 8), [(4, 5), (6, 7)])], [0] * 8)
ALL = frozenset(range(8))


def boards_of(m: MachineMap, cores) -> set[int]:
    return {m.board_of(c).id for c in cores}


# -- pack ----------------------------------------------------------------------


def test_pack_fills_the_lowest_board_first_when_boards_tie():
    assert place(M, ALL, Request(3)) == (0, 1, 2)


def test_pack_prefers_the_board_that_fits_best():
    free = ALL - {6, 7}  # board 1 has 2 free cores, board 0 has 4
    assert place(M, free, Request(2)) == (4, 5)
    assert place(M, free, Request(3)) == (0, 1, 2)


def test_pack_uses_the_fewest_boards_and_a_best_fit_for_the_rest():
    free = ALL - {2, 3}  # board 0: 2 free, board 1: 4 free
    assert place(M, free, Request(5)) == (0, 4, 5, 6, 7)
    assert place(M, ALL, Request(6)) == (0, 1, 2, 3, 4, 5)
    # three boards of 2, 4 and 3 cores: 6 cores go on the 4-core board and the 2-core board
    m3 = make([board(0, (0, 1)), board(1, range(2, 6)), board(2, range(6, 9))], range(9))
    assert place(m3, frozenset(range(9)), Request(6)) == (0, 1, 2, 3, 4, 5)


def test_pack_breaks_a_tie_for_the_rest_by_distance():
    m = make(
        [board(0, range(4)), board(1, (4, 5)), board(2, (6, 7))], range(8), [[10, 30, 15], [30, 10, 30], [15, 30, 10]]
    )
    assert place(m, frozenset(range(8)), Request(6)) == (0, 1, 2, 3, 6, 7)


def test_pack_returns_none_when_too_few_cores_are_free():
    assert place(M, frozenset({0, 5}), Request(3)) is None
    assert place(M, frozenset({0, 5, 7}), Request(3)) == (0, 5, 7)


# -- spread and board ------------------------------------------------------------


def test_spread_deals_over_boards_then_physical_cores():
    assert place(M, ALL, Request(4, "spread")) == (0, 2, 4, 6)
    assert place(M, ALL, Request(2, "spread")) == (0, 4)
    assert place(M, frozenset({0, 1, 2, 3, 4}), Request(3, "spread")) == (0, 2, 4)
    assert place(M, frozenset({0, 1, 2, 3, 4}), Request(5, "spread")) == (0, 1, 2, 3, 4)


def test_board_puts_every_core_on_one_board():
    assert place(M, ALL - {7}, Request(4, "board")) == (0, 1, 2, 3)
    assert place(M, ALL - {3}, Request(4, "board")) == (4, 5, 6, 7)
    assert place(M, ALL - {3, 7}, Request(4, "board")) is None  # 6 free cores, no board with 4
    assert place(M, ALL - {0, 1, 2}, Request(1, "board")) == (3,)  # best fit: the fuller board


# -- SMT threads -----------------------------------------------------------------


def test_one_thread_per_core_takes_whole_physical_cores():
    assert place(M, ALL, Request(2, threads_per_core=1)) == (0, 2)
    assert claimed(M, (0, 2), Request(2, threads_per_core=1)) == {0, 1, 2, 3}
    free = ALL - {1}  # physical core (0,1) is half used: not usable with one thread per core
    assert place(M, free, Request(2, threads_per_core=1)) == (4, 6)
    assert place(M, free, Request(3, threads_per_core=1)) == (2, 4, 6)
    assert place(M, free, Request(4, threads_per_core=1)) is None


def test_threads_per_core_zero_and_two_share_physical_cores():
    for tpc in (0, 2):
        r = Request(3, threads_per_core=tpc)
        assert place(M, ALL - {1}, r) == (0, 2, 3)
        assert claimed(M, (0, 2, 3), r) == {0, 2, 3}


# -- exclusive boards -------------------------------------------------------------


def test_exclusive_board_takes_only_wholly_free_boards_and_holds_them():
    r = Request(2, exclusive_board=True)
    assert place(M, ALL - {5}, r) == (0, 1)
    assert claimed(M, (0, 1), r) == {0, 1, 2, 3}
    assert place(M, ALL - {5, 0}, r) is None
    r5 = Request(5, exclusive_board=True)
    assert place(M, ALL, r5) == (0, 1, 2, 3, 4)
    assert claimed(M, (0, 1, 2, 3, 4), r5) == ALL
    assert place(M, ALL - {7}, r5) is None
    # spread deals over the boards it takes, not over every board
    m3 = make([board(0, range(4)), board(1, range(4, 8)), board(2, range(8, 12))], range(12))
    assert place(m3, frozenset(range(12)), Request(2, "spread", exclusive_board=True)) == (0, 1)
    assert place(m3, frozenset(range(12)), Request(5, "spread", exclusive_board=True)) == (0, 1, 2, 4, 5)


# -- status maps and free maps ------------------------------------------------------


def test_drained_and_reserved_cores_are_never_used():
    maps = [
        StatusMap(Reason.DRAINED, "", frozenset({0, 1})),
        StatusMap(Reason.RESERVED, "R1", frozenset({4, 5})),
        StatusMap(Reason.ALLOCATED, 9, frozenset({2})),
    ]
    free = free_map(M, maps)
    assert free == {3, 6, 7}
    for req in (Request(1), Request(2), Request(3), Request(2, "spread"), Request(2, "board")):
        cores = place(M, free, req)
        assert cores is not None and not set(cores) & {0, 1, 2, 4, 5}
    assert place(M, free, Request(4)) is None
    # a job bound to R1 may use its cores, never the drained ones
    bound = free_map(M, maps, usable(maps, reservation="R1"))
    assert bound == {3, 4, 5, 6, 7}
    assert place(M, bound, Request(4, "board")) == (4, 5, 6, 7)
    assert free_map(M, maps, usable(maps, reservation="R2")) == free


def test_a_drained_core_stays_out_even_when_lent_or_reserved():
    maps = [StatusMap(Reason.LENT, 1, frozenset({4, 5})), StatusMap(Reason.DRAINED, "", frozenset({5}))]
    assert free_map(M, maps, usable(maps, ancestors=[1])) == ALL - {5}


def test_lent_cores_are_used_only_by_descendants():
    maps = [
        StatusMap(Reason.LENT, 1, frozenset({4, 5, 6, 7})),  # job 1 yields its board
        StatusMap(Reason.ALLOCATED, 2, frozenset({0, 1, 2, 3})),  # job 2 (no relation) runs
    ]
    stranger = free_map(M, maps, usable(maps, ancestors=[]))
    assert stranger == frozenset() and place(M, stranger, Request(1)) is None
    child = free_map(M, maps, usable(maps, ancestors=[1]))
    assert child == {4, 5, 6, 7}
    assert place(M, child, Request(2)) == (4, 5)
    # the child runs on 4-5: a grandchild (ancestors 3 and 1) may use only what is still lent and free
    maps.append(StatusMap(Reason.ALLOCATED, 3, frozenset({4, 5})))
    grandchild = free_map(M, maps, usable(maps, ancestors=[3, 1]))
    assert grandchild == {6, 7}
    assert free_map(M, maps, usable(maps, ancestors=[2])) == frozenset()


def test_the_head_job_may_use_preemptable_cores():
    maps = [StatusMap(Reason.BACKFILL, 7, frozenset({0, 1})), StatusMap(Reason.ALLOCATED, 8, frozenset({2, 3}))]
    assert free_map(M, maps, usable(maps, head=True)) == ALL - {2, 3}
    assert free_map(M, maps, usable(maps)) == ALL - {0, 1, 2, 3}
    assert free_map(M, maps, [("backfill", 7)]) == ALL - {2, 3}  # plain strings work too


# -- never_fits ---------------------------------------------------------------------


def test_never_fits_gives_the_reason():
    assert never_fits(M, Request(5, "board")) == "--place board: no board has 5 cores (largest: 4)"
    assert never_fits(M, Request(9)) == "asks for 9 cores, the machine has 8"
    assert never_fits(M, Request(0)) == "asks for 0 cores, at least 1 is needed"
    assert never_fits(M, Request(5, threads_per_core=1)) == (
        "--threads-per-core 1: asks for 5 cores, the machine offers 4 at 1 per physical core"
    )
    assert never_fits(M, Request(3, "board", threads_per_core=1)) == (
        "--place board: no board has 3 cores at 1 per physical core (largest: 2)"
    )
    assert never_fits(M, Request(2, "zigzag")) == "--place zigzag: must be one of pack, spread, board"
    assert never_fits(M, Request(8)) is None and never_fits(M, Request(4, "board", exclusive_board=True)) is None
    with pytest.raises(ValueError):
        place(M, ALL, Request(2, "zigzag"))


# -- properties -------------------------------------------------------------------------


@st.composite
def machines(draw) -> MachineMap:
    """Random maps: 1-4 boards of 1-6 cores, in SMT groups of 1-3 threads."""
    boards = []
    nxt = 0
    for bid in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 6))
        cores = list(range(nxt, nxt + size))
        groups, i = [], 0
        while i < size:
            k = draw(st.integers(1, 3))
            groups.append(cores[i : i + k])
            i += k
        boards.append(board(bid * 2, cores, groups))  # ids 0, 2, 4, ...
        nxt += size
    return make(boards, [0] * nxt)


requests = st.builds(
    Request,
    ncpus=st.integers(1, 9),
    place=st.sampled_from(["pack", "spread", "board"]),
    threads_per_core=st.sampled_from([0, 1, 2]),
    exclusive_board=st.booleans(),
)


def min_boards(m: MachineMap, free: frozenset[int], n: int) -> int:
    """The fewest boards that hold n of the free cores (any thread, shared boards)."""
    caps = sorted((sum(1 for c in b.cores if c in free) for b in m.boards), reverse=True)
    total = 0
    for k, cap in enumerate(caps, 1):
        total += cap
        if total >= n:
            return k
    raise AssertionError("does not fit")


@settings(max_examples=150, deadline=None)
@given(m=machines(), steps=st.lists(st.tuples(st.booleans(), requests, st.integers(0, 50)), max_size=30))
def test_random_starts_and_ends_never_share_a_core(m, steps):
    jobs: dict[int, frozenset[int]] = {}
    next_id = 1
    for start, req, pick in steps:
        maps = [StatusMap(Reason.ALLOCATED, j, held) for j, held in jobs.items()]
        free = free_map(m, maps)
        used = frozenset().union(*jobs.values())
        assert free == frozenset(m.cores()) - used
        if not start and jobs:
            del jobs[sorted(jobs)[pick % len(jobs)]]
            continue
        cores = place(m, free, req)
        if cores is None:
            if req.threads_per_core == 0 and not req.exclusive_board and req.place != "board":
                assert len(free) < req.ncpus
            continue
        held = claimed(m, cores, req)
        assert len(cores) == req.ncpus == len(set(cores)) and list(cores) == sorted(cores)
        assert set(cores) <= held <= free
        if req.place == "board":
            assert len(boards_of(m, cores)) == 1
        if req.threads_per_core:
            for c in cores:
                assert len(set(m.siblings(c)) & set(cores)) <= req.threads_per_core
        if req.exclusive_board:
            assert held == {c for b in boards_of(m, cores) for c in m.board(b).cores}
        if req.place == "pack" and req.threads_per_core == 0 and not req.exclusive_board:
            assert len(boards_of(m, cores)) == min_boards(m, free, req.ncpus)
        for other in jobs.values():
            assert not held & other
        jobs[next_id] = held
        next_id += 1


@settings(max_examples=200, deadline=None)
@given(m=machines(), req=requests)
def test_never_fits_agrees_with_placing_on_an_idle_machine(m, req):
    placed = place(m, frozenset(m.cores()), req)
    assert (never_fits(m, req) is None) == (placed is not None)


def test_the_pass_with_floating_resources_honours_board_placement():
    # two boards of 4 cores; one core busy on each board: 6 free cores, but no board has 4 free
    from gridsched.core.placement import Request
    from gridsched.core.policy import schedule
    from gridsched.core.types import Params, Policy, Running, Snapshot, Waiting

    m = make([board(0, range(4)), board(1, range(4, 8))], tuple(range(8)))
    running = (Running(1, 1, 0.0, 100.0, cores=(0,)), Running(2, 1, 0.0, 100.0, cores=(4,)))
    job = Waiting(3, 4, 50.0, place=Request(4, "board"))
    free = frozenset({1, 2, 3, 5, 6, 7})
    for floating in ({}, {"lic": 1}):  # the count-only pass and the pass with floating resources
        for policy in Policy:
            plan = schedule(
                Snapshot(0.0, 8, running, (job,), Params(policy=policy), free=free, floating=floating, machine=m)
            )
            assert plan.starts == (), (policy, floating)
    spread = Waiting(3, 4, 50.0, place=Request(4, "spread"))
    plan = schedule(
        Snapshot(0.0, 8, running, (spread,), Params(policy=Policy.EASY), free=free, floating={"lic": 1}, machine=m)
    )
    [s] = plan.starts
    assert {c // 4 for c in s.cores} == {0, 1}
