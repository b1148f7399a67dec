"""Reservations in a pass: due fixed reservations activated (or held), and jobs bound to an active
reservation started inside it (see "Reservations" in :mod:`gridsched.core.policy`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from math import inf

from gridsched.core import devices as dev
from gridsched.core.placement import claimed, place_inside
from gridsched.core.policy.room import Pass
from gridsched.core.types import Activate, Resv, Start, Waiting


def fixed_reservations(ps: Pass) -> None:
    """Due fixed reservations are activated (or held, or make room); future ones are held."""
    if not ps.snap.reservations:
        return
    now = ps.now
    waiting = sorted(
        (r for r in ps.snap.reservations if not r.active and r.start is not None), key=lambda r: (r.start, r.id)
    )
    future = [r.start for r in waiting if r.start is not None and r.start > now]
    if future:
        ps.wake = min(ps.wake, future[0])
        if ps.snap.params.preempt_for_fixed:
            ps.loose = [p.copy() for p in ps.profs]
    for r in waiting:
        assert r.start is not None
        end = r.start + r.duration
        if end <= now:
            continue  # over before it could begin: the driver ends it
        v = ps.vec(r)
        if not ps.possible(v):
            continue
        if r.start > now:
            ps.hold(r.start, r.duration, v, fixed=True)
            continue
        left = end - now
        job = _as_job(r)
        if ps.fits_now(v, left) and ps.placeable(job, v):
            ps.hold(now, left, v)
            cores = ps.take(v, job)
            ps.decisions.append(Activate(r.id, cores, end))
            ps.activated[r.id] = (cores, end)
            continue
        if ps.snap.params.preempt_for_fixed:
            have = ps.coming()
            short = [v[d] - have[d] for d in range(ps.dims)]
            cands = [x for x in ps.general if x.preemptable and not x.stopping and x.id not in ps.preempted]
            placed = r.place is not None and ps.machine is not None
            ps.preempt(cands, short, job if placed else None)
        t = ps.earliest(v, 0.0)
        if t < end:
            ps.hold(t, end - t, v)


def start_bound(ps: Pass, pending: tuple[Waiting, ...]) -> None:
    """Start bound jobs inside their active reservations (see "Reservations" in :mod:`gridsched.core.policy`)."""
    if not ps.active and not ps.activated:
        return
    now = ps.now
    placed = ps.snap.free is not None
    # per reservation: what it has left, its free cores, the cores it holds beyond them
    # (free too: SMT siblings of a --threads-per-core reservation), when it ends its jobs
    inside: dict[int, tuple[list[int], frozenset[int] | None, frozenset[int], float]] = {}
    resvs = {r.id: r for r in ps.snap.reservations}
    for rid, rv in ps.active.items():
        room = list(ps.vec(rv))
        cores = frozenset(rv.cores) if placed else None
        extra = _resv_extra(ps, rv, rv.cores) if placed else frozenset()
        for b in ps.bound:
            if b.bind == rid:
                bv = ps.vec(b)
                for d in range(ps.dims):
                    room[d] -= bv[d]
                if cores is not None:
                    busy = b.held.union(b.cores)
                    cores, extra = cores - busy, extra - busy
        inside[rid] = (room, cores, extra, rv.end if rv.end is not None else inf)
    for rid, (cores_t, end) in ps.activated.items():
        new = resvs.get(rid)
        if new is not None:
            extra = _resv_extra(ps, new, cores_t) if placed else frozenset()
            inside[rid] = (list(ps.vec(new)), frozenset(cores_t) if placed else None, extra, end)
    kill = {rid: r.kill for rid, r in resvs.items()}
    for w in pending:
        if w.bind is None or w.bind not in inside:
            continue
        left, cores, extra, end = inside[w.bind]
        v = ps.vec(w)
        if v[0] < 0 or (kill[w.bind] and now + w.estimate > end) or any(v[d] > left[d] for d in range(ps.dims)):
            continue
        picked: tuple[int, ...] = ()
        keys: tuple[tuple[str, int], ...] = ()
        if w.devices:  # devices free now (the reservation's count keeps others off them)
            chosen = ps.choose_devices(replace(w, devices=tuple(replace(a, bind="none") for a in w.devices)))
            if chosen is None:
                continue
            keys = chosen[0]
        if cores is not None:  # placed inside the reservation's cores, with the job's own requirement
            got = place_inside(ps.machine, cores, extra, v[0], w.place)
            if got is None:
                continue
            picked, held = got
            inside[w.bind] = (left, cores - held, extra - held, end)
        if keys:
            assert ps.dev_used is not None
            whole = any(a.exclusive for a in w.devices)
            for k, n in dev.used_slots(((keys, whole),), ps.snap.devices).items():
                ps.dev_used[k] = ps.dev_used.get(k, 0) + n
        for d in range(ps.dims):
            left[d] -= v[d]
        ps.decisions.append(Start(w.id, picked, devices=keys))


def _resv_extra(ps: Pass, rv: Resv, cores: Iterable[int]) -> frozenset[int]:
    """The cores reservation ``rv`` on ``cores`` holds without offering them to its jobs."""
    if ps.machine is None or rv.place is None:
        return frozenset()
    return claimed(ps.machine, cores, rv.place).difference(cores)


def _as_job(r: Resv) -> Waiting:
    """Reservation ``r`` as the pending entry that is placed for it (its flexible entry's shape)."""
    place = replace(r.place, ncpus=r.ncpus) if r.place is not None else None
    return Waiting(r.id, r.ncpus, r.duration, resources=r.resources, flex=True, place=place)
