"""Preemption on the machine map: the victims give the head a placement that meets its requirement."""

from __future__ import annotations

from gridsched.core.placement import Request
from gridsched.core.policy import schedule
from gridsched.core.preempt import by_count, victims
from gridsched.core.topology import board, make
from gridsched.core.types import HeadReservation, Params, Policy, Running, Snapshot, Waiting

# Two boards of four cores, no SMT: the example topology.
M = make([board(0, range(4)), board(1, range(4, 8))], [0] * 8)
CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.25, threshold=5.0)


def scenario(now: float) -> Snapshot:
    """B1 (2 cores, board 0, 60 s) and B2 (3 cores, board 1, 30 s) run; X (2 cores, board 0) and Y (1 core,
    board 1) were backfilled and are checkpointable; the head H wants 4 cores on one board."""
    running = (
        Running(1, 2, 0.0, 60.0, (0, 1)),
        Running(2, 3, 0.0, 30.0, (4, 5, 6)) if now < 30 else None,
        Running(4, 2, 1.0, 100.0, (2, 3), backfilled=True, preemptable=True, planned=25.0),
        Running(5, 1, 1.0, 100.0, (7,), backfilled=True, preemptable=True, planned=25.0),
    )
    running = tuple(r for r in running if r is not None)
    used = {c for r in running for c in r.cores}
    head = Waiting(3, 4, 60.0, place=Request(4, "board"))
    return Snapshot(
        now=now,
        ncores=8,
        running=running,
        pending=(head,),
        params=CKPT,
        free=frozenset(range(8)) - used,
        machine=M,
        head=HeadReservation(3, 30.0),
    )


def test_at_the_reservation_only_the_job_whose_cores_complete_a_board_is_preempted():
    plan = schedule(scenario(30.0))
    assert [p.job for p in plan.preempts] == [5], "Y alone frees board 1; X (most cores) would not help"
    assert plan.starts == ()


def test_the_head_starts_on_the_freed_board():
    s = scenario(30.0)
    s2 = Snapshot(
        now=31.0,
        ncores=8,
        running=tuple(r for r in s.running if r.id != 5),
        pending=s.pending,
        params=CKPT,
        free=s.free | {7},
        machine=M,
        head=HeadReservation(3, 30.0),
    )
    plan = schedule(s2)
    assert [(d.job, d.cores) for d in plan.starts] == [(3, (4, 5, 6, 7))]


def test_by_count_is_most_cores_first_and_kept_when_it_places():
    s = scenario(30.0)
    cands = [r for r in s.running if r.backfilled]
    assert [r.id for r in by_count(s, cands, 1)] == [4]
    head = Waiting(9, 3, 60.0)  # pack: any three cores
    assert [r.id for r in victims(s, cands, head, s.free, 1)] == [4]


def test_nothing_is_preempted_when_no_set_gives_a_placement():
    s = scenario(30.0)
    cands = [r for r in s.running if r.backfilled]
    head = Waiting(9, 5, 60.0, place=Request(5, "board"))  # no board has five cores
    assert victims(s, cands, head, s.free, 0) is None
