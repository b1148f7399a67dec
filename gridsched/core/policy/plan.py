"""What the policy loops share: the general queue, the fit of a job preempted at a fixed reservation,
and the :class:`~gridsched.core.types.Plan` made of a pass's decisions."""

from __future__ import annotations

from math import inf

from gridsched.core.policy.room import Pass
from gridsched.core.policy.state import Vec
from gridsched.core.split import as_chains, chain_cores, per_chain
from gridsched.core.types import Decision, HeadReservation, Kill, Plan, Preempt, Snapshot, Start, StartTasks, Waiting


def general_queue(snap: Snapshot) -> tuple[Waiting, ...]:
    """The general queue: the pending entries not bound to a reservation (all of them, without any)."""
    if not snap.reservations:
        return snap.pending
    return tuple(w for w in snap.pending if w.bind is None)


def loose_fit(ps: Pass, w: Waiting, v: Vec) -> bool:
    """A checkpointable job that fits if it is preempted at the next fixed reservation."""
    return (
        ps.loose is not None
        and w.preemptable
        and not w.flex
        and not w.keeps_devices
        and not w.keeps_memory
        and ps.fits_now(v, w.estimate, ps.loose)
    )


def make_plan(ps: Pass, head: HeadReservation | None, wake: float = inf) -> Plan:
    w = ps.wake if ps.wake < wake else wake
    decisions = ps.decisions
    if ps.snap.splitting and ps.dev_used is not None:
        decisions = _as_pieces(ps, decisions)
    if ps.preempted:  # preemptions (and kills) first
        first = (Preempt, Kill)
        decisions = [d for d in decisions if type(d) in first] + [d for d in decisions if type(d) not in first]
    return Plan(tuple(decisions), head, w if w < inf else None)


def _as_pieces(ps: Pass, decisions: list[Decision]) -> list[Decision]:
    """``decisions`` with each whole start of a splittable job whose sub-tasks ask for devices made pieces:
    the sub-tasks left dealt out to as many chains as it has slots (:func:`gridsched.core.split.as_chains`),
    each chain on its own devices (:func:`gridsched.core.split.per_chain`) and cores near them, so each
    sub-task sees only its devices.  Nothing else changes: the start took those cores and devices already."""
    split = {w.id: w for w in ps.snap.pending if w.split is not None and w.split.devices and not w.split.sizes}
    if not split:
        return decisions
    out: list[Decision] = []
    for d in decisions:
        w = split.get(d.job) if type(d) is Start else None
        if w is None or type(d) is not Start or w.split is None:
            out.append(d)
            continue
        sp = w.split
        k = w.ncpus // sp.ncpus
        chains = as_chains(sp.left, k, sp.task_time, w.estimate)
        keys = per_chain(sp.devices, d.devices, ps.snap.devices, len(chains))
        if not chains or not keys:
            out.append(d)
            continue
        spare = ps.free_set if ps.free_set is not None and w.place is None else ()
        cores = chain_cores(d.cores, sp.ncpus, keys, ps.snap.devices, ps.snap.machine, spare)[: len(chains) * sp.ncpus]
        tasks = tuple(i for c in chains for i in c)
        end = ps.now + max(map(len, chains)) * sp.task_time
        out.append(StartTasks(w.id, tasks, cores, tuple(chains), end, (), keys))
    return out
