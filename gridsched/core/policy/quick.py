"""The easy pass of the plainest snapshot, in one function: cores counted (no map), no floating resource,
device, reservation or splitting, no running job on a relied-on estimate, and jobs that ask for cores alone.

It decides what :func:`gridsched.core.policy.backfill.backfill` decides for such a snapshot (a property
test compares them), at a fraction of the cost: gsim replays a plain trace with it, a pass on every event
that may start a job.  The jobs up to the head, and those behind it that it would start, are checked as
they come; one that asks for more than cores (resources, devices, a reservation, an estimate of its own,
a flexible reservation's entry) makes it answer None, and the general pass decides.  (A job behind the
head that is passed over here is passed over by the general pass too, whatever else it asks for: one
asking for a resource this machine lacks never starts.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from math import inf

from gridsched.core.choices import BackfillOrder
from gridsched.core.types import Decision, HeadReservation, Plan, Snapshot, Start

_QUEUE = BackfillOrder.QUEUE
_NO_REASONS: Mapping[int, str] = {}  # (shared, never changed: a default factory costs, once a pass)


def easy_plain(snap: Snapshot) -> Plan | None:
    """The plan of the easy pass for ``snap``, or None where ``snap`` is not one this function takes."""
    if (
        snap.free is not None
        or snap.floating
        or snap.reservations
        or snap.devices
        or snap.splitting
        or snap.params.backfill_order is not _QUEUE
    ):
        return None
    now, ncores = snap.now, snap.ncores
    free = ncores
    # (end, cores) of the running jobs, each counted at its user walltime (a stopping one: now)
    ends: list[tuple[float, int]] = []
    for r in snap.running:
        if r.planned is not None or r.resources:
            return None
        n = r.ncpus
        free -= n
        if n:
            ends.append((now if r.stopping else r.start + r.estimate, n))
    decisions: list[Decision] = []
    queue = snap.pending
    # the jobs that fit start in queue order, up to the first that does not: the head
    for h, w in enumerate(queue):
        if w.resources or w.bind is not None or w.flex or w.devices or w.hard is not None:
            return None
        n = w.ncpus
        if n > ncores:
            continue  # can never start: never blocks the queue
        if n <= free:
            free -= n
            ends.append((now + w.estimate, n))
            decisions.append(Start(w.id, (), False, None, ()))
            continue
        # the shadow time: the first end at which the cores free then hold the head
        acc, shadow = free, now
        ends.sort()
        for e, x in ends:
            if e > shadow:
                if acc >= n:
                    break
                if e == inf:
                    return None  # (held for ever: the general pass says so)
                shadow = e
            acc += x
        if acc < n:
            continue  # (never, as no job asks for more than the machine)
        if shadow <= now:
            return None  # (it would fit now)
        head, rest = w, queue[h + 1 :]
        break
    else:
        return Plan(tuple(decisions), None, None, _NO_REASONS)
    # behind the head: a job that fits now starts if it ends by the shadow time or leaves the head
    # the cores it needs then (``room``: those free then beyond the head's)
    room = acc - head.ncpus
    reclaimable = False
    if free > 0:  # (a plain loop: filtering by size through map and compress costs more per job)
        for w in rest:
            n = w.ncpus
            if n > free:
                continue
            end = now + w.estimate
            if end > shadow:
                if n > room:
                    continue  # (so in the general pass, whatever else it asks for)
                room -= n
            if w.resources or w.bind is not None or w.flex or w.devices or w.hard is not None:
                return None
            free -= n
            decisions.append(Start(w.id, (), True, None, ()))
            if w.preemptable:
                reclaimable = True
            if free <= 0:
                break
    return Plan(tuple(decisions), HeadReservation(head.id, shadow), shadow if reclaimable else None, _NO_REASONS)


def easy_sorted(
    now: float,
    ncores: int,
    free: int,
    ends: Sequence[tuple[float, int]],
    queue: Sequence[int],
    size: Sequence[int],
    estimate: Sequence[float],
    shortest: bool = False,
) -> tuple[list[int], int, int, float] | None:
    """The easy pass of :func:`easy_plain`, for a driver that keeps the running jobs sorted by end.

    ``ends`` holds the (end, cores) of every running job that holds cores, counted at its walltime and
    sorted (gsim keeps it so from pass to pass, where a snapshot would have them sorted on every pass);
    ``free`` is the cores free now; the pending jobs are ``queue``, job numbers in queue order, each
    asking for ``size[i]`` cores alone for ``estimate[i]``.  Answers ``(started, front, head, shadow)``:
    the jobs to start, in the order :func:`easy_plain` starts them, of which the first ``front`` start in
    queue order and the rest are backfilled; the head (-1: none) and its reservation time (``inf``:
    none).  None where :func:`easy_plain` would leave the pass to the general one (the head would fit now
    but for jobs counted as ending now, or waits for a job held for ever).  ``shortest``: the jobs behind
    the head are tried shortest estimate first, equal estimates in queue order (the general pass's
    ``backfill_order = "shortest"``; the head and its reservation are the same either way).
    """
    started: list[int] = []
    added: list[tuple[float, int]] = []  # (end, cores) of the jobs started in front of the head
    for h in range(len(queue)):
        i = queue[h]
        n = size[i]
        if n > ncores:
            continue  # can never start: never blocks the queue
        if n <= free:
            free -= n
            started.append(i)
            if n:
                added.append((now + estimate[i], n))
            continue
        acc, shadow = free, now
        for e, x in sorted([*ends, *added]) if added else ends:
            if e > shadow:
                if acc >= n:
                    break
                if e == inf:
                    return None
                shadow = e
            acc += x
        if acc < n:
            continue
        if shadow <= now:
            return None
        break
    else:
        return started, len(started), -1, inf
    front = len(started)
    room = acc - n
    if free > 0:
        behind: Iterable[int] = islice(queue, h + 1, None)
        if shortest:  # (only those that fit in what is free now are looked at: free only shrinks)
            behind = sorted([j for j in behind if size[j] <= free], key=estimate.__getitem__)
        for j in behind:
            n = size[j]
            if n > free:
                continue
            if now + estimate[j] > shadow:
                if n > room:
                    continue
                room -= n
            free -= n
            started.append(j)
            if free <= 0:
                break
    return started, front, i, shadow
