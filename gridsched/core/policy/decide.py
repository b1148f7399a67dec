"""``schedule(snapshot) -> Plan``: priority, endings and eligibility, then the policy's loop."""

from __future__ import annotations

from dataclasses import replace

from gridsched.core import endings, priority, tree
from gridsched.core.eligible import eligibility
from gridsched.core.policy.backfill import backfill
from gridsched.core.policy.conservative import conservative
from gridsched.core.policy.fcfs import fcfs
from gridsched.core.policy.quick import easy_plain
from gridsched.core.types import Decision, Params, Plan, Policy, Snapshot


def free_count(snap: Snapshot) -> int:
    """The number of cores free now."""
    if snap.free is not None:
        return len(snap.free)
    return snap.ncores - sum(r.ncpus for r in snap.running)


def schedule(snap: Snapshot) -> Plan:
    """Decide what to start (and, under checkpoint-backfill, preempt) now.

    Only the pending jobs that may be scheduled now are looked at
    (:func:`gridsched.core.eligible.eligibility`); the plan says why the others
    wait and cancels those whose dependencies can never be met, if so set.
    """
    first: tuple[Decision, ...] = ()
    if snap.ranked or snap.params.priority.weighted:  # the queue by priority (gridsched.core.priority)
        snap = priority.prioritized(snap)
    if snap.reservations or snap.lent or snap.ended:  # endings, resumes (gridsched.core.endings)
        first, snap, stop = endings.settle(snap)
        if stop:  # the driver carries the endings out and passes again at once
            return Plan(first, snap.head, snap.now, eligibility(snap)[1])
    if not snap.gated and not first and not snap.params.max_cpus_per_user:  # eligibility would keep them all
        plan = tree.schedule(snap, _one_pass) if snap.lent else _one_pass(snap)
    else:
        pending, reasons, cancels = eligibility(snap)
        if pending is snap.pending and not first:
            plan = _schedule(snap)
        else:
            plan = _schedule(replace(snap, pending=pending))
            plan = replace(plan, decisions=(*first, *cancels, *plan.decisions), reasons=reasons)
    if snap.reservations or (snap.gated and snap.pending):  # reservation ends, begin times
        wake = [t for t in (plan.wake_at, endings.wake(snap), _begin_wake(snap)) if t is not None]
        if wake and min(wake) != plan.wake_at:
            plan = replace(plan, wake_at=min(wake))
    return plan


def quiet_when_full(params: Params) -> bool:
    """Whether, under ``params``, a pass with fewer cores free than the smallest pending job needs
    decides nothing and keeps nothing for the next pass (no reservation, no splittable job, nothing lent
    or ended: the driver asks that much itself).  So under fcfs, easy and conservative, which keep no
    head reservation from pass to pass and never preempt; not under checkpoint-backfill.  (Nor while a job runs on an
    estimate a backfill relied on, ``Running.planned``, which may have to be stopped for the head: the driver
    that asks this, gsim, replays no such estimates.)"""
    return params.policy in (Policy.FCFS, Policy.EASY, Policy.CONSERVATIVE)


def _begin_wake(snap: Snapshot) -> float | None:
    """The earliest begin time of a pending job still in the future (it becomes eligible then)."""
    if not snap.gated:
        return None
    times = [w.begin for w in snap.pending if w.begin is not None and w.begin > snap.now and not w.held]
    return min(times) if times else None


def _schedule(snap: Snapshot) -> Plan:
    if snap.lent:  # yielding parents: tasks on their cores first (gridsched.core.tree)
        return tree.schedule(snap, _one_pass)
    return _one_pass(snap)


# The members read on every pass, as plain names (reading a member of an Enum class is slow).
_EASY, _CKPT, _FCFS, _CONS = Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.FCFS, Policy.CONSERVATIVE


def _one_pass(snap: Snapshot) -> Plan:
    """The pass (see :mod:`gridsched.core.policy`)."""
    params = snap.params
    policy = params.policy
    if policy is _EASY:
        plan = easy_plain(snap)  # the plainest snapshots, in one function (None: not one of them)
        return plan if plan is not None else backfill(snap, False, False)[0]
    if policy is _CKPT:
        return backfill(snap, True, params.cascade)[0]
    if policy is _CONS:
        return conservative(snap, None)[0]
    if policy is _FCFS:
        return fcfs(snap, None)[0]
    raise ValueError(f"unknown policy {policy!r}")
