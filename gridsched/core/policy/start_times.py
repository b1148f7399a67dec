"""Predicted start times of the pending jobs (``forecast``, ``forecast_reasons``), from the pass's own
state: the pass is run, then every other job is held at its earliest start in queue order."""

from __future__ import annotations

from dataclasses import replace
from math import inf

from gridsched.core import priority, tree
from gridsched.core.eligible import eligibility
from gridsched.core.placement import Request, claimed, place_inside
from gridsched.core.policy.backfill import backfill
from gridsched.core.policy.conservative import conservative
from gridsched.core.policy.fcfs import fcfs
from gridsched.core.policy.room import Pass
from gridsched.core.policy.waits import eligibility_wait, waiting_reasons
from gridsched.core.profile import Profile, earliest_common_start
from gridsched.core.split import Planned, plan_tasks
from gridsched.core.types import Forecast, Plan, Policy, Running, Snapshot, StartTasks, Wait, Waiting, WaitKind


def forecast(snap: Snapshot) -> dict[int, float]:
    """Predicted start time of every pending job (``inf``: never); see :func:`forecast_reasons`."""
    return forecast_reasons(snap).times


def forecast_reasons(snap: Snapshot) -> Forecast:
    """Predicted start time of every pending job (``inf``: never), and why each one that does not start now waits.

    Jobs the plan starts now get ``now``.  Under conservative the times are
    the reservations (a splittable job's: its first sub-task's, see below).
    Otherwise the availability profile (running jobs at their counted ends,
    jobs started now at ``now + (planned or estimate)``) first takes the
    head job at its reservation time, then every other job in
    queue order at its earliest start; under fcfs no job is put before the
    one ahead of it.  A splittable job after the head (easy,
    checkpoint-backfill; every one under conservative; one the pass would split: no floating resources, no
    devices) is planned sub-task by sub-task (:func:`gridsched.core.split.plan_tasks`):
    its sub-tasks, in order, take the windows that close by its own earliest
    start as a whole (under conservative: its reservation, every other
    reservation held where it is), from the profile's next change on (what is free now and
    unused the pass left unused), those left run in that start, and its time is
    its first sub-task's; ``Forecast.tasks`` holds every planned sub-task
    (those the pass takes out now at ``now``).  Only the head's time is a
    promise; the others are estimates, like ``squeue --start``.  Jobs that would start now on cores
    a yielding parent lends get ``now``.

    The reasons (:class:`~gridsched.core.types.Wait`), for every pending job
    that does not start now, the first that applies:

    * a job that may not be scheduled yet: its eligibility reason (held, begin
      time, dependency -- never satisfied or not --, array throttle);
    * a job bound to a reservation: ``BOUND_NEVER`` if it can never start in
      it (why: its cores cannot hold it, it would not end before the
      reservation ends its jobs, the reservation is never activated),
      ``RESERVATION`` while the reservation is not active, else as below;
    * a job forecast never to start: ``DRAINED`` (``never``) if it could start
      with the drained cores (``Snapshot.drained``) in service, else
      ``NEVER_FITS`` with what is missing;
    * a job that the free cores cannot hold now but could with the drained
      cores: ``DRAINED``;
    * the head job (the one holding the reservation; without one, the first
      waiting job in queue order): ``LICENSES`` if a floating resource (a
      licence) is all it lacks now, else ``RESOURCES`` naming what it lacks
      now (``"cores"``, a device type, or ``""``: nothing by count);
    * every other waiting job: ``LICENSES`` if a licence is all it lacks now
      and the policy backfills (under fcfs the jobs ahead of it come first
      whatever it lacks), else ``PRIORITY``.

    What a job lacks now is counted against what is free now (running jobs,
    active reservations and the jobs this forecast starts now hold the rest);
    Slurm's squeue shows ``Licenses`` for such a wait, and ``Resources`` for
    cores and GRES alike.
    """
    if snap.ranked or snap.params.priority.weighted:  # the queue by priority, as in the pass
        snap = priority.prioritized(snap)
    pending, elig, _ = eligibility(snap)
    why: dict[int, Wait] = {}
    tasks: dict[int, Planned] = {}
    if elig:
        waiting = {w.id: w for w in snap.pending}
        for jid, text in elig.items():
            why[jid] = eligibility_wait(waiting[jid], text, snap.now)
    if pending is not snap.pending:
        snap = replace(snap, pending=pending)
    if snap.lent:  # jobs that start now on lent cores; the others on the pool (as the pass)
        starts = tree.lend(snap)
        out, head, started = _forecast(tree.pool_view(snap, (s.job for s in starts)), why, tasks)
        out.update((s.job, snap.now) for s in starts)
        started.update(s.job for s in starts)
    else:
        out, head, started = _forecast(snap, why, tasks)
    waiting_reasons(snap, out, head, started, why)
    return Forecast(out, why, tasks)


def _forecast(
    snap: Snapshot, why: dict[int, Wait] | None = None, tasks: dict[int, Planned] | None = None
) -> tuple[dict[int, float], int | None, set[int]]:
    """Predicted start (activation, for flexible entries) of every pending entry (``inf``: never), the
    head job (the one the pass holds a reservation for; None if none) and the entries the pass starts now;
    ``why`` gets the reasons of bound jobs that can never start, ``tasks`` the planned sub-tasks of
    splittable jobs."""
    out: dict[int, float] = {}
    params = snap.params
    head: int | None = None
    if params.policy is Policy.CONSERVATIVE:
        plan, ps = conservative(snap, out)
        head = plan.head.job if plan.head is not None else None
        if snap.splitting and tasks is not None:
            _plan_reserved(ps, plan, out, tasks)
    else:
        if params.policy is Policy.FCFS:
            plan, ps = fcfs(snap, out)
        else:
            ckpt = params.policy is Policy.CHECKPOINT_BACKFILL
            plan, ps = backfill(snap, ckpt, ckpt and params.cascade)
        now = snap.now
        started = {d.job for d in plan.starts} | {a.resv for a in plan.activations}
        last = now
        if plan.head is not None:  # already held in the profiles by the pass
            last = out[plan.head.job] = max(plan.head.time, now)
            head = plan.head.job
            if snap.kept_floating and head in snap.kept_floating:
                hw = next(w for w in snap.pending if w.id == head)
                _let_go(ps, hw, last + hw.estimate)
        in_order = params.policy is Policy.FCFS
        ever: dict[tuple[int, Request | None], bool] = {}
        reach = (ps.free_set or frozenset()).union(*(c for _, c in ps.releases)) if ps.machine else frozenset()
        taken = _taken_now(plan) if snap.splitting and not in_order and tasks is not None else None
        nxt = next((t for t, _ in ps.profs[0].steps() if t > now), now) if taken is not None else now
        on_boards = ps.counts_board_memory()
        for w in snap.pending:
            if w.bind is not None:
                continue
            if w.id in started:
                out[w.id] = now
            elif w.id not in out:
                v = ps.vec(w)
                if not ps.possible(v):
                    out[w.id] = inf
                    continue
                if ps.machine is not None and w.place is not None and not _ever_placed(ps, w, ever, reach):
                    out[w.id] = inf  # no cores it may ever have hold its requirement
                    continue
                t = earliest_common_start(
                    [(ps.profs[d], v[d]) for d in range(ps.dims) if v[d] > 0], w.estimate, last if in_order else now
                )
                if on_boards and t < inf and ps.asks_board_memory(w):  # its memory on the boards of its cores
                    if not ps.placed_on_boards_at(w, v[0], t):
                        since = ps.since_on_boards(w, v[0])
                        t = ps.earliest(v, w.estimate, None, max(since, t)) if since < inf else inf
                sp = w.split
                if taken is not None and tasks is not None and sp is not None and not (w.resources or sp.devices):
                    out[w.id] = _plan_split(ps, w, v, t, nxt, taken.get(w.id, ()), tasks)
                    continue
                if t < inf:
                    ps.hold(t, w.estimate, v)
                    _let_go(ps, w, t + w.estimate)
                out[w.id] = t
                if in_order:
                    last = t
    _bound_forecast(snap, out, why)
    return out, head, {d.job for d in plan.starts} | {a.resv for a in plan.activations}


def _plan_reserved(ps: Pass, plan: Plan, out: dict[int, float], tasks: dict[int, Planned]) -> None:
    """Under conservative: each splittable job (no floating resources, no devices), in queue order, its
    sub-tasks planned (:func:`_plan_split`) into the windows that close by its own reservation, the rest in
    that reservation.  Every reservation is held already and stays where it is: only the job's own is let
    go while its sub-tasks are planned (and held again if some are left for it)."""
    started = {d.job for d in plan.starts}
    taken = _taken_now(plan)
    now = ps.now
    prof = ps.profs[0]
    nxt = next((t for t, _ in prof.steps() if t > now), now)
    for w in ps.snap.pending:
        sp = w.split
        if sp is None or w.bind is not None or w.flex or w.id in started or w.resources or sp.devices:
            continue
        t = out.get(w.id, inf)
        if t == inf or w.estimate <= 0:
            continue
        prof.add(t, t + w.estimate, w.ncpus)  # its own reservation, planned anew
        out[w.id] = _plan_split(ps, w, ps.vec(w), t, nxt, taken.get(w.id, ()), tasks)


def _taken_now(plan: Plan) -> dict[int, tuple[tuple[int, ...], ...]]:
    """The chains of sub-tasks the pass takes out of splittable jobs now, by job."""
    out: dict[int, tuple[tuple[int, ...], ...]] = {}
    for d in plan.decisions:
        if type(d) is StartTasks:
            out[d.job] = out.get(d.job, ()) + d.chains
    return out


def _plan_split(
    ps: Pass,
    w: Waiting,
    v: tuple[int, ...],
    whole: float,
    after: float,
    chains: tuple[tuple[int, ...], ...],
    tasks: dict[int, Planned],
) -> float:
    """Plan splittable job ``w``'s sub-tasks (:func:`gridsched.core.split.plan_tasks`) into the windows before
    ``whole`` (its earliest start as a whole) from ``after`` on, the rest in that start, held in the pass's
    profiles; its predicted start (its first sub-task's).  ``chains``: those the pass takes out now, each
    chain's sub-tasks one after another from now."""
    sp = w.split
    assert sp is not None
    sizes = sp.sizes
    one = (sp.ncpus, sp.task_time)

    def size(i: int) -> tuple[int, float]:
        return sizes[i] if sizes else one

    now = ps.now
    started: list[tuple[int, float, float]] = []
    for ch in chains:
        t = now
        for i in ch:
            started.append((i, t, t + size(i)[1]))
            t += size(i)[1]
    gone = {i for i, _, _ in started}
    left = tuple(i for i in sp.left if i not in gone) if gone else sp.left
    pad = (0,) * (ps.dims - 1)
    planned, whole_used = plan_tasks(
        ps.profs[0],
        lambda s, t, c: ps.hold(s, t, (c, *pad)),
        left,
        size,
        max(after, now),
        whole,
        w.ncpus,
        w.estimate,
        not sizes,
    )
    if whole_used:
        ps.hold(whole, w.estimate, v)
    tasks[w.id] = tuple(sorted((*started, *planned))) if started else planned  # in the sub-tasks' order
    first = min((s for _, s, _ in (*started, *planned)), default=inf)
    return min(first, whole) if whole_used else first


def _let_go(ps: Pass, w: Waiting, end: float) -> None:
    """A suspended job forecast to be continued lets go of what it kept (its memory) at its forecast ``end``."""
    kept = ps.snap.kept_floating.get(w.id) if ps.snap.kept_floating else None
    if not kept or not ps.profs:
        return
    on_boards = ps.snap.kept_boards.get(w.id) if ps.snap.kept_boards else None
    if on_boards and ps.counts_board_memory():  # and its memory on the boards it keeps it on
        ps.let_go_on_boards(dict(on_boards), end)
    for name, k in kept:
        d = ps.index.get(name, 0)
        if d:
            ps.profs[d].add(end, inf, k)


def _ever_placed(ps: Pass, w: Waiting, ever: dict[tuple[int, Request | None], bool], reach: frozenset[int]) -> bool:
    """Whether ``w``'s mapping requirement can be met on ``reach`` (the cores free now or held by a job that
    ends some day); ``ever``: the answers so far, by request."""
    key = (w.ncpus, w.place)
    ok = ever.get(key)
    if ok is None:
        ok = ever[key] = ps.placeable_on(w, reach)
    return ok


def _bound_forecast(snap: Snapshot, out: dict[int, float], why: dict[int, Wait] | None = None) -> None:
    """Jobs bound to a reservation, in queue order, each at the earliest time it fits in it.

    From the reservation's activation (now, if it is active, with its running
    jobs held until their walltimes), in what it has left; ``inf`` if that is
    after the reservation ends its jobs (``kill``) less the job's walltime.
    So two bound jobs that cannot both run at once get different times.
    ``why`` (if given) gets the reason of each bound job that can never start (``BOUND_NEVER``).
    """
    now = snap.now
    bound: dict[int, list[Waiting]] = {}
    for w in snap.pending:
        if w.bind is not None:
            bound.setdefault(w.bind, []).append(w)
    if not bound:
        return
    inside: dict[int, list[Running]] = {}
    for x in snap.running:
        if x.bind is not None:
            inside.setdefault(x.bind, []).append(x)
    for r in snap.reservations:
        jobs = bound.get(r.id)
        if not jobs:
            continue
        if r.active:
            t0, end = now, (r.end if r.end is not None else inf)
        elif r.start is not None:
            t0, end = max(r.start, now), r.start + r.duration
        elif r.id in out:
            t0 = out[r.id]
            end = t0 + r.duration
        else:
            continue
        if t0 == inf:
            for w in jobs:
                out[w.id] = inf
                if why is not None:
                    why[w.id] = Wait(WaitKind.BOUND_NEVER, what="resv", resv=r.id)
            continue
        prof = Profile(t0, r.ncpus)
        for x in inside.get(r.id, ()) if r.active else ():
            prof.reserve(t0, max(x.start + x.estimate - t0, 0.0), x.ncpus)
        # on a map, an active reservation's cores are known: a job they can never hold never starts
        machine = snap.machine if r.active and r.cores and snap.free is not None else None
        own = frozenset(r.cores)
        extra = claimed(machine, own, r.place).difference(own) if machine is not None and r.place else frozenset()
        for w in jobs:
            if (
                machine is not None
                and w.place is not None
                and place_inside(machine, own, extra, w.ncpus, w.place) is None
            ):
                out[w.id] = inf
                if why is not None:
                    why[w.id] = Wait(WaitKind.BOUND_NEVER, what="place", resv=r.id)
                continue
            t = prof.earliest_start(w.ncpus, w.estimate, t0)
            if t == inf or (r.kill and t + w.estimate > end):
                out[w.id] = inf
                if why is not None:
                    why[w.id] = Wait(WaitKind.BOUND_NEVER, what="time", resv=r.id)
                continue
            prof.reserve(t, w.estimate, w.ncpus)
            out[w.id] = t
