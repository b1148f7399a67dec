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

The state of a replay is a :class:`~gridsched.sim.replay.Replay`; this module is
its event loop, one function per kind of event, and the decisions of each pass
are carried out by :mod:`gridsched.sim.decisions`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace as _replace
from heapq import heappop, heappush
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from gridsched.core.eligible import throttled
from gridsched.core.policy import quiet_when_full, schedule
from gridsched.core.policy.quick import ckpt_pass, easy_plain
from gridsched.core.predict import run_ratio
from gridsched.core.topology import Device, MachineMap
from gridsched.core.types import BackfillOrder, Params, Policy, Predictor, Resv, Snapshot, Waiting
from gridsched.sim import lean as lean_replay
from gridsched.sim import lean_ckpt
from gridsched.sim.decisions import apply
from gridsched.sim.records import Gates, Mode, Result, SimMemory, SimResv, SimulationError, Tuner
from gridsched.sim.replay import DONE, INF, PENDING, RUNNING, Replay, job_name
from gridsched.sim.swf import Trace

if TYPE_CHECKING:
    from gridsched.sim.splits import SubTasks

__all__ = ["Gates", "Mode", "Result", "SimResv", "SimulationError", "Tuner", "simulate"]

MAX_REPASS = 16  # passes at one instant after preemptions, at most
_BY_RATIO = Predictor.USER_RATIO
_EMPTY: Mapping[Any, Any] = {}  # an empty mapping of a snapshot (never changed)
_NO_CORES: frozenset[int] = frozenset()
_ncpus = attrgetter("ncpus")


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
    memory: SimMemory | None = None,
    split_tasks: dict[int, SubTasks] | None = None,
    lean: bool = True,
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
    that never ran are split (a preempted one runs whole).  With
    ``split_tasks`` (:mod:`gridsched.sim.splits`, after its ``apply`` to
    ``trace``) the jobs it names are splittable with sub-tasks of their own
    sizes and run times: a piece's chains hold one core count each, and a job
    started whole runs the sub-tasks it has left in order on its cores.

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

    With ``memory`` the machine's memory is one pool, as in the daemon
    (:mod:`gridsched.core.memory`): each job asks for ``memory.asks[i]`` MiB of
    the ``memory.total`` the pool holds, a floating resource of every pass.

    With a ``tuner`` the settings are chosen again every ``tuner.every`` seconds from the first
    submission: ``tuner.choose(now, finished, end, params)`` sees the jobs that have ended by then
    (their indices in the order they ended, and the end times) -- nothing the replay has not yet
    reached -- and returns the settings to use from then on.

    A replay under easy (in queue order or shortest first) with none of the above (nor priorities or
    per-user limits) is made by :mod:`gridsched.sim.lean`, which keeps state of its own from event to
    event and gives the same result; ``lean=False`` makes it here (the tests compare the two).  Any other
    replay with no reservation, gate, floating resource, device, memory pool, machine map, splitting or
    priority (checkpoint-backfill, with a tuner or not) has its events handled by
    :mod:`gridsched.sim.lean_ckpt` on the same state, and ``lean=False`` handles them here.
    """
    if (
        lean
        and fast
        and params.policy is Policy.EASY
        and params.backfill_order in (BackfillOrder.QUEUE, BackfillOrder.SHORTEST)
        and not params.priority.weighted
        and not params.priority.weight_fairshare
        and not params.max_cpus_per_user
        and not (reservations or floating or machine is not None or gates or tuner or devices or memory)
        and split_above is None
        and not split_tasks
        and not trace.devices
        and lean_replay.takes(trace)
    ):
        try:
            return _lean(trace, params, overhead, mode, series, progress)
        except lean_replay.Fallback:
            pass
    r = Replay(
        trace,
        params,
        overhead=overhead,
        mode=mode,
        fast=fast,
        series=series,
        progress=progress,
        reservations=reservations,
        floating=floating,
        machine=machine,
        place=place,
        split_above=split_above,
        gates=gates,
        tuner=tuner,
        devices=devices,
        memory=memory,
        split_tasks=split_tasks,
    )
    if lean and lean_ckpt.takes(r):
        lean_ckpt.run(r)
    else:
        _run(r)
    return _result(r)


def _lean(
    trace: Trace,
    params: Params,
    overhead: float,
    mode: Mode,
    series: bool,
    progress: Callable[[int], None] | None,
) -> Result:
    """The replay of :mod:`gridsched.sim.lean`, as the :class:`Result` :func:`simulate` gives."""
    n = len(trace)
    shortest = params.backfill_order is BackfillOrder.SHORTEST
    out = lean_replay.replay(trace, quiet_when_full(params), series, progress, shortest)
    return Result(
        trace, params, mode, overhead, out.start, out.end, [0] * n, {}, 0.0, 0.0, out.passes, out.skipped, out.series
    )


def _run(r: Replay) -> None:
    """The event loop: the next instant with an event, the batch of events then, and a pass when one can
    decide anything."""
    pending, ends, ts, fast, ncores, n, submit = r.pending, r.ends, r.ts, r.fast, r.ncores, r.n, r.submit
    state, seg = r.state, r.seg
    while True:
        # The next instant with an event (INF: none is left), and the plan's timer (its ``wake_at`` or the
        # head's reservation time, whichever is first); the end events of preempted segments dropped.
        while ends:
            _t, i, s = ends[0]
            if state[i] == RUNNING and seg[i] == s:
                break
            heappop(ends)
        nxt = r.nxt
        now = submit[nxt] if nxt < n else INF
        if ends and ends[0][0] < now:
            now = ends[0][0]
        if r.others:  # reservations, holds, pieces of split jobs
            now = _other_next(r, now)
        timer = r.wake
        if r.head_at < timer:
            timer = r.head_at
        if timer < now:
            now = timer
        if r.next_tune < now < INF:  # tuning instants only while the replay has events left
            now = r.next_tune
        if now == INF:
            break
        # The batch of events at `now`.
        need_pass = timer == now
        was_queued = bool(pending)
        if ends and ends[0][0] == now and _end_jobs(r, now):
            need_pass = True
        if r.others and _other_events(r, now):  # reservations ending, holds released, pieces of split jobs ending
            need_pass = True
        if now >= r.next_tune and _tune(r, now):  # a tuning instant: what has ended by now chooses the settings
            need_pass = True
        if r.nxt < n and submit[r.nxt] == now:
            need_pass = _arrive(r, now, need_pass, was_queued)
        if r.rvs and _create_reservations(r, now):
            need_pass = True
        if need_pass and fast and not r.rv_live and not r.gated:
            need_pass = _needed(r, now)
        if need_pass or not fast:
            _passes(r, now)
        else:
            r.skipped += 1
        if ts is not None:
            ts.append((now, ncores - r.free, len(pending)))


def _other_next(r: Replay, now: float) -> float:
    """The first of ``now`` and the next reservation's creation, reservation event or end of a piece of a
    split job."""
    rvs, rv_next = r.rvs, r.rv_next
    if rv_next < len(rvs) and rvs[r.rv_order[rv_next]].create < now:
        now = rvs[r.rv_order[rv_next]].create
    if r.rv_events and r.rv_events[0][0] < now:
        now = r.rv_events[0][0]
    if r.piece_ends and r.piece_ends[0][0] < now:
        now = r.piece_ends[0][0]
    return now


def _end_jobs(r: Replay, now: float) -> bool:
    """The jobs whose run ends at ``now`` end; whether one did (a preempted segment's end is none)."""
    ends, state, seg, end, running, size = r.ends, r.state, r.seg, r.end, r.running, r.size
    users, work, wall, debt, segs, history, ratios = r.users, r.work, r.wall, r.debt, r.segs, r.history, r.ratios
    acc, keep_ratios, learn, fixed, reclaim, special = r.acc, r.keep_ratios, r.learn, r.fixed, r.reclaim, r.special
    ended = False
    while ends and ends[0][0] == now:
        t, i, s = heappop(ends)
        if state[i] != RUNNING or seg[i] != s:
            continue
        ended = True
        state[i] = DONE
        if now > end[i]:
            end[i] = now
        del running[i]
        if fixed.pop(i, None) is None and reclaim.pop(i, None) is None:
            del special[i]
        r.run_dirty = True
        if r.tuner is not None:
            r.finished.append(i)
        n_i = size[i]
        r.free += n_i
        if r.free_set is not None:
            r.free_set = r.free_set | r.held.pop(i)
        if debt[i]:
            r.overhead_cs += debt[i] * n_i
            debt[i] = 0.0
        if i in segs:
            segs[i].append((r.seg_begin[i], now))
        if learn:  # what the user-history and user-ratio predictors read
            u = users[i]
            h = history.get(u)
            history[u] = (h[-1], work[i]) if h else (work[i],)
            rh = ratios.get(u)
            rr = run_ratio(work[i], wall[i])
            ratios[u] = (*rh[-keep_ratios:], rr) if rh else (rr,)
        if acc is not None:
            acc.add(users[i], work[i] * n_i, now, r.pp.half_life)
        if r.gated:
            r.states[i] = r.g_ended.get(i, "COMPLETED")
            for j, think in r.followers.get(i, ()):
                r.begin_at[j] = now + think
                if state[j] == PENDING:
                    r.regate(j, begin=now + think)
    return ended


def _other_events(r: Replay, now: float) -> bool:
    """Reservations that end or expire at ``now`` (the core ends them), holds released, pieces of split jobs
    that end; whether there was any."""
    rv_events, piece_ends = r.rv_events, r.piece_ends
    changed = False
    while rv_events and rv_events[0][0] <= now:  # a reservation's end or expiry: the core ends it
        _t, rid = heappop(rv_events)
        if rid in r.rv_live:
            changed = True
        elif rid < 0:  # a hold released
            i = -1 - rid
            del r.held_until[i]
            if r.state[i] == PENDING:
                r.regate(i, held="")
            changed = True
    while piece_ends and piece_ends[0][0] <= now:
        _t, pid = heappop(piece_ends)
        i = r.piece_of.pop(pid)
        r.free += r.running.pop(pid).ncpus
        r.run_dirty = True
        if r.free_set is not None:
            r.free_set = r.free_set | r.held.pop(pid)
        r.outstanding[i] -= 1
        r.end[i] = max(r.end[i], now)  # a job ends with the last of its sub-tasks
        changed = True
    return changed


def _tune(r: Replay, now: float) -> bool:
    """A tuning instant: what has ended by ``now`` chooses the settings from now on; whether they changed
    (the plan in force is then dropped)."""
    tuner = r.tuner
    assert tuner is not None  # (next_tune is INF without one)
    new = tuner.choose(now, r.finished, r.end, r.params)
    if r.gated:
        new = _replace(new, cancel_never_satisfied=True)
    while r.next_tune <= now:
        r.next_tune += tuner.every
    r.tunings.append((now, new))
    if new == r.params:
        return False
    r.params = new
    r.fcfs = new.policy is Policy.FCFS
    r.quiet_full = quiet_when_full(new) and not r.splits
    r.quick = r.plain_easy(new)
    r.quick_ckpt = r.plain_ckpt(new)
    r.head, r.head_at, r.wake = None, INF, INF
    return True


def _arrive(r: Replay, now: float, need_pass: bool, was_queued: bool) -> bool:
    """The jobs submitted at ``now`` join the queue; whether a pass is needed (``need_pass``, or one of them
    may start or become the head)."""
    n, submit, size, wall, users, splittable = r.n, r.submit, r.size, r.wall, r.users, r.splittable
    pending, state, preemptable, gated, plain = r.pending, r.state, r.preemptable, r.gated, r.plain
    smallest = r.smallest
    nxt = arrived = r.nxt
    while nxt < n and submit[nxt] == now:
        i = nxt
        nxt += 1
        state[i] = PENDING
        if gated:
            w_i = r.waiting(i, size[i], wall[i], 0.0, r.split_info(i) if splittable[i] else None)
            pending.append(w_i)
            smallest = None
            if w_i.deps or w_i.held or w_i.begin is not None:
                r.ungated.add(i)
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
                    place=r.req_of(i),
                    split=r.split_info(i) if splittable[i] else None,
                    resources=r.dres(i),
                    devices=r.dask(i),
                )
            )
            smallest = None
        if not need_pass and (
            r.prio or not was_queued or ((size[i] <= r.free or (splittable[i] and r.free)) and not r.fcfs)
        ):
            need_pass = True
    r.nxt = nxt
    r.smallest = smallest
    if r.progress is not None and nxt // r.step != arrived // r.step:
        r.progress(nxt)
    return need_pass


def _create_reservations(r: Replay, now: float) -> bool:
    """The reservations created at ``now`` (after the jobs submitted at the same instant: queue order);
    whether there was any."""
    n, rvs, order = r.n, r.rvs, r.rv_order
    created = False
    while r.rv_next < len(rvs) and rvs[order[r.rv_next]].create <= now:
        k = order[r.rv_next]
        r.rv_next += 1
        rv = rvs[k]
        r.rv_live[n + k] = Resv(n + k, rv.ncpus, rv.duration, rv.resources, rv.start, place=rv.place)
        if rv.start is None:
            r.pending.append(Waiting(n + k, rv.ncpus, rv.duration, False, "", 0.0, rv.resources, None, True))
            r.smallest = None
        else:
            heappush(r.rv_events, (rv.start + rv.duration, n + k))
        created = True
    return created


def _needed(r: Replay, now: float) -> bool:
    """Whether a pass can decide anything after this batch (with ``fast``, no reservation, no gates): not
    with an empty queue (the plan is empty), nor when the policy is quiet while fewer cores are free than
    the smallest pending job needs (:func:`gridsched.core.policy.quiet_when_full`)."""
    if not r.pending:  # nothing to decide: the plan is empty
        r.head, r.head_at, r.wake = None, INF, INF
        return False
    if r.quiet_full:
        if r.smallest is None:
            r.smallest = min(map(_ncpus, r.pending))
        if r.free < r.smallest:  # nothing fits now, and nothing but a start can change
            if r.head_at <= now:  # a timer that has come asks for nothing more (else it would again)
                r.head_at = INF
            if r.wake <= now:
                r.wake = INF
            return False
    return True


def _passes(r: Replay, now: float, quick_done: bool = False) -> None:
    """Pass at ``now`` and carry the plan out; again at once (up to :data:`MAX_REPASS` passes) while a plan
    changes more than starts (a preemption, a reservation's end, ...).  ``quick_done``: the quick
    checkpoint-backfill pass has left the first pass to the general one already."""
    r.wake = INF
    quick_ckpt = r.quick_ckpt  # (the settings change only at a tuning instant, never within passes)
    for _ in range(MAX_REPASS):
        r.passes += 1
        # (what schedule would answer, without its steps; under checkpoint-backfill without a snapshot, the
        # running jobs read once from the replay's own table)
        if quick_ckpt and not quick_done:
            params = r.params
            plan = ckpt_pass(
                now,
                r.ncores,
                r.special.values(),
                r.pending,
                params,
                r.head,
                r.history,
                r.ratios if params.predictor is _BY_RATIO else _EMPTY,
                True,  # (a replay that takes this pass makes plain entries only)
                r.fixed.values(),
                r.free,
                r.reclaim.values(),
            )
        else:
            plan = None
        quick_done = False
        if plan is None:
            if r.run_dirty:
                r.run_tuple = tuple(r.running.values())
                r.run_dirty = False
            snap = _snapshot(r, now)
            plan = easy_plain(snap) if r.quick else None
            if plan is None:
                plan = schedule(snap)
        if r.ungated:
            last = r.last_reasons = dict(plan.reasons)
            for i in [i for i in r.ungated if i not in last or throttled(last[i])]:
                r.ungated.discard(i)
                r.eligible[i] = now  # type: ignore[index]
        head = r.head = plan.head
        # a reservation time this pass has already reached asks for no pass of its own (times in
        # floating point: a running job's counted end may fall a hair before its end event)
        r.head_at = head.time if head is not None and head.time > now else INF
        w = plan.wake_at
        r.wake = w if w is not None and w > now else INF
        if not plan.decisions or not apply(r, plan, now):
            break


def _snapshot(r: Replay, now: float) -> Snapshot:
    """What the core is told at ``now``."""
    params = r.params
    # every field by position, the empty ones shared (keywords and default factories cost, once a pass)
    return Snapshot(
        now,
        r.ncores,
        r.run_tuple,
        r.stamp(r.pending) if r.prio else tuple(r.pending),
        params,
        r.free_set,
        r.head,
        r.history,
        r.flo,
        tuple(r.rv_live.values()) if r.rv_live else (),
        r.machine,
        _EMPTY,  # parents, lent: no job trees in a trace
        (),
        r.states,
        r.gated,
        r.splits,  # splitting
        (),  # ended
        _NO_CORES,  # drained
        r.devices,
        _EMPTY,  # kept, kept_floating, kept_boards: no job is suspended
        _EMPTY,
        _EMPTY,
        r.acc.now(now, r.pp.half_life) if r.acc is not None else _EMPTY,  # usage
        False,  # ranked
        _EMPTY,  # priorities
        r.ratios if params.predictor is _BY_RATIO else _EMPTY,
    )


def _result(r: Replay) -> Result:
    """What happened to every job; an error if the policy left jobs waiting on an idle machine."""
    pending = r.pending
    if pending:
        why = r.last_reasons.get(pending[0].id)
        raise SimulationError(
            f"policy {r.params.policy.value} left {len(pending)} jobs waiting on an idle machine "
            f"(first: job {job_name(r.trace, pending[0].id)} of {pending[0].ncpus} cores"
            + (f": {why})" if why else ")")
        )
    return Result(
        r.trace,
        r.params,
        r.mode,
        r.overhead,
        r.first,
        r.end,
        r.ckpts,
        r.segs,
        r.overhead_cs,
        r.lost_cs,
        r.passes,
        r.skipped,
        r.ts,
        r.rvs,
        r.activated,
        sum(r.splittable),
        r.n_pieces,
        r.n_tasks,
        r.eligible,
        r.cancelled,
        r.tunings,
        devices=r.devices,
        gpus=r.gpus,
        killed=r.killed,
    )
