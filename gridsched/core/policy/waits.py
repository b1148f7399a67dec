"""Why a pending job waits (the reasons of :func:`gridsched.core.policy.forecast_reasons`)."""

from __future__ import annotations

from math import inf

from gridsched.core import devices as dev
from gridsched.core.eligible import CPU_LIMIT
from gridsched.core.end_time import USER as _USER
from gridsched.core.memory import MEMORY
from gridsched.core.placement import assign
from gridsched.core.policy.room import Pass
from gridsched.core.types import Policy, Snapshot, Wait, Waiting, WaitKind


def eligibility_wait(w: Waiting, text: str, now: float) -> Wait:
    """The typed reason of a job :func:`gridsched.core.eligible.eligibility` keeps waiting with ``text``."""
    if text.startswith(CPU_LIMIT):
        return Wait(WaitKind.CPU_LIMIT, text)
    if w.held:
        return Wait(WaitKind.HELD, text)
    if w.begin is not None and w.begin > now:
        return Wait(WaitKind.BEGIN_TIME, text)
    if w.deps and text.startswith(_NEVER_SATISFIED):
        return Wait(WaitKind.DEPENDENCY_NEVER, text)
    if w.deps and (w.array_max is None or not text.startswith(f"array {w.array}:")):
        return Wait(WaitKind.DEPENDENCY, text)
    return Wait(WaitKind.ARRAY_LIMIT, text)


_NEVER_SATISFIED = "dependency never satisfied"  # gridsched.core.depend.status


def waiting_reasons(
    snap: Snapshot, out: dict[int, float], head: int | None, started: set[int], why: dict[int, Wait]
) -> None:
    """The reasons of the eligible pending jobs that do not start now (see :func:`forecast_reasons`)."""
    ps: Pass | None = None
    free: list[int] | None = None  # what is free now, once asked (see _short)
    backfills = snap.params.policy is not Policy.FCFS
    first = head
    for w in snap.pending:
        if w.id in why or w.id in started:
            continue
        t = out.get(w.id)
        if t is None:
            continue
        if w.bind is not None:
            active = any(r.id == w.bind and r.active for r in snap.reservations)
            if t == inf:
                why[w.id] = Wait(WaitKind.BOUND_NEVER, what="time", resv=w.bind)
                continue
            if not active:
                why[w.id] = Wait(WaitKind.RESERVATION, resv=w.bind)
                continue
            why[w.id] = Wait(WaitKind.RESOURCES, resv=w.bind)
            continue
        if t == inf:
            if ps is None:
                ps = Pass(snap, _USER)
            why[w.id] = _never(snap, ps, w)
            continue
        if snap.drained and snap.free is not None and _behind_drained(snap, w):
            why[w.id] = Wait(WaitKind.DRAINED, cores=snap.drained)
            continue
        if first is None:
            first = w.id
        is_head = w.id == first
        if not is_head and not (backfills and w.resources):
            why[w.id] = _PRIORITY
            continue
        if ps is None:
            ps = Pass(snap, _USER)
        if free is None:
            free = _free_now(snap, ps, started)
        short = _short(ps, free, w)
        if short is not None and short.kind is WaitKind.LICENSES:
            why[w.id] = short
        elif is_head:
            why[w.id] = short or _RESOURCES
        else:
            why[w.id] = _PRIORITY


_RESOURCES = Wait(WaitKind.RESOURCES)
_PRIORITY = Wait(WaitKind.PRIORITY)  # one value for the whole queue (a Wait is immutable)


def _free_now(snap: Snapshot, ps: Pass, started: set[int]) -> list[int]:
    """What is free now in each dimension of ``ps``: less what the jobs started now take."""
    free = list(ps.free_now)
    if started:
        for w in snap.pending:
            if w.id in started:
                for d, x in enumerate(ps.vec(w)):
                    free[d] -= max(x, 0)
    return free


def _short(ps: Pass, free: list[int], w: Waiting) -> Wait | None:
    """What ``w`` lacks now, by count: ``LICENSES`` when floating resources alone are short, else
    ``RESOURCES`` naming the cores (when short) or the first device type (or the memory) short; None when
    nothing is."""
    v = ps.vec(w)
    if v[0] < 0:
        return None
    short = [d for d in range(ps.dims) if v[d] > free[d]]
    if not short:
        return None
    d = short[0]
    if d == 0:
        return Wait(WaitKind.RESOURCES, what="cores", asks=v[0], has=ps.cap[0], free=max(free[0], 0))
    devs = [k for k in short if ps.names[k - 1].startswith(dev.PREFIX) or ps.names[k - 1] == MEMORY]
    if devs:
        d = devs[0]
        kind = WaitKind.RESOURCES
    else:
        kind = WaitKind.LICENSES
    return Wait(kind, what=ps.names[d - 1], asks=v[d], has=ps.total[d], free=max(free[d], 0))


def _placeable(snap: Snapshot, cores: frozenset[int], w: Waiting) -> bool:
    """Whether ``cores`` hold ``w`` (its mapping requirement on a map, its count without one)."""
    if len(cores) < w.ncpus:
        return False
    if snap.machine is None:
        return True
    return assign(snap.machine, cores, w.ncpus, w.place) is not None


def _behind_drained(snap: Snapshot, w: Waiting) -> bool:
    """Whether ``w`` would be placed now if the drained cores were in service (and is not)."""
    assert snap.free is not None
    return not _placeable(snap, snap.free, w) and _placeable(snap, snap.free | snap.drained, w)


def _never(snap: Snapshot, ps: Pass, w: Waiting) -> Wait:
    """Why ``w`` (not bound, eligible) is forecast never to start: what it misses (:class:`Wait`)."""
    v = ps.vec(w)
    if v[0] < 0:
        unknown = [n for n, k in w.resources if k > 0 and n not in ps.index]
        return Wait(WaitKind.NEVER_FITS, what="unknown", text=",".join(unknown))
    for d in range(1, ps.dims):
        if v[d] > ps.cap[d]:
            return Wait(WaitKind.NEVER_FITS, what=ps.names[d - 1], asks=v[d], has=ps.total[d])
    # the cores in reach: free now, or held by a job that ends some day
    reach = frozenset(snap.free) if snap.free is not None else None
    busy: frozenset[int] = frozenset()
    if reach is not None:
        busy = frozenset(c for r in snap.running for c in (*r.cores, *r.held))
        for r in snap.reservations:
            busy = busy.union(r.cores) if r.active else busy
        reach = reach.union(c for r in ps.general for c in r.cores)
    drained = snap.drained.difference(busy)
    if v[0] > ps.cap[0]:
        if drained and v[0] <= ps.cap[0] + len(drained):
            return Wait(WaitKind.DRAINED, never=True, cores=snap.drained)
        return Wait(WaitKind.NEVER_FITS, what="cores", asks=v[0], has=ps.cap[0])
    if reach is not None and snap.machine is not None and not _placeable(snap, reach, w):
        if drained and _placeable(snap, reach | drained, w):
            return Wait(WaitKind.DRAINED, never=True, cores=snap.drained)
        most = max((len(reach.intersection(b.cores)) for b in snap.machine.boards), default=0)
        return Wait(WaitKind.NEVER_FITS, what="placement", asks=w.ncpus, has=most)
    return Wait(WaitKind.NEVER_FITS)
