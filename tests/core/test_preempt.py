"""Preemption on the machine map: the victims give the head a placement that meets its requirement."""

from __future__ import annotations

from dataclasses import replace

from gridsched.core.placement import Request
from gridsched.core.policy import schedule
from gridsched.core.preempt import by_count, victims
from gridsched.core.topology import board, make
from gridsched.core.types import HeadReservation, Params, Plan, Policy, Running, Snapshot, Waiting

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


# Two boards of three cores, and two boards of two.
M3 = make([board(0, range(3)), board(1, range(3, 6))], range(6))
M2 = make([board(0, range(2)), board(1, range(2, 4))], range(4))


def after(snap: Snapshot, plan: Plan) -> Snapshot:
    """``snap`` once ``plan`` is carried out at once: victims gone and requeued, starts running."""
    gone = {p.job for p in plan.preempts}
    started = {s.job: s for s in plan.starts}
    running = [r for r in snap.running if r.id not in gone]
    running += [
        Running(w.id, w.ncpus, snap.now, w.estimate, started[w.id].cores, started[w.id].backfilled, w.preemptable)
        for w in snap.pending
        if w.id in started
    ]
    requeued = [Waiting(r.id, r.ncpus, r.estimate, True) for r in snap.running if r.id in gone]
    pending = [w for w in snap.pending if w.id not in started] + requeued
    used = {c for r in running for c in r.cores}
    free = frozenset(range(snap.ncores)) - used
    return replace(snap, running=tuple(running), pending=tuple(pending), free=free, head=plan.head)


def boards_left(snap: Snapshot, plan: Plan) -> list[int]:
    """The boards wholly free or coming free (preempted) once ``plan`` has started its jobs."""
    gone = {p.job for p in plan.preempts}
    left = set(snap.free).union(*(r.cores for r in snap.running if r.id in gone))
    left -= {c for s in plan.starts for c in s.cores}
    machine = snap.machine
    assert machine is not None
    return [k for k, b in enumerate(machine.boards) if set(b.cores) <= left]


def test_no_backfill_at_the_reservation_takes_the_board_the_victims_free():
    # At the head's reservation H (3 cores, one board) has no board: X (2 cores, board 0)
    # and Y (1 core, board 1) are checkpointable backfilled jobs; cores 2, 3 and 5 are free.
    # X is preempted (most cores first): board 0 is H's.  A job of one core may still
    # backfill on the "extra" cores by count, but not on core 2.  Taking it, the next pass
    # (same instant) would preempt that job for board 0 and restart X there, and so on.
    running = (
        Running(5, 2, 60.0, 53.0, (0, 1), backfilled=True, preemptable=True),
        Running(7, 1, 80.0, 11.0, (4,), backfilled=True, preemptable=True, planned=5.5),
    )
    head = Waiting(4, 3, 1.0, place=Request(3, "board"))
    small = Waiting(6, 1, 53.0, preemptable=True)
    snap = Snapshot(
        now=86.0,
        ncores=6,
        running=running,
        pending=(head, small),
        params=Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.5, threshold=10.0),
        free=frozenset({2, 3, 5}),
        machine=M3,
        head=HeadReservation(4, 86.0),
    )
    plan = schedule(snap)
    assert [p.job for p in plan.preempts] == [5]
    assert boards_left(snap, plan) == [0]
    nxt = schedule(after(snap, plan))
    assert nxt.preempts == ()
    assert [(s.job, s.cores) for s in nxt.starts][:1] == [(4, (0, 1, 2))]


def test_backfills_at_the_reservation_leave_one_whole_board():
    # H (2 cores, one board) is due; X (backfilled, checkpointable) holds cores 0 and 2, one
    # on each board, and cores 1 and 3 are free.  X is preempted; two one-core jobs fit the
    # "extra" cores by count, but only one may start, on one board, leaving H the other.
    running = (Running(8, 2, 20.0, 11.0, (0, 2), backfilled=True, preemptable=True, planned=0.55),)
    head = Waiting(7, 2, 1.0, place=Request(2, "board"))
    snap = Snapshot(
        now=21.0,
        ncores=4,
        running=running,
        pending=(head, Waiting(9, 1, 1.0), Waiting(10, 1, 1.0)),
        params=Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.05, threshold=10.0),
        free=frozenset({1, 3}),
        machine=M2,
        head=HeadReservation(7, 21.0),
    )
    plan = schedule(snap)
    assert [p.job for p in plan.preempts] == [8]
    assert len(plan.starts) == 1
    assert len(boards_left(snap, plan)) == 1
    nxt = schedule(after(snap, plan))
    assert nxt.preempts == ()
    assert nxt.starts[0].job == 7


def test_before_the_reservation_a_short_job_backfills_where_a_long_one_like_it_may_not():
    # H (3 cores, one board) is reserved at 10, when board 0 frees.  A (1 core, long) would
    # sit on core 2 past 10 and is refused; B, the same request but ending by 10, starts.
    running = (Running(1, 2, 0.0, 10.0, (0, 1)), Running(2, 2, 0.0, 1000.0, (3, 4)))
    snap = Snapshot(
        now=1.0,
        ncores=6,
        running=running,
        pending=(Waiting(3, 3, 50.0, place=Request(3, "board")), Waiting(4, 1, 100.0), Waiting(5, 1, 5.0)),
        params=Params(policy=Policy.EASY),
        free=frozenset({2, 5}),
        machine=M3,
    )
    plan = schedule(snap)
    assert plan.head == HeadReservation(3, 10.0)
    starts = {s.job: s.cores for s in plan.starts}
    assert 4 not in starts or starts[4] == (5,)
    assert 5 in starts


def test_the_head_makes_room_as_soon_as_the_jobs_that_cannot_be_preempted_have_freed_theirs():
    """With ``early_room``, B2 (30 s of walltime) ends at 26 s: board 1 lacks only Y's core, which Y would
    have to give up at the reservation time (30 s) anyway.  Y is preempted at once and the head starts then,
    not 4 s later with board 1 idle meanwhile."""
    s = scenario(27.0)
    s = replace(
        s,
        running=tuple(r for r in s.running if r.id != 2),
        free=frozenset(range(8)) - {c for r in s.running if r.id != 2 for c in r.cores},
    )
    assert schedule(s).preempts == (), "by default, room is made at the reservation time"
    s = replace(s, params=replace(CKPT, early_room=True))
    plan = schedule(s)
    assert [p.job for p in plan.preempts] == [5]
    assert plan.head is not None and plan.head.time == 27.0
    nxt = schedule(replace(s, running=tuple(r for r in s.running if r.id != 5), free=s.free | {7}, head=plan.head))
    assert [(st.job, st.cores) for st in nxt.starts] == [(3, (4, 5, 6, 7))]


def test_no_job_is_preempted_early_that_the_reservation_time_would_not_need():
    """At 27 s B2 still runs (until 30 s) and X and Y would count beyond it: the head fits at 30 s only by
    preempting; but with B2 running, what is free now and X and Y do not make a board now: nothing early."""
    plan = schedule(replace(scenario(27.0), params=replace(CKPT, early_room=True)))
    assert plan.preempts == () and plan.head is not None and plan.head.time == 30.0
