"""``schedule(snapshot) -> Plan``: the one pass both drivers call, for every policy.

Every pass is a pure function of the :class:`~gridsched.core.types.Snapshot`:
the time ``now``, the running jobs, the pending queue in priority order, the
free cores (or only their number), the policy settings, the head-job memo and
the users' run-time history.  ``forecast(snapshot)`` gives each pending job a
predicted start time from the same data (``gstat``, like ``squeue --start``).

Common rules
------------
* A pending job asking for more than the machine can ever offer (free cores
  plus the cores of running jobs; on a map, cores where its requirement can
  be met) is never started and never blocks the queue; its forecast is
  ``inf``.  Jobs ask for at least one core.
* A running job is counted as ending at ``start + estimate`` (its user
  walltime); a job already past that counts as ending ``now``.  A job with
  ``stopping`` set counts as ending ``now``: its cores are "coming free"; no
  job is started on them and no more cores are taken for them.
* A job of walltime 0 ends as it starts.  Reserved for a later time (the
  head's shadow time, a conservative reservation), it holds the instant its
  reservation begins: a job that would still run then must leave it its
  cores (and units) as one of any other walltime, on every machine, with or
  without floating resources or devices; a job ending then need not.
* Placement: in placement mode (``Snapshot.free`` is a set) a started job gets
  the cores :func:`gridsched.core.placement.assign` chooses (the
  lowest-numbered free ones without a map); in count-only mode (``free is
  None``) ``Start.cores`` is ``()``.
* ``Start.backfilled`` is set on a job started by a backfill step: after the
  head job (easy, checkpoint-backfill) or while a job ahead of it keeps
  waiting (conservative).

fcfs
----
Start jobs in queue order while they fit in the free cores; stop at the first
that does not.  ``Plan.head`` is that job, at the earliest time it can start.

easy (EASY backfilling)
-----------------------
Start jobs in queue order while they fit.  The first that does not is the
*head*; its reservation is its *shadow time* ``S``: the earliest running-job
end at which the free cores plus the cores of all jobs ending by then reach its
need.  ``extra`` is the cores free at ``S`` beyond the head's need.  Every
later job, in queue order, starts now if it fits in the cores free now and
either ends by the shadow time (``now + estimate <= S``) or uses only extra
cores (``ncpus <= extra``; starting it this way reduces ``extra``).  Jobs
started earlier in the same pass count as running.  When the shadow time is
``now`` (the head waits only for stopping jobs), ``extra`` is the cores free
now plus those of stopping jobs, beyond the head's need.

The jobs behind the head are tried in queue order (``Params.backfill_order``
``queue``), or shortest estimate first (``shortest``: the "shortest job
backfilled first" of Tsafrir, Etsion and Feitelson's EASY++; equal estimates in
queue order), in easy and checkpoint-backfill alike.  The order changes only
which of the jobs that could backfill start first; the head's reservation is
the same.

conservative (conservative backfilling)
---------------------------------------
The running jobs define an availability profile
(:mod:`gridsched.core.profile`).  Every pending job in queue order gets a
reservation at the earliest time it fits for its whole estimate, and the
reservation is entered in the profile before the next job is considered.  A job
starts now only if its earliest start is ``now`` (and its cores are free now,
not merely coming free), so it delays no earlier job's reservation.  Queue
order and running jobs ending by their estimates guarantee that no job starts
later than its reservation.  The pass stops once nothing more can start now;
``forecast`` computes every reservation.  Counted device slots are not devices
(two slots of one shared GPU are not two GPUs): a job asking for devices is
reserved at the first time, from its count's on, at which
:func:`gridsched.core.devices.choose` can also place it on the devices and (on a
map) cores free then (:class:`_DeviceTimes`); a job that starts now and would
still run at such a reservation's time must leave that job placeable then
(:meth:`_Pass.leaves_devices_at`), else it is reserved later.  Other
reservations are counted in the profile but get no devices of their own.

checkpoint-backfill (the default)
---------------------------------
EASY, with four changes.

1. *Shortened estimates.*  When deciding whether a job other than the head
   that is checkpointable (``preemptable``) may backfill, a prediction shorter
   than its estimate may be used (:mod:`gridsched.core.predict`; ``scaled``:
   ``estimate * p`` when ``estimate > threshold``).  A job is tried in this
   order: it ends by the shadow time on its own estimate (``planned=None``);
   it ends by the shadow time on its prediction (``planned=prediction``); it
   fits in the extra cores (``planned=None``, reduces ``extra``).  Jobs that are
   not checkpointable use the plain EASY rule.  The head is never shortened.
   Every job started after the head has ``Start(backfilled=True)``.
2. *Counting running jobs.*  A running job with ``planned`` set counts as
   ending at ``start + planned`` while that is in the future, and at
   ``start + estimate`` (its user walltime end) once it has outlived it.
3. *The head keeps its reservation.*  ``Snapshot.head`` is the previous pass's
   ``Plan.head``.  While that job is pending it stays the head, wherever it is
   in the queue (a job preempted and requeued ahead of it does not take its
   place; jobs ahead of it are backfill candidates like the others).  If it
   fits now it starts first and the pass goes on as EASY without memo.  If not,
   its reservation is the earlier of the remembered time and a fresh shadow
   time: it may move earlier, never later -- unless it can no longer be met at
   ``max(time, now)`` even by preempting every checkpointable backfilled job,
   in which case the memo is dropped and the pass is plain EASY (fresh head
   and shadow time).
4. *Preemption, only at the reservation time.*  When ``now >= S`` and the head
   still does not fit, running jobs with ``backfilled`` and ``preemptable`` set
   and not ``stopping`` are preempted, most cores first (ties: most recently
   started first, then highest id), until the free cores, plus the cores of
   stopping jobs, plus the preempted cores, reach the head's need.  If even all
   of them would not be enough, nothing is preempted.  Preempted cores count as
   coming free: nothing starts on them in the same pass.  Once the reservation
   time has come, ``extra`` counts only cores free now or coming free
   (stopping or just preempted), never jobs merely counted as ending now, so a
   backfill on "extra" cores can never take what the head is waiting for.

``Params.cascade = True`` selects the naive reading, kept to show its effect:
a backfilled job past ``start + planned`` counts as ending ``now`` and no memo
is kept, so a blocked head preempts at once whenever a backfilled job overruns
its prediction, and a job preempted and requeued ahead of the head becomes the
head in the same instant.

Estimates (every backfilling policy)
------------------------------------
A job may give its own estimate, shorter than its walltime (PBS
``soft_walltime``, ``gsub --estimate``): the pass plans with it
(``Waiting.estimate``; ``Waiting.hard`` is the walltime left).  The estimate
counts only while it holds.  A job started by a backfill step (after the head
under easy and checkpoint-backfill, while a job ahead of it waits under
conservative) that would not have been allowed on its walltime (it would not
fit in the profile for ``hard``) relies on its estimate: it starts with
``Start.planned`` set to the estimate, as a job started on a shortened
prediction does.  Such a running job counts as ending at ``start + planned``
while that is ahead; once it has overrun it, it counts as ending now under
easy and conservative (so the head's reservation time is now), and at its
counted end under checkpoint-backfill (whose head keeps its reservation time).
When the head's reservation time has come and the head does not fit, the
overrunning jobs are among the victims chosen as for checkpoint-backfill's
preemption (rule 4): a checkpointable one is preempted (:class:`Preempt`), one
that is not (checkpoint mode ``none``) is ended as at its walltime
(:class:`Kill`, a TIMEOUT with the reason), as Slurm ends a job whose time
limit was lowered towards ``--time-min`` to backfill it when it reaches that
limit.  A job still within its estimate, or one that would have been allowed
on its walltime, is never stopped for this.  ``Plan.wake_at`` includes the next
``start + planned`` and the head's reservation time while such a job runs.

``Plan.wake_at`` (checkpoint-backfill only): the earliest future time at which
the plan could change with no event -- the head's reservation time when some
checkpointable backfilled job is running, or the next future ``start +
planned`` of a running job; ``None`` otherwise.

One pass, one model
-------------------
Every policy is the same loop over the same state (:class:`_Pass`): one
availability profile per resource (cores, then each floating resource), the
cores free now, and -- with a machine map -- where they are.  The policies
differ only in parameters: fcfs stops at the first job that does not fit;
easy and checkpoint-backfill hold one reservation (the head's) and backfill
around it; conservative holds one for every job; checkpoint-backfill adds the
predictor, the head memo and preemption.  A machine declared by its number of
cores is the one-board case of the same code: counting is what is left when
there is no map.

Placement: with a machine map (``Snapshot.machine`` and ``Snapshot.free``) a
job starts only where its mapping requirement can be met on the free cores
(:func:`gridsched.core.placement.assign`), and its earliest start -- the
shadow time of the head, a conservative reservation -- is the first time, at
the counted ends of running jobs, at which the cores free by then hold its
requirement (:meth:`_Pass.placed_earliest`).  A job that no such time exists
for never starts and never blocks the queue.  Preemption for the head
chooses, among the checkpointable backfilled jobs, the smallest set whose
cores give it a placement (:func:`gridsched.core.preempt.victims`; most cores
first among sets of one size); if none does, nothing is preempted.  For a
head asking for devices the set must also let
:func:`gridsched.core.devices.choose` place it, with or without a map
(:func:`gridsched.core.preempt.device_victims`).  A job
backfilled past the shadow time must leave the head a placement then; once
that time has come, on the cores free now or coming free (the victims'),
whatever the count of extra cores allows (:meth:`_Pass.leaves_room`).  For a
head asking for devices, a job that would still run at the shadow time starts
only if :func:`gridsched.core.devices.choose` can still place the head then,
on what is free then once that job holds what it would get now: the slots of
the devices not held by a job running then and, on a map, the cores free by
then (:meth:`_Pass.leaves_devices_at`; once the time has come, on what is free
or coming free, :meth:`_Pass.leaves_devices`).  The guard holds only if the
head can be placed then at all when the backfilling begins.

Resources
---------
A request is a vector: cores, then one count per floating resource (licences
and the like, machine-wide counters without placement).  A job *fits now*
when every component fits in what is free now *and* the availability profile
of every component (:mod:`gridsched.core.profile`) holds it for its whole
estimate from now: a job never starts on resources promised to someone
later.  A job asking for an unknown floating resource, or for more than the
machine has, never starts and never blocks the queue.

Reservations
------------
* *Active* reservations hold their cores (never in ``Snapshot.free``) and
  resources until their end.  Jobs bound to one (``bind``) are not in the
  general queue: after the general pass, each active reservation (including
  one activated in this pass) starts its bound pending jobs in queue order,
  every one that fits in what it has left (cores, floating resources) and,
  unless the reservation lets its jobs outlive it (``kill`` False), whose
  estimate ends by the reservation's end.  Jobs bound to a waiting
  reservation wait.
* *Fixed* reservations (``start`` set) come first, before every job.  Future
  ones are held in the profiles over ``[start, start + duration)``: a job may
  run before one only if it ends by its start -- or, with
  ``Params.preempt_for_fixed``, if it is checkpointable, in which case it is
  preempted at the start.  A due one is activated as soon as its resources
  are free, until ``start + duration``; with ``preempt_for_fixed`` running
  checkpointable jobs are preempted for it (most cores first), otherwise it
  waits for them.  ``Plan.wake_at`` includes the next future start.
* *Flexible* reservations wait in the queue, at their place, as
  ``Waiting(flex=True)`` entries, and are scheduled exactly like a
  non-checkpointable job of their size and duration; when such an entry
  would start, the reservation is activated instead
  (``Activate(resv, cores, now + duration)``).

Splittable jobs (easy, checkpoint-backfill, conservative)
---------------------------------------------------------
A pending job with ``Waiting.split`` is ``len(split.left)`` independent
sub-tasks, each of ``split.ncpus`` cores and ``split.task_time`` seconds or,
with ``split.sizes``, of its own cores and time; as a whole it asks for one
wave (``ncpus``) for its walltime and is scheduled like any job.  After the
backfill step, the cores still free now form the backfill windows: read from
the cores profile, the cores that some hold (the head's reservation, a fixed
reservation, under conservative every job's reservation) first needs at a
time ``t`` are a window from now until ``t``, so a profile that falls in
steps gives one window per step, each as wide as the drop (cores no hold
ever needs join the latest window).  Each splittable job after the head, in
queue order, that did not start whole fills the windows, the longest first,
with sub-tasks chained on the same cores
(:func:`gridsched.core.split.fill_window`, or
:func:`gridsched.core.split.fill_mixed` for sub-tasks of their own sizes):
one ``StartTasks`` decision per window used, placed like one job of that
many cores.  Every chain ends by its window's end even if each of its
sub-tasks runs for its whole time, so no hold is ever broken and the head
is never delayed; the job keeps the rest of its sub-tasks at its place in
the queue.  Windows that open later (a running job ends before the head's
reservation) are filled by the pass run then.  fcfs never backfills.  A job
that also asks for floating resources or devices is not split (it runs whole),
except one whose sub-tasks ask for devices each (``split.devices``): a window
then takes at most as many chains as the devices have slots free until its
end, each chain on devices of its own (``StartTasks.devices``), and a whole
start of such a job is made pieces of one chain each (:func:`_as_pieces`).

Predictors: ``Params.predictor`` ``user-history`` replaces the scaled rule by
the mean of the user's last two run times, ``user-ratio`` by the walltime times
the user's learned ratio of run time to walltime (see :mod:`gridsched.core.predict`);
preemption and rules 2-4 are unchanged.  The predictor is used only by
checkpoint-backfill.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import compress
from math import inf, nextafter
from operator import attrgetter

from gridsched.core import devices as dev
from gridsched.core import endings, priority, tree
from gridsched.core.eligible import CPU_LIMIT, eligibility
from gridsched.core.ends import NAIVE as _NAIVE
from gridsched.core.ends import PLANNED as _PLANNED
from gridsched.core.ends import USER as _USER
from gridsched.core.ends import counted_end
from gridsched.core.placement import Request, assign, claimed, place_inside
from gridsched.core.predict import READS_USER, make_predictor
from gridsched.core.preempt import device_victims, places_devices, victims
from gridsched.core.profile import Profile, earliest_common_start, from_ends
from gridsched.core.split import as_chains, chain_cores, fill_mixed, fill_window, per_chain
from gridsched.core.tree import preempt_order
from gridsched.core.types import (
    Activate,
    BackfillOrder,
    Decision,
    Forecast,
    HeadReservation,
    Kill,
    Params,
    Plan,
    Policy,
    Preempt,
    Resv,
    Running,
    Snapshot,
    SplitInfo,
    Start,
    StartTasks,
    Wait,
    Waiting,
    WaitKind,
)

_NCPUS = attrgetter("ncpus")
_ESTIMATE = attrgetter("estimate")
_SHORTEST = BackfillOrder.SHORTEST


def free_count(snap: Snapshot) -> int:
    """The number of cores free now."""
    if snap.free is not None:
        return len(snap.free)
    return snap.ncores - sum(r.ncpus for r in snap.running)


def pick(free: frozenset[int] | None, n: int) -> tuple[int, ...]:
    """The cores for a job of ``n`` cores without a map: the lowest-numbered free ones."""
    if free is None:
        return ()
    return tuple(sorted(free)[:n])


def overrun(r: Running, now: float) -> bool:
    """Whether ``r`` was started on an estimate a backfill relied on (``planned``) and has outlived it."""
    return r.planned is not None and r.start + r.planned <= now


def overran(r: Running, head: Waiting | None) -> str:
    """Why ``r``, overrunning the estimate it was backfilled on, is ended (a :class:`Kill`'s reason)."""
    waited = f" while job {head.id} waited" if head is not None else ""
    return f"overran the estimate it was backfilled on ({r.planned:.0f}s){waited}"


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


def forecast(snap: Snapshot) -> dict[int, float]:
    """Predicted start time of every pending job (``inf``: never); see :func:`forecast_reasons`."""
    return forecast_reasons(snap).times


def forecast_reasons(snap: Snapshot) -> Forecast:
    """Predicted start time of every pending job (``inf``: never), and why each one that does not start now waits.

    Jobs the plan starts now get ``now``.  Under conservative the times are
    the reservations.  Otherwise the availability profile (running jobs at
    their counted ends, jobs started now at ``now + (planned or estimate)``)
    first takes the head job at its reservation time, then every other job in
    queue order at its earliest start; under fcfs no job is put before the
    one ahead of it.  Only the head's time is a promise; the others are
    estimates, like ``squeue --start``.  Jobs that would start now on cores
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
    if elig:
        waiting = {w.id: w for w in snap.pending}
        for jid, text in elig.items():
            why[jid] = _eligibility_wait(waiting[jid], text, snap.now)
    if pending is not snap.pending:
        snap = replace(snap, pending=pending)
    if snap.lent:  # jobs that start now on lent cores; the others on the pool (as the pass)
        starts = tree.lend(snap)
        out, head, started = _forecast(tree.pool_view(snap, (s.job for s in starts)), why)
        out.update((s.job, snap.now) for s in starts)
        started.update(s.job for s in starts)
    else:
        out, head, started = _forecast(snap, why)
    _waiting_reasons(snap, out, head, started, why)
    return Forecast(out, why)


def _eligibility_wait(w: Waiting, text: str, now: float) -> Wait:
    """The typed reason of a job :func:`gridsched.core.eligible.eligibility` keeps waiting with ``text``."""
    if text.startswith(CPU_LIMIT):
        return Wait(WaitKind.CPU_LIMIT, text)
    if w.held:
        return Wait(WaitKind.HELD, text)
    if w.begin is not None and w.begin > now:
        return Wait(WaitKind.BEGIN_TIME, text)
    if w.deps and text.startswith(_NEVER_SATISFIED):
        return Wait(WaitKind.DEPENDENCY_NEVER, text)
    if w.deps and (w.array_max is None or not text.startswith(f"array {w.array}:")):
        return Wait(WaitKind.DEPENDENCY, text)
    return Wait(WaitKind.ARRAY_LIMIT, text)


_NEVER_SATISFIED = "dependency never satisfied"  # gridsched.core.depend.status


def _waiting_reasons(
    snap: Snapshot, out: dict[int, float], head: int | None, started: set[int], why: dict[int, Wait]
) -> None:
    """The reasons of the eligible pending jobs that do not start now (see :func:`forecast_reasons`)."""
    ps: _Pass | None = None
    free: list[int] | None = None  # what is free now, once asked (see _short)
    backfills = snap.params.policy is not Policy.FCFS
    first = head
    for w in snap.pending:
        if w.id in why or w.id in started:
            continue
        t = out.get(w.id)
        if t is None:
            continue
        if w.bind is not None:
            active = any(r.id == w.bind and r.active for r in snap.reservations)
            if t == inf:
                why[w.id] = Wait(WaitKind.BOUND_NEVER, what="time", resv=w.bind)
                continue
            if not active:
                why[w.id] = Wait(WaitKind.RESERVATION, resv=w.bind)
                continue
            why[w.id] = Wait(WaitKind.RESOURCES, resv=w.bind)
            continue
        if t == inf:
            if ps is None:
                ps = _Pass(snap, _USER)
            why[w.id] = _never(snap, ps, w)
            continue
        if snap.drained and snap.free is not None and _behind_drained(snap, w):
            why[w.id] = Wait(WaitKind.DRAINED, cores=snap.drained)
            continue
        if first is None:
            first = w.id
        is_head = w.id == first
        if not is_head and not (backfills and w.resources):
            why[w.id] = _PRIORITY
            continue
        if ps is None:
            ps = _Pass(snap, _USER)
        if free is None:
            free = _free_now(snap, ps, started)
        short = _short(ps, free, w)
        if short is not None and short.kind is WaitKind.LICENSES:
            why[w.id] = short
        elif is_head:
            why[w.id] = short or _RESOURCES
        else:
            why[w.id] = _PRIORITY


_RESOURCES = Wait(WaitKind.RESOURCES)
_PRIORITY = Wait(WaitKind.PRIORITY)  # one value for the whole queue (a Wait is immutable)


def _free_now(snap: Snapshot, ps: _Pass, started: set[int]) -> list[int]:
    """What is free now in each dimension of ``ps``: less what the jobs started now take."""
    free = list(ps.free_now)
    if started:
        for w in snap.pending:
            if w.id in started:
                for d, x in enumerate(ps.vec(w)):
                    free[d] -= max(x, 0)
    return free


def _short(ps: _Pass, free: list[int], w: Waiting) -> Wait | None:
    """What ``w`` lacks now, by count: ``LICENSES`` when floating resources alone are short, else
    ``RESOURCES`` naming the cores (when short) or the first device type short; None when nothing is."""
    v = ps.vec(w)
    if v[0] < 0:
        return None
    short = [d for d in range(ps.dims) if v[d] > free[d]]
    if not short:
        return None
    d = short[0]
    if d == 0:
        return Wait(WaitKind.RESOURCES, what="cores", asks=v[0], has=ps.cap[0], free=max(free[0], 0))
    devs = [k for k in short if ps.names[k - 1].startswith(dev.PREFIX)]
    if devs:
        d = devs[0]
        kind = WaitKind.RESOURCES
    else:
        kind = WaitKind.LICENSES
    return Wait(kind, what=ps.names[d - 1], asks=v[d], has=ps.total[d], free=max(free[d], 0))


def _placeable(snap: Snapshot, cores: frozenset[int], w: Waiting) -> bool:
    """Whether ``cores`` hold ``w`` (its mapping requirement on a map, its count without one)."""
    if len(cores) < w.ncpus:
        return False
    if snap.machine is None:
        return True
    return assign(snap.machine, cores, w.ncpus, w.place) is not None


def _behind_drained(snap: Snapshot, w: Waiting) -> bool:
    """Whether ``w`` would be placed now if the drained cores were in service (and is not)."""
    assert snap.free is not None
    return not _placeable(snap, snap.free, w) and _placeable(snap, snap.free | snap.drained, w)


def _never(snap: Snapshot, ps: _Pass, w: Waiting) -> Wait:
    """Why ``w`` (not bound, eligible) is forecast never to start: what it misses (:class:`Wait`)."""
    v = ps.vec(w)
    if v[0] < 0:
        unknown = [n for n, k in w.resources if k > 0 and n not in ps.index]
        return Wait(WaitKind.NEVER_FITS, what="unknown", text=",".join(unknown))
    for d in range(1, ps.dims):
        if v[d] > ps.cap[d]:
            return Wait(WaitKind.NEVER_FITS, what=ps.names[d - 1], asks=v[d], has=ps.total[d])
    # the cores in reach: free now, or held by a job that ends some day
    reach = frozenset(snap.free) if snap.free is not None else None
    busy: frozenset[int] = frozenset()
    if reach is not None:
        busy = frozenset(c for r in snap.running for c in (*r.cores, *r.held))
        for r in snap.reservations:
            busy = busy.union(r.cores) if r.active else busy
        reach = reach.union(c for r in ps.general for c in r.cores)
    drained = snap.drained.difference(busy)
    if v[0] > ps.cap[0]:
        if drained and v[0] <= ps.cap[0] + len(drained):
            return Wait(WaitKind.DRAINED, never=True, cores=snap.drained)
        return Wait(WaitKind.NEVER_FITS, what="cores", asks=v[0], has=ps.cap[0])
    if reach is not None and snap.machine is not None and not _placeable(snap, reach, w):
        if drained and _placeable(snap, reach | drained, w):
            return Wait(WaitKind.DRAINED, never=True, cores=snap.drained)
        most = max((len(reach.intersection(b.cores)) for b in snap.machine.boards), default=0)
        return Wait(WaitKind.NEVER_FITS, what="placement", asks=w.ncpus, has=most)
    return Wait(WaitKind.NEVER_FITS)


Vec = tuple[int, ...]


class _Pass:
    """One pass over a snapshot: the profiles, what is free now, the decisions taken."""

    names: list[str]  # the floating resources, in vector order after the cores
    index: dict[str, int]
    dims: int
    total: tuple[int, ...]
    active: dict[int, Resv]
    bound: list[Running]
    general: Sequence[Running]
    free_now: list[int]
    cap: list[int]
    _profs: list[Profile] | None

    def __init__(self, snap: Snapshot, mode: int) -> None:
        self.snap = snap
        now = self.now = snap.now
        self.free_set = snap.free
        # with a machine map, jobs are placed, and the earliest start of a job is
        # the earliest time its requirement can be met on the cores free by then
        self.machine = snap.machine if snap.free is not None else None
        # (time, cores) freed then: running jobs at their counted ends, jobs started in this pass
        self.releases: list[tuple[float, tuple[int, ...]]] = []
        self.loose: list[Profile] | None = None
        # True while nothing is held from a later time on (only running jobs ending and
        # jobs started now): the profiles never fall, so what is free now stays free
        self.rising = True
        self.mode = mode
        if not snap.floating and not snap.reservations and not snap.devices:
            # cores only, no reservation: the common case, in one sweep over the running jobs
            self.names, self.index, self.dims, self.total = [], {}, 1, (snap.ncores,)
            self.active, self.bound = {}, []
            general = self.general = snap.running
            # (an end before now may stay so: every reader counts it as free now)
            if mode:
                ends0 = [(counted_end(r, now, mode), r.ncpus) for r in general]
            else:  # counted_end for the user's walltime
                ends0 = [(now if r.stopping else r.start + r.estimate, r.ncpus) for r in general]
            held0 = sum(map(_NCPUS, general))
            if self.machine is not None:
                self.releases = [(e if e > now else now, r.cores) for (e, _), r in zip(ends0, general)]
            free0 = len(snap.free) if snap.free is not None else snap.ncores - held0
            self.free_now = [free0]
            self.cap = [free0 + held0]
            # the profile is built when first read (see profs): a pass that only starts
            # jobs in queue order never reads it, and jobs started before are two numbers each
            self._profs = None
            self._ends = ends0
        else:
            self._general_init(snap, mode)
        # while the profile is not built: the one hold from a later time on (the head's
        # reservation: start, duration, cores) and the cores left free when it begins
        self._hold1: tuple[float, float, int] | None = None
        self._extra = 0
        self._at: tuple[float, int] | None = None
        self.decisions: list[Decision] = []
        self.preempted: set[int] = set()
        self.wake = inf
        self.activated: dict[int, tuple[tuple[int, ...], float]] = {}
        # slots in use per device (built when a job asking for devices is first looked at)
        self._dev_used: dict[tuple[str, int], int] | None = None
        self._picked: tuple[tuple[str, int], ...] = ()
        # the devices of the jobs started in this pass: (counted end, device keys, whole)
        self._dev_ends: list[tuple[float, tuple[tuple[str, int], ...], bool]] = []
        self._busy_at: tuple[float, int, int, dict[tuple[str, int], int]] | None = None

    def _general_init(self, snap: Snapshot, mode: int) -> None:
        """The state with floating resources or reservations (one profile per resource)."""
        now = self.now
        floating = {**snap.floating, **dev.totals(snap.devices)} if snap.devices else snap.floating
        self.names = names = sorted(floating)
        self.index = {n: k + 1 for k, n in enumerate(names)}
        self.dims = dims = len(names) + 1
        self.total = (snap.ncores, *(floating[n] for n in names))
        active = self.active = {r.id: r for r in snap.reservations if r.active}
        if active:
            general: Sequence[Running] = [r for r in snap.running if r.bind is None or r.bind not in active]
            self.bound = [r for r in snap.running if r.bind is not None and r.bind in active]
        else:
            general, self.bound = snap.running, []
        self.general = general
        free = [0] * dims
        held = [0] * dims
        ends: list[list[tuple[float, int]]] = [[] for _ in range(dims)]
        # the running jobs in one sweep: what they hold, and when they release it
        ends0 = ends[0]
        releases = self.releases if self.machine is not None else None
        for r in general:
            e = counted_end(r, now, mode)
            if releases is not None:
                releases.append((e, r.cores))
            if r.resources:
                for d, x in enumerate(self.vec(r)):
                    if x:
                        held[d] += x
                        ends[d].append((e, x))
            else:
                n = r.ncpus
                held[0] += n
                if n:
                    ends0.append((e, n))
        for rv in active.values():
            self._acc(held, self.vec(rv))
        for keys, whole in snap.kept.values():  # kept by suspended jobs: held, never released by a running end
            for name, k in dev.held(keys, snap.devices, whole):
                d = self.index.get(name, 0)
                if d:
                    held[d] += k
        for d in range(1, dims):
            free[d] = self.total[d] - held[d]
        if snap.free is not None:
            free[0] = len(snap.free)
        else:
            free[0] = snap.ncores - held[0]
        self.free_now = free
        self.cap = [free[d] + held[d] for d in range(dims)]

        def release(when: float, v: Iterable[int]) -> None:
            for d, x in enumerate(v):
                if x:
                    ends[d].append((when, x))

        for rv in active.values():
            v = list(self.vec(rv))
            end = rv.end if rv.end is not None else inf
            if not rv.kill:
                for b in self.bound:
                    if b.bind == rv.id and b.end > end:
                        bv = self.vec(b)
                        for d in range(dims):
                            v[d] -= bv[d]
                        release(max(b.end, now), bv)
            release(max(end, now), v)
        self._profs = [from_ends(now, free[d], ends[d]) for d in range(dims)]

    # -- vectors ------------------------------------------------------------
    def vec(self, x: Waiting | Running | Resv) -> Vec:
        if not x.resources:
            return (x.ncpus,) + (0,) * (self.dims - 1)
        v = [0] * self.dims
        v[0] = x.ncpus
        for name, k in x.resources:
            d = self.index.get(name)
            if d is None:
                if k > 0:
                    v[0] = -1  # unknown resource: never fits (see possible)
                continue
            v[d] += k
        return tuple(v)

    def possible(self, v: Vec) -> bool:
        """Whether ``v`` can ever be had."""
        return v[0] >= 0 and all(v[d] <= self.cap[d] for d in range(self.dims))

    @staticmethod
    def _acc(acc: list[int], v: Vec) -> None:
        for d, x in enumerate(v):
            acc[d] += x

    # -- questions --------------------------------------------------------
    def earliest(
        self, v: Vec, duration: float, profs: list[Profile] | None = None, not_before: float | None = None
    ) -> float:
        if profs is None and self._profs is None and self._hold1 is None:
            return self._first_free(v[0], self.now if not_before is None else not_before)
        ps = profs or self.profs
        req = [(ps[d], v[d]) for d in range(self.dims) if v[d] > 0]
        return earliest_common_start(req, duration, self.now if not_before is None else not_before)

    def _free_at(self, t: float) -> int:
        """The cores free at ``t`` (from now on), the profile not built and nothing held later."""
        return self.free_now[0] + sum(x for e, x in self._ends if e <= t)

    def _first_free(self, n: int, since: float) -> float:
        """The first time from ``since`` on that ``n`` cores are free, the profile not built.

        Only running and just started jobs are held, so what is free then stays free.
        """
        if since < self.now:
            since = self.now
        acc = self.free_now[0]
        for e, x in sorted(self._ends):
            if e > since:
                if acc >= n:
                    break
                if e == inf:
                    return inf
                since = e
            acc += x
        if acc < n:
            return inf
        self._at = (since, acc)  # what is free then, for a hold there (see hold)
        return since

    def placed_earliest(self, w: Waiting, v: Vec, duration: float, not_before: float | None = None) -> float:
        """The earliest start of ``w``: when it fits by count and, on a map, can be placed.

        On a machine map the cores free at a time ``t`` are those free now and
        those of every job counted as ending by ``t``; the first ``t`` (from the
        count's answer on, at the ends of jobs) at which they hold ``w``'s
        mapping requirement, and the count still fits, is the answer.
        """
        machine = self.machine
        if machine is None or (w.flex and w.place is None):
            if self._profs is None and self._hold1 is None:  # earliest(), cores only, without a call
                return self._first_free(v[0], self.now if not_before is None else not_before)
            return self.earliest(v, duration, None, not_before)
        # the cores free by a time only grow with it: the first release after which the
        # requirement can be met is found by bisection, then the count is asked from there
        rel = sorted(self.releases)
        base = self.free_set or frozenset()
        n = v[0]
        # the cores in the order they come free: after the first k releases, the first count[k]
        order = list(base)
        seen = set(base)
        count = [len(order)]
        for _, cs in rel:
            for c in cs:
                if c not in seen:
                    seen.add(c)
                    order.append(c)
            count.append(len(order))

        def placeable(k: int) -> bool:
            m = count[k]
            return m >= n and assign(machine, frozenset(order[:m]) if k else base, n, w.place) is not None

        if placeable(0):
            since = self.now
        elif not rel or not placeable(len(rel)):
            return inf
        else:
            lo, hi = 1, len(rel)
            while lo < hi:
                mid = (lo + hi) // 2
                if placeable(mid):
                    hi = mid
                else:
                    lo = mid + 1
            since = rel[lo - 1][0]
        return self.earliest(v, duration, None, since if not_before is None else max(since, not_before))

    def fits_now(self, v: Vec, duration: float, profs: list[Profile] | None = None) -> bool:
        """Whether ``v`` is free now and stays free for ``duration`` (nothing is promised to others)."""
        free = self.free_now
        if self.rising and profs is None:  # nothing is free now that is not free later
            return all(x <= free[d] for d, x in enumerate(v))
        if profs is None and self._profs is None:  # cores only, held from later on by one hold
            return v[0] <= free[0] and self._clear(v[0], duration)
        ps = profs or self.profs
        for d, x in enumerate(v):
            if x > free[d] or (x > 0 and not ps[d].fits_now(x, duration)):
                return False
        return True

    # -- changes ----------------------------------------------------------
    @property
    def profs(self) -> list[Profile]:
        """The availability profile of each resource (cores first)."""
        profs = self._profs
        if profs is None:  # cores only: free now, and the ends of running and just started jobs
            profs = self._profs = [from_ends(self.now, self.free_now[0], self._ends)]
            if self._hold1 is not None:
                profs[0].reserve(*self._hold1)
        return profs

    def _clear(self, n: int, duration: float) -> bool:
        """Whether ``n`` cores free now stay free for ``duration``, the profile not built.

        What is free only grows until the one later hold begins, and is least
        when it does (``_extra`` left then): so ``n`` stays free for ever if
        ``n`` is at most that, else until the hold begins.
        """
        h = self._hold1
        if h is None or n <= self._extra:
            return True
        return self.now + duration <= h[0] if duration > 0 else h[0] > self.now

    def hold(self, start: float, duration: float, v: Vec, fixed: bool = False, taken: bool = False) -> None:
        """Hold ``v`` over ``[start, start + duration)`` (``fixed``: not in the loose profiles;
        ``taken``: held from now on, and already taken from what is free now).

        A hold of duration 0 from a later time (a job of walltime 0 due then) holds the instant it
        begins, up to the next float: a job running across that instant must leave it room, as the
        cores-only test (:meth:`_clear`) asks; a job ending then need not, and one that needs its
        cores from then on is reserved just after it (the next float).  From now on it holds
        nothing: such a job ends as it starts, and what it takes is out of what is free now."""
        if duration <= 0 and start > self.now:
            duration = nextafter(start, inf) - start
        if self._profs is None:  # cores only, the profile not built yet
            h = self._hold1
            if taken:  # one more end
                self._at = None
                end = start + duration
                self._ends.append((end, v[0]))
                if h is not None and end > h[0]:
                    self._extra -= v[0]
                return
            if h is None and start > self.now:  # the head's reservation: kept as the cores it leaves when it begins
                self._hold1 = (start, duration, v[0])
                at = self._at
                self._extra = (at[1] if at is not None and at[0] == start else self._free_at(start)) - v[0]
                self.rising = False
                return
        if start > self.now:
            self.rising = False
        for d in range(self.dims):
            if v[d]:
                self.profs[d].reserve(start, duration, v[d])
                if self.loose is not None and not fixed:
                    self.loose[d].reserve(start, duration, v[d])

    def placeable(self, w: Waiting, v: Vec) -> bool:
        """Whether the free cores can hold ``w``'s mapping requirement now (always, without a map),
        and the free devices its devices (:func:`gridsched.core.devices.choose`)."""
        if w.devices and not w.flex:
            return self._choose(w) is not None
        return self.free_set is None or self.placeable_on(w, self.free_set)

    def _device_use(self) -> dict[tuple[str, int], int]:
        """The slots in use per device: by the running jobs, by the suspended jobs that keep theirs, and by
        the jobs started in this pass (kept up to date by :meth:`_take_devices`)."""
        used = self._dev_used
        if used is None:
            snap = self.snap
            holders = [(r.devices, r.whole_devices) for r in snap.running if r.devices]
            holders.extend(snap.kept.values())
            used = self._dev_used = dev.used_slots(holders, snap.devices)
        return used

    def _choose(self, w: Waiting) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...], frozenset[int]] | None:
        """The devices and cores ``w`` gets now (:func:`gridsched.core.devices.choose`), or None.

        A suspended job that kept its devices is continued on them alone (they are its own)."""
        used = self._device_use()
        kept = self.snap.kept.get(w.id) if self.snap.kept else None
        if kept is None:
            return dev.choose(w.devices, self.snap.devices, used, self.machine, self.free_set, w.ncpus, w.place)
        used = dict(used)
        for k, n in dev.used_slots((kept,), self.snap.devices).items():
            used[k] -= n
        return dev.choose(w.devices, self.snap.devices, used, self.machine, self.free_set, w.ncpus, w.place, kept[0])

    def _take_devices(self, w: Waiting) -> tuple[int, ...] | None:
        """Take the devices (and the cores) :meth:`_choose` gives ``w``; its cores (None: not now)."""
        got = self._choose(w)
        if got is None:
            return None
        keys, cores, held = got
        assert self._dev_used is not None
        if not (self.snap.kept and w.id in self.snap.kept):  # a suspended job's kept slots are counted already
            whole = any(a.exclusive for a in w.devices)
            for k, n in dev.used_slots(((keys, whole),), self.snap.devices).items():
                self._dev_used[k] = self._dev_used.get(k, 0) + n
        self._picked = keys
        if self.free_set is not None:
            self.free_set = self.free_set.difference(held or cores)
        return cores

    def take(self, v: Vec, w: Waiting | None = None) -> tuple[int, ...]:
        """Take ``v`` from what is free now; the cores picked.

        A job's mapping requirement is met: the pass starts a job only where
        :meth:`placeable` says the free cores can hold it.  So is a
        reservation's (``w`` its flexible entry, or :func:`_as_job` of a fixed
        one): it holds what a job so placed would.  A reservation without one
        is placed as a job with no requirement is (pack: the fewest boards,
        the best-fitting one first), or, if the free cores are too scattered
        for that, on the lowest-numbered ones.
        """
        for d in range(self.dims):
            self.free_now[d] -= v[d]
        if w is not None and w.devices and not w.flex:
            cores_d = self._take_devices(w)
            if cores_d is not None:
                return cores_d
        if self.free_set is None:
            return ()
        got = None
        if self.snap.machine is not None:
            got = assign(self.snap.machine, self.free_set, v[0], w.place if w is not None else None)
        cores, held = got if got is not None else (pick(self.free_set, v[0]), None)
        self.free_set = self.free_set.difference(held if held is not None else cores)
        return cores

    def start(self, w: Waiting, v: Vec, duration: float, backfilled: bool, planned: float | None) -> None:
        now = self.now
        self._picked = ()
        if self._profs is None and self.free_set is None and not w.devices:  # cores counted, no profile:
            # take and hold, inlined
            n = v[0]
            self.free_now[0] -= n
            end = now + duration
            self._ends.append((end, n))
            self._at = None
            h = self._hold1
            if h is not None and end > h[0]:
                self._extra -= n
            cores: tuple[int, ...] = ()
        else:
            cores = self.take(v, w)
            self.hold(now, duration, v, taken=True)
            if self.machine is not None:
                self.releases.append((now + duration, cores))
        if w.flex:
            self.decisions.append(Activate(w.id, cores, now + w.estimate))
            self.activated[w.id] = (cores, now + w.estimate)
        else:
            if self._picked and not (self.snap.kept and w.id in self.snap.kept):  # (kept slots: in snap.kept)
                self._dev_ends.append((now + duration, self._picked, any(a.exclusive for a in w.devices)))
            self.decisions.append(Start(w.id, cores, backfilled, planned, self._picked))
            if planned is not None and now < now + planned < self.wake:
                self.wake = now + planned

    def preempt(self, cands: list[Running], short: list[int], head: Waiting | None = None) -> bool:
        """Preempt ``cands`` (most cores first) until no component of ``short`` is positive.

        On a machine map, for ``head``, the chosen jobs must also leave cores
        where ``head`` can be placed (:func:`gridsched.core.preempt.victims`: the
        smallest set that does, most cores first among sets of one size).
        Nothing is preempted unless the chosen jobs together would do.
        """
        vecs = {r.id: self.freed(r) for r in cands}
        total = [0] * self.dims
        for v in vecs.values():
            self._acc(total, v)
        if any(short[d] > total[d] for d in range(self.dims)):
            return False
        order = preempt_order(self.snap, cands)  # most cores first; leaves first in job trees
        chosen: list[Running] = []
        if head is not None and head.devices and not head.flex:  # distinct devices, on the right boards
            got = device_victims(
                self.snap,
                order,
                head,
                self._by_count(order, vecs, short),
                lambda rs: all(sum(vecs[r.id][d] for r in rs) >= short[d] for d in range(self.dims) if short[d] > 0),
                self.busy_devices(),
                self.coming_set() if self.free_set is not None else None,
            )
            if got is None:
                return False
            chosen = got
            for r in chosen:
                v = vecs[r.id]
                for d in range(self.dims):
                    short[d] -= v[d]
        elif head is not None and self.machine is not None:
            got = victims(self.snap, order, head, self.coming_set(), short[0])
            if got is None:
                return False
            chosen = list(got)
            for r in chosen:
                v = vecs[r.id]
                for d in range(self.dims):
                    short[d] -= v[d]
        picked = {r.id for r in chosen}
        for r in order:
            if all(s <= 0 for s in short):
                break
            v = vecs[r.id]
            if r.id in picked or not any(v[d] > 0 and short[d] > 0 for d in range(self.dims)):
                continue
            chosen.append(r)
            for d in range(self.dims):
                short[d] -= v[d]
        for r in chosen:
            if r.preemptable:
                self.decisions.append(Preempt(r.id))
            else:  # backfilled on its own estimate, which it overran: ended as at its walltime
                self.decisions.append(Kill(r.id, overran(r, head)))
            self.preempted.add(r.id)
            e = counted_end(r, self.now, self.mode)
            v = vecs[r.id]
            for d in range(self.dims):
                if v[d] and e > self.now:
                    self.profs[d].add(self.now, e, v[d])
                    self.rising = False
                    if self.loose is not None:
                        self.loose[d].add(self.now, e, v[d])
            if self.machine is not None:
                self.releases.append((self.now, r.cores))
        return True

    def _by_count(self, order: list[Running], vecs: dict[int, Vec], short: list[int]) -> list[Running]:
        """``order`` taken while some component of ``short`` is positive, each job that frees some of it."""
        left = list(short)
        out: list[Running] = []
        for r in order:
            if all(s <= 0 for s in left):
                break
            v = vecs[r.id]
            if not any(v[d] > 0 and left[d] > 0 for d in range(self.dims)):
                continue
            out.append(r)
            for d in range(self.dims):
                left[d] -= v[d]
        return out

    def freed(self, r: Running) -> Vec:
        """What preempting ``r`` frees: its vector, without its devices if it keeps them (suspended)."""
        v = self.vec(r)
        if not (r.keeps_devices and r.devices):
            return v
        return tuple(0 if d and self.names[d - 1].startswith(dev.PREFIX) else x for d, x in enumerate(v))

    def busy_devices(self) -> dict[tuple[str, int], int]:
        """The slots in use per device by the jobs that stay: all but the stopping and just preempted ones
        (a preempted job that keeps its devices stays with them)."""
        used = dict(self._device_use())
        gone = [
            r
            for r in self.snap.running
            if r.devices and (r.stopping or (r.id in self.preempted and not r.keeps_devices))
        ]
        for k, n in dev.used_slots(((r.devices, r.whole_devices) for r in gone), self.snap.devices).items():
            used[k] -= n
        return used

    def head_devices_blocked(self, head: Waiting) -> bool:
        """Whether ``head``, which asks for devices, cannot be placed on what is free now or coming free
        (:func:`gridsched.core.devices.choose`), whatever the counts say."""
        coming = self.coming_set() if self.free_set is not None else None
        return not places_devices(self.snap, head, self.busy_devices(), coming, ())

    def leaves_devices(self, w: Waiting, head: Waiting) -> bool:
        """Whether ``head`` (asking for devices, its reservation time come) can still be placed on what is
        free now or coming free once ``w`` runs on the devices and cores it would get now."""
        took = self._would_take(w, self.busy_devices())
        if took is None:
            return True  # it does not start now, or cores by count: the extra count keeps the head's
        busy, taken = took
        coming = self.coming_set().difference(taken) if self.free_set is not None else None
        return places_devices(self.snap, head, busy, coming, ())

    def _would_take(
        self, w: Waiting, busy: Mapping[tuple[str, int], int]
    ) -> tuple[Mapping[tuple[str, int], int], frozenset[int]] | None:
        """The device slots in use (``busy`` and ``w``'s, in a new dict) and the cores ``w`` would hold if
        it started now; None if it cannot start now, or when there is nothing to check (no devices asked
        for and cores only counted)."""
        if w.devices and not w.flex:
            got = self._choose(w)
            if got is None:
                return None
            keys, cores, held = got
            if not (self.snap.kept and w.id in self.snap.kept):
                more = dict(busy)
                whole = any(a.exclusive for a in w.devices)
                for k, n in dev.used_slots(((keys, whole),), self.snap.devices).items():
                    more[k] = more.get(k, 0) + n
                busy = more
            return busy, held or frozenset(cores)
        if self.machine is not None and self.free_set is not None:
            got_c = assign(self.machine, self.free_set, w.ncpus, w.place)
            if got_c is None:
                return None
            return busy, got_c[1]
        return None

    def busy_devices_at(self, t: float) -> dict[tuple[str, int], int]:
        """The slots in use per device at ``t`` (later than now): by the running jobs counted as ending
        after ``t`` (stopping ones and those just preempted without keeping their devices are gone), by
        the suspended jobs that keep theirs, and by the jobs started in this pass that end after ``t``."""
        memo = self._busy_at
        if memo is not None and memo[:3] == (t, len(self._dev_ends), len(self.preempted)):
            return memo[3]
        snap, now, mode = self.snap, self.now, self.mode
        holders: list[tuple[Iterable[tuple[str, int]], bool]] = []
        for r in snap.running:
            if not r.devices:
                continue
            if r.id in self.preempted:
                if r.keeps_devices:
                    holders.append((r.devices, r.whole_devices))
            elif not r.stopping and counted_end(r, now, mode) > t:
                holders.append((r.devices, r.whole_devices))
        holders.extend(snap.kept.values())
        holders.extend((keys, whole) for end, keys, whole in self._dev_ends if end > t)
        used = dev.used_slots(holders, snap.devices)
        self._busy_at = (t, len(self._dev_ends), len(self.preempted), used)
        return used

    def head_devices_placeable_at(self, head: Waiting, t: float) -> bool:
        """Whether ``head``, which asks for devices, can be placed at ``t`` (later than now) by
        :func:`gridsched.core.devices.choose` on the devices and (on a map) the cores free then."""
        return places_devices(self.snap, head, self.busy_devices_at(t), self._cores_at(t), ())

    def leaves_devices_at(self, w: Waiting, head: Waiting, t: float) -> bool:
        """Whether ``head`` (asking for devices, its reservation at ``t``, later than now) can still be
        placed then by :func:`gridsched.core.devices.choose` once ``w``, running past ``t``, holds the
        devices and cores it would get now: on the devices free at ``t`` and, on a map, the cores free
        by then less ``w``'s.  Without a map the cores are only counted (the profile keeps them)."""
        took = self._would_take(w, self.busy_devices_at(t))
        if took is None:
            return True  # it does not start now, or no devices and cores by count: the profile keeps the head's
        busy, taken = took
        then = self._cores_at(t)
        return places_devices(self.snap, head, busy, then.difference(taken) if then is not None else None, ())

    def _cores_at(self, t: float) -> frozenset[int] | None:
        """On a map, the cores free at ``t``: free now, or held by a job counted as ending by then."""
        if self.machine is None or self.free_set is None:
            return None
        cores = set(self.free_set)
        for when, cs in self.releases:
            if when <= t:
                cores.update(cs)
        return frozenset(cores)

    def coming(self) -> list[int]:
        """Free now plus held by stopping or just preempted jobs."""
        acc = list(self.free_now)
        for r in self.general:
            if r.stopping:
                self._acc(acc, self.vec(r))
            elif r.id in self.preempted:
                self._acc(acc, self.freed(r))
        return acc

    def coming_set(self) -> frozenset[int]:
        """The cores free now or coming free (stopping or just preempted jobs'); empty without a map."""
        if self.free_set is None:
            return frozenset()
        return self.free_set.union(*(r.cores for r in self.general if r.stopping or r.id in self.preempted))

    def placeable_at(self, w: Waiting, t: float, without: frozenset[int] = frozenset()) -> bool:
        """Whether ``w`` can be placed at ``t`` on the cores free by then (less ``without``)."""
        if self.machine is None or (w.flex and w.place is None):
            return True
        cores = set(self.free_set or ()).difference(without)
        for when, cs in self.releases:
            if when <= t:
                cores.update(cs)
        return self.placeable_on(w, frozenset(cores))

    def leaves_room(self, w: Waiting, head: Waiting, t: float) -> bool:
        """Whether ``head`` can still be placed at ``t`` once ``w`` runs on the cores it would get now.

        At ``t <= now`` (the reservation time has come) the head has only the
        cores free now or coming free (stopping, just preempted), never those
        of jobs merely counted as ended.
        """
        got = assign(self.machine, self.free_set or frozenset(), w.ncpus, w.place) if self.machine else None
        if got is None:
            return True
        if t <= self.now:
            return self.placeable_on(head, self.coming_set().difference(got[1]))
        return self.placeable_at(head, t, got[1])

    def placeable_on(self, w: Waiting, cores: frozenset[int]) -> bool:
        """Whether ``cores`` hold ``w``'s mapping requirement (always, without a map, and for a
        reservation without one: it takes any free cores)."""
        if self.machine is None or (w.flex and w.place is None):
            return True
        return assign(self.machine, cores, w.ncpus, w.place) is not None

    # -- reservations -----------------------------------------------------
    def fixed(self) -> None:
        """Due fixed reservations are activated (or held, or make room); future ones are held."""
        if not self.snap.reservations:
            return
        now = self.now
        waiting = sorted(
            (r for r in self.snap.reservations if not r.active and r.start is not None), key=lambda r: (r.start, r.id)
        )
        future = [r.start for r in waiting if r.start is not None and r.start > now]
        if future:
            self.wake = min(self.wake, future[0])
            if self.snap.params.preempt_for_fixed:
                self.loose = [p.copy() for p in self.profs]
        for r in waiting:
            assert r.start is not None
            end = r.start + r.duration
            if end <= now:
                continue  # over before it could begin: the driver ends it
            v = self.vec(r)
            if not self.possible(v):
                continue
            if r.start > now:
                self.hold(r.start, r.duration, v, fixed=True)
                continue
            left = end - now
            job = _as_job(r)
            if self.fits_now(v, left) and self.placeable(job, v):
                self.hold(now, left, v)
                cores = self.take(v, job)
                self.decisions.append(Activate(r.id, cores, end))
                self.activated[r.id] = (cores, end)
                continue
            if self.snap.params.preempt_for_fixed:
                have = self.coming()
                short = [v[d] - have[d] for d in range(self.dims)]
                cands = [x for x in self.general if x.preemptable and not x.stopping and x.id not in self.preempted]
                placed = r.place is not None and self.machine is not None
                self.preempt(cands, short, job if placed else None)
            t = self.earliest(v, 0.0)
            if t < end:
                self.hold(t, end - t, v)

    def bound_starts(self, pending: tuple[Waiting, ...]) -> None:
        """Start bound jobs inside their active reservations (see the module docstring)."""
        if not self.active and not self.activated:
            return
        now = self.now
        placed = self.snap.free is not None
        # per reservation: what it has left, its free cores, the cores it holds beyond them
        # (free too: SMT siblings of a --threads-per-core reservation), when it ends its jobs
        inside: dict[int, tuple[list[int], frozenset[int] | None, frozenset[int], float]] = {}
        resvs = {r.id: r for r in self.snap.reservations}
        for rid, rv in self.active.items():
            room = list(self.vec(rv))
            cores = frozenset(rv.cores) if placed else None
            extra = self._resv_extra(rv, rv.cores) if placed else frozenset()
            for b in self.bound:
                if b.bind == rid:
                    bv = self.vec(b)
                    for d in range(self.dims):
                        room[d] -= bv[d]
                    if cores is not None:
                        busy = b.held.union(b.cores)
                        cores, extra = cores - busy, extra - busy
            inside[rid] = (room, cores, extra, rv.end if rv.end is not None else inf)
        for rid, (cores_t, end) in self.activated.items():
            new = resvs.get(rid)
            if new is not None:
                extra = self._resv_extra(new, cores_t) if placed else frozenset()
                inside[rid] = (list(self.vec(new)), frozenset(cores_t) if placed else None, extra, end)
        kill = {rid: r.kill for rid, r in resvs.items()}
        for w in pending:
            if w.bind is None or w.bind not in inside:
                continue
            left, cores, extra, end = inside[w.bind]
            v = self.vec(w)
            if v[0] < 0 or (kill[w.bind] and now + w.estimate > end) or any(v[d] > left[d] for d in range(self.dims)):
                continue
            picked: tuple[int, ...] = ()
            keys: tuple[tuple[str, int], ...] = ()
            if w.devices:  # devices free now (the reservation's count keeps others off them)
                chosen = self._choose(replace(w, devices=tuple(replace(a, bind="none") for a in w.devices)))
                if chosen is None:
                    continue
                keys = chosen[0]
            if cores is not None:  # placed inside the reservation's cores, with the job's own requirement
                got = place_inside(self.machine, cores, extra, v[0], w.place)
                if got is None:
                    continue
                picked, held = got
                inside[w.bind] = (left, cores - held, extra - held, end)
            if keys:
                assert self._dev_used is not None
                whole = any(a.exclusive for a in w.devices)
                for k, n in dev.used_slots(((keys, whole),), self.snap.devices).items():
                    self._dev_used[k] = self._dev_used.get(k, 0) + n
            for d in range(self.dims):
                left[d] -= v[d]
            self.decisions.append(Start(w.id, picked, devices=keys))

    def _resv_extra(self, rv: Resv, cores: Iterable[int]) -> frozenset[int]:
        """The cores reservation ``rv`` on ``cores`` holds without offering them to its jobs."""
        if self.machine is None or rv.place is None:
            return frozenset()
        return claimed(self.machine, cores, rv.place).difference(cores)


def _as_job(r: Resv) -> Waiting:
    """Reservation ``r`` as the pending entry that is placed for it (its flexible entry's shape)."""
    place = replace(r.place, ncpus=r.ncpus) if r.place is not None else None
    return Waiting(r.id, r.ncpus, r.duration, resources=r.resources, flex=True, place=place)


# The members read on every pass, as plain names (reading a member of an Enum class is slow).
_EASY, _CKPT, _FCFS, _CONS = Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.FCFS, Policy.CONSERVATIVE


def _one_pass(snap: Snapshot) -> Plan:
    """The pass (see the module docstring)."""
    params = snap.params
    policy = params.policy
    if policy is _EASY:
        return _backfill(snap, False, False)[0]
    if policy is _CKPT:
        return _backfill(snap, True, params.cascade)[0]
    if policy is _CONS:
        return _conservative(snap, None)
    if policy is _FCFS:
        return _fcfs(snap, None)[0]
    raise ValueError(f"unknown policy {policy!r}")


def _forecast(snap: Snapshot, why: dict[int, Wait] | None = None) -> tuple[dict[int, float], int | None, set[int]]:
    """Predicted start (activation, for flexible entries) of every pending entry (``inf``: never), the
    head job (the one the pass holds a reservation for; None if none) and the entries the pass starts now;
    ``why`` gets the reasons of bound jobs that can never start."""
    out: dict[int, float] = {}
    params = snap.params
    head: int | None = None
    if params.policy is Policy.CONSERVATIVE:
        plan = _conservative(snap, out)
        head = plan.head.job if plan.head is not None else None
    else:
        if params.policy is Policy.FCFS:
            plan, ps = _fcfs(snap, out)
        else:
            ckpt = params.policy is Policy.CHECKPOINT_BACKFILL
            plan, ps = _backfill(snap, ckpt, ckpt and params.cascade)
        now = snap.now
        started = {d.job for d in plan.starts} | {a.resv for a in plan.activations}
        last = now
        if plan.head is not None:  # already held in the profiles by the pass
            last = out[plan.head.job] = max(plan.head.time, now)
            head = plan.head.job
        fcfs = params.policy is Policy.FCFS
        ever: dict[tuple[int, Request | None], bool] = {}
        reach = (ps.free_set or frozenset()).union(*(c for _, c in ps.releases)) if ps.machine else frozenset()
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
                    [(ps.profs[d], v[d]) for d in range(ps.dims) if v[d] > 0], w.estimate, last if fcfs else now
                )
                if t < inf:
                    ps.hold(t, w.estimate, v)
                out[w.id] = t
                if fcfs:
                    last = t
    _bound_forecast(snap, out, why)
    return out, head, {d.job for d in plan.starts} | {a.resv for a in plan.activations}


def _ever_placed(ps: _Pass, w: Waiting, ever: dict[tuple[int, Request | None], bool], reach: frozenset[int]) -> bool:
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


def _queue(snap: Snapshot) -> tuple[Waiting, ...]:
    """The general queue: the pending entries not bound to a reservation (all of them, without any)."""
    if not snap.reservations:
        return snap.pending
    return tuple(w for w in snap.pending if w.bind is None)


def _fcfs(snap: Snapshot, record: dict[int, float] | None) -> tuple[Plan, _Pass]:
    ps = _Pass(snap, _USER)
    ps.fixed()
    head: HeadReservation | None = None
    for w in _queue(snap):
        v = ps.vec(w)
        if not ps.possible(v):
            continue
        if (ps.fits_now(v, w.estimate) or _loose_fit(ps, w, v)) and ps.placeable(w, v):
            ps.start(w, v, w.estimate, False, None)
            continue
        t = ps.placed_earliest(w, v, w.estimate)
        if t == inf:
            continue  # can never be placed: never blocks the queue
        head = HeadReservation(w.id, t)
        if t < inf:
            ps.hold(t, w.estimate, v)
        if record is not None:
            record[w.id] = t
        break
    ps.bound_starts(snap.pending)
    return _plan(ps, head), ps


def _loose_fit(ps: _Pass, w: Waiting, v: Vec) -> bool:
    """A checkpointable job that fits if it is preempted at the next fixed reservation."""
    return (
        ps.loose is not None
        and w.preemptable
        and not w.flex
        and not w.keeps_devices
        and ps.fits_now(v, w.estimate, ps.loose)
    )


def _plan(ps: _Pass, head: HeadReservation | None, wake: float = inf) -> Plan:
    w = ps.wake if ps.wake < wake else wake
    decisions = ps.decisions
    if ps.snap.splitting and ps._dev_used is not None:
        decisions = _as_pieces(ps, decisions)
    if ps.preempted:  # preemptions (and kills) first
        first = (Preempt, Kill)
        decisions = [d for d in decisions if type(d) in first] + [d for d in decisions if type(d) not in first]
    return Plan(tuple(decisions), head, w if w < inf else None)


def _as_pieces(ps: _Pass, decisions: list[Decision]) -> list[Decision]:
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


def _conservative(snap: Snapshot, record: dict[int, float] | None) -> Plan:
    relied = any(r.planned is not None for r in snap.running)  # see "Estimates" in the module doc
    ps = _Pass(snap, _NAIVE if relied else _USER)
    ps.fixed()
    now = snap.now
    head: HeadReservation | None = None
    # the reservations of jobs asking for devices that devices.choose can place at their time
    # (on what is free then): (time, job); a job started now must leave each of them so
    guarded: list[tuple[float, Waiting]] = []
    dtimes: _DeviceTimes | None = None
    for w in _queue(snap):
        v = ps.vec(w)
        if not ps.possible(v):
            if record is not None:
                record[w.id] = inf
            continue
        t = ps.earliest(v, w.estimate)
        started = denied = False
        if (
            (t == now and all(v[d] <= ps.free_now[d] for d in range(ps.dims))) or _loose_fit(ps, w, v)
        ) and ps.placeable(w, v):
            if not guarded or _leaves_reserved(ps, w, guarded):
                # a job ahead waits: one that fits on its own estimate only is held to it
                planned = w.estimate if head is not None and w.hard is not None and not ps.fits_now(v, w.hard) else None
                ps.start(w, v, w.estimate, head is not None, planned)
                t, started = now, True
            else:
                denied = True
        if not started:
            if ps.machine is not None:
                t = ps.placed_earliest(w, v, w.estimate, t if t > now else None)
            on_devices = bool(w.devices) and not w.flex
            if on_devices and t < inf:
                if dtimes is None:
                    dtimes = _DeviceTimes(ps)
                t = dtimes.start(w, v, t, denied)
            if t == inf:
                if record is not None:
                    record[w.id] = inf
                continue
            if head is None:
                head = HeadReservation(w.id, t)
                if relied and t <= now:
                    _make_room(ps, w, v, False)
            ps.hold(t, w.estimate, v)
            if on_devices and (t > now or not ps.head_devices_blocked(w)):  # (later: placeable then, see above)
                guarded.append((t, w))
        if record is not None:
            record[w.id] = t
        elif head is not None and ps.free_now[0] <= 0:
            break
    ps.bound_starts(snap.pending)
    if record is None and head is not None:
        _split(ps, snap, _queue(snap))
    wake = min((e for r in snap.running if r.planned is not None and (e := r.start + r.planned) > now), default=inf)
    return _plan(ps, head, wake)


def _leaves_reserved(ps: _Pass, w: Waiting, guarded: list[tuple[float, Waiting]]) -> bool:
    """Whether ``w``, started now, leaves every job of ``guarded`` that it would still run beside at
    the job's reservation time a placement then by :func:`gridsched.core.devices.choose`."""
    end = ps.now + w.estimate
    for t, r in guarded:
        if end <= t:
            continue  # over by then
        if not (ps.leaves_devices_at(w, r, t) if t > ps.now else ps.leaves_devices(w, r)):
            return False
    return True


class _DeviceTimes:
    """When jobs asking for devices can first be placed, for conservative's reservations.

    What :func:`gridsched.core.devices.choose` can place at a later time ``t``
    is decided on the devices free then (:meth:`_Pass.busy_devices_at`) and, on
    a map, the cores free by then (:meth:`_Pass._cores_at`): both only grow with
    ``t`` while no job starts, so the first time a request can be placed is
    found by bisection over the times devices or cores come free, and kept per
    request until a job starts (or is preempted).
    """

    def __init__(self, ps: _Pass) -> None:
        self.ps = ps
        self.state: tuple[int, int, int] = (-1, -1, -1)
        self.times: list[float] = []
        self.first: dict[tuple[object, ...], float] = {}

    def _fresh(self) -> None:
        ps = self.ps
        state = (len(ps._dev_ends), len(ps.releases), len(ps.preempted))
        if state == self.state:
            return
        self.state = state
        self.first.clear()
        now = ps.now
        events = {e for e, _keys, _whole in ps._dev_ends}
        events.update(e for e, _cores in ps.releases)
        events.update(counted_end(r, now, ps.mode) for r in ps.general if r.devices)
        self.times = sorted(e for e in events if e > now)

    def _places(self, w: Waiting, t: float) -> bool:
        ps = self.ps
        return places_devices(ps.snap, w, ps.busy_devices_at(t), ps._cores_at(t), ())

    def start(self, w: Waiting, v: Vec, t: float, later: bool) -> float:
        """The reservation time of ``w`` from ``t`` (its time by count and, on a map, placement) on: the
        first time from then on at which devices.choose can also place it and the count still fits
        (``later``: after now, for a job that may not start now)."""
        self._fresh()
        ps = self.ps
        kept = ps.snap.kept.get(w.id) if ps.snap.kept else None
        key = (w.devices, w.ncpus, w.place, later, kept)
        first = self.first.get(key)
        if first is None:
            first = self.first[key] = self._first(w, later)
        if t >= first:
            return t
        if first == inf:
            return inf
        return ps.placed_earliest(w, v, w.estimate, first)

    def _first(self, w: Waiting, later: bool) -> float:
        if not later and self._places(w, self.ps.now):
            return self.ps.now
        times = self.times
        if not times or not self._places(w, times[-1]):
            return inf
        lo, hi = 0, len(times) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._places(w, times[mid]):
                hi = mid
            else:
                lo = mid + 1
        return times[lo]


def _backfill(snap: Snapshot, ckpt: bool, naive: bool) -> tuple[Plan, _Pass]:
    now = snap.now
    # jobs running on an estimate a backfill relied on (see "Estimates" in the module doc); under easy, such a
    # job that overran it counts as ending now: its cores are the head's once the head's time has come
    relied = any(r.planned is not None for r in snap.running)
    ps = _Pass(snap, (_NAIVE if naive else _PLANNED) if ckpt else (_NAIVE if relied else _USER))
    if snap.reservations:
        ps.fixed()
    queue = snap.pending  # entries bound to a reservation are skipped as they come (see bound_starts)
    h = -1
    shadow = inf
    skip = -1
    memo = snap.head if ckpt and not naive else None
    if memo is not None:
        for i, w in enumerate(queue):
            if w.id != memo.job:
                continue
            v = ps.vec(w)
            if not ps.possible(v):
                break
            if ps.fits_now(v, w.estimate) and ps.placeable(w, v):
                ps.start(w, v, w.estimate, False, None)
                skip = i
            else:
                t = min(memo.time, ps.placed_earliest(w, v, w.estimate))
                if _meetable(ps, v, w.estimate, max(t, now)):
                    h, shadow = i, t
            break
    if h < 0:
        pad = (0,) * (ps.dims - 1)
        for i, w in enumerate(queue):
            if i == skip or w.bind is not None:
                continue
            if w.resources:
                v = ps.vec(w)
                if not ps.possible(v):
                    continue
                fits = ps.fits_now(v, w.estimate)
            else:  # cores only: the same tests, shorter
                n = w.ncpus
                if n > ps.cap[0]:
                    continue
                v = (n, *pad) if pad else (n,)
                fits = n <= ps.free_now[0] and (ps.rising or ps.fits_now(v, w.estimate))
            if (fits or _loose_fit(ps, w, v)) and ((ps.machine is None and not w.resources) or ps.placeable(w, v)):
                ps.start(w, v, w.estimate, False, None)
                continue
            shadow = ps.placed_earliest(w, v, w.estimate)
            if shadow == inf:
                continue  # can never be placed: never blocks the queue
            h = i
            break
        if h < 0:
            if ps.active or ps.activated:
                ps.bound_starts(snap.pending)
            return _plan(ps, None), ps
        rest = list(queue[h + 1 :])
        if skip > h:
            del rest[skip - h - 1]
    else:
        rest = [w for k, w in enumerate(queue) if k != h and k != skip]
    head = queue[h]
    hv = ps.vec(head)
    if (ckpt or relied) and now >= shadow:
        _make_room(ps, head, hv, ckpt)
    if shadow < inf:
        ps.hold(max(shadow, now), head.estimate, hv)
    predict = make_predictor(snap.params, snap.history, snap.ratios) if ckpt else None
    reclaimable = relied or (ckpt and any(r.backfilled and r.preemptable and not r.stopping for r in ps.general))
    # Once the reservation time has come, only what is free now or coming free
    # (stopping, preempted) is left beyond the head, never jobs merely counted as ended.
    extra = [c - x for c, x in zip(ps.coming(), hv)] if shadow <= now else None
    free_now = ps.free_now
    dims = ps.dims
    # on a map, a job running past the shadow time must leave the head a placement then
    # (once it has come: on the cores free now or coming free, as for extra)
    guard = ps.machine is not None and (
        ps.placeable_at(head, shadow)
        if now < shadow < inf
        else shadow <= now and ps.placeable_on(head, ps.coming_set())
    )
    # on a map, requests (cores, requirement) that cannot be placed now, and those that would
    # leave the head no placement (asked again after each start)
    on_map = ps.machine is not None
    # the same for a head asking for devices, once its time has come: distinct devices, cores near them
    dguard = bool(head.devices) and not head.flex and shadow <= now and not ps.head_devices_blocked(head)
    # and before it has come: a job that would still run at the shadow time must leave the head devices
    # (and, on a map, cores near them) that devices.choose can give it then, on what is free then
    fguard = bool(head.devices) and not head.flex and now < shadow < inf and ps.head_devices_placeable_at(head, shadow)
    no_devices: set[tuple[int, object, bool, object, object]] = set()
    unplaceable: set[tuple[int, object, bool, object]] = set()
    no_room: set[tuple[int, object, bool, object]] = set()
    lazy = ps._profs is None  # cores only: the profile is not built, its one later hold is the head's
    h1 = ps._hold1
    limits: dict[int, float] = {}
    cores = None if lazy else ps.profs[0]
    if cores is not None:
        limits = cores.limits()
    pad = (0,) * (dims - 1)
    free0 = free_now[0]
    binding = bool(snap.reservations)
    # floating resources asked for (as written) that cannot be had in the rest of the loop:
    # what is free now and extra only shrink while jobs start (unless a count is negative)
    blocked: set[tuple[tuple[str, int], ...]] = set()
    # with the profiles built (floating resources, reservations): what a job turned down by the
    # tests below (before placement) asked for, until a job starts.  Those tests read its cores,
    # estimate, resources, checkpointability, flex, and for the prediction its estimate (scaled)
    # or also its user and elapsed time (user-history, user-ratio).
    refused: set[tuple[object, ...]] | None = None if lazy else set()
    by_user = snap.params.predictor in READS_USER
    ask: tuple[object, ...] = ()
    # cores only, nothing to shorten, nothing loose, the head's reservation the one later hold:
    # a job turned down by the tests below is one of more cores than the head leaves (``_extra``)
    # that would still run when the head's reservation begins; such a job is passed over at once
    quick = lazy and h1 is not None and predict is None and extra is None and ps.loose is None
    begins = h1[0] if quick and h1 is not None else -inf
    room = ps._extra if quick else inf
    # only the jobs that fit in what is free now are looked at (free only shrinks in this loop):
    # the others are passed over in C, which on a long queue is most of the pass
    tried: Iterable[Waiting] = compress(rest, map(free0.__ge__, map(_NCPUS, rest))) if free0 > 0 else ()
    if snap.params.backfill_order is _SHORTEST:
        tried = sorted(tried, key=_ESTIMATE)  # stable: equal estimates stay in queue order
    for w in tried:
        n = w.ncpus
        if n > free0 or (binding and w.bind is not None):  # cheap tests first: most of a long queue stops here
            continue
        est = w.estimate
        if n > room and now + est > begins and not w.resources:
            continue
        if refused is not None:
            ask = (
                (n, est, w.resources, w.preemptable, w.flex, w.user, w.elapsed)
                if by_user
                else (n, est, w.resources, w.preemptable, w.flex)
            )
            if ask in refused:
                continue
        if w.resources:
            res = w.resources
            if res in blocked:
                continue
            v = ps.vec(w)
            if v[0] < 0 or any(v[d] > free_now[d] or (extra is not None and v[d] > extra[d]) for d in range(1, dims)):
                blocked.add(res)  # an unknown resource, or more of one than is left: so for the rest of the loop
                continue
            if not ps.possible(v) or (extra is not None and n > extra[0]):
                continue
            fits = ps.fits_now(v, est)
        else:  # cores only: the same tests on the cores alone, without a call
            v = (n, *pad) if pad else (n,)
            if extra is not None and n > extra[0]:
                continue
            if lazy and ps._profs is None:  # ps._clear(n, est), inlined
                fits = h1 is None or n <= ps._extra or (now + est <= h1[0] if est > 0 else h1[0] > now)
            else:
                if cores is None:  # built since (nothing in this loop does so today)
                    lazy, cores = False, ps.profs[0]
                    limits = cores.limits()
                until = limits.get(n)
                if until is None:
                    until = cores.until(n)
                fits = now + est <= until if est > 0 else until > now
        # a job that keeps its devices when preempted is not shortened for a head asking for devices
        shorten = predict is not None and w.preemptable and not w.flex and not (w.keeps_devices and head.devices)
        planned: float | None = None
        if fits and (not shorten or now + est <= shadow):
            pass
        elif (
            shorten
            and predict is not None
            and (planned := predict(w)) is not None
            and now + planned <= shadow
            and ps.fits_now(v, planned)
        ):
            pass
        elif fits or (ps.loose is not None and _loose_fit(ps, w, v)):
            planned = None
        else:
            if refused is not None:
                refused.add(ask)
            continue
        if planned is None and w.hard is not None and not ps.fits_now(v, w.hard):
            planned = est  # it may start on its own estimate only: the estimate holds it (module doc, "Estimates")
        if w.resources and w.devices and not on_map and not ps.placeable(w, v):
            continue  # count-only: no distinct devices free now
        if on_map:  # the costliest tests last, each asked once per request while nothing starts
            key = (n, w.place, w.flex, w.devices)
            late = guard and now + (est if planned is None else planned) > shadow
            if key in unplaceable or (late and key in no_room):
                continue
            if not ps.placeable(w, v):
                unplaceable.add(key)  # the free cores only shrink in this loop
                continue
            if late and not ps.leaves_room(w, head, shadow):
                no_room.add(key)
                continue  # it would sit on cores the head is placed on at its reservation
            no_room.clear()
        if dguard and not ps.leaves_devices(w, head):
            continue
        if fguard and now + (est if planned is None else planned) > shadow:
            dkey = (n, w.place, w.flex, w.devices, snap.kept.get(w.id) if snap.kept else None)
            if dkey in no_devices:
                continue
            if not ps.leaves_devices_at(w, head, shadow):
                no_devices.add(dkey)  # what is free only shrinks until a job starts
                continue
        ps.start(w, v, est if planned is None else planned, True, planned)
        free0 = free_now[0]
        if not lazy:
            cores = ps.profs[0]
            limits = cores.limits()
        if quick:
            room = ps._extra if ps._profs is None else inf
        if extra is not None:
            for d in range(ps.dims):
                extra[d] -= v[d]
        if blocked and min(v) < 0:
            blocked.clear()
        if refused:
            refused.clear()
        if no_devices:
            no_devices.clear()
        if (w.preemptable and not w.flex) or planned is not None:
            reclaimable = True
        if free0 <= 0:
            break
    wake = inf
    if ckpt or relied or reclaimable:
        for r in ps.general:
            if r.planned is not None and not r.stopping:
                pe = r.start + r.planned
                if now < pe < wake:
                    wake = pe
        if now < shadow < wake and reclaimable:
            wake = shadow
    if ps.active or ps.activated:
        ps.bound_starts(snap.pending)
    if snap.splitting:
        _split(ps, snap, rest)
    return _plan(ps, HeadReservation(head.id, shadow), wake), ps


def _split(ps: _Pass, snap: Snapshot, rest: Sequence[Waiting]) -> None:
    """Sub-tasks of splittable jobs in the windows left after backfilling.

    The windows are the cores free now that nothing holds (the head's
    reservation, fixed reservations, conservative reservations), in bands by
    when something first needs them (:func:`_windows`); a job that also asks
    for floating resources is not split.  Sub-tasks that ask for devices
    (``SplitInfo.devices``) fill a window with at most as many chains as the
    devices have slots free until its end, each chain on distinct devices.
    """
    if not snap.splitting:
        return
    now = ps.now
    width = min(ps.free_now[0], ps.profs[0].free_at(now))
    if width <= 0:
        return
    cands = [w for w in rest if w.split is not None and (not w.resources or _device_split(w))]
    if not cands:
        return
    windows = _windows(ps.profs[0], now, width)
    if not windows:
        return
    started = [d for d in ps.decisions if type(d) is Start]
    pad = (0,) * (ps.dims - 1)
    devs = _DeviceChains(ps) if any(w.split is not None and w.split.devices for w in cands) else None
    whole = {w.id: any(a.exclusive for a in w.split.devices) for w in cands if w.split is not None and w.split.devices}
    for d in _split_fill(snap, cands, started, ps.free_set, windows, devs):
        ps.decisions.append(d)
        n = len(d.cores) if ps.free_set is not None else _piece_cores(d, snap)
        ps.free_now[0] -= n
        if d.devices:
            v = [0] * ps.dims
            v[0] = n
            for name, k in dev.held((key for ch in d.devices for key in ch), snap.devices, whole[d.job]):
                v[ps.index[name]] += k
            for i in range(1, ps.dims):
                ps.free_now[i] -= v[i]
            ps.hold(now, d.end - now, tuple(v), taken=True)
        else:
            ps.hold(now, d.end - now, (n, *pad), taken=True)
        if ps.free_set is not None:
            ps.free_set = ps.free_set.difference(d.cores)


def _device_split(w: Waiting) -> bool:
    """Whether ``w`` is a splittable job whose sub-tasks ask for devices and nothing floating."""
    return w.split is not None and bool(w.split.devices) and all(n.startswith(dev.PREFIX) for n, _ in w.resources)


class _DeviceChains:
    """The devices the chains of sub-tasks get in the backfill windows of a pass."""

    def __init__(self, ps: _Pass) -> None:
        self.ps = ps

    def cap(self, sp: SplitInfo, end: float) -> int:
        """How many chains, each with the devices of one sub-task, the devices' slots hold from now to ``end``,
        on distinct devices free now."""
        ps = self.ps
        snap = ps.snap
        k = 1 << 30
        for name, per in dev.slots(sp.devices, snap.devices):
            d = ps.index.get(name)
            if d is None or per <= 0:
                return 0
            k = min(k, ps.profs[d].min_free(ps.now, end) // per, ps.free_now[d] // per)
        while k > 0 and self._choose(sp, k) is None:
            k -= 1
        return k

    def _choose(self, sp: SplitInfo, k: int) -> tuple[tuple[str, int], ...] | None:
        asks = [replace(a, count=a.count * k) for a in sp.devices]
        got = dev.choose(asks, self.ps.snap.devices, self.ps._device_use(), None, None, 0, None)
        return got[0] if got is not None else None

    def take(self, sp: SplitInfo, k: int) -> tuple[tuple[tuple[str, int], ...], ...]:
        """The devices of ``k`` chains, now taken: per chain (empty: not that many)."""
        keys = self._choose(sp, k)
        if keys is None:
            return ()
        snap = self.ps.snap
        used = self.ps._device_use()
        whole = any(a.exclusive for a in sp.devices)
        for key, n in dev.used_slots(((keys, whole),), snap.devices).items():
            used[key] = used.get(key, 0) + n
        return per_chain(sp.devices, keys, snap.devices, k)


def _piece_cores(d: StartTasks, snap: Snapshot) -> int:
    """The cores of the piece ``d`` starts (count-only mode)."""
    if d.widths:
        return sum(d.widths)
    w = next(x for x in snap.pending if x.id == d.job)
    return len(d.chains) * w.split.ncpus  # type: ignore[union-attr]


def _windows(prof: Profile, now: float, width: int) -> list[tuple[int, float]]:
    """The backfill windows in the ``width`` cores free now: ``(cores, end)`` bands.

    Reading the profile from now on, each time it drops below the cores
    still counted, the cores it loses close a band there: those cores are
    free from now until that time.  Cores it never loses form a band that
    is given the latest of those times (any end would do; a window that
    never closes is none).  Bands never overlap: at any instant the cores of
    the bands still open are at most what the profile has free.
    """
    out: list[tuple[int, float]] = []
    level = width
    last = inf
    for t, v in prof.steps():
        if t <= now or v >= level:
            continue
        low = v if v > 0 else 0
        out.append((level - low, t))
        last = t
        level = low
        if level == 0:
            break
    if level > 0 and last < inf:
        out.append((level, last))
    return out


def _make_room(ps: _Pass, head: Waiting, hv: Vec, ckpt: bool) -> None:
    """The head's reservation time has come and it does not fit: preempt checkpointable backfilled jobs
    (checkpoint-backfill) and stop those that overran the estimate they were backfilled on (every backfilling
    policy), the fewest that leave it room (:meth:`_Pass.preempt`)."""
    have = ps.coming()
    short = [hv[d] - have[d] for d in range(ps.dims)]
    if (
        any(s > 0 for s in short)
        or not ps.placeable_on(head, ps.coming_set())
        or (head.devices and not head.flex and ps.head_devices_blocked(head))
    ):
        now = ps.now
        cands = [
            r
            for r in ps.general
            if r.backfilled
            and not r.stopping
            and r.id not in ps.preempted
            and ((ckpt and r.preemptable) or overrun(r, now))
        ]
        if cands:
            ps.preempt(cands, short, head)


def _meetable(ps: _Pass, v: Vec, duration: float, t: float) -> bool:
    """Whether ``v`` can be had from ``t`` on, preempting every checkpointable backfilled job."""
    extra = [0] * ps.dims
    for r in ps.general:
        if (
            r.backfilled
            and (r.preemptable or r.planned is not None)
            and not r.stopping
            and counted_end(r, ps.now, ps.mode) > t
        ):
            ps._acc(extra, ps.freed(r))
    if ps._profs is None and ps._hold1 is None:  # cores only, rising: least free at t
        return ps._free_at(t) + extra[0] >= v[0]
    for d in range(ps.dims):
        if v[d] and ps.profs[d].min_free(t, t + duration) + extra[d] < v[d]:
            return False
    return True


def _split_fill(
    snap: Snapshot,
    rest: Sequence[Waiting],
    started: list[Start],
    free: frozenset[int] | None,
    windows: Sequence[tuple[int, float]],
    devs: _DeviceChains | None = None,
) -> tuple[StartTasks, ...]:
    """Sub-tasks of splittable jobs in the backfill ``windows`` (``(cores, end)`` bands from now).

    Each splittable job, in queue order, that did not start whole fills the
    windows, the longest first, with sub-tasks chained on the same cores
    (:func:`gridsched.core.split.fill_window`; sub-tasks of their own sizes:
    :func:`gridsched.core.split.fill_mixed`), each window's share placed like
    one job of that many cores: one ``StartTasks`` decision per window used.
    Every chain ends by its window's end; a sub-task is taken at most once.
    Sub-tasks that ask for devices (``devs``) get at most as many chains as
    :meth:`_DeviceChains.cap` allows, each with its own devices.
    """
    now = snap.now
    room = [[c, e] for c, e in sorted(windows, key=lambda x: -x[1]) if c > 0 and now < e < inf]
    if not room:
        return ()
    nfree = len(free) if free is not None else sum(int(c) for c, _ in room)
    done = {s.job for s in started}
    out: list[StartTasks] = []
    for w in rest:
        sp = w.split
        if sp is None or w.id in done or w.flex or w.bind is not None:
            continue
        left = sp.left
        for win in room:
            width = min(int(win[0]), nfree)
            if sp.devices:
                if sp.sizes or devs is None:
                    break
                width = min(width, devs.cap(sp, win[1]) * sp.ncpus)
            if width <= 0 or (not sp.sizes and sp.ncpus > width):
                continue
            length = win[1] - now
            widths: tuple[int, ...] = ()
            keys: tuple[tuple[tuple[str, int], ...], ...] = ()
            if sp.sizes:
                mixed = fill_mixed(left, sp.sizes, width, length)
                if not mixed:
                    continue
                chains = [ch for _, ch in mixed]
                widths = tuple(c for c, _ in mixed)
                n = sum(widths)
                sizes = sp.sizes
                dur = max(sum(sizes[i][1] for i in ch) for ch in chains)
            else:
                chains = fill_window(left, sp.ncpus, sp.task_time, width, length)
                if not chains:
                    continue
                n = len(chains) * sp.ncpus
                dur = max(map(len, chains)) * sp.task_time
                if sp.devices:
                    keys = devs.take(sp, len(chains)) if devs is not None else ()
                    if not keys:
                        continue
            if free is None:
                cores: tuple[int, ...] = ()
                nfree -= n
            else:
                got = assign(snap.machine, free, n, replace(w.place, ncpus=n) if w.place is not None else None)
                if got is None:
                    continue
                cores, held = got
                free = free.difference(held)
                if keys and w.place is None:  # each chain's cores on its devices' boards where free
                    cores = chain_cores(cores, sp.ncpus, keys, snap.devices, snap.machine, free)
                    free = free.union(held).difference(cores)
                nfree = len(free)
            win[0] -= n
            tasks = tuple(i for c in chains for i in c)
            out.append(StartTasks(w.id, tasks, cores, tuple(chains), now + dur, widths, keys))
            if widths:
                taken = set(tasks)
                left = tuple(i for i in left if i not in taken)
            else:  # fill_window takes the first ones
                left = left[len(tasks) :]
            if not left or nfree <= 0:
                break
        if nfree <= 0:
            break
    return tuple(out)
