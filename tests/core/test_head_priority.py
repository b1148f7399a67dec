"""The remembered head gives way to a job of higher priority (checkpoint-backfill), and to no job that has run
(a job preempted and requeued, perhaps for that head, never takes it back: no cascade)."""

from __future__ import annotations

from gridsched.core.policy import schedule
from gridsched.core.types import HeadReservation, Params, Policy, Running, Snapshot, Waiting

CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.25, threshold=5.0)


def snap(now: float, pending: tuple[Waiting, ...], running: tuple[Running, ...], head: HeadReservation | None):
    used = sum(r.ncpus for r in running)
    return Snapshot(
        now=now,
        ncores=4,
        running=running,
        pending=pending,
        params=CKPT,
        free=frozenset(range(used, 4)),
        head=head,
        ranked=True,
    )


BLOCKER = Running(1, 4, 0.0, 30.0, (0, 1, 2, 3))
LOW = Waiting(2, 4, 60.0, nice=500, submitted=1.0)  # priority -500
HIGH = Waiting(3, 4, 60.0, admin=750, submitted=2.0)  # submitted after LOW became the head


def test_a_job_of_higher_priority_submitted_later_takes_the_head_and_starts_first():
    first = schedule(snap(1.5, (LOW,), (BLOCKER,), None))
    assert first.head is not None and first.head.job == LOW.id and first.head.time == 30.0
    later = schedule(snap(5.0, (LOW, HIGH), (BLOCKER,), first.head))
    assert later.head is not None and later.head.job == HIGH.id, "the job of higher priority is the head now"
    at_end = schedule(snap(30.0, (LOW, HIGH), (), later.head))
    assert [s.job for s in at_end.starts] == [HIGH.id], "and starts first when the cores free"


def test_the_old_head_keeps_its_time_when_it_is_the_head_again():
    first = schedule(snap(1.5, (LOW,), (BLOCKER,), None))
    assert first.head is not None
    # the job that took the head went away (cancelled): the old head is the head again, at no later time
    again = schedule(snap(6.0, (LOW,), (BLOCKER,), HeadReservation(HIGH.id, 30.0)))
    assert again.head is not None and again.head.job == LOW.id and again.head.time <= first.head.time


def test_a_job_that_has_run_does_not_take_the_head_back():
    # the preempted job comes back with a higher priority (older, raised by an admin) and has run already
    back = Waiting(4, 4, 40.0, preemptable=True, elapsed=20.0, admin=900, submitted=0.5)
    first = schedule(snap(1.5, (LOW,), (BLOCKER,), None))
    again = schedule(snap(5.0, (back, LOW), (BLOCKER,), first.head))
    assert again.head is not None and again.head.job == LOW.id, "no cascade"


def test_equal_priorities_keep_the_remembered_head():
    a = Waiting(2, 4, 60.0, submitted=1.0)
    b = Waiting(3, 4, 60.0, submitted=2.0)
    first = schedule(snap(1.5, (a,), (BLOCKER,), None))
    again = schedule(snap(5.0, (b, a), (BLOCKER,), first.head))  # b ahead in the driver's order, same priority
    assert again.head is not None and again.head.job == a.id
