"""EASY and checkpoint-based backfilling: the head job's reservation, the jobs backfilled around it,
and preemption for it when its time has come (see "easy" and "checkpoint-backfill" in
:mod:`gridsched.core.policy`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress
from math import inf
from operator import attrgetter

from gridsched.core.end_time import NAIVE as _NAIVE
from gridsched.core.end_time import PLANNED as _PLANNED
from gridsched.core.end_time import USER as _USER
from gridsched.core.end_time import counted_end
from gridsched.core.memory import MEMORY
from gridsched.core.policy.plan import loose_fit, make_plan
from gridsched.core.policy.reservations import fixed_reservations, start_bound
from gridsched.core.policy.room import Pass, overrun
from gridsched.core.policy.state import Vec
from gridsched.core.policy.windows import split_windows
from gridsched.core.predict import READS_USER, PredictFn, make_predictor
from gridsched.core.types import BackfillOrder, HeadReservation, Plan, Snapshot, Waiting

_NCPUS = attrgetter("ncpus")
_ESTIMATE = attrgetter("estimate")
_SHORTEST = BackfillOrder.SHORTEST
_NO_GUARDS = (False, False, False)


def backfill(snap: Snapshot, ckpt: bool, naive: bool) -> tuple[Plan, Pass]:
    """The pass of easy (``ckpt`` False) and checkpoint-backfill (``naive``: ``Params.cascade``)."""
    now = snap.now
    # jobs running on an estimate a backfill relied on (see "Estimates" in gridsched.core.policy); under easy, such a
    # job that overran it counts as ending now: its cores are the head's once the head's time has come
    relied = False
    for r in snap.running:  # (a loop: any() of a generator costs twice as much, on every pass)
        if r.planned is not None:
            relied = True
            break
    ps = Pass(snap, (_NAIVE if naive else _PLANNED) if ckpt else (_NAIVE if relied else _USER))
    if snap.reservations:
        fixed_reservations(ps)
    found = _head(ps, snap.pending, snap.head if ckpt and not naive else None)
    if found is None:
        if ps.active or ps.activated:
            start_bound(ps, snap.pending)
        return make_plan(ps, None), ps
    head, shadow, rest = found
    hv = ps.vec(head)
    early = ckpt and not naive and snap.params.early_room
    if (ckpt or relied) and now >= shadow:
        make_room(ps, head, hv, ckpt)
    elif early and now < shadow < inf and not _room_at(ps, hv, shadow, head.estimate):
        if make_room(ps, head, hv, ckpt, by=shadow):
            shadow = now  # room is being made: the head's time has come (nothing else takes what it waits for)
    if shadow < inf:
        ps.hold(max(shadow, now), head.estimate, hv)
    predict = make_predictor(snap.params, snap.history, snap.ratios) if ckpt else None
    reclaimable = relied or (ckpt and any(r.backfilled and r.preemptable and not r.stopping for r in ps.general))
    if _behind(ps, head, hv, shadow, rest, predict):
        reclaimable = True
    wake = inf
    if ckpt or relied or reclaimable:
        if ckpt or relied:  # (else no running job has a planned end)
            for r in ps.general:
                if r.planned is not None and not r.stopping:
                    pe = r.start + r.planned
                    if now < pe < wake:
                        wake = pe
        if now < shadow < wake and reclaimable:
            wake = shadow
    if ps.active or ps.activated:
        start_bound(ps, snap.pending)
    if snap.splitting:
        split_windows(ps, snap, rest)
    return make_plan(ps, HeadReservation(head.id, shadow), wake), ps


def _head(
    ps: Pass, queue: tuple[Waiting, ...], memo: HeadReservation | None
) -> tuple[Waiting, float, list[Waiting]] | None:
    """Start the jobs that fit in queue order up to the head; the head, its reservation (shadow) time and
    the jobs behind it, or None when every job started or none can ever be placed.

    ``memo`` (checkpoint-backfill): the previous pass's head, which stays the head while it waits and its
    reservation can still be met, at the earlier of the remembered time and a fresh one."""
    now = ps.now
    # entries bound to a reservation are skipped as they come (see start_bound)
    h = -1
    shadow = inf
    skip = -1
    kept = memo
    if memo is not None and _outranked(ps.snap.priorities, queue, memo.job):
        memo = None  # a job of higher priority takes the head (below); the old head keeps its time if again head
    if memo is not None:
        for i, w in enumerate(queue):
            if w.id != memo.job:
                continue
            v = ps.vec(w)
            if not ps.possible(v):
                break
            if ps.fits_now(v, w.estimate) and ps.placeable(w, v):
                ps.start(w, v, w.estimate, False, None)
                skip = i
            else:
                t = min(memo.time, ps.placed_earliest(w, v, w.estimate))
                if _meetable(ps, v, w.estimate, max(t, now)):
                    h, shadow = i, t
            break
    if h < 0:
        pad = (0,) * (ps.dims - 1)
        for i, w in enumerate(queue):
            if i == skip or w.bind is not None:
                continue
            if w.resources:
                v = ps.vec(w)
                if not ps.possible(v):
                    continue
                fits = ps.fits_now(v, w.estimate)
            else:  # cores only: the same tests, shorter
                n = w.ncpus
                if n > ps.cap[0]:
                    continue
                v = (n, *pad) if pad else (n,)
                fits = n <= ps.free_now[0] and (ps.rising or ps.fits_now(v, w.estimate))
            if (fits or (ps.loose is not None and loose_fit(ps, w, v))) and (
                (ps.machine is None and not w.resources) or ps.placeable(w, v)
            ):
                ps.start(w, v, w.estimate, False, None)
                continue
            shadow = ps.placed_earliest(w, v, w.estimate)
            if shadow == inf:
                continue  # can never be placed: never blocks the queue
            if kept is not None and w.id == kept.job and _meetable(ps, v, w.estimate, max(kept.time, now)):
                shadow = min(shadow, kept.time)  # head again: its reservation never moves later
            h = i
            break
        if h < 0:
            return None
        rest = list(queue[h + 1 :])
        if skip > h:
            del rest[skip - h - 1]
    else:
        rest = [w for k, w in enumerate(queue) if k != h and k != skip]
    return queue[h], shadow, rest


def _outranked(priorities: Mapping[int, float], queue: tuple[Waiting, ...], head: int) -> bool:
    """Whether a job of higher priority than the remembered ``head`` waits ahead of it in the queue and has
    never run: one submitted or raised since, or one that could not be scheduled when ``head`` became the head.
    A job that has run (preempted and requeued, perhaps for this very head) never takes the head back: no
    cascade."""
    if not priorities:
        return False
    mine = priorities.get(head)
    if mine is None:
        return False
    for w in queue:
        if w.id == head:
            return False
        if w.bind is None and w.elapsed <= 0 and priorities.get(w.id, mine) > mine:
            return True
    return False


def _behind(ps: Pass, head: Waiting, hv: Vec, shadow: float, rest: list[Waiting], predict: PredictFn | None) -> bool:
    """Backfill the jobs behind ``head`` (reserved at ``shadow``): each that fits now and ends by the shadow
    time (on its estimate or, checkpointable, on ``predict``'s), or leaves the head what it needs then.
    Whether a job started that may have to make room for the head (checkpointable, or on its estimate)."""
    snap, now = ps.snap, ps.now
    reclaimable = False
    # Once the reservation time has come, only what is free now or coming free
    # (stopping, preempted) is left beyond the head, never jobs merely counted as ended.
    extra = [c - x for c, x in zip(ps.coming(), hv)] if shadow <= now else None
    free_now = ps.free_now
    dims = ps.dims
    # (no guard holds off a map for a head asking for no devices)
    guard, dguard, fguard = _guards(ps, head, shadow) if ps.machine is not None or head.devices else _NO_GUARDS
    # on a map, requests (cores, requirement) that cannot be placed now, and those that would
    # leave the head no placement (asked again after each start)
    on_map = ps.machine is not None
    no_devices: set[tuple[int, object, bool, object, object]] = set()
    unplaceable: set[tuple[int, object, bool, object, object]] = set()
    no_room: set[tuple[int, object, bool, object, object]] = set()
    lazy = ps.profs_built is None  # cores only: the profile is not built, its one later hold is the head's
    h1 = ps.later_hold
    cores = None if lazy else ps.profs[0]
    limits: dict[int, float] = cores.limits() if cores is not None else {}
    pad = (0,) * (dims - 1)
    free0 = free_now[0]
    binding = bool(snap.reservations)
    # floating resources asked for (as written) that cannot be had in the rest of the loop:
    # what is free now and extra only shrink while jobs start (unless a count is negative)
    blocked: set[tuple[tuple[str, int], ...]] = set()
    # with the profiles built (floating resources, reservations): what a job turned down by the
    # tests below (before placement) asked for, until a job starts.  Those tests read its cores,
    # estimate, resources, checkpointability, flex, and for the prediction its estimate (scaled)
    # or also its user and elapsed time (user-history, user-ratio).
    refused: set[tuple[object, ...]] | None = None if lazy else set()
    by_user = snap.params.predictor in READS_USER
    ask: tuple[object, ...] = ()
    # cores only, nothing to shorten, nothing loose, the head's reservation the one later hold:
    # a job turned down by the tests below is one of more cores than the head leaves (``left_at_hold``)
    # that would still run when the head's reservation begins; such a job is passed over at once
    quick = lazy and h1 is not None and predict is None and extra is None and ps.loose is None
    begins = h1[0] if quick and h1 is not None else -inf
    room = ps.left_at_hold if quick else inf
    for w in _tried(rest, free0, snap.params.backfill_order):
        n = w.ncpus
        if n > free0 or (binding and w.bind is not None):  # cheap tests first: most of a long queue stops here
            continue
        est = w.estimate
        if n > room and now + est > begins and not w.resources:
            continue
        if refused is not None:
            ask = (
                (n, est, w.resources, w.preemptable, w.flex, w.user, w.elapsed)
                if by_user
                else (n, est, w.resources, w.preemptable, w.flex)
            )
            if ask in refused:
                continue
        if w.resources:
            res = w.resources
            if res in blocked:
                continue
            v = ps.vec(w)
            if v[0] < 0 or any(v[d] > free_now[d] or (extra is not None and v[d] > extra[d]) for d in range(1, dims)):
                blocked.add(res)  # an unknown resource, or more of one than is left: so for the rest of the loop
                continue
            if not ps.possible(v) or (extra is not None and n > extra[0]):
                continue
            fits = ps.fits_now(v, est)
        else:  # cores only: the same tests on the cores alone, without a call
            v = (n, *pad) if pad else (n,)
            if extra is not None and n > extra[0]:
                continue
            if lazy and ps.profs_built is None:  # ps.stays_free(n, est), inlined
                fits = h1 is None or n <= ps.left_at_hold or (now + est <= h1[0] if est > 0 else h1[0] > now)
            else:
                if cores is None:  # built since (nothing in this loop does so today)
                    lazy, cores = False, ps.profs[0]
                    limits = cores.limits()
                until = limits.get(n)
                if until is None:
                    until = cores.until(n)
                fits = now + est <= until if est > 0 else until > now
        shorten = predict is not None and w.preemptable and not w.flex and not _keeps_what_head_needs(w, head)
        planned: float | None = None
        if fits and (not shorten or now + est <= shadow):
            pass
        elif (
            shorten
            and predict is not None
            and (planned := predict(w)) is not None
            and now + planned <= shadow
            and ps.fits_now(v, planned)
        ):
            pass
        elif fits or (ps.loose is not None and loose_fit(ps, w, v)):
            planned = None
        else:
            if refused is not None:
                refused.add(ask)
            continue
        if planned is None and w.hard is not None and not ps.fits_now(v, w.hard):
            # it may start on its own estimate only: the estimate holds it (gridsched.core.policy, "Estimates")
            planned = est
        if w.resources and w.devices and not on_map and not ps.placeable(w, v):
            continue  # count-only: no distinct devices free now
        if on_map:  # the costliest tests last, each asked once per request while nothing starts
            key = (n, w.place, w.flex, w.devices, w.resources)  # (its memory: placed on the boards' memory)
            late = guard and now + (est if planned is None else planned) > shadow
            if key in unplaceable or (late and key in no_room):
                continue
            if not ps.placeable(w, v):
                unplaceable.add(key)  # the free cores only shrink in this loop
                continue
            if late and not ps.leaves_room(w, head, shadow):
                no_room.add(key)
                continue  # it would sit on cores the head is placed on at its reservation
            no_room.clear()
        if dguard and not ps.leaves_devices(w, head):
            continue
        if fguard and now + (est if planned is None else planned) > shadow:
            dkey = (n, w.place, w.flex, w.devices, snap.kept.get(w.id) if snap.kept else None)
            if dkey in no_devices:
                continue
            if not ps.leaves_devices_at(w, head, shadow):
                no_devices.add(dkey)  # what is free only shrinks until a job starts
                continue
        ps.start(w, v, est if planned is None else planned, True, planned)
        free0 = free_now[0]
        if not lazy:
            cores = ps.profs[0]
            limits = cores.limits()
        if quick:
            room = ps.left_at_hold if ps.profs_built is None else inf
        if extra is not None:
            for d in range(ps.dims):
                extra[d] -= v[d]
        if blocked and min(v) < 0:
            blocked.clear()
        if refused:
            refused.clear()
        if no_devices:
            no_devices.clear()
        if (w.preemptable and not w.flex) or planned is not None:
            reclaimable = True
        if free0 <= 0:
            break
    return reclaimable


def _guards(ps: Pass, head: Waiting, shadow: float) -> tuple[bool, bool, bool]:
    """Which placement guards hold for the jobs backfilled past ``head``'s reservation time ``shadow``:
    the cores (on a map), the devices once the time has come, the devices before it has come."""
    now = ps.now
    # on a map, a job running past the shadow time must leave the head a placement then
    # (once it has come: on the cores free now or coming free, as for extra)
    guard = ps.machine is not None and (
        ps.placeable_at(head, shadow) if now < shadow < inf else shadow <= now and ps.placeable_coming(head)
    )
    # the same for a head asking for devices, once its time has come: distinct devices, cores near them
    dguard = bool(head.devices) and not head.flex and shadow <= now and not ps.head_devices_blocked(head)
    # and before it has come: a job that would still run at the shadow time must leave the head devices
    # (and, on a map, cores near them) that devices.choose can give it then, on what is free then
    fguard = bool(head.devices) and not head.flex and now < shadow < inf and ps.head_devices_placeable_at(head, shadow)
    return guard, dguard, fguard


def _tried(rest: list[Waiting], free0: int, order: BackfillOrder) -> Iterable[Waiting]:
    """The jobs behind the head that are looked at, in the order they are tried."""
    # only the jobs that fit in what is free now are looked at (free only shrinks in this loop):
    # the others are passed over in C, which on a long queue is most of the pass
    tried: Iterable[Waiting] = compress(rest, map(free0.__ge__, map(_NCPUS, rest))) if free0 > 0 else ()
    if order is _SHORTEST:
        tried = sorted(tried, key=_ESTIMATE)  # stable: equal estimates stay in queue order
    return tried


def make_room(ps: Pass, head: Waiting, hv: Vec, ckpt: bool, by: float | None = None) -> bool:
    """The head's reservation time has come and it does not fit: preempt checkpointable backfilled jobs
    (checkpoint-backfill) and stop those that overran the estimate they were backfilled on (every backfilling
    policy), the fewest that leave it room (:meth:`Pass.preempt`).

    ``by``: the reservation time, not come yet, at which the head will not fit without preempting (the
    caller checks that).  The head starts as early as it can: if what is free now and the checkpointable
    backfilled jobs that would have to make room at ``by`` anyway (they count as running beyond it) are
    enough, those are preempted now.  Whether any job was told to stop."""
    have = ps.coming()
    short = [hv[d] - have[d] for d in range(ps.dims)]
    if (
        any(s > 0 for s in short)
        or not ps.placeable_coming(head)
        or (head.devices and not head.flex and ps.head_devices_blocked(head))
    ):
        now = ps.now
        cands = [
            r
            for r in ps.general
            if r.backfilled
            and not r.stopping
            and r.id not in ps.preempted
            and ((ckpt and r.preemptable) or overrun(r, now))
            and (by is None or (r.preemptable and counted_end(r, now, ps.mode) > by))
        ]
        if cands:
            return ps.preempt(cands, short, head)
    return False


def _room_at(ps: Pass, v: Vec, t: float, duration: float) -> bool:
    """Whether ``v`` is free from ``t`` on for ``duration`` without preempting anything (by count)."""
    if ps.profs_built is None and ps.later_hold is None:  # cores only, rising: least free at t
        return ps.free_at(t) >= v[0]
    return all(not v[d] or ps.profs[d].min_free(t, t + duration) >= v[d] for d in range(ps.dims))


def _meetable(ps: Pass, v: Vec, duration: float, t: float) -> bool:
    """Whether ``v`` can be had from ``t`` on, preempting every checkpointable backfilled job."""
    extra = [0] * ps.dims
    for r in ps.general:
        if (
            r.backfilled
            and (r.preemptable or r.planned is not None)
            and not r.stopping
            and counted_end(r, ps.now, ps.mode) > t
        ):
            ps.accumulate(extra, ps.freed(r))
    if ps.profs_built is None and ps.later_hold is None:  # cores only, rising: least free at t
        return ps.free_at(t) + extra[0] >= v[0]
    for d in range(ps.dims):
        if v[d] and ps.profs[d].min_free(t, t + duration) + extra[d] < v[d]:
            return False
    return True


def _keeps_what_head_needs(w: Waiting, head: Waiting) -> bool:
    """Whether ``w``, preempted, keeps what ``head`` waits for (its devices, its memory: suspended): it is not
    shortened for such a head, as preempting it would not give the head what it needs."""
    return (w.keeps_devices and bool(head.devices)) or (
        w.keeps_memory and any(name == MEMORY for name, _ in head.resources)
    )
