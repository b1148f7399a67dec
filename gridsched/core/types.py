"""The snapshot the core reads and the decisions it returns.

All times are seconds on the driver's clock (real or virtual); the core never
asks what time it is, it is told (``Snapshot.now``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import Enum
from typing import TYPE_CHECKING

from gridsched.core.params import BackfillOrder as BackfillOrder
from gridsched.core.params import Params as Params
from gridsched.core.params import Policy as Policy
from gridsched.core.params import Predictor as Predictor
from gridsched.core.params import PriorityParams as PriorityParams
from gridsched.core.params import YieldAffinity as YieldAffinity
from gridsched.core.record import record as record

if TYPE_CHECKING:
    from gridsched.core.model import Dep, DeviceAsk, Request
    from gridsched.core.topology import Device, MachineMap


@record
class SplitInfo:
    """The sub-tasks a splittable job has left: ``left`` (their indices), each on ``ncpus`` cores
    for at most ``task_time``.

    ``sizes``, when given, holds every sub-task's own ``(ncpus, time)``, by
    index (``left`` names indices into it); ``ncpus`` and ``task_time`` are
    then the largest of them.  Empty: every sub-task is ``(ncpus, task_time)``.

    ``devices``: the devices each sub-task asks for (``gsub --gpus-per-task``).
    The job's own :attr:`Waiting.devices` are then those of one wave (as many
    sub-tasks as its ``ncpus`` holds), and it only ever starts as pieces of
    one chain each, each chain with its own devices
    (:attr:`StartTasks.devices`).
    """

    ncpus: int
    task_time: float
    left: tuple[int, ...]
    sizes: tuple[tuple[int, float], ...] = ()
    devices: tuple[DeviceAsk, ...] = ()


@record
class Waiting:
    """A pending job as the core sees it.

    ``estimate`` is what is left of the user's walltime: the full walltime for a
    job that never ran, the walltime minus the time already run for a job that
    was checkpointed (``elapsed`` > 0).
    """

    id: int
    ncpus: int
    estimate: float
    preemptable: bool = False  # checkpoint mode is not ``none``
    user: str = ""
    elapsed: float = 0.0
    # Floating resources, ``((name, count), ...)`` sorted by name.
    resources: tuple[tuple[str, int], ...] = ()
    # The reservation the job is bound to: it runs only on that reservation's
    # resources, while the reservation is active (never in the general queue).
    bind: int | None = None
    # This entry is the flexible job of the waiting flexible reservation with
    # the same id: when it would start, the reservation is activated instead.
    flex: bool = False
    # The job's mapping requirement (--place, --threads-per-core,
    # --exclusive-board); None: pack, any thread.  Used when Snapshot.machine is set.
    place: Request | None = None
    # A splittable job (its ``ncpus`` is one wave: as many sub-tasks as fit on
    # the machine, times their cores); None for any other job.
    split: SplitInfo | None = None
    # Eligibility (gridsched.core.eligible): the job's name (for singleton), its
    # dependencies, and the array it is a task of with that array's %MAX.
    name: str = ""
    deps: tuple[Dep, ...] = ()
    array: int | None = None
    array_max: int | None = None
    # Holds and begin times (gridsched.core.eligible): why the job is held ("" = not held: by its
    # owner or an admin with ghold, or its subtree's parent ended, :class:`HoldSubtree`), and the
    # time it may not start before (``sbatch --begin``); None: any time.
    held: str = ""
    begin: float | None = None
    # Devices asked for (GPUs, ...): their slots are also in ``resources`` (gridsched.core.devices.slots),
    # except for a suspended job that keeps its devices (``Snapshot.kept``): it needs them from no one.
    devices: tuple[DeviceAsk, ...] = ()
    # Preempted, it is suspended (checkpoint ``suspend``) and keeps its devices: preempting it frees none.
    keeps_devices: bool = False
    # Preempted, it is suspended and keeps its memory (its processes stay in memory): preempting it frees
    # none of the memory pool (gridsched.core.memory).
    keeps_memory: bool = False
    # Priority (gridsched.core.priority): when the job was submitted (the age factor), its nice value
    # (``gsub --nice``, subtracted) and the priority an admin set (``gsub --priority``; None: computed).
    submitted: float = 0.0
    nice: int = 0
    admin: int | None = None
    # The job's own estimate (PBS soft_walltime, gsub --estimate) is shorter than its walltime: ``estimate`` is
    # that estimate, and ``hard`` what is left of the walltime (None: ``estimate`` is the walltime).  A backfill
    # that would not be allowed on ``hard`` relies on the estimate: it starts the job with ``planned`` set to
    # it, and the job is stopped for the head when it overruns (see gridsched.core.policy, "Estimates").
    hard: float | None = None


@record
class Running:
    """A job in its current run segment.

    ``estimate`` is the user's walltime for this segment (the job is killed at
    ``start + estimate``), or the time the job is planned to take by its own
    estimate (:func:`gridsched.core.end_time.soft_left`).  ``planned`` is the shorter
    estimate the backfill step relied on when it started the job: a prediction
    (checkpoint-backfill) or the job's own estimate (``Waiting.hard``); ``None``
    if it relied on the walltime.  A backfilled job still running past
    ``start + planned`` is counted at ``start + estimate`` (checkpoint-backfill),
    or as ending now (the other backfilling policies), and is stopped for the
    head when the head's reservation time has come.  ``stopping`` marks a job that was told to stop
    (preempted, cancelled, out of time) and has not exited yet: its cores are
    not free, but no more cores need be taken from it.
    """

    id: int
    ncpus: int
    start: float
    estimate: float
    cores: tuple[int, ...] = ()
    backfilled: bool = False
    preemptable: bool = False
    planned: float | None = None
    stopping: bool = False
    user: str = ""
    resources: tuple[tuple[str, int], ...] = ()
    # Running inside this reservation (its resources are the reservation's, not
    # the machine's free ones) while the reservation is active.
    bind: int | None = None
    name: str = ""  # for singleton dependencies of later jobs
    array: int | None = None  # the array it is a task of (array throttles)
    # Cores the job holds without running on them (the SMT siblings a --threads-per-core
    # job leaves idle, the rest of an --exclusive-board job's boards): see placement.claimed.
    held: frozenset[int] = frozenset()
    # The devices it holds, ``((type, index), ...)`` (their slots are also in ``resources``), every slot
    # of each when ``whole_devices`` (an exclusive ask).
    devices: tuple[tuple[str, int], ...] = ()
    whole_devices: bool = False
    # Preempted, it is suspended (checkpoint ``suspend``) and keeps its devices: preempting it frees none.
    keeps_devices: bool = False
    # Preempted, it is suspended and keeps its memory (its processes stay in memory): preempting it frees
    # none of the memory pool (gridsched.core.memory).
    keeps_memory: bool = False

    @property
    def end(self) -> float:
        """When the job ends at the latest (its user walltime)."""
        return self.start + self.estimate


@record
class HeadReservation:
    """The head job's reservation, carried by the driver from pass to pass.

    Once a job becomes the head its reservation time may move earlier, never
    later (except when it can no longer be met at all).
    """

    job: int
    time: float


@record
class Resv:
    """A reservation: ``ncpus`` cores and floating ``resources`` for ``duration`` seconds.

    Waiting: ``active`` is False.  A *fixed* reservation (``start`` set) holds
    its resources over ``[start, start + duration)``.  A *flexible* one
    (``start`` None) waits in the queue as the pending entry
    ``Waiting(id, ..., flex=True)`` and is activated when that entry would
    start.  Active: it holds ``cores`` (placement mode) and its resources
    until ``end``; jobs bound to it run inside.  ``kill``: its bound jobs end
    with it; otherwise they go on as ordinary running jobs.  ``place``: its
    mapping requirement (--place, --threads-per-core, --exclusive-board, as a
    job's; None: the fewest boards, any thread): it is activated only on cores
    that meet it, and holds what a job so placed would hold
    (:func:`gridsched.core.placement.claimed`).
    """

    id: int
    ncpus: int
    duration: float
    resources: tuple[tuple[str, int], ...] = ()
    start: float | None = None
    active: bool = False
    cores: tuple[int, ...] = ()
    end: float | None = None
    kill: bool = True
    place: Request | None = None


@record
class Ended:
    """Job ``job`` ended in ``state`` since the last pass, leaving the live ``children`` (its direct children).

    ``recoverable``: it was submitted with ``--recoverable`` (its subtree is
    held rather than cancelled when it did not complete).
    """

    job: int
    state: str
    children: tuple[int, ...] = ()
    recoverable: bool = False


@record
class Snapshot:
    """What a pass is told: the time, the machine, the running and pending jobs, the settings and what the
    driver keeps from pass to pass (the head's reservation, the users' history, ...)."""

    now: float
    ncores: int
    running: tuple[Running, ...]
    pending: tuple[Waiting, ...]  # in priority order
    params: Params = field(default_factory=Params)
    free: frozenset[int] | None = None  # free cores; None = count-only mode
    head: HeadReservation | None = None
    history: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # Floating resources of the machine (name -> units) and the reservations
    # (one availability profile each in the pass).  ``free`` never includes the
    # cores of an active reservation.
    floating: Mapping[str, int] = field(default_factory=dict)
    reservations: tuple[Resv, ...] = ()
    # The machine map: with it (and ``free``), started jobs are placed by
    # :func:`gridsched.core.placement.place`; without it, on the lowest-numbered
    # free cores.
    machine: MachineMap | None = None
    # Parent-child trees (:mod:`gridsched.core.tree`): the parent of each live
    # job that has one, and the cores running parents lend while they yield.
    parents: Mapping[int, int] = field(default_factory=dict)
    lent: tuple[Lent, ...] = ()
    # The state (PENDING, RUNNING, COMPLETED, ...) of every job a pending job's
    # dependencies name; a job missing here is unknown.
    states: Mapping[int, str] = field(default_factory=dict)
    # False: the driver knows no pending job has dependencies or an array
    # throttle, so eligibility need not look (gsim on a plain trace).
    gated: bool = True
    # False: the driver knows no pending job is splittable, so the pass need
    # not look for sub-tasks to fill its windows with (gsim on a plain trace).
    splitting: bool = True
    # The jobs with children that ended since the last pass (gridsched.core.endings):
    # what becomes of their subtrees is decided by the next pass.
    ended: tuple[Ended, ...] = ()
    # Cores taken out of service (drained by the admin): never in ``free``; the
    # forecast tells a job that waits for them (:class:`Wait`, ``DRAINED``).
    drained: frozenset[int] = frozenset()
    # The machine's devices (GPUs, ...; gridsched.core.devices): counted as resources in the pass,
    # and the ones a started job gets are chosen among them (``Start.devices``).
    devices: tuple[Device, ...] = ()
    # The devices suspended jobs keep (as Slurm keeps a suspended job's GRES): job -> (device keys, whole).
    # They are held, never free, until the job is continued on them (and only on them) or ends.
    kept: Mapping[int, tuple[tuple[tuple[str, int], ...], bool]] = field(default_factory=dict)
    # The floating resources suspended jobs keep (their memory: gridsched.core.memory): job -> (name, amount)
    # pairs, held until the job is continued (it asks for none of them anew) and ends; the forecast lets them
    # go at the end it plans for the job.
    kept_floating: Mapping[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    # Where the boards' memory is counted (gridsched.core.board_memory): the memory each suspended job keeps on
    # each board, job -> (board position in the map, MiB) pairs, from the cores it ran on.  Held there, never
    # free to others, until it is continued: on cores of those boards whose share of its memory is the one it
    # keeps on each (its memory never left them), asking for none anew.
    kept_boards: Mapping[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # Fair share (gridsched.core.priority): each user's usage in core-seconds, decayed to ``now``.
    usage: Mapping[str, float] = field(default_factory=dict)
    # True: some pending job may have a nice value or an admin priority, so the queue is put in priority
    # order (gridsched.core.priority) even with every priority weight 0.  False (the default): with every
    # weight 0 the driver's order stands and the pass does not look at the jobs for it.
    ranked: bool = False
    # Each pending job's priority, where priorities may differ (set with the queue's priority order by
    # gridsched.core.priority.prioritized; empty: every job has the same): a remembered head gives way to a
    # job of higher priority (see "The head keeps its reservation" in gridsched.core.policy).
    priorities: Mapping[int, float] = field(default_factory=dict)
    # The user-ratio predictor's input (gridsched.core.predict): for each user, the ratios of run
    # time to walltime of their last finished jobs (at most ``predict.RATIO_JOBS``), newest last.
    ratios: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


@record
class Lent:
    """Running job ``parent`` yields: it lends ``cores`` (its own) to the tasks allowed on them.

    ``resuming``: it has asked for them back; no new task starts on them (except
    to unstall its tree, see :mod:`gridsched.core.tree`), and it is resumed
    (:class:`Resume`) when no job runs on them above it.  ``awaiting``: the
    jobs it yields until (``gwait --yield`` on given jobs) that have not ended;
    once none is left it asks for its cores back (:class:`Reclaim`).  None: it
    waits for an explicit resume.
    """

    parent: int
    cores: frozenset[int]
    resuming: bool = False
    awaiting: tuple[int, ...] | None = None


@record
class Start:
    """Start pending job ``job`` now on ``cores`` (``()`` in count-only mode), with ``devices``
    (``((type, index), ...)``, for a job that asks for some)."""

    job: int
    cores: tuple[int, ...] = ()
    backfilled: bool = False
    planned: float | None = None  # the shortened estimate relied on, if any
    devices: tuple[tuple[str, int], ...] = ()


@record
class Preempt:
    """Checkpoint and stop running job ``job``; it goes back to the queue."""

    job: int


@record
class Kill:
    """End running job ``job`` at once, as at its walltime (TIMEOUT), for ``reason``: it was backfilled on its
    own estimate, overran it, and cannot be preempted (checkpoint mode ``none``) while the head needs its cores."""

    job: int
    reason: str


@record
class Activate:
    """Reservation ``resv`` takes its resources now, on ``cores``, until ``end``."""

    resv: int
    cores: tuple[int, ...] = ()
    end: float = 0.0


@record
class StartTasks:
    """Take sub-tasks out of splittable job ``job`` and start them now, as one piece, on ``cores``.

    ``chains[i]`` is the indices of the sub-tasks run one after another on
    ``cores[i * ncpus:(i + 1) * ncpus]`` (``ncpus`` of the job's
    :class:`SplitInfo`); ``tasks`` is all of them.  ``end`` is when the
    longest chain ends at the latest (now plus its sub-tasks' times).
    ``widths``, for sub-tasks of their own sizes, is the cores of each chain
    (every sub-task of chain ``i`` needs ``widths[i]``), laid out one after
    another in ``cores``; empty: every chain has ``ncpus``.
    ``devices``, for sub-tasks that ask for devices, is the devices of each
    chain (``((type, index), ...)`` per chain): each chain then runs as a
    piece of its own, seeing and holding only its devices.
    """

    job: int
    tasks: tuple[int, ...]
    cores: tuple[int, ...]
    chains: tuple[tuple[int, ...], ...]
    end: float = 0.0
    widths: tuple[int, ...] = ()
    devices: tuple[tuple[tuple[str, int], ...], ...] = ()


@record
class Cancel:
    """Cancel pending job ``job`` for ``reason`` (its dependencies can never be met)."""

    job: int
    reason: str


@record
class EndReservation:
    """Active reservation ``resv`` reached its end, or fixed reservation ``resv`` never came before its end.

    Its resources return to the machine.  ``kill``: its bound running jobs
    stopped as at their walltime (the reservation was made to end its jobs);
    its other bound running jobs go on as ordinary jobs.  ``cancel``: its
    bound jobs still waiting, cancelled.  ``reason``: empty for an active
    reservation's end, else why it ended.
    """

    resv: int
    kill: tuple[int, ...] = ()
    cancel: tuple[int, ...] = ()
    reason: str = ""


@record
class Reclaim:
    """Yielding parent ``parent``: the jobs it yields until have ended; it asks for its cores back."""

    parent: int


@record
class Resume:
    """Yielding parent ``parent`` is resumed: its cores are clear of the tasks it lent them to, and its own again.

    ``implicit``: the jobs it yielded until ended in this same pass
    (:class:`Reclaim` and this at once).
    """

    parent: int
    implicit: bool = False


@record
class CancelSubtree:
    """Parent ``parent`` ended badly: cancel its live descendants ``jobs`` (waiting ones at once, running ones
    signalled as by gdel) for ``reason``."""

    parent: int
    jobs: tuple[int, ...]
    reason: str


@record
class HoldSubtree:
    """Recoverable parent ``parent`` ended badly: hold its waiting descendants ``jobs`` for ``reason``; its
    running descendants go on (``gresume-tree`` releases the held ones)."""

    parent: int
    jobs: tuple[int, ...]
    reason: str


Decision = (
    Start
    | Preempt
    | Kill
    | Activate
    | StartTasks
    | Cancel
    | EndReservation
    | Reclaim
    | Resume
    | CancelSubtree
    | HoldSubtree
)


class WaitKind(str, Enum):
    """Why a pending job waits, as Slurm's squeue REASON names it (the value)."""

    RESOURCES = "Resources"  # next to start: waits for resources in use (``what``: cores or a device type)
    LICENSES = "Licenses"  # waits only for a floating resource (a licence) that other jobs hold
    PRIORITY = "Priority"  # jobs ahead of it come first
    DRAINED = "Drained"  # would be placed if drained cores were in service (Slurm: ReqNodeNotAvail)
    NEVER_FITS = "NeverFits"  # the machine in service can never hold it (Slurm: BadConstraints)
    BOUND_NEVER = "BoundNever"  # can never start in the reservation it is bound to
    RESERVATION = "Reservation"  # bound to a reservation not active yet
    HELD = "Held"  # Slurm: JobHeldUser / JobHeldAdmin
    BEGIN_TIME = "BeginTime"
    DEPENDENCY = "Dependency"
    DEPENDENCY_NEVER = "DependencyNeverSatisfied"
    ARRAY_LIMIT = "JobArrayTaskLimit"
    CPU_LIMIT = "QOSMaxCpuPerUserLimit"  # its user's running jobs hold the cores a user may (limits.max_cpus_per_user)


@record
class Wait:
    """Why a pending job does not start now (:func:`gridsched.core.policy.forecast_reasons`).

    ``DRAINED``: ``cores`` are the drained cores; ``never``: it can never start
    while they are drained (else it waits for cores, and would be placed now with
    them).  ``NEVER_FITS``: ``what`` is missing -- ``"cores"`` (it asks for
    ``asks``, ``has`` are in service), a floating resource's name (``asks``
    units of ``has``), ``"placement"`` (its mapping requirement on ``asks``
    cores; ``has``: the most cores in service on one board), ``"unknown"``
    (a floating resource the machine does not have: ``text``), or ``""`` (what
    it needs stays held: an active reservation without end).
    ``BOUND_NEVER`` and ``RESERVATION``: ``resv``; for ``BOUND_NEVER``
    ``what`` is ``"place"`` (the reservation's cores can never hold its
    requirement), ``"time"`` (it would not end before the reservation ends its
    jobs) or ``"resv"`` (the reservation can never be activated).  The
    eligibility kinds carry the eligibility reason in ``text``
    (:mod:`gridsched.core.eligible`).
    ``RESOURCES`` (not bound): ``what`` is what binds now -- ``"cores"`` (it
    asks for ``asks``, ``free`` of the ``has`` in service are free), a device
    dimension (``device:gpu``, ``device:gpu:H100``: ``asks`` slots, ``free``
    of ``has`` free), the memory (:data:`gridsched.core.memory.MEMORY`: MiB),
    or ``""`` (nothing it asks for is short now: its placement, or the jobs
    ahead of it, keep it waiting).  ``LICENSES``: a floating resource alone binds: ``what`` is its name, ``asks`` units,
    ``free`` of ``has`` free now.
    """

    kind: WaitKind
    text: str = ""
    what: str = ""
    asks: int = 0
    has: int = 0
    never: bool = False
    cores: frozenset[int] = frozenset()
    resv: int | None = None
    free: int = 0


@record
class Forecast:
    """Predicted start of every pending entry (``inf``: never) and why each one that does not start now waits.

    ``tasks``: by splittable job, its sub-tasks' planned ``(index, start, end)`` (the revised schedule:
    windows before its start as a whole, then that start), in sub-task order; a sub-task never planned
    is not there.
    """

    times: dict[int, float]
    reasons: dict[int, Wait]
    tasks: dict[int, tuple[tuple[int, float, float], ...]] = field(default_factory=dict)


@record
class Plan:
    """What a pass decides: its decisions in the order they are carried out, the head's reservation and
    when to pass again at the latest."""

    decisions: tuple[Decision, ...] = ()
    head: HeadReservation | None = None
    wake_at: float | None = None  # call schedule() again at this time at the latest
    # Why pending jobs that may not be scheduled yet wait (dependencies, array throttles).
    reasons: Mapping[int, str] = field(default_factory=dict)

    @property
    def starts(self) -> tuple[Start, ...]:
        return tuple(d for d in self.decisions if isinstance(d, Start))

    @property
    def preempts(self) -> tuple[Preempt, ...]:
        return tuple(d for d in self.decisions if isinstance(d, Preempt))

    @property
    def kills(self) -> tuple[Kill, ...]:
        return tuple(d for d in self.decisions if isinstance(d, Kill))

    @property
    def activations(self) -> tuple[Activate, ...]:
        return tuple(d for d in self.decisions if isinstance(d, Activate))
