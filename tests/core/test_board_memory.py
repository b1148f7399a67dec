"""Memory per board (pure): shares in proportion to a job's cores, the boards' parts of the pool, and the
free cores a placement may use so that every board it uses has its share free."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import board_memory as bm
from gridsched.core.placement import Request, assign
from gridsched.core.topology import board, make

GIB = 1024  # MiB


def two(mem0: int = 8 << 30, mem1: int = 8 << 30):
    return make([board(0, range(4), memory=mem0), board(1, range(4, 8), memory=mem1)], list(range(8)))


def test_shares_follow_the_cores_and_add_up():
    m = two()
    assert bm.shares(m, [0, 1, 2, 4], 8 * GIB) == {0: 6 * GIB, 1: 2 * GIB}
    got = bm.shares(m, [0, 4, 5], 1000)  # 333.3 and 666.7: the remainder to the larger fraction
    assert got == {0: 333, 1: 667} and sum(got.values()) == 1000
    assert bm.shares(m, [], 100) == {} and bm.shares(m, [0], 0) == {}


def test_the_pool_is_cut_in_proportion_to_the_boards_memory():
    assert bm.capacities(two(8 << 30, 24 << 30), 30 * GIB) == [7680, 23040]  # 30 GiB left of 32
    assert bm.capacities(two(8 << 30, None), 16 * GIB) is None  # a board of unknown memory: not counted
    one = make([board(0, range(4), memory=8 << 30)], list(range(4)))
    assert bm.capacities(one, 8 * GIB) is None and bm.capacities(None, 8 * GIB) is None


def test_a_job_too_big_for_one_board_is_given_cores_on_both():
    m = two()
    free = frozenset(range(8))
    place = lambda cs: assign(m, cs, 3)  # noqa: E731
    cores = bm.fit(m, free, [8 * GIB, 8 * GIB], 12 * GIB, 3, place)
    assert cores is not None
    got = assign(m, cores, 3)
    assert got is not None and {c // 4 for c in got[0]} == {0, 1}
    assert bm.fit(m, free, [4 * GIB, 4 * GIB], 12 * GIB, 3, place) is None  # 8 GiB free in all


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 8 * GIB), min_size=2, max_size=2),
    st.sets(st.integers(0, 7), min_size=1),
    st.integers(1, 8),
    st.integers(1, 16 * GIB),
    st.sampled_from(["pack", "spread", "board"]),
)
def test_a_placement_on_the_cores_fit_gives_never_takes_more_than_a_board_has(free_mem, free, n, mib, how):
    m = two()
    req = Request(n, how)
    cores = bm.fit(m, frozenset(free), free_mem, mib, n, lambda cs: assign(m, cs, n, req))
    if cores is None:
        return
    got = assign(m, cores, n, req)
    assert got is not None
    assert all(k <= free_mem[b] for b, k in bm.shares(m, got[0], mib).items())


def test_admission_refuses_a_job_whose_memory_no_boards_of_its_cores_hold():
    from gridsched.core.admission import never_runs

    m = two()
    ok = never_runs(m, 16 << 30, 3600, ncpus=3, walltime=60, mem=12 << 30)
    assert ok is None, "2 cores on one board and 1 on the other hold 8 + 4 GiB"
    why = never_runs(m, 16 << 30, 3600, ncpus=1, walltime=60, mem=12 << 30)
    assert why is not None and "boards of its 1 core," in why and "8G" in why, why
    assert never_runs(m, 16 << 30, 3600, ncpus=1, walltime=60, mem=8 << 30) is None
    one_board = Request(3, "board")
    assert never_runs(m, 16 << 30, 3600, ncpus=3, walltime=60, mem=12 << 30, placement=one_board) is not None
