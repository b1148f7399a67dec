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
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from .placement import assign
from .tree import preempt_order
from .types import Running, Snapshot, Waiting

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
    order = preempt_order(snap, cands)
    if len(order) <= MAX_SEARCH:
        for k in range(1, len(order) + 1):
            for combo in combinations(order, k):
                if _places(snap, head, coming, combo):
                    return list(combo)
        return None
    for k in range(1, len(order) + 1):
        if _places(snap, head, coming, order[:k]):
            return order[:k]
    return None


def _places(snap: Snapshot, head: Waiting, coming: frozenset[int], chosen: Sequence[Running]) -> bool:
    cores = coming.union(*(r.cores for r in chosen)) if chosen else coming
    return len(cores) >= head.ncpus and assign(snap.machine, cores, head.ncpus, head.place) is not None
