"""A suspended job's memory on its boards (pure): it keeps it on the boards it ran on (Snapshot.kept_boards),
where no other job may take it, is continued on those boards with the share it keeps on each, and the
forecast gives it back there at the end it plans for the job.  Two boards of 4 cores and 8 GiB (pool 16 GiB)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gridsched.core.policy import forecast, schedule
from gridsched.core.types import Params, Policy, Resv, Running, Snapshot, Start, Waiting
from tests.core.test_board_memory_plan import EASY, GIB
from tests.core.test_board_memory_plan import snap as plan_snap

CONS = Params(policy=Policy.CONSERVATIVE)
CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=100.0)


def mem(mib: int) -> tuple[tuple[str, int], ...]:
    return (("mem", mib),)


def snap(
    running: list[Running], pending: list[Waiting], kept: dict[int, tuple[tuple[int, int], ...]], params: Params = EASY
) -> Snapshot:
    """``kept``: the suspended jobs' memory by board (its sum is what each keeps in the pool)."""
    kept_floating = {j: mem(sum(k for _, k in sh)) for j, sh in kept.items()}
    return replace(plan_snap(running, pending, params), kept_floating=kept_floating, kept_boards=kept)


def suspended(jid: int, ncpus: int, estimate: float) -> Waiting:
    """A suspended job: it asks for none of the memory it keeps."""
    return Waiting(jid, ncpus, estimate, preemptable=True, keeps_memory=True)


def starts(s: Snapshot) -> dict[int, tuple[int, ...]]:
    return {d.job: d.cores for d in schedule(s).decisions if isinstance(d, Start)}


# R (7 cores, no memory, ends at 50) leaves core 7 free; S, suspended, keeps 6 GiB on board 1 and waits for 2
# cores.  F (1 core, 4 GiB, 10 s) fits the free core and the pool (10 GiB free), and ends before S's turn.
BUSY = [Running(1, 7, 0.0, 50, cores=(0, 1, 2, 3, 4, 5, 6))]
S = suspended(5, 2, 20)
F = Waiting(6, 1, 10, resources=mem(4 * GIB))


@pytest.mark.parametrize("params", [EASY, CKPT, CONS], ids=["easy", "checkpoint-backfill", "conservative"])
def test_no_job_is_placed_on_the_memory_a_suspended_job_keeps_on_its_board(params):
    assert 6 not in starts(snap(BUSY, [S, F], {5: ((1, 6 * GIB),)}, params)), "board 1 has 2 GiB free"
    # kept on board 0 (where no core is free), board 1 has F's memory
    assert starts(snap(BUSY, [S, F], {5: ((0, 6 * GIB),)}, params)) == {6: (7,)}


def test_a_suspended_job_is_continued_on_the_boards_it_keeps_its_memory_on():
    for b in (0, 1):
        got = starts(snap([], [S], {5: ((b, 6 * GIB),)}))
        assert {c // 4 for c in got[5]} == {b}
    got = starts(snap([], [S], {5: ((0, 3 * GIB), (1, 3 * GIB))}))  # ran on a core of each board
    assert sorted(c // 4 for c in got[5]) == [0, 1]


def test_a_suspended_job_waits_for_cores_on_its_boards():
    """The cores free are on board 0; S keeps its memory on board 1: it is not continued there."""
    busy = [Running(1, 4, 0.0, 50, cores=(4, 5, 6, 7))]
    s = snap(busy, [S], {5: ((1, 6 * GIB),)})
    assert starts(s) == {}
    assert forecast(s)[5] == 50, "when board 1's cores come free"
    assert starts(replace(s, kept_boards={5: ((0, 6 * GIB),)})) == {5: (0, 1)}


def test_the_forecast_gives_a_suspended_jobs_memory_back_on_its_board_at_its_planned_end():
    """R0 (4 cores of board 0, 2 GiB, ends at 100), R1 (3 cores of board 1, ends at 50).  S (2 cores, 6 GiB
    kept on board 1) is continued at 50 and planned to end at 70.  G (2 cores, 12 GiB) needs 6 GiB on each
    board (a core on each): board 1 has them once S's memory is back, and board 0 once R0 ends."""
    busy = [
        Running(1, 4, 0.0, 100, cores=(0, 1, 2, 3), resources=mem(2 * GIB)),
        Running(2, 3, 0.0, 50, cores=(4, 5, 6)),
    ]
    g = Waiting(7, 2, 10, resources=mem(12 * GIB))
    got = forecast(snap(busy, [S, g], {5: ((1, 6 * GIB),)}))
    assert got[5] == 50 and got[7] == 100


# An active reservation of 2 cores and 6 GiB on board 1 (cores 4 and 5) until 100.
RESV = Resv(9, 2, 100, resources=mem(6 * GIB), active=True, cores=(4, 5), end=100)


def with_resv(running: list[Running], pending: list[Waiting], params: Params = EASY) -> Snapshot:
    s = snap(running, pending, {}, params)
    assert s.free is not None
    return replace(s, reservations=(RESV,), free=s.free - {4, 5})


@pytest.mark.parametrize("params", [EASY, CKPT, CONS], ids=["easy", "checkpoint-backfill", "conservative"])
def test_no_job_outside_an_active_reservation_takes_its_memory_on_its_boards(params):
    """F (2 cores, 4 GiB) would be packed on cores 6 and 7 beside the reservation, where 2 GiB are left: it
    goes to board 0; and waits for it while board 0's cores are busy."""
    f = Waiting(6, 2, 10, resources=mem(4 * GIB))
    got = starts(with_resv([], [f], params))
    assert {c // 4 for c in got[6]} == {0}
    busy = [Running(1, 4, 0.0, 50, cores=(0, 1, 2, 3))]
    assert starts(with_resv(busy, [f], params)) == {}
    assert forecast(with_resv(busy, [f], params))[6] == 50


def test_a_job_bound_to_the_reservation_uses_its_memory():
    """The reservation's memory is its jobs': a bound job's 3 GiB are not counted on board 1 again, which has
    the 2 GiB F asks beside the reservation's 6 (board 0's cores are busy)."""
    inside = Running(2, 2, 0.0, 50, cores=(4, 5), resources=mem(3 * GIB), bind=9)
    busy = [Running(1, 4, 0.0, 50, cores=(0, 1, 2, 3)), inside]
    f = Waiting(6, 2, 10, resources=mem(2 * GIB))
    assert starts(with_resv(busy, [f])) == {6: (6, 7)}
