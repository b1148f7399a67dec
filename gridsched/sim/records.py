"""What a replay of a trace (gsim) is given and gives back: the checkpoint mode, the reservations and
gates replayed beside the trace, a tuner, and the :class:`Result` (:func:`gridsched.sim.engine.simulate`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from gridsched.core.depend import Dep
from gridsched.core.placement import Request as PlaceRequest
from gridsched.core.record import record
from gridsched.core.topology import Device
from gridsched.core.types import Params
from gridsched.sim.swf import Trace


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


@record
class SimResv:
    """A reservation replayed beside a trace: created at ``create``; ``start`` None = flexible."""

    create: float
    ncpus: int
    duration: float
    resources: tuple[tuple[str, int], ...] = ()
    start: float | None = None
    place: PlaceRequest | None = None  # its mapping requirement (with a machine map)


@record
class SimMemory:
    """The machine's memory as one pool (gsim --memory): ``total`` MiB handed out, and what each job of the
    trace asks for (MiB, by index; 0: none)."""

    total: int
    asks: list[int]


@record
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


@record
class Tuner:
    """Settings chosen again during a replay (``simulate(tuner=...)``): every ``every`` seconds,
    ``choose(now, finished, end, params)`` from the jobs ended by ``now`` (indices in the order they
    ended; ``end`` their end times) and the settings in force."""

    every: float
    choose: Callable[[float, list[int], list[float], Params], Params]
