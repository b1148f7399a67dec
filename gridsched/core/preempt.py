"""Which backfilled jobs to preempt for the head job, on the machine map (checkpoint-backfill).

By count, the victims are the checkpointable backfilled jobs in preemption
order (most cores first; leaves first in job trees, :func:`tree.preempt_order`)
until enough cores are free or coming free.  On a machine map that is not
always enough: the head may need its cores on one board, or whole physical
cores, and the cores freed by count may lie elsewhere.  :func:`victims` keeps
the count choice whenever it gives the head a placement that meets its
requirement; otherwise it looks for the smallest set of candidates whose cores,
with those free or coming free, do (among sets of one size the first in
preemption order: most cores first stays the tie-break).  If no set works,
nothing is preempted.

A head asking for devices (GPUs) needs more than slots by count: distinct
devices (two slots of one shared GPU are not two GPUs), of its type and
model, and under ``--gpu-bind strict`` (or, when they fit there, ``closest``)
its cores on their boards.  For such a head :func:`device_victims` asks
:func:`gridsched.core.devices.choose` -- the very function a start uses --
whether the head can be placed on what the candidates leave: the devices'
slots no longer held by them (nor by stopping jobs) and the cores free or
coming free.  The count choice is kept when it does; otherwise the smallest
set that does, as above.  A candidate that keeps its devices when preempted
(suspended, ``keeps_devices``) frees only its cores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations

from gridsched.core import devices as dev
from gridsched.core.placement import assign
from gridsched.core.tree import preempt_order
from gridsched.core.types import Running, Snapshot, Waiting

MAX_SEARCH = 8  # candidates searched set by set; beyond that only prefixes of the preemption order


def by_count(snap: Snapshot, cands: Sequence[Running], short: int) -> list[Running] | None:
    """Candidates in preemption order until ``short`` cores are covered; None if all of them would not do."""
    if short <= 0:
        return []
    if sum(r.ncpus for r in cands) < short:
        return None
    out = []
    for r in preempt_order(snap, cands):
        out.append(r)
        short -= r.ncpus
        if short <= 0:
            break
    return out


def victims(
    snap: Snapshot, cands: Sequence[Running], head: Waiting, coming: frozenset[int], short: int
) -> list[Running] | None:
    """The jobs to preempt so that ``head`` can be placed on ``coming`` (free or coming free) plus their cores.

    ``short`` is the cores missing by count.  Without a machine map this is
    :func:`by_count`.  [] when nothing needs preempting; None when no set of
    candidates would do.
    """
    machine = snap.machine
    counted = by_count(snap, cands, short)
    if machine is None or snap.free is None:
        return counted
    if counted is not None and _places(snap, head, coming, counted):
        return counted
    return search(preempt_order(snap, cands), lambda chosen: _places(snap, head, coming, chosen))


def search(order: Sequence[Running], ok: Callable[[Sequence[Running]], bool]) -> list[Running] | None:
    """The smallest set of ``order`` (already in preemption order) that is ``ok``, the first in that order
    among sets of one size; beyond :data:`MAX_SEARCH` candidates only prefixes of the order.  None: none is."""
    if len(order) <= MAX_SEARCH:
        for k in range(1, len(order) + 1):
            for combo in combinations(order, k):
                if ok(combo):
                    return list(combo)
        return None
    for k in range(1, len(order) + 1):
        if ok(order[:k]):
            return list(order[:k])
    return None


def device_victims(
    snap: Snapshot,
    order: Sequence[Running],
    head: Waiting,
    counted: Sequence[Running] | None,
    covers: Callable[[Sequence[Running]], bool],
    busy: Mapping[tuple[str, int], int],
    coming: frozenset[int] | None,
) -> list[Running] | None:
    """The jobs to preempt so that ``head``, which asks for devices, can be placed (see the module doc).

    ``order``: the candidates in preemption order; ``counted``: the count
    choice (None if there is none); ``covers``: whether a set frees enough of
    every resource by count; ``busy``: the slots in use per device by the
    jobs that stay (stopping jobs left out); ``coming``: the cores free or
    coming free (None without placement: cores are then only counted).
    """

    def ok(chosen: Sequence[Running]) -> bool:
        return covers(chosen) and places_devices(snap, head, busy, coming, chosen)

    if counted is not None and ok(counted):
        return list(counted)
    return search(order, ok)


def places_devices(
    snap: Snapshot,
    head: Waiting,
    busy: Mapping[tuple[str, int], int],
    coming: frozenset[int] | None,
    chosen: Sequence[Running],
) -> bool:
    """Whether :func:`gridsched.core.devices.choose` places ``head`` once ``chosen`` are gone."""
    used = dict(busy)
    gone = [(r.devices, r.whole_devices) for r in chosen if not r.keeps_devices]  # a suspended job keeps its own
    kept = snap.kept.get(head.id) if snap.kept else None
    if kept is not None:  # a suspended head: its own devices, and only those
        gone.append(kept)
    if gone:
        for k, n in dev.used_slots(gone, snap.devices).items():
            used[k] = used.get(k, 0) - n
    cores = coming.union(*(r.cores for r in chosen)) if coming is not None and chosen else coming
    machine = snap.machine if cores is not None else None
    only = kept[0] if kept is not None else ()
    return dev.choose(head.devices, snap.devices, used, machine, cores, head.ncpus, head.place, only) is not None


def _places(snap: Snapshot, head: Waiting, coming: frozenset[int], chosen: Sequence[Running]) -> bool:
    cores = coming.union(*(r.cores for r in chosen)) if chosen else coming
    return len(cores) >= head.ncpus and assign(snap.machine, cores, head.ncpus, head.place) is not None
