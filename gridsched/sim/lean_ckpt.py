"""The event loop of a plain replay, on the replay's own state, for checkpoint-backfill and its tuner.

A replay with no reservation, gate, floating resource, device, memory pool, machine map, splitting or
priority (:func:`takes`) has only arrivals, ends, the plan's timers and tuning instants for events, and
its jobs ask for cores alone.  :func:`run` is :func:`gridsched.sim.engine._run` for such a replay, with the
events handled in one loop; a pass that :func:`~gridsched.core.policy.quick.ckpt_starts` decides (nearly
every pass under checkpoint-backfill) is carried out here, its starts kept apart as that pass reads them
(:func:`start_all`), and so is a pass under easy (a setting the tuner chose) while no job runs on a planned
end, which :func:`~gridsched.core.policy.quick.easy_sorted` decides; any other pass -- one those leave to
the general one (the head's time has come: preemptions), or one under easy while a job backfilled on a
prediction still runs -- is made by the general loop's :func:`~gridsched.sim.engine._passes` on the same
state.  The events, the passes made and
skipped and everything the result holds are those of the general loop (a test compares them job by job).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from heapq import heappop, heappush
from operator import attrgetter
from typing import Any

from gridsched.core.policy.quick import Started, ckpt_starts, easy_sorted
from gridsched.core.predict import run_ratio
from gridsched.core.types import BackfillOrder, HeadReservation, Predictor, Running, Waiting
from gridsched.sim.records import SimulationError
from gridsched.sim.replay import DONE, INF, PENDING, RUNNING, Replay, by_id, job_name

_BY_RATIO = Predictor.USER_RATIO
_SHORTEST = BackfillOrder.SHORTEST
_EMPTY: Mapping[Any, Any] = {}
_ncpus = attrgetter("ncpus")


def takes(r: Replay) -> bool:
    """Whether :func:`run` replays ``r``: its only events are arrivals, ends, timers and tunings, its jobs
    plain entries counted in cores, its queue in job order, with no priority, gate or fair share."""
    return (
        r.fast
        and r.plain
        and not r.others
        and not r.gated
        and not r.rvs
        and not r.flo
        and not r.devices
        and r.free_set is None
        and r.key is by_id
        and not r.prio
        and r.acc is None
        and not r.splits
    )


def start_all(r: Replay, starts: list[Started], now: float) -> None:
    """Start each job of ``starts`` (``(id, backfilled, planned)``, as the quick pass decided them) as
    :func:`gridsched.sim.decisions.start` does for a plain replay, and take them out of the queue."""
    n, state, size, first, debt, done = r.n, r.state, r.size, r.first, r.debt, r.done
    wall, work, users, seg_begin, seg, ends = r.wall, r.work, r.users, r.seg_begin, r.seg, r.ends
    running, fixed, reclaim, special = r.running, r.fixed, r.reclaim, r.special
    preemptable = r.preemptable
    free = r.free
    for i, backfilled, planned in starts:
        if not 0 <= i < n or state[i] != PENDING:
            raise SimulationError(f"policy started job {job_name(r.trace, i)}, which is not waiting")
        n_i = size[i]
        if n_i > free:
            raise SimulationError(f"policy started job {job_name(r.trace, i)} on {n_i} cores with {free} free")
        free -= n_i
        if n_i == r.smallest:  # it may have been the only one of that size
            r.smallest = None
        state[i] = RUNNING
        if first[i] < 0:
            first[i] = now
        d_i, done_i = debt[i], done[i]
        left = wall[i] - done_i + d_i
        ru = Running(i, n_i, now, left, (), backfilled, preemptable, planned, False, users[i])
        running[i] = ru
        if planned is not None:
            special[i] = ru
        elif backfilled and preemptable:
            reclaim[i] = (now + left, n_i)
        else:
            fixed[i] = (now + left, n_i)  # (its start + estimate)
        seg_begin[i] = now
        heappush(ends, (now + d_i + work[i] - done_i, i, seg[i]))
    r.free = free
    r.run_dirty = True
    pending = r.pending
    for i, _b, _p in starts:  # pending stays sorted by job id (= submit order)
        k = bisect_left(pending, i, key=by_id)
        if k < len(pending) and pending[k].id == i:
            del pending[k]


def run(r: Replay) -> None:
    """The event loop of :func:`gridsched.sim.engine._run` for a replay :func:`takes` takes."""
    from gridsched.sim.engine import _passes, _tune

    pending, ends, ts, ncores, n, submit = r.pending, r.ends, r.ts, r.ncores, r.n, r.submit
    state, seg, end, size, wall, work, users = r.state, r.seg, r.end, r.size, r.wall, r.work, r.users
    running, fixed, reclaim, special = r.running, r.fixed, r.reclaim, r.special
    debt, segs, seg_begin, history, ratios = r.debt, r.segs, r.seg_begin, r.history, r.ratios
    learn, keep_ratios, preemptable = r.learn, r.keep_ratios, r.preemptable
    finished = r.finished if r.tuner is not None else None
    progress, step = r.progress, r.step
    while True:
        while ends:  # the end events of preempted segments dropped
            _t, i, s = ends[0]
            if state[i] == RUNNING and seg[i] == s:
                break
            heappop(ends)
        nxt = r.nxt
        now = submit[nxt] if nxt < n else INF
        if ends and ends[0][0] < now:
            now = ends[0][0]
        timer = r.wake
        if r.head_at < timer:
            timer = r.head_at
        if timer < now:
            now = timer
        if r.next_tune < now < INF:
            now = r.next_tune
        if now == INF:
            break
        need = timer == now
        was_queued = bool(pending)
        while ends and ends[0][0] == now:  # (_end_jobs of the general loop)
            _t, i, s = heappop(ends)
            if state[i] != RUNNING or seg[i] != s:
                continue
            need = True
            state[i] = DONE
            if now > end[i]:
                end[i] = now
            del running[i]
            if fixed.pop(i, None) is None and reclaim.pop(i, None) is None:
                del special[i]
            r.run_dirty = True
            if finished is not None:
                finished.append(i)
            n_i = size[i]
            r.free += n_i
            if debt[i]:
                r.overhead_cs += debt[i] * n_i
                debt[i] = 0.0
            if i in segs:
                segs[i].append((seg_begin[i], now))
            if learn:
                u = users[i]
                h = history.get(u)
                history[u] = (h[-1], work[i]) if h else (work[i],)
                rh = ratios.get(u)
                rr = run_ratio(work[i], wall[i])
                ratios[u] = (*rh[-keep_ratios:], rr) if rh else (rr,)
        if now >= r.next_tune and _tune(r, now):
            need = True
        if nxt < n and submit[nxt] == now:  # (_arrive of the general loop)
            smallest, free, fcfs = r.smallest, r.free, r.fcfs
            while nxt < n and submit[nxt] == now:
                i = nxt
                nxt += 1
                state[i] = PENDING
                n_i = size[i]
                pending.append(Waiting(i, n_i, wall[i], preemptable, users[i]))
                if smallest is not None and n_i < smallest:
                    smallest = n_i
                if not need and (not was_queued or (n_i <= free and not fcfs)):
                    need = True
            if progress is not None and nxt // step != r.nxt // step:
                progress(nxt)
            r.nxt = nxt
            r.smallest = smallest
        if need:  # (_needed of the general loop)
            if not pending:
                r.head, r.head_at, r.wake = None, INF, INF
                need = False
            elif r.quiet_full:
                if r.smallest is None:
                    r.smallest = min(map(_ncpus, pending))
                if r.free < r.smallest:
                    if r.head_at <= now:
                        r.head_at = INF
                    if r.wake <= now:
                        r.wake = INF
                    need = False
        if not need:
            r.skipped += 1
        elif not (_ckpt(r, now) if r.quick_ckpt else r.quick and not special and _easy(r, now)):
            _passes(r, now, r.quick_ckpt)
        if ts is not None:
            ts.append((now, ncores - r.free, len(pending)))


def _ckpt(r: Replay, now: float) -> bool:
    """The pass at ``now`` under checkpoint-backfill, where the quick pass decides it; whether it did."""
    params = r.params
    found = ckpt_starts(
        now,
        r.ncores,
        r.special.values(),
        r.pending,
        params,
        r.head,
        r.history,
        r.ratios if params.predictor is _BY_RATIO else _EMPTY,
        True,
        r.fixed.values(),
        r.free,
        r.reclaim.values(),
    )
    if found is None:
        return False
    r.passes += 1
    starts, head, wake = found
    r.head = head
    r.head_at = head.time if head is not None and head.time > now else INF
    r.wake = wake if wake is not None and wake > now else INF
    if starts:
        start_all(r, starts, now)
    return True


def _easy(r: Replay, now: float) -> bool:
    """The pass at ``now`` under easy (a setting the tuner chose) with no job running on a planned end, where
    :func:`~gridsched.core.policy.quick.easy_sorted` decides it (what
    :func:`~gridsched.core.policy.quick.easy_plain` decides for the snapshot); whether it did."""
    pending = r.pending
    estimate = {w.id: w.estimate for w in pending}  # (a job preempted before runs whole: its estimate is less)
    found = easy_sorted(
        now,
        r.ncores,
        r.free,
        sorted([*r.fixed.values(), *r.reclaim.values()]),
        list(estimate),
        r.size,
        estimate,  # type: ignore[arg-type]
        r.params.backfill_order is _SHORTEST,
    )
    if found is None:
        return False
    r.passes += 1
    started, front, head, shadow = found
    if head >= 0:
        r.head = HeadReservation(head, shadow)
        r.head_at = shadow if shadow > now else INF
        # (the plan wakes at the reservation time where a backfilled job may be preempted then)
        r.wake = shadow if len(started) > front and r.preemptable and shadow > now else INF
    else:
        r.head, r.head_at, r.wake = None, INF, INF
    if started:
        start_all(r, [(i, k >= front, None) for k, i in enumerate(started)], now)
    return True
