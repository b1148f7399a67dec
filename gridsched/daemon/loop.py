"""The daemon's loop.

One thread.  It sleeps in ``select`` on: the wake socket (a command dropped a
request), a self-pipe for signals (SIGTERM/SIGINT stop the daemon, SIGHUP
reloads the config), the pipe on which each shepherd tells of its job's end, and
one pidfd per job shepherd (a shepherd ended).  Each turn
it takes in new requests, enforces walltimes and kill graces, asks the core
for a plan when anything changed, carries the plan out, and commits the job
table.  A job's start is committed before its shepherd is forked, so after a
crash every job is found again (see :mod:`gridsched.daemon.recover`).
"""

from __future__ import annotations

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridsched.core import cpuset
from gridsched.core.types import HeadReservation
from gridsched.daemon import (
    actions,
    apply,
    arrays,
    contexts,
    devcgroup,
    handlers,
    intake,
    jobfiles,
    jobtmp,
    launch,
    logs,
    mail,
    outcome,
    reservations,
    slices,
    snapshot,
    split,
)
from gridsched.daemon.procs import start_ticks
from gridsched.daemon.spawn import Processes, Stub
from gridsched.daemon.starts import Starts
from gridsched.daemon.table import JobTable, Rec
from gridsched.daemon.tree import Trees
from gridsched.daemon.tuner import Tuner
from gridsched.host.topology import TopologyError, changed_map, load_machine
from gridsched.protocol import config as configmod
from gridsched.protocol import requests as rq
from gridsched.protocol.admin import admin_uids
from gridsched.protocol.jobs import JobState, Stop
from gridsched.protocol.specview import SpecView
from gridsched.protocol.spool import Spool, atomic_write
from gridsched.protocol.state import StateDB
from gridsched.sim.tune import label as tune_label
from gridsched.submission.submit import machine_memory

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow

log = logging.getLogger("gschedd")

NO_ROOM = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)
RESCAN = 1.0  # seconds between looks at the spool when nobody woke the daemon
FORECAST_EVERY = 2.0  # seconds between refreshes of the predicted start times


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None) -> None:
        super().__init__(f"already running with pid {pid}")
        self.pid = pid


class Daemon:
    def __init__(
        self, spool: Spool, cfg: configmod.Config, config_path: str | None = None, executor: Any = None
    ) -> None:
        self.spool = spool
        self.sel = selectors.DefaultSelector()
        self.ex: Processes | Stub = executor if executor is not None else Processes(self.sel)
        self.file_cfg = cfg  # as read from its file; self.cfg has the tuned settings in force
        self.cfg = cfg
        self.tuner = Tuner()
        self.config_path = config_path
        self.machine = load_machine(cfg)
        self.all_cores = frozenset(range(self.machine.ncores))
        self.drained: frozenset[int] = frozenset()
        self.drain_reason = ""
        # the reasons the last forecast gave pending jobs beyond eligibility (job id -> text): kept when
        # scheduling finds the job eligible (apply.note_reasons)
        self.forecast_said: dict[int, str] = {}
        self.head: HeadReservation | None = None
        self.dirty = True
        self.wake_at: float | None = None
        self.stop_requested = False
        self.reload_requested = False
        self.last_scan = 0.0
        # each user's jobs queued, held or running, counted once a turn when a submission needs it
        # ([limits] max_submit_jobs_per_user: daemon/handlers/submit.py)
        self.queued_by_user: dict[str, int] | None = None
        self.last_forecast = 0.0
        self.pending_launches: list[tuple[Rec, launch.Launch]] = []
        self.starts = Starts(self.ex, self.launched, self.not_started, self.job_ended)  # answers to take
        self.book = reservations.Book()
        self.trees = Trees()  # parent-child job trees (daemon/tree.py), opened with the table
        self.senders = intake.Senders(admin_uids(spool.root))
        self.id_high = 0  # the highest id in use (requests.ID_WINDOW)
        self.confinement: list[str] = []  # how jobs are confined on this host (found when the table is opened)
        self.full_logged = False
        self.mail = mail.Mailer()  # mail about jobs' events ([mail] sendmail)
        # what waits for the job table's next published copy (a system spool's state.db): request files to remove
        # or quarantine once the copy shows what became of them; the scan passes over them meanwhile
        self.publisher = snapshot.Publisher(spool)
        self.settling: dict[str, str | None] = {}  # request name -> None (served) or the reason it was refused
        # the tasks of arrays not made yet, by array id (daemon/arrays.py); big work done a slice per turn
        # (daemon/slices.py): requests acting on many jobs, and the names of their request files (kept in
        # incoming/ until the work is done)
        self.rests: dict[int, arrays.Rest] = {}
        self.more_tasks = False  # tasks of arrays to make that the last turn's slice had no room for
        self.arrays_ended: dict[int, str] = {}  # arrays named in dependencies whose tasks have all ended: their state
        self.sweeps: deque[slices.Sweep] = deque()
        self.busy: set[str] = set()
        self.actions = actions.DaemonActions(self)  # what the request handlers may ask of the daemon

    # -- setup ------------------------------------------------------------------
    def lock(self) -> None:
        self.spool.ensure()
        if self.spool.system:
            self._let_go_of_old_lock()
        self.lock_fd = os.open(self.spool.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = self.spool.daemon_info() or {}
            os.close(self.lock_fd)
            raise AlreadyRunning(info.get("pid")) from None
        self.started = time.time()
        info = {"pid": os.getpid(), "started": self.started, "ticks": start_ticks(os.getpid())}
        atomic_write(self.spool.pidfile, json.dumps(info).encode())

    def _let_go_of_old_lock(self) -> None:
        """The world-readable lock an earlier release kept in the spool root: a daemon of that release still
        holding it still runs (``AlreadyRunning``); anyone else's lock on it (a user's shared ``flock``) is
        passed over, and the file removed."""
        old = self.spool.root / "gschedd.lock"
        try:
            fd = os.open(old, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                info = self.spool._pid_info()
                pid = info.get("pid")
                if isinstance(pid, int) and pid > 0 and pid != os.getpid():
                    try:
                        owner = os.stat(f"/proc/{pid}").st_uid
                    except OSError:
                        owner = None
                    if owner == os.geteuid():
                        raise AlreadyRunning(pid) from None
                log.warning("%s is locked by a process that is no daemon: passed over", old)
            os.unlink(old)
        finally:
            os.close(fd)

    def listen(self) -> None:
        """Take the wake socket and the signals (SIGTERM and SIGINT stop, SIGHUP reloads)."""
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

    def open_table(self) -> None:
        """Open the job table (a system spool's: take an earlier release's over, and publish a first copy, so the
        commands find one as soon as the daemon answers)."""
        if self.spool.system:
            snapshot.adopt_old_table(self.spool)
            snapshot.clear_old_index(self.spool)
        self.db = StateDB(self.spool.live_db, write=True)
        self.publisher.run(self.db.conn, self.db.version, time.time(), force=True)

    def open(self) -> None:
        """Open the job table and recover: the jobs, reservations and drained cores of the last run."""
        if not hasattr(self, "db"):
            self.open_table()
        self.tuner.load(self.db, time.time())
        self.cfg = self.tuner.effective(self.file_cfg)
        self.table = JobTable(self.db, self.spool)
        self.table.devices, self.table.memory = self.machine.devices, apply.memory_pool(self.machine, self.cfg)
        self.trees.open(self.table, self.db, self.cancel)
        if self.cfg.params.priority.weight_fairshare:
            self.table.load_usage(self.cfg.params.priority.half_life)
        self.table.begin()
        self.db.set_meta(
            "machine",
            json.dumps(
                {
                    "ncores": self.machine.ncores,
                    "memory": machine_memory(self.machine),  # what gsub checks --mem against
                    "host_cpus": list(self.machine.host_cpus),
                    "map": self.machine.text(),  # what gctl reload compares a changed topology with
                }
            ),
        )
        self.db.set_meta("daemon", json.dumps({"pid": os.getpid(), "started": self.started, "config": self.cfg.path}))
        # how jobs are confined here (their processes, a process cap, their cores), found once: gctl info shows it
        self.confinement = self.ex.confinement(self.cfg.max_processes)
        self.ex.start()
        self.db.set_meta("confinement", json.dumps({"lines": self.confinement, "at": self.started}))
        self.id_high = self.db.max_id()
        self._drop_stale_claims()
        from gridsched.daemon.recover import recover

        self.book.load(self.db)
        arrays.load(contexts.for_arrays(self))
        self._load_drained()
        self.trees.load_ended()
        if recover(contexts.for_recover(self), time.time()):
            self.dirty = True
        self.trees.load()
        self.table.commit()
        self.settle(time.time(), force=True)

    def close(self) -> None:
        """Let go of the job table and the spool (the fast tests' daemons; a served daemon just exits)."""
        self.table.commit()
        self.settle(time.time(), force=True)
        self.db.close()
        os.close(self.lock_fd)
        self.sel.close()

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
        self.table.claims.extend(ids)
        self.id_high = max(self.id_high, *ids, 0)
        return ids

    def unclaim(self, ids: list[int]) -> None:
        """Let go at once of ids claimed with :meth:`new_ids` and never used (nothing was written under them)."""
        drop = set(ids)
        self.table.claims = [i for i in self.table.claims if i not in drop]
        self.spool.release_claims(ids)

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

    # -- the loop ---------------------------------------------------------------------
    def serve(self) -> None:
        log.info(
            "gschedd %d on %s: %d cores on host CPUs %s, policy %s",
            os.getpid(),
            self.spool.root,
            self.machine.ncores,
            cpuset.format(self.machine.host_cpus),
            self.cfg.params.policy.value,
        )
        for line in devcgroup.announce(self.machine.devices, self.cfg.device_enforce, self.cfg.system):
            log.info("%s", line)
        for line in self.confinement:
            log.info("%s", line)
        if self.tuner.tunes(self.file_cfg):
            log.info("tuning: %s; in force: %s", self.file_cfg.tuning.describe(), tune_label(self.cfg.params))
        while not self.stop_requested:
            self.turn(time.time())
            if self.table.forecast_dirty and time.time() - self.last_forecast >= FORECAST_EVERY:
                self.forecast()
                self.table.commit()
                launch.mark("d_forecast")
            timeout = self.next_timeout()
            for key, _ in self.sel.select(timeout):
                launch.mark("d_woke")
                kind, arg = key.data
                if kind == "wake":
                    self._drain(self.sock)
                    self.starts.take(block=True)  # a request may act on a job just started
                    self.ingest(settle=False)  # settled by the turn that follows, after the jobs it starts
                elif kind == "signal":
                    self._drain(self.sig_r)
                elif kind == "started":
                    self.starts.take()
                elif kind == "job":
                    self.job_ended(arg)
                elif kind == "ended":  # told by the shepherds before they remove their jobs' private directories
                    for jid, seg in self.ex.ended():
                        rec = self.table.jobs.get(jid)
                        if rec is not None and rec.segment == seg:
                            self.job_ended(jid)
            if self.reload_requested:
                self.starts.take(block=True)
                self.reload()
        self.starts.take(block=True)
        self.tuner.stop()
        self.table.commit()
        self.settle(time.time(), force=True)
        jobtmp.sweep(force=True)
        log.info(
            "gschedd %d stopping; %d jobs still running keep running",
            os.getpid(),
            sum(1 for r in self.table.jobs.values() if r.state in (JobState.RUNNING, JobState.STOPPING)),
        )

    def turn(self, now: float, scan: bool = False) -> None:
        """One turn of the loop: take requests in (every :data:`RESCAN` seconds, or with ``scan``), enforce
        walltimes, ask the core for a plan when anything changed and carry it out, commit, start the jobs."""
        if self.starts.waiting:
            self.table.commit()  # the ends recorded meanwhile, before the wait for the starter's answers
            self.starts.take(block=True)
        if scan or now - self.last_scan >= RESCAN:
            self.ingest()
        # a slice of the big work under way (large cancels), the tasks of arrays to start
        changed, self.more_tasks = slices.advance(contexts.for_slices(self))
        self.dirty = self.dirty or changed
        self.trees.account(now)  # yielding parents earn walltime credit only while a child of theirs runs
        self.timers(now)
        jobtmp.sweep()  # the private directories the shepherds of ended jobs did not remove
        self.tune(now)
        if self.mail.children:
            self.mail.poll(now)
        if self.dirty or (self.wake_at is not None and now >= self.wake_at):
            self.dirty = False  # what the plan's decisions change sets it again (an end, a cancel)
            launch.mark("d_pass_begin")
            done = apply.schedule(contexts.for_apply(self), now)
            launch.mark("d_pass_end")
            self.dirty = self.dirty or done.changed
            self.head, self.wake_at = done.head, done.wake_at
            self.trees.account(now)
        if self.table.commit():
            launch.mark("d_committed")
            self.launch_pending()
        self.table.commit()
        self.settle(now)

    def settle(self, now: float, force: bool = False) -> None:
        """Publish the job table's copy when due (system spools), then let go of what waited for it: the request
        files served or refused, the ids claimed for arrays.  Until then a command reading the copy and the
        spool sees each request where it was (never neither, so an id is never taken twice)."""
        if not self.settling and not self.table.settled_claims and self.publisher.due(self.db.version) is None:
            return
        if self.db.unsaved or not self.publisher.run(self.db.conn, self.db.version, now, force):
            return
        if self.settling and not intake.make_durable(self.db.path):  # one fsync for all served since the last
            return
        launch.mark("d_durable")
        for name, why in self.settling.items():
            if why is None:
                intake.done(self.spool, name)
            else:
                intake.quarantine(self.spool, name, why)
        self.settling = {}
        launch.mark("d_settled")
        if self.table.settled_claims:
            self.spool.release_claims(self.table.settled_claims)
            self.table.settled_claims = []

    @staticmethod
    def _drain(sock: socket.socket) -> None:
        try:
            while sock.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def next_timeout(self) -> float:
        if slices.pending(self.sweeps, self.more_tasks):
            return 0.0  # the next slice at once, after a look at what else came
        now = time.time()
        t = self.last_scan + RESCAN
        for rec in self.table.jobs.values():
            if rec.state is JobState.RUNNING and rec.stop is None and rec.deadline is not None:
                due = rec.due(now, self.cfg.max_walltime) or rec.deadline
                t = min(t, due)
                if rec.warn is not None and not rec.warned:
                    t = min(t, due - rec.warn.secs)
                t = min(t, self.mail.next_limit(self.cfg, rec, now, due) or t)
            if rec.kill_at is not None:
                t = min(t, rec.kill_at)
        if self.wake_at is not None:
            t = min(t, self.wake_at)
        t = min(t, self.mail.next_deadline() or t)
        resv_end = self.book.next_end()
        if resv_end is not None:
            t = min(t, resv_end)
        if self.table.forecast_dirty:
            t = min(t, self.last_forecast + FORECAST_EVERY)
        publish_at = self.publisher.due(self.db.version)
        if publish_at is not None:
            t = min(t, publish_at)
        tune_at = self.tuner.due(self.file_cfg)
        if tune_at is not None:
            t = min(t, tune_at)
        return max(0.0, t - now)

    # -- requests ------------------------------------------------------------------------
    def ingest(self, settle: bool = True) -> None:
        """Take in the requests waiting in the spool: each is parsed at the boundary (intake) and served by the
        handler of its kind; a refused one is quarantined and, if it brought a new id, recorded as refused.
        ``settle``: let go of the requests served (:meth:`settle`) now rather than at the end of the turn."""
        self.last_scan = time.time()
        self.queued_by_user = None
        skip = self.settling.keys() | self.busy  # requests served, or whose work goes on over turns
        launch.mark("d_scan")
        got, refused = intake.scan(self.spool, self.senders, room=self._room(), skip=skip)
        if not got and not refused:
            return
        launch.mark("d_parsed")
        got.sort(key=lambda r: not isinstance(r.request, rq.ResvCreate))  # a job may name a reservation made with it
        self.table.begin()
        served = []
        for r in refused:
            self.refuse(r.name, r.uid, r.new_id, r.reason)
        for rcv in got:
            try:
                if handlers.handle(contexts.for_handlers(self), rcv):
                    self.dirty = True
            except rq.Refused as e:
                if isinstance(e, handlers.RefusedInPart) and e.changed:
                    self.dirty = True
                self.refuse(rcv.name, rcv.sender.uid, rq.id_of_name(rcv.name), str(e), rcv.digest)
                continue
            except OSError as e:
                if e.errno in NO_ROOM:
                    if not self.table.disk_trouble:
                        log.error("no room in the spool (%s): submissions wait in incoming/", e.strerror)
                        self.table.disk_trouble = True
                    break
                log.exception("request %s failed", rq.safe(rcv.name, 120))
                self.refuse(rcv.name, rcv.sender.uid, rq.id_of_name(rcv.name), f"could not be served: {e}", rcv.digest)
                continue
            except Exception as e:  # noqa: BLE001 - a bad request never stops the daemon
                log.exception("request %s failed", rq.safe(rcv.name, 120))
                self.refuse(rcv.name, rcv.sender.uid, rq.id_of_name(rcv.name), f"could not be served: {e}", rcv.digest)
                continue
            if rcv.name not in self.busy:
                served.append(rcv.name)
        # served requests leave incoming/ once their writes are committed and published; a commit that fails
        # (a full disk) keeps its writes to try again, and the requests are not read again meanwhile
        for name in served:
            self.settling[name] = None
        self.table.commit()
        launch.mark("d_taken_in")
        if settle:
            self.settle(time.time())

    def refuse(self, name: str, uid: int | None, new_id: int | None, why: str, digest: str = "") -> None:
        """Quarantine a refused request; if it brought a new id that nobody has, record the refusal under it,
        with the request's ``digest`` (``gsub --wait`` and ``gstat`` tell the submitter; a gsub checking its
        id meanwhile knows it for its own)."""
        why = rq.safe(why, 1000)
        self.settling[name] = why  # moved to quarantine/ once the published table shows the refusal
        if new_id is None or new_id > self.id_high + rq.ID_WINDOW:
            return
        rec = self.db.id_record(new_id)
        if new_id in self.table.jobs or (self.db.id_used(new_id) and (rec is None or rec["uid"] != uid)):
            return  # the id is someone else's: the refusal is in the quarantine and the log only
        self.table.begin()
        self.db.put_id(new_id, uid, digest, time.time(), why)
        self.id_high = max(self.id_high, new_id)

    def _room(self) -> bool:
        """Whether the spool's file system has room to take submissions in (logged once when it has not)."""
        try:
            self.spool.check_space()
        except OSError as e:
            if not self.full_logged:
                log.warning(
                    "spool %s: %s; submissions wait in incoming/ until there is room", self.spool.root, e.strerror
                )
                self.full_logged = True
            return False
        if self.full_logged:
            log.info("spool %s has room again: taking submissions in", self.spool.root)
            self.full_logged = False
        return True

    def take_in(
        self, job: rq.JobSpec, user: str, state: JobState, reason: str, files: jobfiles.JobFiles | None = None
    ) -> Rec | None:
        """Write a checked job's files and row and queue it; its record (None if it is refused).

        ``files`` maps names in the job's directory to their text, or to a path
        to hard-link (the tasks of an array share their script); without it the
        job's ``script`` is the file ``script``.
        """
        jid = job.id
        if files is None:
            files = {"script": job.script}
        spec, private = job.stored()
        jobfiles.create(self.spool.job_dir(jid), job.uid, job.gid, job.umask, files, json.dumps(private).encode())
        row: JobRow = {
            "id": jid,
            "state": state,
            "user": user,
            "uid": job.uid,
            "name": job.name,
            "ncpus": job.ncpus,
            "walltime": job.walltime,
            "submit_time": job.submit_time,
            "start_time": None,
            "end_time": time.time() if state is JobState.FAILED else None,
            "cores": "",
            "exit_code": None,
            "exit_signal": None,
            "reason": reason,
            "backfilled": False,
            "restarts": 0,
            "preemptions": 0,
            "checkpoints": 0,
            "elapsed": 0.0,
            "lost": 0.0,
            "predicted_start": None,
            "segments": [],
            "run": {},
            "spec": SpecView(spec),
        }
        self.id_high = max(self.id_high, jid)
        rec = self.table.put(row, job.public())
        if rec is None:
            log.info("job %d refused: %s", jid, reason)
            return None
        self.dirty = self.dirty or rec.state is JobState.PENDING
        log.debug("job %d queued", jid)
        return rec

    def set_drained(self, cores: frozenset[int], reason: str, what: str) -> None:
        """Drained cores take no new job; jobs running on them finish."""
        self.drained = cores & self.all_cores
        self.drain_reason = reason if self.drained else ""
        self.table.begin()
        self.db.set_meta("drained", json.dumps({"cores": cpuset.format(self.drained), "reason": self.drain_reason}))
        log.info("%s; drained now: %s", what, cpuset.format(self.drained) or "none")

    def reload(self) -> None:
        self.reload_requested = False
        try:
            cfg = configmod.load(self.config_path, self.spool.root)
        except configmod.ConfigError as e:
            log.error("reload refused, the old settings stay: %s", e)
            return
        try:
            machine = load_machine(cfg)
        except TopologyError as e:
            log.error("reload refused, the old settings stay: %s", e)
            return
        if machine != self.machine:
            # the running jobs hold cores of the running map: it stays until the next start
            log.error(
                "reload refused, the old settings stay: %s",
                changed_map(machine, self.machine),
            )
            return
        old_pp, pp = self.cfg.params.priority, cfg.params.priority
        if pp.weight_fairshare and (pp.half_life != old_pp.half_life or not old_pp.weight_fairshare):
            self.table.load_usage(pp.half_life)  # usage read again with the half-life now in force
        self.file_cfg = cfg
        self.cfg = self.tuner.effective(cfg)
        self.dirty = True
        p = self.cfg.params
        log.info("reloaded %s: policy %s, p %s, threshold %ss", cfg.path, p.policy.value, p.p, p.threshold)
        if self.tuner.tunes(cfg):
            log.info("tuning: %s; in force: %s", cfg.tuning.describe(), tune_label(p))

    def tune(self, now: float) -> None:
        """Look at the tuner (:meth:`gridsched.daemon.tuner.Tuner.tick`): a setting it adopts is in force for the
        next pass."""
        cfg = self.tuner.tick(contexts.for_tuner(self), now)
        if cfg is not None:
            self.cfg = cfg
            self.dirty = True

    # -- scheduling -------------------------------------------------------------------------

    def launch_pending(self) -> None:
        """Have the shepherds of the jobs whose start was just committed started (:mod:`.starts`)."""
        launches, self.pending_launches = self.pending_launches, []
        self.starts.send(launches)
        if self.starts.waiting and not any(r.shepherd is not None for r in self.table.jobs.values()):
            # no other job runs, so no end can come meanwhile: the answers at once, the turn's settling after them
            self.starts.take(block=True)

    def launched(self, rec: Rec, pid: int, ticks: int | None) -> None:
        self.watch(rec, pid, ticks)
        self.table.save(rec)
        log.info("job %d started on cores %s (shepherd %d)", rec.id, cpuset.format(rec.cores), pid)
        self.mail.began(self.cfg, self.table, rec, time.time())
        launch.mark("d_launched", rec.id)

    def not_started(self, rec: Rec, spec: launch.Launch, e: OSError) -> None:
        log.error("job %d: cannot fork: %s", rec.id, e)
        jobtmp.remove(spec.private, rec.uid, wait=False)
        self.end(rec, JobState.FAILED, time.time(), reason=f"cannot start: {e}")
        self.dirty = True

    def watch(self, rec: Rec, pid: int, ticks: int | None) -> bool:
        rec.shepherd = pid
        rec.ticks = ticks
        return self.ex.watch(rec.id, pid)

    def where(self, rec: Rec) -> tuple[Path, int]:
        """The job's running segment, as the executor finds its processes: job directory and segment number."""
        return self.spool.job_dir(rec.id), rec.segment

    def terminate(self, rec: Rec, now: float, sig: int, grace: float) -> None:
        if self.starts.waits_for(rec):
            self.starts.take(block=True)
        if rec.shepherd is not None:
            self.ex.signal(rec.shepherd, self.where(rec), sig)
        rec.kill_at = now + grace

    def warn(self, rec: Rec, warn: rq.JobSignal) -> None:
        """Send the job its signal before the walltime (sbatch --signal): to its batch shell alone, or to all
        its processes as the walltime's SIGTERM is sent."""
        if rec.shepherd is None:
            return
        if warn.shell_only:  # the shepherd's child, named (with its start time) in the shepherd's pid file
            self.ex.signal_shell(rec.shepherd, self.where(rec), warn.num)
        else:
            self.ex.signal(rec.shepherd, self.where(rec), warn.num)
        log.info("job %d sent SIG%s, %d seconds before its walltime", rec.id, rq.signal_name(warn.num), warn.secs)

    def timers(self, now: float) -> None:
        if reservations.timers(self.book, now):
            self.dirty = True
        for rec in list(self.table.jobs.values()):
            if rec.shepherd is None:
                continue
            due = rec.due(now, self.cfg.max_walltime)  # the deadline, later by its credit as a yielding parent
            warn = rec.warn
            if (
                warn is not None
                and not rec.warned
                and rec.state is JobState.RUNNING
                and rec.stop is None
                and due is not None
                and now >= due - warn.secs
            ):
                rec.warned = True  # once a segment: saved before it is sent, so a restart does not send it again
                self.table.save(rec)
                self.warn(rec, warn)
            if rec.state is JobState.RUNNING and rec.stop is None:
                self.mail.timers(self.cfg, self.table, rec, now, due)
            if rec.state is JobState.RUNNING and rec.stop is None and due is not None and now >= due:
                rec.stop = Stop.TIMEOUT
                log.info("job %d reached its walltime", rec.id)
                self.mail.time_limit(self.cfg, rec)
                self.terminate(rec, now, signal.SIGTERM, self.cfg.kill_grace)
                self.table.save(rec)
                self.dirty = True
            elif rec.kill_at is not None and now >= rec.kill_at:
                self.ex.signal(rec.shepherd, self.where(rec), signal.SIGKILL)
                rec.kill_at = now + 5.0  # again, should anything have escaped
                self.table.save(rec)

    # -- endings ---------------------------------------------------------------------------------
    def job_ended(self, jid: int) -> None:
        launch.mark("d_end_seen", jid)
        rec = self.table.jobs.get(jid)
        if rec is not None and self.starts.tell_end(rec):
            return  # ended before the starter's answer came: ended with it
        if rec is None or rec.shepherd is None:
            return  # its end is recorded already (told on the pipe of ends, then its shepherd's exit seen)
        result = self.read_exit(rec)
        if result is None and rec.shepherd is not None and self.ex.alive(rec.shepherd, rec.ticks):
            return  # spurious wake-up
        if outcome.finish(contexts.for_outcome(self), rec, result):
            self.dirty = True
        launch.mark("d_end_recorded", jid)

    def read_exit(self, rec: Rec) -> dict[str, Any] | None:
        return self.ex.exit_info(self.spool.job_dir(rec.id), rec.segment)

    def unwatch(self, rec: Rec) -> None:
        if rec.shepherd is not None:
            self.ex.unwatch(rec.shepherd)
        rec.shepherd = None
        rec.ticks = None

    def cancel(self, rec: Rec, now: float, why: str) -> None:
        """Cancel a job: a waiting one ends now with ``why``; a running one is signalled (SIGTERM, grace,
        SIGKILL; a suspended one is killed) and ends CANCELLED when its shepherd reports it gone."""
        if self.starts.waits_for(rec):
            self.starts.take(block=True)
        if rec.state in (JobState.PENDING, JobState.HELD) and rec.shepherd is None:
            self.end(rec, JobState.CANCELLED, now, reason=why)
        elif rec.shepherd is not None and rec.stop is not Stop.CANCEL:
            rec.stop = Stop.CANCEL
            if rec.state is JobState.SUSPENDED:
                self.ex.signal(rec.shepherd, self.where(rec), signal.SIGKILL)
                self.ex.signal(rec.shepherd, self.where(rec), signal.SIGCONT)
            else:
                self.terminate(rec, now, signal.SIGTERM, self.cfg.kill_grace)
            self.table.save(rec)
        self.dirty = True

    def end(
        self,
        rec: Rec,
        state: JobState,
        end: float,
        code: int | None = None,
        signal_: int | None = None,
        reason: str = "",
    ) -> None:
        """End a job (table) and carry out what follows: its tree, the splittable job it is a piece of."""
        self.table.end(rec, state, end, code, signal_, reason)
        log.info("job %d %s%s", rec.id, state.value, f" ({rq.safe(reason, 300)})" if reason else "")
        if self.trees.ended(rec, state, end):
            self.dirty = True
        self.mail.ended(self.cfg, self.table, self.db, rec, state, code, signal_, reason, self.rests)
        if rec.split_of is not None:
            split.piece_ended(contexts.for_split(self), rec, end)

    # -- forecast -------------------------------------------------------------------------------------
    def forecast(self, now: float | None = None) -> None:
        """Predicted start times and why each pending job waits (:func:`gridsched.daemon.apply.forecast`), as
        of ``now`` (the clock's time where not given)."""
        self.last_forecast = time.time() if now is None else now
        said = apply.forecast(contexts.for_apply(self), self.last_forecast)
        if said is not None:
            self.forecast_said = said


def serve(spool: Spool, cfg: configmod.Config, config_path: str | None = None) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT; returns the exit status."""
    spool.ensure()
    d = Daemon(spool, cfg, config_path)
    d.lock()
    logs.setup(spool, cfg.log_level)
    try:
        d.open_table()
        d.listen()
        d.open()
        d.serve()
    finally:
        # the socket too: one left behind would pass for a daemon's to a command waiting for one to answer
        # (the lock, held until this process exits, keeps another daemon from binding its own meanwhile)
        for path in (spool.pidfile, *((spool.sock,) if hasattr(d, "sock") else ())):
            try:
                os.unlink(path)
            except OSError:
                pass
    return 0
