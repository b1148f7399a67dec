"""The changes of a job's state in the daemon: one function per transition, each checking the state it leaves.

The states and their transitions (docs/ARCHITECTURE.md, "Job states")::

    PENDING --hold--> HELD --release--> PENDING
    PENDING or SUSPENDED --start--> RUNNING          (SUSPENDED: continued, or started again without its process)
    RUNNING --suspend--> SUSPENDED                   (preempted in suspend mode)
    RUNNING --stopping--> STOPPING                   (told to stop: preempted, requeued)
    STOPPING or RUNNING --requeued--> PENDING        (it exited to run again; RUNNING: a start a crash undid)
    an end --run_again--> PENDING                    (grequeue of a finished job: it runs again from the start)
    any state but an end --end--> COMPLETED | FAILED | TIMEOUT | CANCELLED | OUT_OF_MEMORY
    any state but an end --unreadable--> FAILED      (at a start: a row no record can be made of)

A change the daemon would make from another state is a fault of the daemon's and raises :class:`Transition`.
Every change of ``Rec.state`` is made here (the job table writes it in its next save), and so is the one change
written to a row alone (:func:`unreadable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.protocol.jobs import TERMINAL, JobState, Stop

if TYPE_CHECKING:
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.state import StateDB

LIVE = frozenset(JobState) - TERMINAL


class Transition(RuntimeError):
    """A change of state the job's current state does not allow."""


def _move(rec: Rec, to: JobState, sources: frozenset[JobState] | tuple[JobState, ...]) -> None:
    if rec.state not in sources:
        raise Transition(f"job {rec.id}: {rec.state.value} -> {to.value} is not a transition")
    rec.state = to


def start(rec: Rec) -> None:
    """A pending job starts (or a suspended one is continued, or started again if its process is gone)."""
    _move(rec, JobState.RUNNING, (JobState.PENDING, JobState.SUSPENDED))


def suspend(rec: Rec) -> None:
    """A running job is stopped in memory for the head job (checkpoint mode ``suspend``)."""
    _move(rec, JobState.SUSPENDED, (JobState.RUNNING,))


def stopping(rec: Rec, why: Stop) -> None:
    """A running job is told to stop (``why``: preempted, requeued); it goes back to the queue once it exited."""
    _move(rec, JobState.STOPPING, (JobState.RUNNING,))
    rec.stop = why


def requeued(rec: Rec) -> None:
    """A job that was told to stop has exited and waits to run again; or a start a crash of the daemon undid."""
    _move(rec, JobState.PENDING, (JobState.STOPPING, JobState.RUNNING))


def run_again(rec: Rec) -> None:
    """A job that has ended goes back to the queue, to run again from the start (grequeue)."""
    _move(rec, JobState.PENDING, TERMINAL)


def hold(table: JobTable, rec: Rec, reason: str) -> None:
    """A pending job is held (out of the queue) for ``reason``."""
    _move(rec, JobState.HELD, (JobState.PENDING,))
    table.dequeue(rec)
    rec.reason = reason
    table.save(rec, reason=reason)


def release(table: JobTable, rec: Rec) -> None:
    """A held job is released to the queue."""
    _move(rec, JobState.PENDING, (JobState.HELD,))
    rec.reason = ""
    table.enqueue(rec)
    table.save(rec, reason="")


def end(rec: Rec, state: JobState) -> None:
    """A job that has not ended ends in ``state`` (one of the ends)."""
    if state not in TERMINAL:
        raise Transition(f"job {rec.id}: {state.value} is not an end")
    _move(rec, state, LIVE)


def unreadable(db: StateDB, jid: int, now: float, why: str) -> None:
    """A job of the table that has not ended but whose row no record can be made of (written by an older
    version) ends FAILED at ``now``, with ``why``: in its row alone, as the daemon holds no record of it."""
    db.update(jid, state=JobState.FAILED, end_time=now, reason=why)
