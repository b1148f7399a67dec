"""What ends with time or with another job: reservations, yields, subtrees (pure).

Each pass, before the policy looks at the queue, :func:`settle` decides:

* **Reservations that end** (:class:`~gridsched.core.types.EndReservation`).
  An active reservation ends at its ``end``; its bound running jobs are
  listed in ``kill`` when it was made to end them (``Resv.kill``), else they
  go on as ordinary running jobs; its bound jobs still waiting are
  cancelled.  A fixed reservation still waiting at ``start + duration``
  ends unused ("its resources never came free before its end").  A pass
  that ends a reservation decides nothing else: the driver carries the
  endings out and passes again at once (``Plan.wake_at`` is ``now``), so the
  next pass sees the resources returned.
* **Yielding parents that get their cores back**
  (:class:`~gridsched.core.types.Reclaim`,
  :class:`~gridsched.core.types.Resume`): a parent that yields until given
  jobs (``Lent.awaiting``) asks for its cores back once none of them is
  left; a parent that asked (``Lent.resuming``) is resumed when it is on
  top of all its cores again (:func:`gridsched.core.tree.clear`).  The rest
  of the pass sees the lending as it is after these.
* **Subtrees of parents that ended badly** (``Snapshot.ended``: FAILED,
  CANCELLED or TIMEOUT): their live descendants are cancelled
  (:class:`~gridsched.core.types.CancelSubtree`, reason ``parent ID ended
  STATE``), or, for a ``recoverable`` parent, the waiting ones are held
  (:class:`~gridsched.core.types.HoldSubtree`, reason ``parent ID ended
  STATE: subtree held (gresume-tree)``) and the running ones go on.  None of
  those descendants starts in the same pass.

:func:`wake` is the earliest future time at which one of these changes by
the clock alone (a reservation's end or expiry).
"""

from __future__ import annotations

from dataclasses import replace

from gridsched.core.tree import ancestors, clear
from gridsched.core.types import CancelSubtree, Decision, EndReservation, HoldSubtree, Lent, Reclaim, Resume, Snapshot

ENDED_BADLY = frozenset({"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY"})
NEVER_CAME = "its resources never came free before its end"


def reservation_endings(snap: Snapshot) -> tuple[EndReservation, ...]:
    """The reservations whose time is up at ``snap.now`` (see the module docstring)."""
    now = snap.now
    out: list[EndReservation] = []
    for rv in snap.reservations:
        if rv.active:
            if rv.end is None or now < rv.end:
                continue
            kill = tuple(sorted(r.id for r in snap.running if r.bind == rv.id and not r.stopping)) if rv.kill else ()
            why = ""
        elif rv.start is not None and now >= rv.start + rv.duration:
            kill, why = (), NEVER_CAME
        else:
            continue
        cancel = tuple(sorted(w.id for w in snap.pending if w.bind == rv.id and not w.flex))
        out.append(EndReservation(rv.id, kill, cancel, why))
    return tuple(out)


def resumes(snap: Snapshot) -> tuple[tuple[Reclaim | Resume, ...], tuple[Lent, ...]]:
    """The yielding parents that ask for their cores back or are resumed now, and the lending after that."""
    out: list[Reclaim | Resume] = []
    lent: list[Lent] = []
    for le in snap.lent:
        implicit = not le.resuming and le.awaiting is not None and not le.awaiting
        if not (le.resuming or implicit):
            lent.append(le)
            continue
        if clear(snap.running, snap.parents, le.parent):
            out.append(Resume(le.parent, implicit))
            continue
        if implicit:
            out.append(Reclaim(le.parent))
            le = replace(le, resuming=True)
        lent.append(le)
    return tuple(out), tuple(lent)


def subtree_endings(snap: Snapshot) -> tuple[CancelSubtree | HoldSubtree, ...]:
    """What becomes of the live subtrees of the parents that ended badly (see the module docstring)."""
    out: list[CancelSubtree | HoldSubtree] = []
    running = {r.id for r in snap.running}
    for e in snap.ended:
        if e.state not in ENDED_BADLY or not e.children:
            continue
        kids = set(e.children)
        below = kids | {j for j in snap.parents if kids.intersection(ancestors(snap.parents, j))}
        below.discard(e.job)
        why = f"parent {e.job} ended {e.state}"
        if e.recoverable:
            waiting = tuple(sorted(j for j in below if j not in running))
            if waiting:
                out.append(HoldSubtree(e.job, waiting, why + ": subtree held (gresume-tree)"))
        else:
            out.append(CancelSubtree(e.job, tuple(sorted(below)), why))
    return tuple(out)


def settle(snap: Snapshot) -> tuple[tuple[Decision, ...], Snapshot, bool]:
    """The decisions of this module at ``snap.now``, the snapshot the policy then sees, and whether the pass
    stops there (a reservation ended: the driver passes again once it is carried out)."""
    ends = reservation_endings(snap) if snap.reservations else ()
    moves, lent = resumes(snap) if snap.lent else ((), snap.lent)
    subtrees = subtree_endings(snap) if snap.ended else ()
    decisions: tuple[Decision, ...] = (*ends, *moves, *subtrees)
    if not decisions:
        return (), snap, False
    gone = {j for s in subtrees for j in s.jobs}
    pending = tuple(w for w in snap.pending if w.id not in gone) if gone else snap.pending
    if gone:
        cancelled = {j for s in subtrees if isinstance(s, CancelSubtree) for j in s.jobs}
        running = tuple(replace(r, stopping=True) if r.id in cancelled else r for r in snap.running)
    else:
        running = snap.running
    return decisions, replace(snap, pending=pending, running=running, lent=lent, ended=()), bool(ends)


def wake(snap: Snapshot) -> float | None:
    """The earliest time after ``now`` at which a reservation ends or expires."""
    times = [
        t
        for rv in snap.reservations
        if (t := (rv.end if rv.active else None if rv.start is None else rv.start + rv.duration)) is not None
        and t > snap.now
    ]
    return min(times) if times else None
