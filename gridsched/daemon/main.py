"""The daemon's loop.

One thread.  It sleeps in ``select`` on: the wake socket (a command dropped a
request), a self-pipe for signals (SIGTERM/SIGINT stop the daemon, SIGHUP
reloads the config), and one pidfd per job shepherd (a job ended).  Each turn
it takes in new requests, enforces walltimes and kill graces, asks the core
for a plan when anything changed, carries the plan out, and commits the job
table.  A job's start is committed before its shepherd is forked, so after a
crash every job is found again (see :mod:`gridsched.daemon.recover`).
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import json
import logging
import os
import selectors
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .. import config as configmod
from .. import requests as rq
from ..admin import admin_uids
from ..core import cpuset, depend
from ..core import policy as corepolicy
from ..core.placement import Request as PlaceRequest
from ..core.placement import claimed
from ..core.types import Activate, HeadReservation, Preempt, Running, Snapshot, Start, StartTasks, Waiting
from ..jobenv import compat_env
from ..jobs import EXIT_CHECKPOINTED, PRIVATE_KEYS, TERMINAL, JobState
from ..spool import Spool, atomic_write
from ..state import StateDB
from ..topology import load_machine
from . import arrays, handlers, intake, jobfiles, launch, procs, reserve, split
from .split import split_info
from .tree import Trees

log = logging.getLogger("gschedd")

NO_ROOM = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)
RESCAN = 1.0  # seconds between looks at the spool when nobody woke the daemon
FORECAST_EVERY = 2.0  # seconds between refreshes of the predicted start times


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None) -> None:
        super().__init__(f"already running with pid {pid}")
        self.pid = pid


@dataclass(slots=True)
class Rec:
    """The daemon's view of a job that has not ended (ended jobs live only in the table)."""

    id: int
    user: str
    uid: int
    ncpus: int
    walltime: int
    submit_time: float
    checkpoint: str
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
    pgid: int | None = None
    pidfd: int | None = None
    stop: str | None = None  # cancel | timeout | preempt
    kill_at: float | None = None
    deadline: float | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)
    name: str = ""
    deps: tuple[depend.Dep, ...] = ()
    place: PlaceRequest | None = None  # mapping requirement (--place, ...); None: pack
    held: tuple[int, ...] = ()  # cores held beyond ``cores`` (unused SMT threads, rest of exclusive boards)
    reason: str = ""
    resources: tuple[tuple[str, int], ...] = ()  # floating resources (gsub -l)
    resv: int | None = None  # the reservation the job is bound to (gsub --reservation)
    array_id: int | None = None  # an array task: its array (gridsched.arrays)
    array_max: int | None = None  # most tasks of that array running at once
    split: dict[str, Any] | None = None  # a splittable job: n, ncpus, task_time, left (daemon/split.py)
    split_of: int | None = None  # a piece of a splittable job: that job's id
    _waiting: Waiting | None = None

    @property
    def preemptable(self) -> bool:
        return self.checkpoint != "none"

    def remaining(self) -> float:
        """What is left of the user's walltime for the next segment."""
        if self.checkpoint == "requeue":
            return float(self.walltime)
        return max(1.0, self.walltime - self.elapsed)

    def waiting(self) -> Waiting:
        w = self._waiting
        if w is None:
            w = self._waiting = Waiting(
                self.id, self.ncpus, self.remaining(), self.preemptable, self.user, self.elapsed,
                self.resources, self.resv, place=self.place, split=split_info(self.split),
            )
        return w

    def running(self) -> Running:
        return Running(
            self.id, self.ncpus, self.start or 0.0, self.remaining() if self.start else 0.0,
            self.cores, self.backfilled, self.preemptable, self.planned,
            self.state is JobState.STOPPING or self.stop is not None, self.user, self.resources, self.resv,
        )

    def run_info(self) -> dict[str, Any]:
        return {
            "segment": self.segment, "start": self.start, "shepherd": self.shepherd, "ticks": self.ticks,
            "pgid": self.pgid, "stop": self.stop, "kill_at": self.kill_at, "deadline": self.deadline,
            "planned": self.planned, "checkpoint": self.checkpoint, "held": list(self.held),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Rec:
        run = row["run"]
        spec = row["spec"]
        rec = cls(
            id=row["id"], user=row["user"], uid=row["uid"], ncpus=row["ncpus"], walltime=row["walltime"],
            submit_time=row["submit_time"], checkpoint=spec.get("checkpoint", "none"),
            state=JobState(row["state"]), elapsed=row["elapsed"], lost=row["lost"],
            restarts=row["restarts"], preemptions=row["preemptions"], checkpoints=row["checkpoints"],
            first_start=row["start_time"], cores=tuple(sorted(cpuset.parse(row["cores"]))),
            backfilled=row["backfilled"], segments=row["segments"], name=row["name"], reason=row["reason"],
        )
        try:
            rec.deps = depend.parse(spec.get("depend") or "")
        except depend.DependError:
            rec.deps = ()
        rec.segment = run.get("segment", 0)
        rec.start = run.get("start")
        rec.shepherd = run.get("shepherd")
        rec.ticks = run.get("ticks")
        rec.pgid = run.get("pgid")
        rec.stop = run.get("stop")
        rec.kill_at = run.get("kill_at")
        rec.deadline = run.get("deadline")
        rec.planned = run.get("planned")
        rec.resources = tuple(sorted((spec.get("resources") or {}).items()))
        rec.resv = spec.get("reservation")
        rec.array_id = spec.get("array_id")
        rec.array_max = spec.get("array_max")
        rec.split = spec.get("split")
        rec.split_of = spec.get("split_of")
        rec.held = tuple(run.get("held") or ())
        if spec.get("place") not in (None, "pack", "spread", "board"):
            raise ValueError(f"unknown placement {spec.get('place')!r}")
        if spec.get("place") or spec.get("threads_per_core") or spec.get("exclusive_board"):
            rec.place = PlaceRequest(
                rec.ncpus, spec.get("place") or "pack", int(spec.get("threads_per_core") or 0),
                bool(spec.get("exclusive_board")),
            )
        return rec


class Daemon:
    def __init__(self, spool: Spool, cfg: configmod.Config, config_path: str | None = None) -> None:
        self.spool = spool
        self.cfg = cfg
        self.config_path = config_path
        self.machine = load_machine(cfg)
        self.all_cores = frozenset(range(self.machine.ncores))
        self.drained: frozenset[int] = frozenset()
        self.drain_reason = ""
        self.jobs: dict[int, Rec] = {}
        self.queue: list[int] = []  # pending (and suspended) job ids in priority order
        self.head: HeadReservation | None = None
        self.history: dict[str, deque[float]] = {}
        self.dirty = True
        self.wake_at: float | None = None
        self.stop_requested = False
        self.reload_requested = False
        self.last_scan = 0.0
        self.last_forecast = 0.0
        self.forecast_dirty = True
        self.pending_launches: list[tuple[Rec, launch.Launch]] = []
        self.disk_trouble = False
        self.in_txn = False
        self.book = reserve.Book()
        self.trees = Trees(self)  # parent-child job trees (daemon/tree.py)
        self.budget: dict[int, int] = {}  # array throttles in the snapshot being built (see arrays.may_run)
        self.senders = intake.Senders(admin_uids(spool.root))
        self.id_high = 0  # the highest id in use (requests.ID_WINDOW)
        self.claims: list[int] = []  # ids the daemon took for itself, released once committed
        self.full_logged = False

    # -- setup ------------------------------------------------------------------
    def lock(self) -> None:
        self.spool.ensure()
        self.lock_fd = os.open(self.spool.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = self.spool.daemon_info() or {}
            os.close(self.lock_fd)
            raise AlreadyRunning(info.get("pid")) from None
        self.started = time.time()
        atomic_write(self.spool.pidfile, json.dumps({"pid": os.getpid(), "started": self.started}).encode())

    def open(self) -> None:
        self.db = StateDB(self.spool.db, write=True)
        self.sel = selectors.DefaultSelector()
        try:
            os.unlink(self.spool.sock)
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.spool.sock))
        os.chmod(self.spool.sock, 0o666)
        self.sock.setblocking(False)
        self.sel.register(self.sock, selectors.EVENT_READ, ("wake", None))
        self.sig_r, self.sig_w = socket.socketpair()
        self.sig_r.setblocking(False)
        self.sig_w.setblocking(False)
        signal.set_wakeup_fd(self.sig_w.fileno(), warn_on_full_buffer=False)
        self.sel.register(self.sig_r, selectors.EVENT_READ, ("signal", None))
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)
        self.begin()
        self.db.set_meta("machine", json.dumps({"ncores": self.machine.ncores, "host_cpus": list(self.machine.host_cpus)}))
        self.db.set_meta("daemon", json.dumps({"pid": os.getpid(), "started": self.started, "config": self.cfg.path}))
        self._load_history()
        self.id_high = self.db.max_id()
        self._drop_stale_claims()
        from .recover import recover

        self.book.load(self)
        self._load_drained()
        recover(self)
        self.trees.load()
        self.commit()

    def _drop_stale_claims(self) -> None:
        """Remove the ids a daemon killed in the middle of taking an array in had claimed (empty files of its own)."""
        me = os.geteuid()
        try:
            names = os.listdir(self.spool.incoming)
        except OSError:
            return
        for n in names:
            if rq.id_of_name(n) is None:
                continue
            try:
                st = os.lstat(self.spool.incoming / n)
                if st.st_uid == me and st.st_size == 0 and not os.path.islink(self.spool.incoming / n):
                    os.unlink(self.spool.incoming / n)
            except OSError:
                pass

    def new_ids(self, count: int) -> list[int]:
        """``count`` new ids for the daemon's own use (array tasks, pieces of split jobs)."""
        ids = self.spool.claim_ids(count)
        self.claims.extend(ids)
        self.id_high = max(self.id_high, *ids)
        return ids

    def _load_drained(self) -> None:
        try:
            d = json.loads(self.db.meta().get("drained") or "{}")
            self.drained = frozenset(cpuset.parse(d.get("cores", ""))) & self.all_cores
            self.drain_reason = str(d.get("reason", ""))
        except (ValueError, AttributeError, cpuset.CpuListError):
            self.drained = frozenset()

    def _on_stop(self, signum: int, frame: Any) -> None:
        self.stop_requested = True

    def _on_hup(self, signum: int, frame: Any) -> None:
        self.reload_requested = True

    def _load_history(self) -> None:
        rows = self.db.conn.execute(
            "SELECT user, elapsed FROM jobs WHERE state = 'COMPLETED' ORDER BY end_time DESC LIMIT 5000"
        )
        for user, elapsed in rows:
            h = self.history.setdefault(user, deque(maxlen=2))
            if len(h) < 2:
                h.appendleft(elapsed)

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
            log.error("cannot write the job table (%s): jobs wait to start and submissions wait in incoming/ "
                      "until the spool has room", self.db.failed)
        elif ok and self.disk_trouble:
            self.disk_trouble = False
            log.info("the job table is written again")
        if ok and self.claims:
            self.spool.release_claims(self.claims)
            self.claims = []
        return ok

    def save(self, rec: Rec, **extra: Any) -> None:
        self.begin()
        self.db.update(
            rec.id, state=rec.state.value, elapsed=rec.elapsed, lost=rec.lost, restarts=rec.restarts,
            preemptions=rec.preemptions, checkpoints=rec.checkpoints, start_time=rec.first_start,
            cores=cpuset.format(rec.cores), backfilled=int(rec.backfilled), segments=rec.segments,
            run=rec.run_info(), **extra,
        )
        self.forecast_dirty = True

    # -- the loop ---------------------------------------------------------------------
    def serve(self) -> None:
        log.info(
            "gschedd %d on %s: %d cores on host CPUs %s, policy %s",
            os.getpid(), self.spool.root, self.machine.ncores, cpuset.format(self.machine.host_cpus),
            self.cfg.params.policy.value,
        )
        while not self.stop_requested:
            now = time.time()
            if now - self.last_scan >= RESCAN:
                self.ingest()
            self.timers(now)
            if self.dirty or (self.wake_at is not None and now >= self.wake_at):
                self.schedule(now)
            if self.commit():
                self.launch_pending()
            self.commit()
            if self.forecast_dirty and time.time() - self.last_forecast >= FORECAST_EVERY:
                self.forecast()
                self.commit()
            timeout = self.next_timeout()
            for key, _ in self.sel.select(timeout):
                kind, arg = key.data
                if kind == "wake":
                    self._drain(self.sock)
                    self.ingest()
                elif kind == "signal":
                    self._drain(self.sig_r)
                elif kind == "job":
                    self.job_ended(arg)
            if self.reload_requested:
                self.reload()
        self.commit()
        log.info("gschedd %d stopping; %d jobs still running keep running", os.getpid(), sum(
            1 for r in self.jobs.values() if r.state in (JobState.RUNNING, JobState.STOPPING)))

    @staticmethod
    def _drain(sock: socket.socket) -> None:
        try:
            while sock.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def next_timeout(self) -> float:
        now = time.time()
        t = self.last_scan + RESCAN
        for rec in self.jobs.values():
            if rec.state is JobState.RUNNING and rec.stop is None and rec.deadline is not None:
                t = min(t, rec.deadline)
            if rec.kill_at is not None:
                t = min(t, rec.kill_at)
        if self.wake_at is not None:
            t = min(t, self.wake_at)
        resv_end = self.book.next_end()
        if resv_end is not None:
            t = min(t, resv_end)
        if self.forecast_dirty:
            t = min(t, self.last_forecast + FORECAST_EVERY)
        return max(0.0, t - now)

    # -- requests ------------------------------------------------------------------------
    def ingest(self) -> None:
        """Take in the requests waiting in the spool: each is parsed at the boundary (intake) and served by the
        handler of its kind; a refused one is quarantined and, if it brought a new id, recorded as refused."""
        self.last_scan = time.time()
        got, refused = intake.scan(self.spool, self.senders, room=self._room())
        if not got and not refused:
            return
        got.sort(key=lambda r: not isinstance(r.request, rq.ResvCreate))  # a job may name a reservation made with it
        self.begin()
        served = []
        for r in refused:
            self.refuse(r.name, r.uid, r.new_id, r.reason)
        for rcv in got:
            try:
                handlers.handle(self, rcv)
            except rq.Refused as e:
                self.refuse(rcv.name, rcv.sender.uid, rq.id_of_name(rcv.name), str(e))
                continue
            except OSError as e:
                if e.errno in NO_ROOM:
                    if not self.disk_trouble:
                        log.error("no room in the spool (%s): submissions wait in incoming/", e.strerror)
                        self.disk_trouble = True
                    break
                log.exception("request %s failed", rq.safe(rcv.name, 120))
                self.refuse(rcv.name, rcv.sender.uid, rq.id_of_name(rcv.name), f"could not be served: {e}")
                continue
            except Exception as e:  # noqa: BLE001 - a bad request never stops the daemon
                log.exception("request %s failed", rq.safe(rcv.name, 120))
                self.refuse(rcv.name, rcv.sender.uid, rq.id_of_name(rcv.name), f"could not be served: {e}")
                continue
            served.append(rcv.name)
        if self.commit():
            for name in served:
                intake.done(self.spool, name)

    def refuse(self, name: str, uid: int | None, new_id: int | None, why: str) -> None:
        """Quarantine a refused request; if it brought a new id that nobody has, record the refusal under it
        (``gsub --wait`` and ``gstat`` tell the submitter)."""
        why = rq.safe(why, 1000)
        intake.quarantine(self.spool, name, why)
        if new_id is None or new_id > self.id_high + rq.ID_WINDOW:
            return
        rec = self.db.id_record(new_id)
        if new_id in self.jobs or (self.db.id_used(new_id) and (rec is None or rec["uid"] != uid)):
            return  # the id is someone else's: the refusal is in the quarantine and the log only
        self.begin()
        self.db.put_id(new_id, uid, "", time.time(), why)
        self.id_high = max(self.id_high, new_id)

    def _room(self) -> bool:
        """Whether the spool's file system has room to take submissions in (logged once when it has not)."""
        try:
            self.spool.check_space()
        except OSError as e:
            if not self.full_logged:
                log.warning("spool %s: %s; submissions wait in incoming/ until there is room", self.spool.root,
                            e.strerror)
                self.full_logged = True
            return False
        if self.full_logged:
            log.info("spool %s has room again: taking submissions in", self.spool.root)
            self.full_logged = False
        return True

    def take_in(self, job: dict[str, Any], user: str, state: JobState, reason: str,
                files: dict[str, Any] | None = None) -> Rec | None:
        """Write a checked job's files and row and queue it; its record (None if it is refused).

        ``files`` maps names in the job's directory to their text, or to a path
        to hard-link (the tasks of an array share their script); without it the
        spec's ``script`` is the file ``script``.
        """
        jid = job["id"]
        if files is None:
            files = {"script": job.pop("script")}
        private = {k: job.pop(k) for k in PRIVATE_KEYS if k in job}
        jobfiles.create(self.spool.job_dir(jid), job["uid"], job.get("gid", -1), job.get("umask", 0o022),
                        files, json.dumps(private).encode())
        row = {
            "id": jid, "state": state.value, "user": user, "uid": job["uid"], "name": job["name"],
            "ncpus": job["ncpus"], "walltime": job["walltime"], "submit_time": float(job["submit_time"]),
            "start_time": None, "end_time": time.time() if state is JobState.FAILED else None, "cores": "",
            "exit_code": None, "exit_signal": None, "reason": reason, "backfilled": 0, "restarts": 0,
            "preemptions": 0, "checkpoints": 0, "elapsed": 0.0, "lost": 0.0, "predicted_start": None,
            "segments": [], "run": {}, "spec": job,
        }
        self.db.put(row)
        self.id_high = max(self.id_high, jid)
        if state is JobState.FAILED:
            log.info("job %d refused: %s", jid, reason)
            return None
        rec = Rec.from_row(row)
        self.jobs[jid] = rec
        if state is JobState.PENDING:
            bisect.insort(self.queue, jid)
            self.dirty = True
        self.forecast_dirty = True
        log.debug("job %d queued", jid)
        return rec

    def set_drained(self, cores: frozenset[int], reason: str, what: str) -> None:
        """Drained cores take no new job; jobs running on them finish."""
        self.drained = cores & self.all_cores
        self.drain_reason = reason if self.drained else ""
        self.begin()
        self.db.set_meta("drained", json.dumps({"cores": cpuset.format(self.drained), "reason": self.drain_reason}))
        self.dirty = True
        log.info("%s; drained now: %s", what, cpuset.format(self.drained) or "none")

    def reload(self) -> None:
        self.reload_requested = False
        try:
            cfg = configmod.load(self.config_path, self.spool.root)
        except configmod.ConfigError as e:
            log.error("reload refused, the old settings stay: %s", e)
            return
        if cfg.cores != self.cfg.cores or cfg.cpus != self.cfg.cpus:
            log.warning("reload: machine.cores and machine.cpus take effect at the next start")
        self.cfg = cfg
        self.dirty = True
        self.forecast_dirty = True
        p = cfg.params
        log.info("reloaded %s: policy %s, p %s, threshold %ss", cfg.path, p.policy.value, p.p, p.threshold)

    # -- scheduling -------------------------------------------------------------------------
    def _dequeue(self, rec: Rec) -> None:
        i = bisect.bisect_left(self.queue, rec.id)
        if i < len(self.queue) and self.queue[i] == rec.id:
            del self.queue[i]

    def snapshot(self, now: float) -> Snapshot:
        running = [r for r in self.jobs.values() if r.start is not None and r.state in (JobState.RUNNING, JobState.STOPPING)]
        used: set[int] = set(self.drained)
        for r in running:
            used.update(r.cores)
            used.update(r.held)
        return self.trees.annotate(Snapshot(
            now=now,
            ncores=self.machine.ncores,
            running=tuple(r.running() for r in running),
            pending=self.book.merge(tuple(self.jobs[i].waiting() for i in self.queue if self.eligible(self.jobs[i]))),
            params=self.cfg.params,
            free=self.all_cores - used - self.book.reserved_cores(),
            head=self.head,
            history={u: tuple(h) for u, h in self.history.items()},
            floating=self.cfg.floating,
            reservations=self.book.core(),
            machine=self.machine,
        ))

    def eligible(self, rec: Rec) -> bool:
        """Whether a pending job may be offered to the core now: its dependencies hold, its array's throttle
        leaves room (``self.budget``, set afresh for each snapshot), a splittable job has sub-tasks left."""
        if rec.split is not None and not rec.split.get("left"):
            return False  # every sub-task went to pieces: it ends with the last of them (split.piece_ended)
        if not self.deps_ready(rec):
            return False
        return rec.array_max is None or arrays.may_run(self, rec, self.budget)

    def deps_ready(self, rec: Rec) -> bool:
        """Whether a pending job's dependencies let it start now (evaluated by the core's rules)."""
        if not rec.deps:
            return True
        states: dict[int, str] = {}
        for jid in depend.job_ids(rec.deps):
            live = self.jobs.get(jid)
            if live is not None:
                states[jid] = live.state.value
            else:
                row = self.db.conn.execute("SELECT state FROM jobs WHERE id = ?", (jid,)).fetchone()
                if row is not None:
                    states[jid] = row[0]
        names = [r.name for r in self.jobs.values() if r.id < rec.id and r.uid == rec.uid and r.state is not JobState.HELD]
        st = depend.status(rec.deps, states, names, rec.name)
        if st.verdict == "ready":
            if rec.reason:
                rec.reason = ""
                self.save(rec, reason="")
            return True
        if st.verdict == "never" and self.cfg.cancel_never_satisfied and rec.shepherd is None:
            self.cancel_later.append((rec, st.reason))
            return False
        if rec.reason != st.reason:
            rec.reason = st.reason
            self.save(rec, reason=st.reason)
        return False

    def schedule(self, now: float) -> None:
        self.dirty = False
        self.trees.settle()
        self.cancel_later: list[tuple[Rec, str]] = []
        self.budget = {}
        plan = corepolicy.schedule(self.snapshot(now))
        for rec, why in self.cancel_later:
            if rec.id in self.jobs and rec.state is JobState.PENDING:
                self._dequeue(rec)
                self.end(rec, JobState.CANCELLED, now, reason=why)
        self.head = plan.head
        self.wake_at = plan.wake_at
        for d in plan.decisions:
            if isinstance(d, Activate):
                reserve.activate(self, d, now)
                continue
            rec = self.jobs.get(d.job)
            if rec is None:
                log.error("plan names unknown job %d", d.job)
                continue
            if isinstance(d, Start):
                self.start(rec, d, now)
            elif isinstance(d, Preempt):
                self.preempt(rec, now)
            elif isinstance(d, StartTasks):
                split.start_tasks(self, rec, d, now)

    def start(self, rec: Rec, d: Start, now: float) -> None:
        self._dequeue(rec)
        rec.cores = tuple(d.cores)
        rec.backfilled = d.backfilled
        rec.planned = d.planned
        if rec.first_start is None:
            rec.first_start = now
        if rec.segment > 0:
            rec.restarts += 1
        rec.start = now
        rec.stop = None
        rec.kill_at = None
        rec.deadline = now + rec.remaining()
        rec._waiting = None
        rec.held = ()
        if rec.place is not None and (rec.place.threads_per_core or rec.place.exclusive_board) and rec.cores:
            rec.held = tuple(sorted(claimed(self.machine, rec.cores, rec.place) - set(rec.cores)))
        boards = ",".join(str(b) for b in sorted({self.machine.board_of(c).id for c in rec.cores}))
        cpus = frozenset(self.machine.host_set(rec.cores))
        if rec.state is JobState.SUSPENDED and rec.shepherd is not None:
            rec.state = JobState.RUNNING
            procs.set_affinity(rec.shepherd, set(cpus))
            procs.signal_job(rec.shepherd, rec.pgid, signal.SIGCONT)
            rec.segments.append({"start": now, "cores": cpuset.format(rec.cores), "boards": boards, "resumed": True})
            self.save(rec)
            log.info("job %d resumed on cores %s", rec.id, cpuset.format(rec.cores))
            return
        rec.segment += 1
        try:
            spec = self._launch_spec(rec)
        except (jobfiles.JobFilesError, KeyError, TypeError, ValueError) as e:
            rec.cores = ()
            rec.start = None
            self.end(rec, JobState.FAILED, now, reason=f"cannot start: {rq.safe(str(e))}")
            return
        rec.state = JobState.RUNNING
        rec.segments.append({"start": now, "cores": cpuset.format(rec.cores), "boards": boards})
        self.save(rec)
        self.pending_launches.append((rec, spec))

    def mem_nodes(self, cores: tuple[int, ...]) -> tuple[int, ...]:
        """The host NUMA nodes of the boards a job runs on, when every one of them is a host node."""
        nodes = {self.machine.board_of(c).node for c in cores}
        if not nodes or None in nodes:
            return ()
        return tuple(sorted(n for n in nodes if n is not None))

    def full_spec(self, jid: int) -> dict[str, Any]:
        """A job's whole spec: the public part from the table, the private part from the daemon's own file."""
        spec = dict(self.db.job(jid)["spec"])  # type: ignore[index]
        spec.update(jobfiles.read_private(self.spool.job_dir(jid)))
        return spec

    def _launch_spec(self, rec: Rec) -> launch.Launch:
        spec = self.full_spec(rec.id)
        jdir = self.spool.job_dir(rec.id)
        script = str(jdir / "script")
        args = tuple(spec["args"])
        try:
            with open(script, "rb") as f:
                shebang = f.read(2) == b"#!"
        except OSError:
            shebang = True  # let the exec fail and say why
        if not shebang:
            script, args = "/bin/sh", (script, *args)
        cores = cpuset.format(rec.cores)
        env = dict(spec["env"])
        env.update(
            GS_JOBID=str(rec.id), GS_JOBNAME=spec["name"], GS_NCPUS=str(rec.ncpus), GS_CORES=cores,
            GS_HOST_CPUS=cpuset.format(self.machine.host_set(rec.cores)),
            GS_SUBMIT_DIR=spec.get("submit_dir", spec["workdir"]), OMP_NUM_THREADS=str(rec.ncpus),
            GS_CHECKPOINT_DIR=str(jdir / "checkpoint"), GS_RESTART_COUNT=str(rec.restarts),
            GS_CHECKPOINT_MODE=rec.checkpoint, GS_WALLTIME=str(rec.walltime), GS_SPOOL=str(self.spool.root),
        )
        if self.cfg.compat_env:
            env.update(compat_env(rec.id, spec["name"], rec.ncpus, spec.get("submit_dir", spec["workdir"])))
        return launch.Launch(
            job_id=rec.id, segment=rec.segment, job_dir=str(jdir), script=script, args=args,
            workdir=spec["workdir"], stdout=spec["stdout"], stderr=spec["stderr"], append=rec.segment > 1,
            env=env, cpus=frozenset(self.machine.host_set(rec.cores)), uid=rec.uid, gid=spec.get("gid", -1),
            user=rec.user, mem=spec.get("mem"), mem_nodes=self.mem_nodes(rec.cores),
        )

    def launch_pending(self) -> None:
        """Fork the shepherds of the jobs whose start was just committed."""
        launches, self.pending_launches = self.pending_launches, []
        now = time.time()
        for rec, spec in launches:
            if rec.start is not None and now - rec.start > 1.0:  # held back while the spool had no room
                rec.start = now
                rec.deadline = now + rec.remaining()
                if rec.segments:
                    rec.segments[-1]["start"] = now
            try:
                pid = launch.spawn(spec)
            except OSError as e:
                log.error("job %d: cannot fork: %s", rec.id, e)
                self.end(rec, JobState.FAILED, time.time(), reason=f"cannot start: {e}")
                continue
            self.watch(rec, pid, procs.start_ticks(pid))
            self.save(rec)
            log.info("job %d started on cores %s (shepherd %d)", rec.id, cpuset.format(rec.cores), pid)

    def watch(self, rec: Rec, pid: int, ticks: int | None) -> bool:
        rec.shepherd = pid
        rec.ticks = ticks
        try:
            rec.pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            rec.pidfd = None
            return False
        self.sel.register(rec.pidfd, selectors.EVENT_READ, ("job", rec.id))
        return True

    def preempt(self, rec: Rec, now: float) -> None:
        if rec.shepherd is None or rec.state is not JobState.RUNNING:
            return
        mode = rec.checkpoint
        rec.preemptions += 1
        if mode == "suspend":
            procs.signal_job(rec.shepherd, rec.pgid, signal.SIGSTOP)
            self._close_segment(rec, now, "suspended")
            rec.elapsed += now - (rec.start or now)
            rec.state = JobState.SUSPENDED
            rec.start = None
            rec.cores = ()
            rec._waiting = None
            bisect.insort(self.queue, rec.id)
            self.dirty = True
            log.info("job %d suspended for the head job", rec.id)
        elif mode == "signal":
            rec.state = JobState.STOPPING
            rec.stop = "preempt"
            sig = procs.SIGNALS.get(self.cfg.checkpoint_signal, signal.SIGUSR1)
            self.terminate(rec, now, sig, self.cfg.checkpoint_grace)
            log.info("job %d asked to checkpoint (SIG%s)", rec.id, self.cfg.checkpoint_signal)
        elif mode == "requeue":
            rec.state = JobState.STOPPING
            rec.stop = "preempt"
            self.terminate(rec, now, signal.SIGTERM, self.cfg.kill_grace)
            log.info("job %d stopped to be requeued", rec.id)
        else:
            log.error("job %d has checkpoint mode none and cannot be preempted", rec.id)
            return
        self.save(rec)

    def terminate(self, rec: Rec, now: float, sig: int, grace: float) -> None:
        if rec.shepherd is not None:
            procs.signal_job(rec.shepherd, rec.pgid, sig)
        rec.kill_at = now + grace

    def timers(self, now: float) -> None:
        reserve.timers(self, now)
        for rec in list(self.jobs.values()):
            if rec.shepherd is None:
                continue
            if rec.state is JobState.RUNNING and rec.stop is None and rec.deadline is not None and now >= rec.deadline:
                rec.stop = "timeout"
                log.info("job %d reached its walltime", rec.id)
                self.terminate(rec, now, signal.SIGTERM, self.cfg.kill_grace)
                self.save(rec)
                self.dirty = True
            elif rec.kill_at is not None and now >= rec.kill_at:
                procs.signal_job(rec.shepherd, rec.pgid, signal.SIGKILL)
                rec.kill_at = now + 5.0  # again, should anything have escaped
                self.save(rec)

    # -- endings ---------------------------------------------------------------------------------
    def job_ended(self, jid: int) -> None:
        rec = self.jobs.get(jid)
        if rec is None:
            return
        result = self.read_exit(rec)
        if result is None and rec.shepherd is not None and procs.alive(rec.shepherd, rec.ticks):
            return  # spurious wake-up
        self.finish(rec, result)

    def read_exit(self, rec: Rec) -> dict[str, Any] | None:
        try:
            return json.loads(launch.exit_file(self.spool.job_dir(rec.id), rec.segment).read_text())
        except (OSError, ValueError):
            return None

    def _unwatch(self, rec: Rec) -> None:
        if rec.pidfd is not None:
            try:
                self.sel.unregister(rec.pidfd)
            except (KeyError, ValueError):
                pass
            os.close(rec.pidfd)
            rec.pidfd = None
        if rec.shepherd is not None:
            try:
                os.waitpid(rec.shepherd, os.WNOHANG)
            except ChildProcessError:
                pass  # adopted after a restart: not our child
        rec.shepherd = None
        rec.pgid = None
        rec.ticks = None

    def _close_segment(self, rec: Rec, end: float, outcome: str) -> None:
        if rec.segments and "end" not in rec.segments[-1]:
            rec.segments[-1]["end"] = end
            rec.segments[-1]["outcome"] = outcome

    def finish(self, rec: Rec, result: dict[str, Any] | None) -> None:
        """The shepherd of ``rec`` has gone: decide the job's new state from how it ended."""
        self._unwatch(rec)
        now = time.time()
        end = float(result.get("end", now)) if result else now
        ran = max(0.0, end - rec.start) if rec.start is not None else 0.0
        code = result.get("exit_code") if result else None
        sig = result.get("signal") if result else None
        error = result.get("error") if result else None
        why = result.get("reason") if result else None  # e.g. out of memory, from the shepherd
        was_queued = rec.state is JobState.SUSPENDED
        if was_queued:
            self._dequeue(rec)
        rec.kill_at = None
        self.dirty = True
        if result is None:
            self._close_segment(rec, end, "lost")
            rec.elapsed += ran
            self.end(rec, JobState.FAILED, end, reason="the job's shepherd was killed; its outcome is unknown")
            return
        if error:
            self._close_segment(rec, end, "failed")
            self.end(rec, JobState.FAILED, end, code=code, reason=f"could not start: {error.strip()}")
            return
        if rec.stop is None and rec.checkpoint == "signal" and code == EXIT_CHECKPOINTED and rec.state is JobState.RUNNING:
            # saved its state and asked to be restarted: a preemption whose record a crash of the daemon lost
            rec.stop, rec.state = "preempt", JobState.STOPPING
            rec.preemptions += 1
        if rec.stop == "preempt" and rec.state is JobState.STOPPING:
            checkpointed = rec.checkpoint == "signal" and code == EXIT_CHECKPOINTED
            if checkpointed or rec.checkpoint == "requeue" or sig is not None:
                if checkpointed:
                    rec.elapsed += ran
                    rec.checkpoints += 1
                    outcome = "checkpointed"
                elif rec.checkpoint == "requeue":
                    rec.lost += rec.elapsed + ran
                    rec.elapsed = 0.0
                    outcome = "requeued"
                else:  # did not save its state in time: restarts from its last checkpoint
                    rec.lost += ran
                    outcome = "killed before checkpoint"
                self._close_segment(rec, end, outcome)
                rec.state = JobState.PENDING
                rec.start = None
                rec.stop = None
                rec.cores = ()
                rec._waiting = None
                bisect.insort(self.queue, rec.id)
                self.save(rec)
                log.info("job %d back in the queue (%s)", rec.id, outcome)
                return
        rec.elapsed += ran
        if rec.stop == "cancel":
            self._close_segment(rec, end, "cancelled")
            self.end(rec, JobState.CANCELLED, end, code=code, signal_=sig, reason="cancelled")
        elif rec.stop == "resvend":
            self._close_segment(rec, end, "timeout")
            self.end(rec, JobState.TIMEOUT, end, code=code, signal_=sig, reason="reservation ended")
        elif rec.stop == "timeout":
            self._close_segment(rec, end, "timeout")
            self.end(rec, JobState.TIMEOUT, end, code=code, signal_=sig, reason="reached its walltime")
        elif sig is not None:
            self._close_segment(rec, end, "failed")
            self.end(rec, JobState.FAILED, end, signal_=sig, reason=why or f"killed by signal {sig}")
        elif code == 0:
            self._close_segment(rec, end, "completed")
            self.end(rec, JobState.COMPLETED, end, code=0)
        else:
            self._close_segment(rec, end, "failed")
            self.end(rec, JobState.FAILED, end, code=code, reason=why or f"exit code {code}")

    def end(
        self, rec: Rec, state: JobState, end: float, code: int | None = None,
        signal_: int | None = None, reason: str = "",
    ) -> None:
        assert state in TERMINAL
        rec.state = state
        rec.stop = None
        rec.deadline = None
        self.save(rec, end_time=end, exit_code=code, exit_signal=signal_, reason=reason, predicted_start=None)
        self.jobs.pop(rec.id, None)
        if state is JobState.COMPLETED:
            self.history.setdefault(rec.user, deque(maxlen=2)).append(rec.elapsed)
        log.info("job %d %s%s", rec.id, state.value, f" ({reason})" if reason else "")
        self.trees.ended(rec, state, end)
        if rec.split_of is not None:
            split.piece_ended(self, rec, end)

    # -- forecast -------------------------------------------------------------------------------------
    def forecast(self) -> None:
        self.forecast_dirty = False
        self.last_forecast = time.time()
        fc = getattr(corepolicy, "forecast", None)
        if fc is None:
            return
        self.budget = {}
        snap = self.snapshot(self.last_forecast)
        try:
            pred = fc(snap)
        except Exception:  # noqa: BLE001 - a forecast is advice; it never stops the daemon
            log.exception("forecast failed")
            return
        self.begin()
        self.db.set_predicted((pred.get(w.id), w.id) for w in snap.pending)
        reserve.set_predicted(self, pred, snap.now)


def serve(spool: Spool, cfg: configmod.Config, config_path: str | None = None) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT; returns the exit status."""
    spool.ensure()
    d = Daemon(spool, cfg, config_path)
    d.lock()
    _setup_logging(spool, cfg.log_level)
    try:
        d.open()
        d.serve()
    finally:
        try:
            os.unlink(spool.pidfile)
        except OSError:
            pass
    return 0


def _setup_logging(spool: Spool, level: str) -> None:
    root = logging.getLogger("gschedd")
    root.setLevel(level.upper())
    if not root.handlers:
        h = logging.FileHandler(spool.log)
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root.addHandler(h)
