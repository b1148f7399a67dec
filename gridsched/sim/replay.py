"""The state of one replay of a trace (:func:`gridsched.sim.engine.simulate`).

:class:`Replay` holds what the replay knows at its virtual ``now``: each job's
state, run segments and checkpoints, the free cores (and, with a machine map,
which ones), the pending queue in the core's order, the running jobs, the
reservations and the gates replayed beside the trace, and the settings in
force.  It makes the entries the core is given for the jobs
(:meth:`Replay.waiting`, :meth:`Replay.stamp`).  The event loop
(:mod:`gridsched.sim.engine`) and the carrying out of the core's decisions
(:mod:`gridsched.sim.decisions`) change it.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import replace as _replace
from operator import attrgetter
from typing import TYPE_CHECKING

from gridsched.core import devices as coredev
from gridsched.core.memory import MEMORY
from gridsched.core.placement import Request as PlaceRequest
from gridsched.core.policy import quiet_when_full
from gridsched.core.predict import RATIO_JOBS, READS_USER
from gridsched.core.topology import Device, MachineMap
from gridsched.core.types import HeadReservation, Params, Policy, Resv, Running, SplitInfo, Waiting
from gridsched.sim.records import Gates, Mode, SimMemory, SimResv, SimulationError, Tuner
from gridsched.sim.swf import Trace

if TYPE_CHECKING:
    from gridsched.protocol.usage import Usage
    from gridsched.sim.splits import SubTasks

INF = math.inf
HELD = "held by its owner"

# Job states.
FUTURE, PENDING, RUNNING, DONE = 0, 1, 2, 3

by_id = attrgetter("id")
NO_DEV: tuple[()] = ()


def job_name(trace: Trace, i: int) -> str:
    """Job ``i`` as the trace names it (its id), for messages."""
    return str(trace.ids[i]) if 0 <= i < len(trace.ids) else f"#{i}"


class Replay:
    """The state of one replay: see the module docstring.  Jobs are indices into the trace; reservations
    are ids ``n + k`` (``k``: their index in ``reservations``), pieces of split jobs the ids after them."""

    __slots__ = (
        # the trace and the options
        "trace", "n", "ncores", "submit", "size", "wall", "work", "users", "params", "overhead", "mode",
        "fast", "progress", "machine", "place", "tuner", "devices", "preemptable", "requeue", "fcfs",
        "quiet_full", "plain", "quick", "quick_ckpt", "others", "step",
        # priorities
        "pp", "prio", "acc", "stamped",
        # devices
        "dev_asks", "dev_slots", "gpus",
        # memory
        "mem_res",
        # splittable jobs
        "splittable", "splits", "tasks_left", "outstanding", "piece_of", "piece_ends", "next_piece",
        "n_pieces", "n_tasks", "sub", "left",
        # every job
        "state", "first", "end", "done", "debt", "ckpts", "seg_begin", "seg", "segs", "running", "fixed", "reclaim",
        "special",
        "run_tuple", "run_dirty", "pending", "ends", "history", "ratios", "keep_ratios", "learn", "finished",
        "smallest", "nxt",
        # the plan in force and the clock's other events
        "head", "head_at", "wake", "tunings", "next_tune",
        # the machine
        "free", "free_set", "held",
        # accounting
        "overhead_cs", "lost_cs", "passes", "skipped", "ts",
        # reservations
        "rvs", "flo", "rv_order", "rv_next", "rv_live", "rv_events", "activated", "key", "order_key",
        # gates
        "gated", "states", "eligible", "ungated", "last_reasons", "cancelled", "killed", "g_names",
        "g_arrays", "g_deps", "g_ended", "g_think", "held_until", "begin_at", "followers",
    )  # fmt: skip

    def __init__(
        self,
        trace: Trace,
        params: Params,
        *,
        overhead: float,
        mode: Mode,
        fast: bool,
        series: bool,
        progress: Callable[[int], None] | None,
        reservations: list[SimResv] | None,
        floating: dict[str, int] | None,
        machine: MachineMap | None,
        place: str | None,
        split_above: int | None,
        gates: Gates | None,
        tuner: Tuner | None,
        devices: tuple[Device, ...],
        memory: SimMemory | None = None,
        split_tasks: dict[int, SubTasks] | None = None,
    ) -> None:
        self.n = len(trace)
        self.trace, self.params, self.overhead, self.mode, self.fast = trace, params, overhead, mode, fast
        self.progress, self.machine, self.place, self.tuner, self.devices = progress, machine, place, tuner, devices
        self.ncores = trace.ncores
        self.submit, self.size, self.wall, self.work, self.users = (
            trace.submit,
            trace.size,
            trace.walltime,
            trace.run,
            trace.user,
        )
        # Priorities ([priority] of the config): the age of each job from its submit, fair share by the SWF
        # user id (field 12) from the usage of the jobs that ended, decayed as the daemon does.
        pp = self.pp = params.priority
        self.prio = pp.weighted
        self.acc: Usage | None = None
        if pp.weight_fairshare:
            from gridsched.protocol.usage import Usage  # (sqlite3: only for fair share)

            self.acc = Usage()
        self.stamped: dict[int, tuple[Waiting, Waiting]] = {}
        self._devices(trace, devices)
        # jobs of sub-tasks of their own sizes (gsim run --split-file): their sub-tasks, and those left
        self.sub = split_tasks or {}
        self.left = {i: tuple(range(len(st.sizes))) for i, st in self.sub.items()}
        if self.sub:
            self.work = list(self.work)  # a job's run time as a whole is that of the sub-tasks it has left
        self._jobs(reservations, split_above, series)
        self._reservations(reservations, floating)
        self._memory(memory)
        self._gates(gates)
        if machine is not None and machine.ncores != self.ncores:
            raise SimulationError(f"the topology has {machine.ncores} cores, the machine {self.ncores}")
        self.free_set: frozenset[int] | None = frozenset(range(self.ncores)) if machine is not None else None
        self.held: dict[int, frozenset[int]] = {}  # cores held by each job (placement mode)
        # a job is one Waiting entry without a mapping requirement or sub-tasks; and no other events than
        # arrivals and ends (then the loop need not look for them)
        self.plain = not (machine is not None and place) and not self.splits and not self.dev_asks and not self.mem_res
        self.others = bool(self.rvs or self.rv_events or self.splits)
        self.smallest: int | None = None  # the fewest cores a pending job needs (None: not known)
        self.quick = self.plain_easy(params)
        self.quick_ckpt = self.plain_ckpt(params)

    def plain_easy(self, params: Params) -> bool:
        """Whether :func:`~gridsched.core.policy.schedule` takes a pass under ``params`` straight to the
        easy pass, which :func:`~gridsched.core.policy.quick.easy_plain` makes for the plainest snapshots:
        easy, with no priority, per-user limit, gate or reservation (and nothing in a replay's snapshot is
        ranked, lent or ended)."""
        return (
            params.policy is Policy.EASY
            and not params.priority.weighted
            and not params.max_cpus_per_user
            and not self.gated
            and not self.rvs
        )

    def plain_ckpt(self, params: Params) -> bool:
        """Whether every snapshot of this replay under ``params`` is one that
        :func:`~gridsched.core.policy.schedule` takes straight to the checkpoint-backfill pass and
        :func:`~gridsched.core.policy.quick.ckpt_plain` takes (cores counted: no map, floating resource,
        device, splitting; no priority, per-user limit, gate or reservation; not the cascading reading nor
        early room): then each pass is :func:`~gridsched.core.policy.quick.ckpt_pass` on the replay's state,
        and a snapshot is built only for a pass it leaves to the general one."""
        return (
            params.policy is Policy.CHECKPOINT_BACKFILL
            and not params.cascade
            and not params.early_room
            and not params.priority.weighted
            and not params.max_cpus_per_user
            and not self.gated
            and not self.rvs
            and self.plain
            and self.free_set is None
            and not self.flo
            and not self.devices
        )

    def _devices(self, trace: Trace, devices: tuple[Device, ...]) -> None:
        """Devices: what each job asks for, the slots that counts for in the pass, the GPUs it holds."""
        dev_asks: list[tuple[coredev.DeviceAsk, ...]] = []
        if trace.devices:
            dev_asks = [trace.devices.get(j, ()) for j in trace.ids]
            if not any(dev_asks):
                dev_asks = []
        if dev_asks and not devices:
            raise SimulationError("jobs ask for devices, and the machine has none")
        self.dev_asks = dev_asks
        self.dev_slots = [coredev.slots(a, devices) if a else NO_DEV for a in dev_asks] if dev_asks else []
        self.gpus = [sum(a.count for a in asks if a.type == "gpu") for asks in dev_asks] if dev_asks else None

    def _memory(self, memory: SimMemory | None) -> None:
        """The memory pool: each job's ask as a resource of the pass, the pool among the floating resources."""
        self.mem_res: list[tuple[tuple[str, int], ...]] = []
        if memory is None:
            return
        if len(memory.asks) != self.n:
            raise SimulationError(f"memory asks of {len(memory.asks)} jobs, the trace has {self.n}")
        self.mem_res = [((MEMORY, a),) if a > 0 else NO_DEV for a in memory.asks]
        self.flo[MEMORY] = memory.total

    def _jobs(self, reservations: list[SimResv] | None, split_above: int | None, series: bool) -> None:
        """The state of every job, and what the replay counts."""
        n, size, params, mode = self.n, self.size, self.params, self.mode
        sub = self.sub
        self.splittable = [
            (i in sub or (split_above is not None and size[i] > split_above)) and not self.dask(i) for i in range(n)
        ]
        self.splits = any(self.splittable)
        if any(self.splittable):
            self.size = size = list(size)  # a split job's cores shrink as sub-tasks are taken out of it
        self.tasks_left = list(size)  # sub-tasks not yet taken out, per job
        self.outstanding = [0] * n  # pieces of each job still running
        self.piece_of: dict[int, int] = {}  # running piece id -> its job
        self.piece_ends: list[tuple[float, int]] = []  # heap of (end, piece id)
        self.next_piece = n + len(reservations or ())
        self.n_pieces = self.n_tasks = 0
        self.preemptable = mode is not Mode.NONE
        self.requeue = mode is Mode.REQUEUE
        self.fcfs = params.policy is Policy.FCFS
        self.quiet_full = quiet_when_full(params) and not self.splits

        self.state = [FUTURE] * n
        self.first = [-1.0] * n
        self.end = [-1.0] * n
        self.done = [0.0] * n  # useful work done before the current segment
        self.debt = [0.0] * n  # checkpoint overhead still to be run
        self.ckpts = [0] * n
        self.seg_begin = [0.0] * n  # start of the current segment
        self.seg = [0] * n  # run segment number: invalidates the end events of preempted segments
        self.segs: dict[int, list[tuple[float, float]]] = {}
        self.running: dict[int, Running] = {}
        # the running jobs (started whole) as the checkpoint-backfill quick pass counts them: (walltime end,
        # cores) of those it counts at their walltime alone (no planned end, not backfilled preemptable), the
        # same of the backfilled preemptable ones without a planned end, the others as they run
        self.fixed: dict[int, tuple[float, int]] = {}
        self.reclaim: dict[int, tuple[float, int]] = {}
        self.special: dict[int, Running] = {}
        self.run_tuple: tuple[Running, ...] = ()
        self.run_dirty = False
        self.pending: list[Waiting] = []
        self.ends: list[tuple[float, int, int]] = []  # heap of (time, job, segment)
        self.history: dict[str, tuple[float, ...]] = {}
        self.ratios: dict[str, tuple[float, ...]] = {}  # run time / walltime of each user's last jobs (user-ratio)
        self.keep_ratios = RATIO_JOBS - 1
        # whether they are kept: for the user-history and user-ratio predictors (which a tuner may choose)
        self.learn = self.tuner is not None or self.params.predictor in READS_USER
        self.head: HeadReservation | None = None
        self.head_at = INF  # when the head's reservation asks for a pass
        self.finished: list[int] = []  # jobs in the order they ended (for a tuner)
        self.tunings: list[tuple[float, Params]] = []
        self.next_tune = (self.submit[0] + self.tuner.every) if self.tuner is not None and n else INF
        self.wake = INF
        self.free = self.ncores
        self.overhead_cs = 0.0
        self.lost_cs = 0.0
        self.passes = 0
        self.skipped = 0
        self.ts: list[tuple[float, int, int]] | None = [] if series else None
        self.nxt = 0  # next arrival
        self.step = 4096

    def _reservations(self, reservations: list[SimResv] | None, floating: dict[str, int] | None) -> None:
        """Reservations (ids n + k): arrivals in create order, ends and expiries on their own heap."""
        n = self.n
        rvs = self.rvs = list(reservations or ())
        self.flo = dict(floating or {})
        self.rv_order = sorted(range(len(rvs)), key=lambda k: (rvs[k].create, k))
        self.rv_next = 0
        self.rv_live: dict[int, Resv] = {}
        self.rv_events: list[tuple[float, int]] = []  # (time, id): end of an active one, or expiry of a fixed one
        self.activated = [-1.0] * len(rvs)
        self.key: Callable[[Waiting], int | tuple[float, int, int]] = by_id  # the order of `pending`
        self.order_key: dict[int, tuple[float, int, int]] = {}
        if rvs:
            submit = self.submit
            order_key = self.order_key
            order_key.update({i: (submit[i], 0, i) for i in range(n)})
            order_key.update({n + k: (rvs[k].create, 1, k) for k in range(len(rvs))})
            self.key = lambda w: order_key[w.id]  # queue order: submission or creation time

    def _gates(self, gates: Gates | None) -> None:
        """Dependencies, array throttles, holds and think times (see :class:`~gridsched.sim.records.Gates`)."""
        self.gated = gated = bool(gates)
        g = gates if gates is not None else Gates()
        self.states: dict[int, str] = {}  # the state of every job, for the dependencies (gated only)
        self.eligible: list[float] | None = None
        self.ungated: set[int] = set()  # pending gated jobs not found eligible yet
        self.last_reasons: dict[int, str] = {}
        self.cancelled: list[int] = []
        self.killed: list[int] = []
        self.g_names, self.g_arrays, self.g_deps, self.g_ended = g.names, g.arrays, g.deps, g.ended
        self.g_think = g.think
        self.held_until: dict[int, float] = {}
        self.begin_at: dict[int, float] = {}
        self.followers: dict[int, list[tuple[int, float]]] = {}  # preceding job -> (job, think time)
        if gated:
            submit = self.submit
            self.params = _replace(self.params, cancel_never_satisfied=True)
            self.states = dict.fromkeys(range(self.n), "PENDING")
            self.eligible = list(submit)
            self.held_until = {i: t for i, t in g.holds.items() if t > submit[i]}
            for i, t in self.held_until.items():
                self.rv_events.append((t, -1 - i))  # a hold's release (negative ids: jobs)
            heapq.heapify(self.rv_events)
            for i, (pj, t) in g.think.items():
                self.followers.setdefault(pj, []).append((i, t))

    # -- the entries the core is given ------------------------------------------------------------

    def dres(self, i: int) -> tuple[tuple[str, int], ...]:
        """The device slots (and the memory) job ``i`` asks for, as resources of the pass."""
        slots = self.dev_slots[i] if self.dev_asks else NO_DEV
        return coredev.merge(slots, self.mem_res[i]) if self.mem_res else slots

    def mres(self, i: int) -> tuple[tuple[str, int], ...]:
        """The memory job ``i`` asks for, as a resource of the pass (none without ``--memory``)."""
        return self.mem_res[i] if self.mem_res else NO_DEV

    def dask(self, i: int) -> tuple[coredev.DeviceAsk, ...]:
        """The devices job ``i`` asks for."""
        return self.dev_asks[i] if self.dev_asks else NO_DEV

    def split_info(self, i: int) -> SplitInfo:
        """Splittable job ``i``'s sub-tasks left, as the core reads them: of their own sizes (``--split-file``),
        else one 1-core sub-task per processor, the lowest ones taken first."""
        st = self.sub.get(i)
        if st is None:
            total, left = self.trace.size[i], self.tasks_left[i]
            return SplitInfo(1, self.wall[i], tuple(range(total - left, total)))
        sizes = st.sizes
        return SplitInfo(max(c for c, _ in sizes), max(t for _, t in sizes), self.left[i], sizes)

    def req_of(self, i: int) -> PlaceRequest | None:
        """Job ``i``'s mapping requirement (``place``, given to every job on a machine map), or None."""
        if self.machine is not None and self.place:
            return PlaceRequest(self.size[i], self.place)
        return None

    def waiting(self, i: int, ncpus: int, estimate: float, elapsed: float, split: SplitInfo | None) -> Waiting:
        """The entry of gated job ``i`` (its gates as the core reads them)."""
        a = self.g_arrays.get(i)
        return Waiting(
            i,
            ncpus,
            estimate,
            self.preemptable,
            self.users[i],
            elapsed,
            place=self.req_of(i),
            split=split,
            name=self.g_names.get(i, ""),
            deps=self.g_deps.get(i, ()),
            array=a[0] if a else None,
            array_max=a[1] if a else None,
            held=HELD if i in self.held_until else "",
            begin=self.begin_at.get(i),
            resources=self.dres(i),
            devices=self.dask(i),
        )

    def position(self, i: int) -> int:
        """Where job (or flexible reservation) ``i`` is, or would be, in the pending queue."""
        return bisect_left(self.pending, i if self.key is by_id else self.order_key[i], key=self.key)

    def regate(self, i: int, **kw: object) -> None:
        """Change the entry of pending job ``i`` (a hold released, a begin time set)."""
        pending = self.pending
        pos = self.position(i)
        if pos < len(pending) and pending[pos].id == i:
            pending[pos] = _replace(pending[pos], **kw)  # type: ignore[arg-type]

    def stamp(self, queue: list[Waiting]) -> tuple[Waiting, ...]:
        """The queue with each job's submit time on its entry (made once per entry)."""
        n, submit, stamped = self.n, self.submit, self.stamped
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
