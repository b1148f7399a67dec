"""Job priorities: Slurm's multifactor priority, computed from the snapshot alone.

A pending job's priority is, as Slurm's ``priority/multifactor`` computes it::

    weight_age * age + weight_job_size * size + weight_fairshare * fairshare - nice

with every factor between 0 and 1:

* ``age``: the time since the job was submitted (``Waiting.submitted``), up
  to ``max_age``, over ``max_age`` (``PriorityMaxAge``);
* ``size``: the job's cores over the machine's; with ``favor_small``
  (``PriorityFavorSmall``) one minus that, plus one core's share, so that a
  one-core job gets 1;
* ``fairshare``: ``2 ** (-U / S)``, Slurm's classic formula: ``U`` is the
  user's share of all users' decayed usage (core-seconds, halved every
  ``half_life``; the driver keeps it, :func:`decay` ages it), ``S`` the
  user's share of the machine -- an equal share for every user known to the
  snapshot (in the usage or with a pending job).  A user with no usage gets 1.

``nice`` (``gsub --nice``, -10000..10000 as Slurm's) is subtracted.  An
admin priority (``gsub --priority N``, ``Waiting.admin``) is the job's
priority outright, as ``scontrol update job priority=N`` sets it: the
factors and nice do not count for such a job.

The queue is ordered by decreasing priority; equal priorities keep the
driver's order (submission order).  With every weight 0 and no nice or
admin priority, every job has priority 0 and the queue is left as the driver
gave it (:func:`ordered` returns it unchanged, without computing anything).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gridsched.core.params import ADMIN_MAX, NICE_MAX, NICE_MIN
from gridsched.core.record import record
from gridsched.core.types import Snapshot, Waiting


@record
class Factors:
    """One pending job's priority and its factors (each 0..1 before its weight), as ``sprio`` shows them."""

    job: int
    priority: float
    age: float
    size: float
    fairshare: float
    nice: int
    admin: int | None


def decay(usage: float, elapsed: float, half_life: float) -> float:
    """``usage`` (core-seconds) aged by ``elapsed`` seconds: halved every ``half_life`` (0: no decay)."""
    if half_life <= 0 or elapsed <= 0:
        return usage
    return usage * float(0.5 ** (elapsed / half_life))


def fairshare(usage: Mapping[str, float], users: set[str]) -> dict[str, float]:
    """Slurm's classic fair-share factor ``2 ** (-U / S)`` of each of ``users`` (equal shares)."""
    known = set(users) | {u for u, v in usage.items() if v > 0}
    total = sum(max(0.0, v) for v in usage.values())
    if not known:
        return {}
    share = 1.0 / len(known)
    if total <= 0:
        return dict.fromkeys(known, 1.0)
    return {u: 2.0 ** (-(max(0.0, usage.get(u, 0.0)) / total) / share) for u in known}


def factors(snap: Snapshot) -> list[Factors]:
    """The priority of every pending job of ``snap`` with its factors, in the snapshot's order."""
    pp = snap.params.priority
    fs = fairshare(snap.usage, {w.user for w in snap.pending}) if pp.weight_fairshare else {}
    ncores = max(1, snap.ncores)
    out = []
    for w in snap.pending:
        age = _age(w, snap.now, pp.max_age)
        size = _size(w, ncores, pp.favor_small)
        f = fs.get(w.user, 1.0)
        if w.admin is not None:
            prio = float(w.admin)
        else:
            prio = pp.weight_age * age + pp.weight_job_size * size + pp.weight_fairshare * f - w.nice
        out.append(Factors(w.id, prio, age, size, f, w.nice, w.admin))
    return out


def _age(w: Waiting, now: float, max_age: float) -> float:
    if max_age <= 0:
        return 1.0
    return min(max(0.0, now - w.submitted), max_age) / max_age


def _size(w: Waiting, ncores: int, favor_small: bool) -> float:
    n = min(max(w.ncpus, 1), ncores)
    return (ncores - n + 1) / ncores if favor_small else n / ncores


def ranked(snap: Snapshot) -> bool:
    """Whether the priorities of ``snap`` may differ (else the driver's order stands as it is)."""
    if snap.params.priority.weighted:
        return True
    return snap.ranked and any(w.nice or w.admin is not None for w in snap.pending)


def ordered(snap: Snapshot) -> tuple[Waiting, ...]:
    """The pending jobs by decreasing priority, equal ones in the driver's order (``snap.pending`` itself
    when no priority differs)."""
    return _ordered(snap)[0]


def _ordered(snap: Snapshot) -> tuple[tuple[Waiting, ...], list[float] | None]:
    if not ranked(snap):
        return snap.pending, None
    prio = [f.priority for f in factors(snap)]
    order = sorted(range(len(prio)), key=lambda i: -prio[i])
    if all(i == k for k, i in enumerate(order)):
        return snap.pending, prio
    pend = snap.pending
    return tuple(pend[i] for i in order), prio


def prioritized(snap: Snapshot) -> Snapshot:
    """``snap`` with its pending jobs in priority order and their priorities (``Snapshot.priorities``, where
    they differ); ``snap`` itself when every job has the same priority."""
    pending, prio = _ordered(snap)
    if prio is None or len(set(prio)) <= 1:
        return snap if pending is snap.pending else replace(snap, pending=pending)
    return replace(snap, pending=pending, priorities={w.id: p for w, p in zip(snap.pending, prio)})


__all__ = [
    "ADMIN_MAX",
    "NICE_MAX",
    "NICE_MIN",
    "Factors",
    "decay",
    "factors",
    "fairshare",
    "ordered",
    "prioritized",
    "ranked",
]
