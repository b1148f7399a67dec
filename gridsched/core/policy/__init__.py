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
map) cores free then (:class:`~gridsched.core.policy.conservative._DeviceTimes`); a job that starts now and would
still run at such a reservation's time must leave that job placeable then
(:meth:`~gridsched.core.policy.room.Pass.leaves_devices_at`), else it is reserved later.  Other
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
   place; jobs ahead of it are backfill candidates like the others) -- unless
   a job of higher priority (``Snapshot.priorities``) that has never run waits
   ahead of it: one submitted or raised since, or one that could not be
   scheduled when the head was chosen.  That job takes the head (the pass is
   EASY's, with a fresh head); the old head, when it is the head again, keeps
   the earlier of its remembered time and a fresh one.  A job that has run
   never takes the head back, so a job preempted for the head cannot start a
   cascade.  If it
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
Every policy is the same loop over the same state (:class:`~gridsched.core.policy.room.Pass`): one
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
requirement (:meth:`~gridsched.core.policy.room.Pass.placed_earliest`).  A job that no such time exists
for never starts and never blocks the queue.  Preemption for the head
chooses, among the checkpointable backfilled jobs, the smallest set whose
cores give it a placement (:func:`gridsched.core.preempt.victims`; most cores
first among sets of one size); if none does, nothing is preempted.  For a
head asking for devices the set must also let
:func:`gridsched.core.devices.choose` place it, with or without a map
(:func:`gridsched.core.preempt.device_victims`).  A job
backfilled past the shadow time must leave the head a placement then; once
that time has come, on the cores free now or coming free (the victims'),
whatever the count of extra cores allows (:meth:`~gridsched.core.policy.room.Pass.leaves_room`).  For a
head asking for devices, a job that would still run at the shadow time starts
only if :func:`gridsched.core.devices.choose` can still place the head then,
on what is free then once that job holds what it would get now: the slots of
the devices not held by a job running then and, on a map, the cores free by
then (:meth:`~gridsched.core.policy.room.Pass.leaves_devices_at`; once the time has come, on what is free
or coming free, :meth:`~gridsched.core.policy.room.Pass.leaves_devices`).  The guard holds only if the
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
reservation) are filled by the pass run then; the forecast plans them
already (``Forecast.tasks``, see :func:`forecast_reasons`).  fcfs never backfills.  A job
that also asks for floating resources or devices is not split (it runs whole),
except one whose sub-tasks ask for devices each (``split.devices``): a window
then takes at most as many chains as the devices have slots free until its
end, each chain on devices of its own (``StartTasks.devices``), and a whole
start of such a job is made pieces of one chain each (:func:`~gridsched.core.policy.plan._as_pieces`).

Predictors: ``Params.predictor`` ``user-history`` replaces the scaled rule by
the mean of the user's last two run times, ``user-ratio`` by the walltime times
the user's learned ratio of run time to walltime (see :mod:`gridsched.core.predict`);
preemption and rules 2-4 are unchanged.  The predictor is used only by
checkpoint-backfill.

The modules
-----------
``decide`` (``schedule``: priority, endings, eligibility, then the policy's
loop), the loops ``fcfs``, ``backfill`` (easy and checkpoint-backfill) and
``conservative``, the state of a pass (``state``: profiles, what is free now,
taking and holding; ``room``: preemption and what is left for the head),
``reservations`` (fixed reservations, bound jobs), ``windows`` (splittable
jobs), ``plan`` (what the loops share), ``start_times`` (``forecast``) and
``waits`` (why a job waits).
"""

from gridsched.core.policy.decide import free_count, quiet_when_full, schedule
from gridsched.core.policy.room import overran, overrun
from gridsched.core.policy.start_times import forecast, forecast_reasons
from gridsched.core.policy.state import pick

__all__ = [
    "forecast",
    "forecast_reasons",
    "free_count",
    "overran",
    "overrun",
    "pick",
    "quiet_when_full",
    "schedule",
]
