"""The job table: the daemon's live jobs, its queue, and their rows in the state db.

Every change of a job's state is written here, inside the transaction the
daemon's loop commits once a turn (:meth:`JobTable.commit`): a job is put in
(:meth:`JobTable.put`), queued and taken out of the queue
(:meth:`JobTable.enqueue`, :meth:`JobTable.dequeue`), saved after each
change (:meth:`JobTable.save`), and ended (:meth:`JobTable.end`), after which
it lives only in the db.  A failed commit (a full disk) keeps its writes for
the next one.
"""

from __future__ import annotations

import bisect
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gridsched.core import cpuset, depend
from gridsched.core import devices as coredev
from gridsched.core.devices import DeviceAsk
from gridsched.core.end_time import soft_left
from gridsched.core.memory import MEMORY, MemoryPool
from gridsched.core.placement import Request as PlaceRequest
from gridsched.core.predict import RATIO_JOBS, run_ratio
from gridsched.core.topology import Device
from gridsched.core.tree import credit_limit, walltime_credit
from gridsched.core.types import Running, Waiting
from gridsched.daemon import transitions
from gridsched.daemon.split import split_info
from gridsched.protocol.device_asks import format_keys
from gridsched.protocol.jobs import Checkpoint, JobState, Stop
from gridsched.protocol.requests import JobSignal, JobSpec, Split
from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB, usage
from gridsched.protocol.usage import Usage

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow, RunInfo, Segment

log = logging.getLogger("gschedd")


@dataclass(slots=True)
class Rec:
    """The daemon's view of a job that has not ended (ended jobs live only in the table)."""

    id: int
    user: str
    uid: int
    ncpus: int
    walltime: int
    submit_time: float
    checkpoint: Checkpoint
    state: JobState
    elapsed: float = 0.0
    lost: float = 0.0
    segment: int = 0
    restarts: int = 0
    preemptions: int = 0
    checkpoints: int = 0
    first_start: float | None = None
    start: float | None = None
    cores: tuple[int, ...] = ()
    backfilled: bool = False
    planned: float | None = None
    shepherd: int | None = None
    ticks: int | None = None
    stop: Stop | None = None  # why it was told to stop
    kill_at: float | None = None
    deadline: float | None = None
    segments: list[Segment] = field(default_factory=list)
    name: str = ""
    deps: tuple[depend.Dep, ...] = ()
    place: PlaceRequest | None = None  # mapping requirement (--place, ...); None: pack
    held: tuple[int, ...] = ()  # cores held beyond ``cores`` (unused SMT threads, rest of exclusive boards)
    reason: str = ""
    resources: tuple[tuple[str, int], ...] = ()  # floating resources (gsub -l)
    resv: int | None = None  # the reservation the job is bound to (gsub --reservation)
    array_id: int | None = None  # an array task: its array (gridsched.protocol.arrays)
    array_index: int | None = None  # and its index in it
    array_max: int | None = None  # most tasks of that array running at once
    split: Split | None = None  # a splittable job: its sub-tasks and those left (daemon/split.py)
    split_of: int | None = None  # a piece of a splittable job: that job's id
    begin: float | None = None  # not before this time (spec ``begin``)
    warn: JobSignal | None = None  # sent before the walltime ends (spec ``signal``)
    estimate: int | None = None  # the job's own estimate the core plans with (spec ``estimate``, PBS soft_walltime)
    mailed: int = 0  # the highest TIME_LIMIT_NN mailed this segment (kept in the run info, as ``warned``)
    warned: bool = False  # this segment was sent ``warn`` (kept in the run info: sent once, across restarts)
    nice: int = 0  # spec ``nice`` (gsub --nice)
    admin_prio: int | None = None  # spec ``priority`` (gsub --priority, an admin's)
    interactive: bool = False  # spec ``interactive``: a grun job, never rerun
    withdrawn: bool = False  # a cancel under way will end it (handlers/cancel.py): offered to no pass meanwhile
    # This segment's credit: [since, until] while it yielded and a child of it ran (until None: it still
    # earns), see gridsched.core.tree.credit_spans and walltime_credit
    lent: list[list[float | None]] = field(default_factory=list)
    # Devices (gsub --gpus, --gres): what it asks for, the slots that counts for, the devices it holds
    # (or last held) and the slots they count for; ``whole``: it takes its devices whole (--exclusive-gpu).
    dev_asks: tuple[DeviceAsk, ...] = ()
    dev_slots: tuple[tuple[str, int], ...] = ()
    devices: tuple[tuple[str, int], ...] = ()
    dev_held: tuple[tuple[str, int], ...] = ()
    whole: bool = False
    # the job's spec (its public part: the private part is read at launch); an array's tasks share one, of
    # the array's id and no index (JobTable.share), which ``job`` makes the task's
    spec: JobSpec | None = None
    _waiting: Waiting | None = None

    @property
    def job(self) -> JobSpec:
        """The job's spec (its public part), which every record has."""
        s = self.spec
        assert s is not None
        if s.id != self.id or s.array_index != self.array_index:
            return s._replace(id=self.id, array_index=self.array_index)
        return s

    def set_devices(self, keys: tuple[tuple[str, int], ...], machine_devices: tuple[Device, ...]) -> None:
        """The devices the job now holds (``()``: none)."""
        self.devices = keys
        self.dev_held = coredev.held(keys, machine_devices, self.whole) if keys else ()

    @property
    def keeps_devices(self) -> bool:
        """Preempted, it is suspended and keeps its devices (``--checkpoint suspend`` with devices)."""
        return self.checkpoint is Checkpoint.SUSPEND and bool(self.dev_asks)

    @property
    def keeps_memory(self) -> bool:
        """Preempted, it is suspended and keeps its memory (``--checkpoint suspend`` with memory asked)."""
        return self.checkpoint is Checkpoint.SUSPEND and any(name == MEMORY for name, _ in self.resources)

    @property
    def suspended_on_devices(self) -> bool:
        """Suspended holding devices: they stay its own until it is continued on them."""
        return self.state is JobState.SUSPENDED and bool(self.devices)

    @property
    def preemptable(self) -> bool:
        return self.checkpoint is not Checkpoint.NONE

    def remaining(self) -> float:
        """What is left of the user's walltime for the next segment."""
        if self.checkpoint is Checkpoint.REQUEUE:
            return float(self.walltime)
        return max(1.0, self.walltime - self.elapsed)

    def soft_remaining(self) -> float | None:
        """What is left of the job's own estimate (spec ``estimate``) for the next segment; None: none given."""
        if self.estimate is None:
            return None
        if self.checkpoint is Checkpoint.REQUEUE:
            return float(self.estimate)
        return max(1.0, self.estimate - self.elapsed)

    def waiting(self) -> Waiting:
        w = self._waiting
        if w is None:
            left = self.remaining()
            est = left if self.estimate is None else soft_left(left, self.soft_remaining(), 0.0)
            w = self._waiting = Waiting(
                self.id,
                self.ncpus,
                est,
                self.preemptable,
                self.user,
                self.elapsed,
                # suspended, it keeps its devices (Snapshot.kept) and its memory (held out of the pool: its
                # processes are still in memory, as Slurm keeps a suspended job's): it needs them from no one
                self.asks_when_resumed(),
                self.resv,
                place=self.place,
                split=split_info(self.split),
                name=self.name,
                deps=self.deps,
                array=self.array_id,
                array_max=self.array_max,
                begin=self.begin,
                devices=self.dev_asks,
                keeps_devices=self.keeps_devices,
                keeps_memory=self.keeps_memory,
                submitted=self.submit_time,
                nice=self.nice,
                admin=self.admin_prio,
                hard=left if est < left else None,  # its own estimate is shorter than its walltime
            )
        return w

    def asks_when_resumed(self) -> tuple[tuple[str, int], ...]:
        """The floating resources (and device slots) the job asks of the pool to start: a suspended one asks
        for neither the devices nor the memory it keeps."""
        if self.state is not JobState.SUSPENDED:
            return coredev.merge(self.resources, self.dev_slots)
        own = self.resources if self.suspended_on_devices else coredev.merge(self.resources, self.dev_slots)
        return tuple(r for r in own if r[0] != MEMORY)

    def kept_memory(self) -> int:
        """MiB of memory a suspended job keeps (0 for a job in any other state)."""
        if self.state is not JobState.SUSPENDED:
            return 0
        return sum(n for name, n in self.resources if name == MEMORY)

    def credit(self, now: float, longest: float) -> float:
        """The seconds this segment's walltime deadline has moved: the time its children ran while it yielded,
        never carrying the segment past ``max(its walltime, longest)`` from its start (``longest``:
        jobs.max_walltime; :func:`gridsched.core.tree.credit_limit`)."""
        if not self.lent:
            return 0.0
        if self.deadline is not None and self.start is not None:
            allowance = self.deadline - self.start
        else:
            allowance = self.remaining()
        return walltime_credit(
            ((s or 0.0, u) for s, u in self.lent), now, credit_limit(allowance, longest, self.backfilled)
        )

    def due(self, now: float, longest: float) -> float | None:
        """When this segment reaches its walltime (its deadline, later by its credit)."""
        if self.deadline is None or not self.lent:
            return self.deadline
        return self.deadline + self.credit(now, longest)

    def running(self, now: float, longest: float) -> Running:
        """The core's view of the running job (``now``, ``longest``: to count its credit up to now)."""
        return Running(
            self.id,
            self.ncpus,
            self.start or 0.0,
            self._planned_left(now, longest) if self.start else 0.0,
            self.cores,
            self.backfilled,
            self.preemptable,
            self.planned,
            self.state is JobState.STOPPING or self.stop is not None,
            self.user,
            coredev.merge(self.resources, self.dev_held),
            self.resv,
            name=self.name,
            array=self.array_id,
            held=frozenset(self.held),
            devices=self.devices,
            whole_devices=self.whole,
            keeps_devices=self.keeps_devices,
            keeps_memory=self.keeps_memory,
        )

    def _planned_left(self, now: float, longest: float) -> float:
        """The segment's length the core plans with: its walltime, or its own estimate (core.end_time.soft_left)."""
        credit = self.credit(now, longest)
        if self.estimate is None:
            return self.remaining() + credit
        ran = max(0.0, now - (self.start or now) - credit)
        return soft_left(self.remaining(), self.soft_remaining(), ran) + credit

    def run_info(self) -> RunInfo:
        return {
            "segment": self.segment,
            "start": self.start,
            "shepherd": self.shepherd,
            "ticks": self.ticks,
            "stop": self.stop,
            "kill_at": self.kill_at,
            "deadline": self.deadline,
            "planned": self.planned,
            "checkpoint": self.checkpoint,
            "held": list(self.held),
            "lent": self.lent,
            "warned": self.warned,
            "mailed": self.mailed,
        }

    @classmethod
    def from_row(
        cls,
        row: JobRow,
        machine_devices: tuple[Device, ...] = (),
        spec: JobSpec | None = None,
        memory: MemoryPool | None = None,
    ) -> Rec:
        """The record of a job row; its spec (``spec``, the public part of the typed job, when the caller has it)
        is decoded once (:meth:`JobSpec.from_spec`) and kept typed.  With ``memory`` (the machine's memory
        pool) the job's memory is among its floating resources, except for a job bound to a reservation."""
        run = row["run"]
        if spec is None:
            spec = row["spec"].job()
        rec = cls(
            id=row["id"],
            user=row["user"],
            uid=-1 if row["uid"] is None else row["uid"],
            ncpus=row["ncpus"],
            walltime=row["walltime"],
            submit_time=row["submit_time"],
            checkpoint=spec.checkpoint,
            state=JobState(row["state"]),
            elapsed=row["elapsed"],
            lost=row["lost"],
            restarts=row["restarts"],
            preemptions=row["preemptions"],
            checkpoints=row["checkpoints"],
            first_start=row["start_time"],
            cores=tuple(sorted(cpuset.parse(row["cores"]))),
            backfilled=row["backfilled"],
            segments=row["segments"],
            name=row["name"],
            reason=row["reason"],
            spec=spec,
        )
        try:
            rec.deps = depend.parse(spec.depend)
        except depend.DependError:
            rec.deps = ()
        rec.segment = run.get("segment", 0)
        rec.start = run.get("start")
        rec.shepherd = run.get("shepherd")
        rec.ticks = run.get("ticks")
        rec.stop = Stop(run["stop"]) if run.get("stop") else None
        rec.kill_at = run.get("kill_at")
        rec.deadline = run.get("deadline")
        rec.planned = run.get("planned")
        rec.resources = spec.resources
        if memory is not None and spec.reservation is None:
            rec.resources = memory.asks(spec.resources, spec.mem, rec.ncpus)
        rec.resv = spec.reservation
        rec.array_id = spec.array_id
        rec.array_index = spec.array_index
        rec.array_max = spec.array_max
        rec.split = spec.split
        rec.split_of = spec.split_of
        rec.held = tuple(run.get("held") or ())
        rec.lent = [list(x) for x in run.get("lent") or ()]
        rec.nice = spec.nice
        rec.admin_prio = spec.priority
        rec.interactive = spec.interactive
        rec.begin = spec.begin
        rec.warned = bool(run.get("warned"))
        rec.mailed = int(run.get("mailed") or 0)
        rec.estimate = spec.estimate
        rec.warn = spec.signal
        if spec.placed:
            rec.place = PlaceRequest(rec.ncpus, spec.place or "pack", spec.threads_per_core, spec.exclusive_board)
        if spec.devices:
            rec.dev_asks = spec.devices
        if spec.split is not None and spec.split.devices:  # a wave of sub-tasks that ask for devices
            from gridsched.daemon.split import wave_asks

            rec.dev_asks = wave_asks(spec.split, rec.ncpus)
        if rec.dev_asks:
            rec.whole = any(a.exclusive for a in rec.dev_asks)
            rec.dev_slots = coredev.slots(rec.dev_asks, machine_devices)
        if row.get("devices"):
            from gridsched.protocol.device_asks import parse_keys

            rec.set_devices(parse_keys(row["devices"]), machine_devices)
        return rec


class JobTable:
    """The live jobs (``jobs``), the queue (pending and suspended job ids in priority order) and the db."""

    def __init__(self, db: StateDB, spool: Spool) -> None:
        self.db = db
        self.spool = spool
        self.jobs: dict[int, Rec] = {}
        self.queue: list[int] = []  # in queue order (queue_key), with ``_keys`` beside it
        self._keys: list[tuple[int, int, int]] = []
        self.history: dict[str, deque[float]] = {}  # the last run times of each user's completed jobs
        # run time / walltime of each user's last completed jobs (the user-ratio predictor)
        self.ratios: dict[str, deque[float]] = {}
        self.in_txn = False
        self.disk_trouble = False
        self.forecast_dirty = True  # a change the predicted start times do not reflect yet
        self.claims: list[int] = []  # ids the daemon took for itself (Spool.claim_ids), released once committed
        self.settled_claims: list[int] = []  # committed claims, released once the published table shows them
        self.devices: tuple[Device, ...] = ()  # the machine's devices (set by the daemon)
        self.memory: MemoryPool | None = None  # the machine's memory pool (set by the daemon; None: not counted)
        self.shared: dict[int, JobSpec] = {}  # each array's spec its tasks' records share (share)
        rows = db.conn.execute(
            "SELECT user, elapsed, walltime FROM jobs WHERE state = 'COMPLETED' ORDER BY end_time DESC LIMIT 5000"
        )
        for user, elapsed, walltime in rows:
            h = self.history.setdefault(user, deque(maxlen=2))
            if len(h) < 2:
                h.appendleft(elapsed)
            r = self.ratios.setdefault(user, deque(maxlen=RATIO_JOBS))
            if len(r) < RATIO_JOBS:
                r.appendleft(run_ratio(elapsed, walltime))
        # fair share's input, loaded by the daemon with its half-life when fair share is weighted (load_usage)
        self.usage = Usage()
        self.half_life = 0.0

    def share(self, rec: Rec) -> None:
        """Let an array task's record hold its array's one spec (an array of a million tasks keeps one)."""
        spec = rec.spec
        if spec is None or spec.array_id is None:
            return
        key = spec._replace(id=spec.array_id, array_index=None)
        shared = self.shared.get(spec.array_id)
        if shared != key:
            self.shared[spec.array_id] = shared = key
        rec.spec = shared

    def load_usage(self, half_life: float) -> None:
        """Each user's decayed usage from the accounting table (fair share, gridsched.core.priority)."""
        self.half_life = half_life
        self.usage = Usage()
        self.usage.load(self.db.conn, half_life)

    # -- transactions -------------------------------------------------------------
    def begin(self) -> None:
        if not self.in_txn:
            self.db.begin()
            self.in_txn = True

    def commit(self) -> bool:
        """Commit the job table; False when the spool has no room (the writes are kept for later)."""
        if self.db.unsaved and not self.in_txn:
            self.begin()  # try again what a full disk refused
        if not self.in_txn:
            return True
        self.in_txn = False
        ok = self.db.commit()
        if not ok and not self.disk_trouble:
            self.disk_trouble = True
            log.error(
                "cannot write the job table (%s): jobs wait to start and submissions wait in incoming/ "
                "until the spool has room",
                self.db.failed,
            )
        elif ok and self.disk_trouble:
            self.disk_trouble = False
            log.info("the job table is written again")
        if ok and self.claims:  # released by the daemon once the published table shows the ids (Daemon.settle)
            self.settled_claims.extend(self.claims)
            self.claims = []
        return ok

    def spec(self, jid: int) -> JobSpec:
        """A job's whole spec: the public part from its row, the private part from the daemon's own file."""
        from gridsched.daemon import jobfiles

        spec = dict(self.db.job(jid)["spec"])  # type: ignore[index]
        spec.update(jobfiles.read_private(self.spool.job_dir(jid)))
        return JobSpec.from_spec(spec)

    # -- changes --------------------------------------------------------------------
    def put(self, row: JobRow, spec: JobSpec | None = None) -> Rec | None:
        """A new job's whole row (and its typed spec, when the caller has it); its record, queued if it is
        pending (None for a job refused at once)."""
        self.begin()
        self.db.put(row)
        self.forecast_dirty = True
        if row["state"] == JobState.FAILED:
            return None
        rec = Rec.from_row(row, self.devices, spec, self.memory)
        self.share(rec)
        self.jobs[rec.id] = rec
        if rec.state is JobState.PENDING:
            self.enqueue(rec)
        return rec

    def save(self, rec: Rec, **extra: Any) -> None:
        self.begin()
        self.db.update(
            rec.id,
            state=rec.state.value,
            elapsed=rec.elapsed,
            lost=rec.lost,
            restarts=rec.restarts,
            preemptions=rec.preemptions,
            checkpoints=rec.checkpoints,
            start_time=rec.first_start,
            cores=cpuset.format(rec.cores),
            backfilled=int(rec.backfilled),
            devices=format_keys(rec.devices),
            segments=rec.segments,
            run=rec.run_info(),
            **usage(rec.segments),
            **extra,
        )
        self.forecast_dirty = True

    def enqueue(self, rec: Rec) -> None:
        k = queue_key(rec)
        i = bisect.bisect_left(self._keys, k)
        if i == len(self._keys) or self._keys[i] != k:
            self._keys.insert(i, k)
            self.queue.insert(i, rec.id)

    def dequeue(self, rec: Rec) -> None:
        k = queue_key(rec)
        i = bisect.bisect_left(self._keys, k)
        if i < len(self._keys) and self._keys[i] == k:
            del self._keys[i]
            del self.queue[i]

    def end(
        self,
        rec: Rec,
        state: JobState,
        end: float,
        code: int | None = None,
        signal_: int | None = None,
        reason: str = "",
    ) -> None:
        """Record the job's terminal state; it leaves the live jobs and the queue."""
        transitions.end(rec, state)
        self.dequeue(rec)
        rec.stop = None
        rec.deadline = None
        self.save(rec, end_time=end, exit_code=code, exit_signal=signal_, reason=reason, predicted_start=None)
        self.jobs.pop(rec.id, None)
        self.usage.add(rec.user, rec.ncpus * rec.elapsed, end, self.half_life)
        if state is JobState.COMPLETED:
            self.history.setdefault(rec.user, deque(maxlen=2)).append(rec.elapsed)
            self.ratios.setdefault(rec.user, deque(maxlen=RATIO_JOBS)).append(run_ratio(rec.elapsed, rec.walltime))


def queue_key(rec: Rec) -> tuple[int, int, int]:
    """A job's place in the queue: by id, an array's tasks at their array's place in the order of their indices
    (a task made when it is about to start has a newer id than jobs submitted after its array)."""
    if rec.array_id is not None and rec.array_index is not None:
        return (rec.array_id, rec.array_index, rec.id)
    return (rec.id, -1, rec.id)
