"""The replay of a plain trace under easy, with state of its own kept from event to event.

A replay that :func:`gridsched.sim.engine.simulate` would take through the plainest easy pass on every
pass (easy in queue order or shortest first; no priority, per-user limit, gate, reservation, floating
resource, device, memory pool, machine map, splitting or tuner) is replayed here: the running jobs are
kept sorted by their walltime's end, the pending ones as job numbers, and each pass is
:func:`gridsched.core.policy.quick.easy_sorted` on them, which decides what the general pass decides for
the snapshot the general loop would build (what
:func:`~gridsched.core.policy.quick.easy_plain` decides).
The events, the passes made and skipped and everything the :class:`~gridsched.sim.records.Result`
holds are those of the general loop (a test compares them job by job).  Where the pass answers None
(a job that would end as it starts), :class:`Fallback` is raised and the general loop replays the trace.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from heapq import heappop, heappush
from math import inf, isfinite
from operator import gt

from gridsched.core.policy.quick import easy_sorted
from gridsched.sim.swf import Trace


class Fallback(Exception):
    """The plain pass left a decision to the general one: the general loop replays the trace."""


def takes(trace: Trace) -> bool:
    """Whether every job of ``trace`` is one this loop replays: at least one core and no more than the
    machine, a walltime above 0 and finite, a run time from 0 to its walltime."""
    size, wall, run = trace.size, trace.walltime, trace.run
    if not size:
        return True
    return (
        0 < min(size)
        and max(size) <= trace.ncores
        and min(wall) > 0
        and isfinite(max(wall))
        and min(run) >= 0
        and len(run) == len(wall) == len(size)
        and not any(map(gt, run, wall))
    )


class Lean:
    """What the loop leaves: each job's first start and end, the passes made and skipped, the series."""

    __slots__ = ("start", "end", "passes", "skipped", "series")

    def __init__(self, n: int, series: bool) -> None:
        self.start = [-1.0] * n
        self.end = [-1.0] * n
        self.passes = 0
        self.skipped = 0
        self.series: list[tuple[float, int, int]] | None = [] if series else None


def replay(
    trace: Trace, quiet_full: bool, series: bool, progress: Callable[[int], None] | None, shortest: bool = False
) -> Lean:
    """Replay ``trace`` (see the module docstring); ``quiet_full``: no pass while fewer cores are free than
    the smallest pending job needs; ``shortest``: backfill shortest first (EASY-SJF).  (The plan's
    ``wake_at``, where backfilled jobs may be preempted, is the head's reservation time, when the replay
    passes anyway.)"""
    n, ncores = len(trace), trace.ncores
    submit, size, wall, run = trace.submit, trace.size, trace.walltime, trace.run
    out = Lean(n, series)
    first, end, ts = out.start, out.end, out.series
    pending: list[int] = []  # job numbers, in queue (= submit) order
    ends: list[tuple[float, int]] = []  # (end at its walltime, cores) of each running job, sorted
    events: list[tuple[float, int]] = []  # heap of (end, job)
    free = ncores
    smallest = 0  # the fewest cores a pending job needs (0: not known)
    waiting = [0] * (ncores + 1)  # pending jobs of each size
    head_at = inf  # the head's reservation time
    nxt = 0
    step = 4096
    passes = skipped = 0
    while True:
        # the next instant with an event
        now = submit[nxt] if nxt < n else inf
        if events and events[0][0] < now:
            now = events[0][0]
        if head_at < now:
            now = head_at
        if now == inf:
            break
        need = head_at == now
        was_queued = bool(pending)
        while events and events[0][0] == now:
            i = heappop(events)[1]
            end[i] = now
            n_i = size[i]
            free += n_i
            del ends[bisect_left(ends, (first[i] + wall[i], n_i))]
            need = True
        if nxt < n and submit[nxt] == now:
            arrived = nxt
            while nxt < n and submit[nxt] == now:
                n_i = size[nxt]
                pending.append(nxt)
                waiting[n_i] += 1
                if smallest and n_i < smallest:
                    smallest = n_i
                if not need and (not was_queued or n_i <= free):
                    need = True
                nxt += 1
            if progress is not None and nxt // step != arrived // step:
                progress(nxt)
        if need:  # (_needed of the general loop)
            if not pending:
                head_at = inf
                need = False
            elif quiet_full:
                if not smallest:
                    smallest = min([size[i] for i in pending])
                if free < smallest:
                    if head_at <= now:
                        head_at = inf
                    need = False
        if need:
            passes += 1
            plan = easy_sorted(now, ncores, free, ends, pending, size, wall, shortest)
            if plan is None:
                raise Fallback
            started, front, head, shadow = plan
            head_at = shadow if head >= 0 and shadow > now else inf
            for i in started:
                n_i = size[i]
                free -= n_i
                waiting[n_i] -= 1
                if n_i == smallest and not waiting[n_i]:
                    smallest = 0
                first[i] = now
                heappush(events, (now + run[i], i))
                insort(ends, (now + wall[i], n_i))
            if front and pending[front - 1] == started[front - 1]:  # (a prefix of the queue)
                del pending[:front]
                started = started[front:]
            for i in started:
                del pending[bisect_left(pending, i)]
        else:
            skipped += 1
        if ts is not None:
            ts.append((now, ncores - free, len(pending)))
    out.passes, out.skipped = passes, skipped
    return out
