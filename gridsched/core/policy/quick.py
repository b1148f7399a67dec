"""The easy pass of the plainest snapshot, in one function: cores counted (no map), no floating resource,
device, reservation or splitting, no running job on a relied-on estimate, and jobs that ask for cores alone
(and :func:`ckpt_plain`, the checkpoint-backfill pass of such a snapshot, for gsim).

It decides what :func:`gridsched.core.policy.backfill.backfill` decides for such a snapshot (a property
test compares them), at a fraction of the cost: gsim replays a plain trace with it, a pass on every event
that may start a job.  The jobs up to the head, and those behind it that it would start, are checked as
they come; one that asks for more than cores (resources, devices, a reservation, an estimate of its own,
a flexible reservation's entry) makes it answer None, and the general pass decides.  (A job behind the
head that is passed over here is passed over by the general pass too, whatever else it asks for: one
asking for a resource this machine lacks never starts.)
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import islice
from math import inf
from operator import attrgetter

from gridsched.core.choices import BackfillOrder
from gridsched.core.predict import make_predictor
from gridsched.core.profile import first_free
from gridsched.core.types import Decision, HeadReservation, Params, Plan, Running, Snapshot, Start, Waiting

_SHORTEST = BackfillOrder.SHORTEST
_estimate = attrgetter("estimate")
_NO_REASONS: Mapping[int, str] = {}  # (shared, never changed: a default factory costs, once a pass)


def easy_plain(snap: Snapshot) -> Plan | None:
    """The plan of the easy pass for ``snap``, or None where ``snap`` is not one this function takes."""
    if snap.free is not None or snap.floating or snap.reservations or snap.devices or snap.splitting:
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
        tried: Sequence[Waiting] = rest
        if snap.params.backfill_order is _SHORTEST:  # shortest estimate first, equal ones in queue order
            tried = sorted([w for w in rest if w.ncpus <= free], key=_estimate)
        for w in tried:
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


def ckpt_plain(snap: Snapshot) -> Plan | None:
    """The checkpoint-backfill pass (not the cascading reading, nor early room) of the plainest snapshot, in one
    function: what :func:`gridsched.core.policy.backfill.backfill` decides for it, or None where ``snap`` is not
    one this function takes, or the head's time has come (the general pass then makes room for it).

    As there, a running job counts as ending at its planned end (the estimate it was backfilled on) while that
    is ahead, else at its walltime; the previous pass's head stays the head while its reservation can be met
    (preempting every checkpointable backfilled job); the jobs behind it start if they fit now and end by the
    reservation time, on their walltime or, checkpointable, on the predicted one, or leave the head its cores
    then.  A test compares the two on generated snapshots and on replays."""
    params = snap.params
    if (
        snap.free is not None
        or snap.floating
        or snap.reservations
        or snap.devices
        or snap.splitting
        or snap.lent
        or snap.ended
        or snap.priorities
        or snap.ranked
        or params.cascade
        or params.early_room
    ):
        return None
    return ckpt_pass(snap.now, snap.ncores, snap.running, snap.pending, params, snap.head, snap.history, snap.ratios)


def ckpt_pass(
    now: float,
    ncores: int,
    running: Iterable[Running],
    queue: Sequence[Waiting],
    params: Params,
    memo: HeadReservation | None,
    history: Mapping[str, tuple[float, ...]],
    ratios: Mapping[str, tuple[float, ...]],
    plain: bool = False,
    fixed: Iterable[tuple[float, int]] | None = None,
    free: int | None = None,
    reclaim: Collection[tuple[float, int]] = (),
) -> Plan | None:
    """:func:`ckpt_plain` for a driver that has the snapshot's parts at hand: see :func:`ckpt_starts`, whose
    answer this is as a plan."""
    found = ckpt_starts(now, ncores, running, queue, params, memo, history, ratios, plain, fixed, free, reclaim)
    if found is None:
        return None
    starts, memo, wake = found
    return Plan(tuple([Start(j, (), b, pl, ()) for j, b, pl in starts]), memo, wake, _NO_REASONS)


Started = tuple[int, bool, float | None]  # a job started: its id, whether backfilled, the estimate relied on


def ckpt_starts(
    now: float,
    ncores: int,
    running: Iterable[Running],
    queue: Sequence[Waiting],
    params: Params,
    memo: HeadReservation | None,
    history: Mapping[str, tuple[float, ...]],
    ratios: Mapping[str, tuple[float, ...]],
    plain: bool = False,
    fixed: Iterable[tuple[float, int]] | None = None,
    free: int | None = None,
    reclaim: Collection[tuple[float, int]] = (),
) -> tuple[list[Started], HeadReservation | None, float | None] | None:
    """:func:`ckpt_plain`'s decisions, all starts, as ``(id, backfilled, planned)``, with the head's reservation
    and the plan's ``wake_at``, for a driver that has the snapshot's parts at hand and knows the snapshot is one it
    takes (cores counted, no floating resource, reservation, device, splitting, priority; not the cascading
    reading nor early room): gsim's general loop, which then builds no snapshot for the passes it decides.
    The running jobs and the queue are read once each and never kept.  With ``plain`` the driver also
    knows that no running job holds a resource or is stopping and that no waiting one asks for a resource
    or device, is bound to a reservation, is one or has an estimate of its own: the entries are not looked
    at for those (the answer is the same; else a pass such an entry is in is left to the general one).

    With ``fixed`` and ``free`` the driver keeps the running jobs apart: ``fixed`` the (start + estimate,
    cores) of those that have no planned end and are not both backfilled and preemptable (this pass only
    counts them as ending then), ``running`` the others, ``free`` the cores free now; and ``reclaim`` may hold the
    (start + estimate, cores) of those of the others that have no planned end (backfilled and preemptable:
    counted as ending then, and freed if the head needs their cores), ``running`` then the rest."""
    counted = free is None
    if free is None:
        free = ncores
    # (counted end, cores) of the running jobs and of those started in this pass (an end before now counts
    # as now wherever it is read); with a head kept from the previous pass, (counted end, cores) of the
    # running ones that preempting every checkpointable backfilled job would free
    ends: list[tuple[float, int]] = [*reclaim] if fixed is None else [*fixed, *reclaim]
    add = ends.append
    meet: list[tuple[float, int]] | None = [*reclaim] if memo is not None else None
    relied = False
    reclaimable = bool(reclaim)
    wake = inf  # the earliest planned end still ahead
    for r in running:
        if not plain and (r.resources or r.stopping):
            return None
        n = r.ncpus
        if counted:
            free -= n
        pl = r.planned
        if pl is None:
            e = r.start + r.estimate
            if r.backfilled and r.preemptable:
                reclaimable = True
                if meet is not None:
                    meet.append((e, n))
        else:
            relied = True
            e = r.start + pl
            if e > now:
                if e < wake:
                    wake = e
            else:
                e = r.start + r.estimate
            if r.backfilled:
                if r.preemptable:
                    reclaimable = True
                if meet is not None:
                    meet.append((e, n))
        add((e, n))
    decisions: list[Started] = []
    found = _ckpt_head(queue, ncores, memo, now, free, ends, meet, decisions, plain)
    if found is None:
        return None
    h, shadow, free, skip, by_then = found
    if h < 0:  # every job started, or none can ever be placed
        return decisions, None, None
    if now >= shadow:
        return None  # the head's time has come: the general pass makes room for it
    head = queue[h]
    ps_wake = inf
    if free > 0:
        # the jobs behind the head that fit in what is free now (free only shrinks in this loop); with the
        # head kept from the previous pass, those ahead of it in the queue too
        if skip >= 0:
            tried = [w for k, w in enumerate(queue) if k > h and k != skip and w.ncpus <= free]
        elif by_then is not None:
            tried = [w for k, w in enumerate(queue) if k != h and w.ncpus <= free]
        else:
            tried = [w for w in islice(queue, h + 1, None) if w.ncpus <= free]
        if tried:
            if params.backfill_order is _SHORTEST:
                tried.sort(key=_estimate)  # (stable: equal estimates stay in queue order)
            # the cores left beside the head when its reservation begins
            left = (free + sum([x for e, x in ends if e <= shadow]) if by_then is None else by_then) - head.ncpus
            predict = None
            for w in tried:
                n = w.ncpus
                if n > free:
                    continue
                if not plain and (w.resources or w.bind is not None or w.flex or w.devices or w.hard is not None):
                    return None
                est = w.estimate
                end = now + est
                fits = n <= left or end <= shadow or est <= 0
                planned: float | None = None
                if fits and (not w.preemptable or end <= shadow):
                    pass
                elif w.preemptable:
                    if predict is None:
                        predict = make_predictor(params, history, ratios)
                    planned = predict(w)
                    if planned is not None and now + planned <= shadow:  # (then it stays free for as long)
                        end = now + planned
                    elif fits:
                        planned = None
                    else:
                        continue
                else:
                    continue
                free -= n
                if end > shadow:
                    left -= n
                decisions.append((w.id, True, planned))
                if planned is not None:
                    if now < end < ps_wake:
                        ps_wake = end
                    reclaimable = True
                elif w.preemptable:
                    reclaimable = True
                if free <= 0:
                    break
    if now < shadow < wake and (reclaimable or relied):
        wake = shadow
    if ps_wake < wake:
        wake = ps_wake
    # (the previous pass's reservation itself where it is unchanged: a record is never changed)
    if memo is None or memo.job != head.id or memo.time != shadow:
        memo = HeadReservation(head.id, shadow)
    return decisions, memo, wake if wake < inf else None


def _meetable(n: int, t: float, free: int, ends: list[tuple[float, int]], meet: list[tuple[float, int]]) -> bool:
    """Whether ``n`` cores can be had from ``t`` (now or later) on, preempting every checkpointable backfilled
    job (``meet``)."""
    return free + sum([x for e, x in ends if e <= t]) + sum([x for e, x in meet if e > t]) >= n


def _ckpt_head(
    queue: Sequence[Waiting],
    ncores: int,
    memo: HeadReservation | None,
    now: float,
    free: int,
    ends: list[tuple[float, int]],
    meet: list[tuple[float, int]] | None,
    decisions: list[Started],
    plain: bool,
) -> tuple[int, float, int, int, int | None] | None:
    """:func:`ckpt_plain`'s jobs started in queue order up to the head (into ``decisions``, their ends into
    ``ends``): the head's place in ``queue`` (-1: none), its reservation time, the cores left free now, the
    place of the kept head started now (-1: none) and, where the head is the kept one, found first (then the
    jobs ahead of it are tried behind it), the cores free by its reservation time (counted from ``ends``; the
    time is now if that is past), else None; None where a job looked at asks for more than cores."""
    skip = -1
    if memo is not None:  # the previous pass's head stays the head while its reservation can be met
        assert meet is not None
        for i, w in enumerate(queue):
            if w.id != memo.job:
                continue
            if not plain and (w.resources or w.bind is not None or w.flex or w.devices or w.hard is not None):
                return None
            n = w.ncpus
            if n > ncores:
                break
            if n <= free:
                free -= n
                ends.append((now + w.estimate, n))
                decisions.append((w.id, False, None))
                skip = i
                break
            t, by_then = first_free(n, now, free, ends)  # (and the cores free by t, from now on)
            at = t if t > now else now  # (_meetable, its sum over ends kept for the jobs tried behind the head)
            if memo.time < t:
                t = memo.time
                at = t if t > now else now
                by_then = free + sum([x for e, x in ends if e <= at])
            if by_then + sum([x for e, x in meet if e > at]) >= n:
                return i, t, free, -1, by_then
            break
    for i, w in enumerate(queue):
        if i == skip:
            continue
        if not plain:
            if w.bind is not None:
                continue
            if w.resources or w.flex or w.devices or w.hard is not None:
                return None
        n = w.ncpus
        if n > ncores:
            continue  # can never start: never blocks the queue
        if n <= free:
            free -= n
            ends.append((now + w.estimate, n))
            decisions.append((w.id, False, None))
            continue
        shadow = first_free(n, now, free, ends)[0]
        if shadow == inf:
            continue  # can never be placed: never blocks the queue
        if memo is not None and w.id == memo.job:
            assert meet is not None
            if _meetable(n, memo.time if memo.time > now else now, free, ends, meet):
                shadow = min(shadow, memo.time)  # head again: its reservation never moves later
        return i, shadow, free, skip, None
    return -1, inf, free, skip, None
