"""The event-driven replay of a trace through :func:`gridsched.core.policy.schedule`.

The clock is virtual: it jumps from event to event.  Events are job arrivals,
job ends, the ``wake_at`` time of the last plan and the head job's reservation
time.  After each batch of simultaneous events the simulator builds a
:class:`~gridsched.core.types.Snapshot` (count-only mode: no core numbers),
calls ``schedule`` and carries out the plan, exactly as the daemon does on the
real clock.

A pass is skipped only when it cannot decide anything (see :func:`simulate`);
``fast=False`` turns the skipping off, which the tests use to show that the
results are the same.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from enum import Enum
from operator import attrgetter

from gridsched.core import devices as coredev
from gridsched.core.depend import Dep
from gridsched.core.eligible import throttled
from gridsched.core.placement import Request as PlaceRequest
from gridsched.core.placement import claimed
from gridsched.core.policy import quiet_when_full, schedule
from gridsched.core.predict import RATIO_JOBS, run_ratio
from gridsched.core.topology import Device, MachineMap
from gridsched.core.types import (
    Activate,
    Cancel,
    CancelSubtree,
    EndReservation,
    HeadReservation,
    HoldSubtree,
    Kill,
    Params,
    Policy,
    Predictor,
    Reclaim,
    Resume,
    Resv,
    Running,
    Snapshot,
    SplitInfo,
    Start,
    StartTasks,
    Waiting,
)
from gridsched.protocol.usage import Usage
from gridsched.sim.swf import Trace

INF = math.inf
MAX_REPASS = 16  # passes at one instant after preemptions, at most
_BY_RATIO = Predictor.USER_RATIO

# Job states.
_FUTURE, _PENDING, _RUNNING, _DONE = 0, 1, 2, 3


class Mode(str, Enum):
    """What a preempted job keeps."""

    CHECKPOINT = "checkpoint"  # restarts from its checkpoint: work done is kept
    REQUEUE = "requeue"  # reruns from scratch: work done is lost
    NONE = "none"  # never preempted (so never aggressively backfilled)


class SimulationError(Exception):
    """The policy asked for something impossible, or left jobs waiting forever."""


@dataclass(slots=True)
class Result:
    """What happened to every job of a trace, indexed like the trace's lists."""

    trace: Trace
    params: Params
    mode: Mode
    overhead: float
    start: list[float]  # first start
    end: list[float]
    checkpoints: list[int]
    segments: dict[int, list[tuple[float, float]]]  # run segments of jobs preempted at least once
    overhead_cs: float = 0.0  # core-seconds spent writing and reading checkpoints
    lost_cs: float = 0.0  # core-seconds of work thrown away by requeueing
    passes: int = 0  # calls of schedule()
    skipped: int = 0  # event batches after which no call was needed
    series: list[tuple[float, int, int]] | None = field(default=None)  # (time, busy cores, queue length)
    reservations: list[SimResv] = field(default_factory=list)
    activated: list[float] = field(default_factory=list)  # activation time of each reservation (-1: never)
    split_jobs: int = 0  # jobs replayed as splittable (split_above)
    pieces: int = 0  # pieces taken out of them into backfill windows
    split_tasks: int = 0  # sub-tasks in those pieces
    # With gates: when each job became eligible (its dependencies met, its hold released, its begin time
    # reached), the effective submit from which its wait counts; None: every job at its submit.
    eligible: list[float] | None = None
    cancelled: list[int] = field(default_factory=list)  # jobs cancelled: their dependencies can never be met
    # With a tuner: (time, the settings in force from then on) at each tuning instant
    tunings: list[tuple[float, Params]] = field(default_factory=list)
    devices: tuple[Device, ...] = ()  # the machine's devices
    gpus: list[int] | None = None  # GPUs each job holds while it runs (None: no job asks for devices)
    killed: list[int] = field(default_factory=list)  # jobs ended as at their walltime for overrunning an estimate

    def runs(self, i: int) -> list[tuple[float, float]]:
        """The run segments of job ``i`` (start, end)."""
        return self.segments.get(i) or [(self.start[i], self.end[i])]


_by_id = attrgetter("id")
_ncpus = attrgetter("ncpus")


@dataclass(frozen=True, slots=True)
class SimResv:
    """A reservation replayed beside a trace: created at ``create``; ``start`` None = flexible."""

    create: float
    ncpus: int
    duration: float
    resources: tuple[tuple[str, int], ...] = ()
    start: float | None = None
    place: PlaceRequest | None = None  # its mapping requirement (with a machine map)


HELD = "held by its owner"
_NO_PARENTS: dict[int, int] = {}  # never changed


@dataclass(frozen=True, slots=True)
class Gates:
    """What else than the machine decides when trace jobs may start; jobs are indices into the trace.

    The core decides (:mod:`gridsched.core.eligible`): a job with ``deps``
    waits for them (``Snapshot.states`` holds every job's state: PENDING until
    it starts, RUNNING, then ``ended[i]`` or COMPLETED); ``think`` maps a job to
    ``(preceding job, think time)``: its ``deps`` name that job (afterany) and
    its begin time is set, when that job ends, to the end plus the think time
    (SWF fields 17 and 18); a job of ``arrays`` (array number, %MAX) runs only
    while fewer than MAX of its array run; a job of ``holds`` is held from its
    submission to that time; ``names`` are job names (for singleton).
    """

    deps: dict[int, tuple[Dep, ...]] = field(default_factory=dict)
    think: dict[int, tuple[int, float]] = field(default_factory=dict)
    arrays: dict[int, tuple[int, int]] = field(default_factory=dict)
    holds: dict[int, float] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    ended: dict[int, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.deps or self.arrays or self.holds)


def simulate(
    trace: Trace,
    params: Params,
    *,
    overhead: float = 120.0,
    mode: Mode = Mode.CHECKPOINT,
    fast: bool = True,
    series: bool = False,
    progress: Callable[[int], None] | None = None,
    reservations: list[SimResv] | None = None,
    floating: dict[str, int] | None = None,
    machine: MachineMap | None = None,
    place: str | None = None,
    split_above: int | None = None,
    gates: Gates | None = None,
    tuner: Tuner | None = None,
    devices: tuple[Device, ...] = (),
) -> Result:
    """Replay ``trace`` under ``params``.

    A preempted job returns to the queue at the place of its submission.  In
    ``CHECKPOINT`` mode each checkpoint adds ``overhead`` seconds (writing it)
    and each restart ``overhead`` seconds (reading it) to the job's remaining
    run time and to its remaining walltime; in ``REQUEUE`` mode it starts over.

    With ``fast`` no pass is made when the queue is empty, nor under fcfs, easy
    and conservative (no reservation, no splittable job) when fewer cores are
    free than the smallest pending job needs; and a batch made only of arrivals is not followed by a pass when
    the queue already held a job (so none of the new jobs is the head) and
    every new job needs more cores than are free (so none can start without a
    preemption, which only the head may cause) -- or, under FCFS, whenever the
    queue already held a job.  Nothing else has changed since the previous
    pass, whose plan still holds: its ``wake_at`` and head reservation stay in
    force.

    With a ``machine`` map (``gsim --topology``) the replay tracks which cores
    each job holds and the core places every job on the map (with the mapping
    requirement ``place``, e.g. ``"board"``, given to every job); without one
    it counts cores only, which is faster.

    With ``split_above`` every job of more than that many processors is
    splittable: one sub-task per processor (1 core each), each taking the
    job's run time and estimated at its walltime.  At its turn the job runs
    whole, as before; while it waits, the backfill step may take sub-tasks out
    of it into pieces (:class:`~gridsched.core.types.StartTasks`), which run
    their chains of sub-tasks back to back and hold their cores until the
    longest chain ends; the job keeps the rest, on fewer cores.  A job starts
    when its first sub-task does and ends when its last one does.  Only jobs
    that never ran are split (a preempted one runs whole).

    With ``gates`` (dependencies, array throttles, holds: see :class:`Gates`)
    every pass goes through the core's eligibility, as the daemon's do; a
    job's wait counts from the pass that first found it eligible
    (``Result.eligible``), and a job whose dependencies can never be met is
    cancelled (``Params.cancel_never_satisfied``: a replay must end).
    Without them, or with empty ones, the core is told that no job is gated.

    With ``devices`` (the machine's GPUs and other devices) every pass is told
    of them, as the daemon's are; the jobs of ``trace.devices`` ask for
    theirs (:class:`~gridsched.core.devices.DeviceAsk`): device slots are
    resources of the pass, and the core chooses which devices a job gets at
    its start (``Start.devices``), as for the daemon.  A job asking for
    devices is never split.

    With a ``tuner`` the settings are chosen again every ``tuner.every`` seconds from the first
    submission: ``tuner.choose(now, finished, end, params)`` sees the jobs that have ended by then
    (their indices in the order they ended, and the end times) -- nothing the replay has not yet
    reached -- and returns the settings to use from then on.
    """
    n = len(trace)
    ncores = trace.ncores
    submit, size, wall, work, users = trace.submit, trace.size, trace.walltime, trace.run, trace.user
    # Priorities ([priority] of the config): the age of each job from its submit, fair share by the SWF
    # user id (field 12) from the usage of the jobs that ended, decayed as the daemon does.
    pp = params.priority
    prio = pp.weighted
    acc = Usage() if pp.weight_fairshare else None
    stamped: dict[int, tuple[Waiting, Waiting]] = {}

    def stamp(queue: list[Waiting]) -> tuple[Waiting, ...]:
        """The queue with each job's submit time on its entry (made once per entry)."""
        out = []
        for w in queue:
            if w.id >= n:
                out.append(w)
                continue
            c = stamped.get(w.id)
            if c is None or c[0] is not w:
                c = stamped[w.id] = (w, _replace(w, submitted=submit[w.id]))
            out.append(c[1])
        return tuple(out)

    # Devices: what each job asks for, the slots that counts for in the pass, the GPUs it holds.
    dev_asks: list[tuple[coredev.DeviceAsk, ...]] = []
    if trace.devices:
        dev_asks = [trace.devices.get(j, ()) for j in trace.ids]
        if not any(dev_asks):
            dev_asks = []
    if dev_asks and not devices:
        raise SimulationError("jobs ask for devices, and the machine has none")
    no_dev: tuple[()] = ()
    dev_slots = [coredev.slots(a, devices) if a else no_dev for a in dev_asks] if dev_asks else []
    gpus = [sum(a.count for a in asks if a.type == "gpu") for asks in dev_asks] if dev_asks else None

    def dres(i: int) -> tuple[tuple[str, int], ...]:
        return dev_slots[i] if dev_asks else no_dev

    def dask(i: int) -> tuple[coredev.DeviceAsk, ...]:
        return dev_asks[i] if dev_asks else no_dev

    splittable = [split_above is not None and size[i] > split_above and not dask(i) for i in range(n)]
    splits = any(splittable)
    if any(splittable):
        size = list(size)  # a split job's cores shrink as sub-tasks are taken out of it
    tasks_left = list(size)  # sub-tasks not yet taken out, per job
    outstanding = [0] * n  # pieces of each job still running
    piece_of: dict[int, int] = {}  # running piece id -> its job
    piece_ends: list[tuple[float, int]] = []  # heap of (end, piece id)
    next_piece = n + len(reservations or ())
    n_pieces = n_tasks = 0
    preemptable = mode is not Mode.NONE
    requeue = mode is Mode.REQUEUE
    fcfs = params.policy is Policy.FCFS

    state = [_FUTURE] * n
    first = [-1.0] * n
    end = [-1.0] * n
    done = [0.0] * n  # useful work done before the current segment
    debt = [0.0] * n  # checkpoint overhead still to be run
    ckpts = [0] * n
    seg_begin = [0.0] * n  # start of the current segment
    seg = [0] * n  # run segment number: invalidates the end events of preempted segments
    segs: dict[int, list[tuple[float, float]]] = {}
    running: dict[int, Running] = {}
    run_tuple: tuple[Running, ...] = ()
    run_dirty = False
    pending: list[Waiting] = []
    ends: list[tuple[float, int, int]] = []  # heap of (time, job, segment)
    history: dict[str, tuple[float, ...]] = {}
    ratios: dict[str, tuple[float, ...]] = {}  # run time / walltime of each user's last jobs (user-ratio)
    keep_ratios = RATIO_JOBS - 1
    head: HeadReservation | None = None
    head_at = INF  # when the head's reservation asks for a pass
    finished: list[int] = []  # jobs in the order they ended (for a tuner)
    tunings: list[tuple[float, Params]] = []
    next_tune = (submit[0] + tuner.every) if tuner is not None and n else INF
    wake = INF
    free = ncores
    overhead_cs = 0.0
    lost_cs = 0.0
    passes = 0
    skipped = 0
    ts: list[tuple[float, int, int]] | None = [] if series else None
    nxt = 0  # next arrival
    step = 4096
    # Reservations (ids n + k): arrivals in create order, ends and expiries on their own heap.
    rvs = list(reservations or ())
    flo = dict(floating or {})
    rv_order = sorted(range(len(rvs)), key=lambda k: (rvs[k].create, k))
    rv_next = 0
    rv_live: dict[int, Resv] = {}
    rv_events: list[tuple[float, int]] = []  # (time, id): end of an active one, or expiry of a fixed one
    activated = [-1.0] * len(rvs)
    key: Callable[[Waiting], int | tuple[float, int, int]] = _by_id  # the order of `pending`
    if rvs:
        order_key = {i: (submit[i], 0, i) for i in range(n)}
        order_key.update({n + k: (rvs[k].create, 1, k) for k in range(len(rvs))})
        key = lambda w: order_key[w.id]  # noqa: E731 - queue order: submission or creation time

    quiet_full = quiet_when_full(params) and not splits
    heappush, heappop = heapq.heappush, heapq.heappop
    gated = bool(gates)
    g = gates if gates is not None else Gates()
    states: dict[int, str] = {}  # the state of every job, for the dependencies (gated only)
    eligible: list[float] | None = None
    ungated: set[int] = set()  # pending gated jobs not found eligible yet
    last_reasons: dict[int, str] = {}
    cancelled: list[int] = []
    killed: list[int] = []
    g_names, g_arrays, g_deps, g_ended = g.names, g.arrays, g.deps, g.ended
    held_until: dict[int, float] = {}
    begin_at: dict[int, float] = {}
    followers: dict[int, list[tuple[int, float]]] = {}  # preceding job -> (job, think time)
    if gated:
        params = _replace(params, cancel_never_satisfied=True)
        states = dict.fromkeys(range(n), "PENDING")
        eligible = list(submit)
        held_until = {i: t for i, t in g.holds.items() if t > submit[i]}
        for i, t in held_until.items():
            rv_events.append((t, -1 - i))  # a hold's release (negative ids: jobs)
        heapq.heapify(rv_events)
        for i, (pj, t) in g.think.items():
            followers.setdefault(pj, []).append((i, t))

    def gate_waiting(i: int, ncpus: int, estimate: float, elapsed: float, split: SplitInfo | None) -> Waiting:
        a = g_arrays.get(i)
        return Waiting(
            i,
            ncpus,
            estimate,
            preemptable,
            users[i],
            elapsed,
            place=req_of(i),
            split=split,
            name=g_names.get(i, ""),
            deps=g_deps.get(i, ()),
            array=a[0] if a else None,
            array_max=a[1] if a else None,
            held=HELD if i in held_until else "",
            begin=begin_at.get(i),
            resources=dres(i),
            devices=dask(i),
        )

    def regate(i: int, **kw: object) -> None:
        """Change the entry of pending job ``i`` (a hold released, a begin time set)."""
        pos = bisect_left(pending, i if key is _by_id else order_key[i], key=key)
        if pos < len(pending) and pending[pos].id == i:
            pending[pos] = _replace(pending[pos], **kw)  # type: ignore[arg-type]

    if machine is not None and machine.ncores != ncores:
        raise SimulationError(f"the topology has {machine.ncores} cores, the machine {ncores}")
    free_set: frozenset[int] | None = frozenset(range(ncores)) if machine is not None else None
    held: dict[int, frozenset[int]] = {}  # cores held by each job (placement mode)
    req_of: Callable[[int], PlaceRequest | None] = (
        (lambda i: PlaceRequest(size[i], place)) if machine is not None and place else (lambda i: None)
    )

    # a job is one Waiting entry without a mapping requirement or sub-tasks; and no other events than
    # arrivals and ends (then the loop need not look for them)
    plain = not (machine is not None and place) and not splits and not dev_asks
    others = bool(rvs or rv_events or splits)
    smallest: int | None = None  # the fewest cores a pending job needs (None: not known)
    while True:
        # Drop end events of segments that were preempted.
        while ends:
            t, i, s = ends[0]
            if state[i] == _RUNNING and seg[i] == s:
                break
            heappop(ends)
        now = submit[nxt] if nxt < n else INF
        if ends and ends[0][0] < now:
            now = ends[0][0]
        if others:  # reservations, holds, pieces of split jobs
            if rv_next < len(rvs) and rvs[rv_order[rv_next]].create < now:
                now = rvs[rv_order[rv_next]].create
            if rv_events and rv_events[0][0] < now:
                now = rv_events[0][0]
            if piece_ends and piece_ends[0][0] < now:
                now = piece_ends[0][0]
        timer = wake
        if head_at < timer:
            timer = head_at
        if timer < now:
            now = timer
        if next_tune < now < INF:  # tuning instants only while the replay has events left
            now = next_tune
        if now == INF:
            break

        # The batch of events at `now`.
        need_pass = timer == now
        was_queued = bool(pending)
        while ends and ends[0][0] == now:
            t, i, s = heappop(ends)
            if state[i] != _RUNNING or seg[i] != s:
                continue
            need_pass = True
            state[i] = _DONE
            if now > end[i]:
                end[i] = now
            del running[i]
            run_dirty = True
            if tuner is not None:
                finished.append(i)
            n_i = size[i]
            free += n_i
            if free_set is not None:
                free_set = free_set | held.pop(i)
            if debt[i]:
                overhead_cs += debt[i] * n_i
                debt[i] = 0.0
            if i in segs:
                segs[i].append((seg_begin[i], now))
            u = users[i]
            h = history.get(u)
            history[u] = (h[-1], work[i]) if h else (work[i],)
            rh = ratios.get(u)
            rr = run_ratio(work[i], wall[i])
            ratios[u] = (*rh[-keep_ratios:], rr) if rh else (rr,)
            if acc is not None:
                acc.add(u, work[i] * n_i, now, pp.half_life)
            if gated:
                states[i] = g_ended.get(i, "COMPLETED")
                for j, think in followers.get(i, ()):
                    begin_at[j] = now + think
                    if state[j] == _PENDING:
                        regate(j, begin=now + think)
        if others:  # reservations ending, holds released, pieces of split jobs ending
            while rv_events and rv_events[0][0] <= now:  # a reservation's end or expiry: the core ends it
                _t, rid = heapq.heappop(rv_events)
                if rid in rv_live:
                    need_pass = True
                elif rid < 0:  # a hold released
                    i = -1 - rid
                    del held_until[i]
                    if state[i] == _PENDING:
                        regate(i, held="")
                    need_pass = True
            while piece_ends and piece_ends[0][0] <= now:
                _t, pid = heappop(piece_ends)
                i = piece_of.pop(pid)
                free += running.pop(pid).ncpus
                run_dirty = True
                if free_set is not None:
                    free_set = free_set | held.pop(pid)
                outstanding[i] -= 1
                end[i] = max(end[i], now)  # a job ends with the last of its sub-tasks
                need_pass = True
        if now >= next_tune:  # a tuning instant: what has ended by now chooses the settings from now on
            new = tuner.choose(now, finished, end, params)  # type: ignore[union-attr]
            if gated:
                new = _replace(new, cancel_never_satisfied=True)
            while next_tune <= now:
                next_tune += tuner.every  # type: ignore[union-attr]
            tunings.append((now, new))
            if new != params:
                params = new
                fcfs = params.policy is Policy.FCFS
                quiet_full = quiet_when_full(params) and not splits
                head, head_at, wake = None, INF, INF
                need_pass = True
        arrived = nxt
        while nxt < n and submit[nxt] == now:
            i = nxt
            nxt += 1
            state[i] = _PENDING
            if gated:
                w_i = gate_waiting(
                    i, size[i], wall[i], 0.0, SplitInfo(1, wall[i], tuple(range(size[i]))) if splittable[i] else None
                )
                pending.append(w_i)
                smallest = None
                if w_i.deps or w_i.held or w_i.begin is not None:
                    ungated.add(i)
                need_pass = True
                continue
            if plain:
                pending.append(Waiting(i, size[i], wall[i], preemptable, users[i]))
                if smallest is not None and size[i] < smallest:
                    smallest = size[i]
            else:
                pending.append(
                    Waiting(
                        i,
                        size[i],
                        wall[i],
                        preemptable,
                        users[i],
                        0.0,
                        place=req_of(i),
                        split=SplitInfo(1, wall[i], tuple(range(size[i]))) if splittable[i] else None,
                        resources=dres(i),
                        devices=dask(i),
                    )
                )
                smallest = None
            if not need_pass and (
                prio or not was_queued or ((size[i] <= free or (splittable[i] and free)) and not fcfs)
            ):
                need_pass = True
        if progress is not None and nxt // step != arrived // step:
            progress(nxt)
        # reservations created now: after the jobs submitted at the same instant (queue order)
        while rvs and rv_next < len(rvs) and rvs[rv_order[rv_next]].create <= now:
            k = rv_order[rv_next]
            rv_next += 1
            r = rvs[k]
            rv_live[n + k] = Resv(n + k, r.ncpus, r.duration, r.resources, r.start, place=r.place)
            if r.start is None:
                pending.append(Waiting(n + k, r.ncpus, r.duration, False, "", 0.0, r.resources, None, True))
                smallest = None
            else:
                heappush(rv_events, (r.start + r.duration, n + k))
            need_pass = True

        if need_pass and fast and not rv_live and not gated:
            if not pending:  # nothing to decide: the plan is empty
                need_pass, head, head_at, wake = False, None, INF, INF
            elif quiet_full:
                if smallest is None:
                    smallest = min(map(_ncpus, pending))
                if free < smallest:
                    need_pass = False  # nothing fits now, and nothing but a start can change
                    if head_at <= now:  # a timer that has come asks for nothing more (else it would again)
                        head_at = INF
                    if wake <= now:
                        wake = INF
        if need_pass or not fast:
            wake = INF
            for _ in range(MAX_REPASS):
                if run_dirty:
                    run_tuple = tuple(running.values())
                    run_dirty = False
                passes += 1
                snap = Snapshot(
                    now,
                    ncores,
                    run_tuple,
                    stamp(pending) if prio else tuple(pending),
                    params,
                    free_set,
                    head,
                    history,
                    flo,
                    tuple(rv_live.values()) if rv_live else (),
                    machine,
                    _NO_PARENTS,  # parents, lent: no job trees in a trace
                    (),
                    states,
                    gated,
                    splits,  # splitting (all by position: keywords cost more, once a pass)
                )
                if devices:
                    snap = _replace(snap, devices=devices)
                if params.predictor is _BY_RATIO:
                    snap = _replace(snap, ratios=ratios)
                if acc is not None:
                    snap = _replace(snap, usage=acc.now(now, pp.half_life))
                plan = schedule(snap)
                if ungated:
                    last_reasons = dict(plan.reasons)
                    for i in [i for i in ungated if i not in last_reasons or throttled(last_reasons[i])]:
                        ungated.discard(i)
                        eligible[i] = now  # type: ignore[index]
                head = plan.head
                # a reservation time this pass has already reached asks for no pass of its own (times in
                # floating point: a running job's counted end may fall a hair before its end event)
                head_at = head.time if head is not None and head.time > now else INF
                w = plan.wake_at
                wake = w if w is not None and w > now else INF
                if not plan.decisions:
                    break
                started: list[int] = []
                preempted = False
                for d in plan.decisions:
                    if isinstance(d, Start):  # the common decision first
                        i = d.job
                        if not 0 <= i < n or state[i] != _PENDING:
                            raise SimulationError(f"policy started job {_name(trace, i)}, which is not waiting")
                        n_i = size[i]
                        if n_i > free:
                            raise SimulationError(
                                f"policy started job {_name(trace, i)} on {n_i} cores with {free} free"
                            )
                        free -= n_i
                        if n_i == smallest:  # it may have been the only one of that size
                            smallest = None
                        if free_set is not None:
                            on = set(d.cores)
                            if len(on) != n_i or not on <= free_set:
                                raise SimulationError(f"policy placed job {_name(trace, i)} on cores not free")
                            r_i = req_of(i)
                            hold = claimed(machine, d.cores, r_i) if r_i is not None else frozenset(on)  # type: ignore[arg-type]
                            held[i] = hold
                            free_set = free_set - hold
                        d_keys: tuple[tuple[str, int], ...] = no_dev
                        d_held: tuple[tuple[str, int], ...] = no_dev
                        if dev_asks and dev_asks[i]:
                            d_keys = tuple(d.devices)
                            if len(set(d_keys)) != sum(a.count for a in dev_asks[i]):
                                raise SimulationError(
                                    f"policy started job {_name(trace, i)} on devices {list(d_keys)}, "
                                    f"not the {sum(a.count for a in dev_asks[i])} it asks for"
                                )
                            d_held = coredev.held(d_keys, devices, False)
                        state[i] = _RUNNING
                        if first[i] < 0:
                            first[i] = now
                        left = wall[i] - done[i] + debt[i]
                        if gated:
                            states[i] = "RUNNING"
                            a = g_arrays.get(i)
                            running[i] = Running(
                                i,
                                n_i,
                                now,
                                left,
                                tuple(d.cores),
                                d.backfilled,
                                preemptable,
                                d.planned,
                                False,
                                users[i],
                                d_held,
                                name=g_names.get(i, ""),
                                array=a[0] if a else None,
                                devices=d_keys,
                            )
                        elif d_keys:
                            running[i] = Running(
                                i,
                                n_i,
                                now,
                                left,
                                d.cores,
                                d.backfilled,
                                preemptable,
                                d.planned,
                                False,
                                users[i],
                                d_held,
                                devices=d_keys,
                            )
                        else:
                            running[i] = Running(
                                i, n_i, now, left, d.cores, d.backfilled, preemptable, d.planned, False, users[i]
                            )
                        seg_begin[i] = now
                        heappush(ends, (now + debt[i] + work[i] - done[i], i, seg[i]))
                        started.append(i)
                        run_dirty = True
                        continue
                    smallest = None  # the queue changes in other ways than by starts
                    if isinstance(d, EndReservation):  # its resources return; the core passes again
                        rv = rv_live.pop(d.resv, None)
                        if rv is None:
                            raise SimulationError(f"policy ended reservation {d.resv - n + 1}, which is not live")
                        if rv.active:
                            free += rv.ncpus
                            if free_set is not None:
                                free_set = free_set | held.pop(d.resv, frozenset())
                        preempted = True
                        continue
                    if isinstance(d, Activate):  # isinstance: the type checker narrows d below
                        rv = rv_live.get(d.resv)
                        if rv is None or rv.active or rv.ncpus > free:
                            raise SimulationError(f"policy activated reservation {d.resv - n + 1}, which cannot be")
                        free -= rv.ncpus
                        if free_set is not None:
                            held[d.resv] = (
                                claimed(machine, d.cores, rv.place)  # type: ignore[arg-type]
                                if rv.place is not None
                                else frozenset(d.cores)
                            )
                            free_set = free_set - held[d.resv]
                        rv_live[d.resv] = Resv(
                            rv.id,
                            rv.ncpus,
                            rv.duration,
                            rv.resources,
                            rv.start,
                            True,
                            tuple(d.cores),
                            d.end,
                            place=rv.place,
                        )
                        activated[d.resv - n] = now
                        heappush(rv_events, (d.end, d.resv))
                        if rv.start is None:
                            started.append(d.resv)
                        continue
                    if isinstance(d, Cancel) and gated and 0 <= d.job < n and state[d.job] == _PENDING:
                        i = d.job  # its dependencies can never be met
                        state[i] = _DONE
                        states[i] = "CANCELLED"
                        cancelled.append(i)
                        ungated.discard(i)
                        pending[:] = [w for w in pending if w.id != i]
                        preempted = True  # a job waiting for it may be eligible now: pass again
                        continue
                    if isinstance(d, (Cancel, Reclaim, Resume, CancelSubtree, HoldSubtree)):
                        raise SimulationError(f"policy decided {d}, which a trace has no part for")
                    i = d.job
                    if type(d) is StartTasks:
                        k, width = len(d.tasks), len(d.chains)
                        if (
                            not 0 <= i < n
                            or state[i] != _PENDING
                            or not splittable[i]
                            or k > tasks_left[i]
                            or width > free
                            or (free_set is not None and len(d.cores) != width)
                        ):
                            raise SimulationError(f"policy split job {_name(trace, i)}, which cannot be")
                        pid = next_piece
                        next_piece += 1
                        free -= width
                        if free_set is not None:
                            got = frozenset(d.cores)
                            if not got <= free_set:
                                raise SimulationError(f"policy placed sub-tasks of {_name(trace, i)} on cores not free")
                            held[pid] = got
                            free_set = free_set - got
                        longest = max(map(len, d.chains))
                        running[pid] = Running(
                            pid, width, now, longest * wall[i], tuple(d.cores), True, False, None, False, users[i]
                        )
                        piece_of[pid] = i
                        heappush(piece_ends, (now + longest * work[i], pid))
                        outstanding[i] += 1
                        if first[i] < 0:
                            first[i] = now
                        tasks_left[i] -= k
                        size[i] = tasks_left[i]
                        n_pieces += 1
                        n_tasks += k
                        pos = bisect_left(pending, i if key is _by_id else order_key[i], key=key)
                        if tasks_left[i] == 0:
                            state[i] = _DONE  # its end is the end of its last piece
                            del pending[pos]
                        else:
                            total = trace.size[i]
                            undone = SplitInfo(1, wall[i], tuple(range(total - tasks_left[i], total)))
                            pending[pos] = (
                                gate_waiting(i, tasks_left[i], wall[i], 0.0, undone)
                                if gated
                                else Waiting(
                                    i, tasks_left[i], wall[i], preemptable, users[i], 0.0, place=req_of(i), split=undone
                                )
                            )
                        run_dirty = True
                        continue
                    if type(d) is Kill:  # it overran the estimate it was backfilled on: it ends now, as timed out
                        if not 0 <= i < n or state[i] != _RUNNING:
                            raise SimulationError(f"policy killed job {_name(trace, i)}, which is not running")
                        state[i] = _DONE
                        end[i] = now
                        del running[i]
                        free += size[i]
                        if free_set is not None:
                            free_set = free_set | held.pop(i)
                        if i in segs:
                            segs[i].append((seg_begin[i], now))
                        killed.append(i)
                        preempted = True
                        run_dirty = True
                        continue
                    if not 0 <= i < n or state[i] != _RUNNING:
                        raise SimulationError(f"policy preempted job {_name(trace, i)}, which is not running")
                    if not preemptable:
                        raise SimulationError(f"policy preempted job {_name(trace, i)}, which is not preemptable")
                    n_i = size[i]
                    began = seg_begin[i]
                    ran = now - began
                    paid = debt[i] if debt[i] < ran else ran
                    overhead_cs += paid * n_i
                    progress_made = ran - paid
                    if requeue:
                        lost_cs += (done[i] + progress_made) * n_i
                        done[i] = 0.0
                        debt[i] -= paid
                    else:
                        done[i] += progress_made
                        debt[i] += 2.0 * overhead - paid
                    ckpts[i] += 1
                    segs.setdefault(i, []).append((began, now))
                    seg[i] += 1
                    state[i] = _PENDING
                    del running[i]
                    free += n_i
                    if free_set is not None:
                        free_set = free_set | held.pop(i)
                    insort(
                        pending,
                        gate_waiting(i, n_i, wall[i] - done[i] + debt[i], done[i], None)
                        if gated
                        else Waiting(
                            i,
                            n_i,
                            wall[i] - done[i] + debt[i],
                            True,
                            users[i],
                            done[i],
                            dres(i),
                            place=req_of(i),
                            devices=dask(i),
                        ),
                        key=key,
                    )  # runs whole from now on
                    preempted = True
                    run_dirty = True
                for i in started:  # pending stays sorted by job id (= submit order)
                    if i >= n:  # a flexible reservation's entry
                        pending[:] = [w for w in pending if w.id != i]
                        continue
                    k = bisect_left(pending, i if key is _by_id else order_key[i], key=key)
                    if k < len(pending) and pending[k].id == i and state[i] == _RUNNING:
                        del pending[k]
                if not preempted:
                    break
        else:
            skipped += 1
        if ts is not None:
            ts.append((now, ncores - free, len(pending)))

    if pending:
        why = last_reasons.get(pending[0].id)
        raise SimulationError(
            f"policy {params.policy.value} left {len(pending)} jobs waiting on an idle machine "
            f"(first: job {_name(trace, pending[0].id)} of {pending[0].ncpus} cores" + (f": {why})" if why else ")")
        )
    return Result(
        trace,
        params,
        mode,
        overhead,
        first,
        end,
        ckpts,
        segs,
        overhead_cs,
        lost_cs,
        passes,
        skipped,
        ts,
        rvs,
        activated,
        sum(splittable),
        n_pieces,
        n_tasks,
        eligible,
        cancelled,
        tunings,
        devices=devices,
        gpus=gpus,
        killed=killed,
    )


@dataclass(frozen=True, slots=True)
class Tuner:
    """Settings chosen again during a replay (``simulate(tuner=...)``): every ``every`` seconds,
    ``choose(now, finished, end, params)`` from the jobs ended by ``now`` (indices in the order they
    ended; ``end`` their end times) and the settings in force."""

    every: float
    choose: Callable[[float, list[int], list[float], Params], Params]


def _name(trace: Trace, i: int) -> str:
    return str(trace.ids[i]) if 0 <= i < len(trace.ids) else f"#{i}"
