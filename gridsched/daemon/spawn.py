"""Carrying jobs out on the machine: starting shepherds, signalling them, learning how they ended.

The daemon's loop decides; an executor acts.  :class:`Processes` is the real
one: it has a shepherd forked per job (:mod:`.launch`), by the shepherds'
starter (:mod:`.starter`, a small process of its own: forking the daemon costs
more) or, where that cannot run, by the daemon itself; it watches it with a pidfd
in the loop's selector, signals the job's processes
(:mod:`.procs`: its cgroups and the processes below its shepherd) and reads the pid and exit files the shepherd writes.
:class:`Stub` has the same methods and runs nothing: the fast tier of the
tests drives the whole loop with it (a turn takes requests in, schedules,
and "starts" jobs), and ends the jobs it chooses with the result it chooses.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import pickle
import select
import selectors
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridsched.daemon import birth, cgroup, confine, devcgroup, jobtmp, launch, procs, starter
from gridsched.job.env import Private

log = logging.getLogger("gridsched.daemon")

Where = tuple[Path, int]  # a job segment: the job's directory and the segment's number


def _read_json(path: Path, owner: int | None = None) -> dict[str, Any] | None:
    """A JSON object file the daemon's user wrote (``owner``), without following links; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (owner is not None and st.st_uid != owner) or st.st_size > 1 << 16:
            return None
        data = json.loads(os.read(fd, 1 << 16))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else None


class Starter:
    """The daemon's end of the shepherds' starter (:mod:`.starter`): a child process and a socket to it."""

    TIMEOUT = 30.0  # a starter that takes longer to answer is stuck: it is killed and started again

    def __init__(self, notify: int = -1) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.notify = notify  # the write end of the daemon's pipe of ends, handed to the starter
        # the launches sent whose answers are not read yet, oldest first, each with what its ``meanwhile`` raised
        self.waiting: deque[tuple[launch.Launch, OSError | None]] = deque()
        self.lost: list[tuple[launch.Launch, OSError]] = []  # launches the starter ended without answering

    def start(self) -> None:
        """Start the starter (the daemon's interpreter, with the daemon's environment and import path: the
        same code); OSError if it cannot be."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        code = f"import sys; sys.path[:] = {sys.path!r}; from gridsched.daemon.starter import main; main()"
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                cwd="/",
            )
        except (OSError, subprocess.SubprocessError) as e:
            mine.close()
            raise OSError(getattr(e, "errno", None) or 0, f"cannot start the shepherds' starter: {e}") from None
        finally:
            theirs.close()
        mine.settimeout(self.TIMEOUT)
        self.sock = mine
        try:
            found = {"confine": confine.setup(), "devices": devcgroup._found}
            starter.send_message(mine, pickle.dumps(found), [self.notify] if self.notify >= 0 else None)
        except OSError as e:
            self.stop()
            raise OSError(e.errno or 0, f"cannot start the shepherds' starter: {e.strerror or e}") from None

    def reap(self) -> None:
        """Collect a starter that has died (killed by someone): the next start starts another."""
        if self.proc is not None and self.proc.poll() is not None:
            self.stop()

    def stop(self) -> None:
        """End the starter; the answers it still owed are ConnectionErrors (:meth:`replies`)."""
        gone = ConnectionError("the shepherds' starter ended before it answered")
        self.lost.extend((spec, gone) for spec, _ in self.waiting)
        self.waiting.clear()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def send(self, spec: launch.Launch, meanwhile: Callable[[], None] | None = None) -> None:
        """Send a launch; the starter's answer (the shepherd's pid, start time and a pidfd on it, or why it was
        not started) is taken later, in the order the launches were sent (:meth:`replies`).  ConnectionError:
        the starter is gone, and may have taken the shepherd with it.

        ``meanwhile``: what the job needs before it runs (its private directory), done while the starter forks
        the shepherd; the shepherd writes its pid file (and runs the job) only once told on a pipe sent with the
        launch that it is done.  What it raises (OSError) is the launch's answer, and the shepherd runs
        nothing."""
        if self.sock is None or self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()
        assert self.sock is not None
        r, w = os.pipe2(os.O_CLOEXEC) if meanwhile is not None else (-1, -1)
        failed: OSError | None = None
        try:
            try:
                starter.send_message(self.sock, pickle.dumps(spec), [r] if r >= 0 else None)
            finally:
                if r >= 0:
                    os.close(r)
            if meanwhile is not None:
                try:
                    meanwhile()
                except OSError as e:
                    failed = e
                os.write(w, b"n" if failed else b"g")  # one byte into an empty pipe: never blocks
        except OSError as e:
            self.stop()
            raise ConnectionError(f"the shepherds' starter failed: {e or type(e).__name__}") from None
        finally:
            if w >= 0:
                os.close(w)  # unsaid (the daemon failed before it could say): the shepherd takes it as a no
        self.waiting.append((spec, failed))

    def readable(self) -> bool:
        """Whether an answer (or the starter's end) can be read now without waiting."""
        return self.sock is not None and bool(select.select([self.sock], [], [], 0)[0])

    def replies(self, block: bool = False) -> list[tuple[launch.Launch, tuple[int, int | None, int] | OSError]]:
        """The answers to the launches sent, oldest first: those there now, or with ``block`` all of them.  Each
        is the shepherd's pid, start time and pidfd, or an OSError (ConnectionError: the starter is gone, with
        the answers it still owed, and may have taken their shepherds with it)."""
        got: list[tuple[launch.Launch, tuple[int, int | None, int] | OSError]] = list(self.lost)
        self.lost.clear()
        while self.waiting and self.sock is not None and (block or self.readable()):
            spec, failed = self.waiting[0]
            try:
                data, fds = starter.recv_message(self.sock)
                reply = pickle.loads(data)
            except (OSError, EOFError, ValueError, pickle.UnpicklingError) as e:
                failure = ConnectionError(f"the shepherds' starter failed: {e or type(e).__name__}")
                got.extend((s, failure) for s, _ in self.waiting)
                self.waiting.clear()
                self.stop()
                break
            self.waiting.popleft()
            got.append((spec, self._answer(reply, fds, failed)))
        return got

    @staticmethod
    def _answer(reply: dict[str, Any], fds: list[int], failed: OSError | None) -> tuple[int, int | None, int] | OSError:
        if failed is not None or "pid" not in reply or not fds:
            for fd in fds:
                os.close(fd)
            if failed is not None:
                return failed
            if "pid" not in reply:
                return OSError(reply.get("errno", 0), reply.get("error", "cannot fork"))
            return ConnectionError("the shepherds' starter sent no pidfd")
        for fd in fds[1:]:
            os.close(fd)
        return reply["pid"], reply.get("ticks"), fds[0]


class Processes:
    """The real executor: shepherd processes watched through pidfds registered in ``sel``."""

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel
        self.fds: dict[int, int] = {}  # shepherd pid -> pidfd
        self.unreaped: set[int] = set()
        # private directories named for the starts of this turn, made once the starts are committed (spawn)
        self.unmade: dict[str, tuple[str, int, int, int, str, int, int]] = {}
        # the pipe of ends: each shepherd writes "JOB SEGMENT" once its job's exit file is written, before it
        # removes the job's private directory (launch._tell); the loop reads it as ("ended", None)
        self.ends, launch.NOTIFY = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        sel.register(self.ends, selectors.EVENT_READ, ("ended", None))
        self.starter: Starter | None = Starter(launch.NOTIFY)
        self.listening = -1  # the starter's socket as registered in ``sel``

    def start(self) -> None:
        """Start the shepherds' starter now (the first job need not wait for it); where it cannot run, the
        daemon forks the shepherds itself."""
        if self.starter is None:
            return
        try:
            self.starter.start()
        except OSError as e:
            log.warning("%s; the daemon forks the shepherds itself", e.strerror or e)
            self.starter = None

    def begin(self, spec: launch.Launch) -> tuple[int, int | None] | None:
        """Start the job's shepherd: its pid and start time (clock ticks: tells it from a reused pid), or None
        where the starter forks it: its answer comes later from :meth:`replies` (the loop is woken with
        ``("started", None)``).  OSError if it was not started (nor is its job: its private directory could not
        be made)."""
        unmade = self.unmade.pop(spec.private, None)

        def make_private() -> None:
            if unmade is None:
                return
            base, job_id, uid, gid, host, ncpus, ranks = unmade
            try:
                jobtmp.create(
                    base,
                    job_id,
                    uid,
                    gid,
                    host,
                    ncpus,
                    ranks,
                    name=os.path.basename(spec.private),
                    pool=jobtmp.pool_dir(spec.job_dir),
                )
            except OSError as e:
                raise OSError(f"cannot make its private directory in {base}: {e.strerror or e}") from None
            launch.mark("d_private_made", spec.job_id)

        if self.starter is None:
            make_private()
            pid = launch.spawn(spec)
            return pid, procs.start_ticks(pid)
        try:
            # the private directory is made while the starter forks the shepherd, which waits for it
            self.starter.send(spec, make_private if unmade is not None else None)
        except ConnectionError as e:
            self._listen()
            found = self._lost(spec, e)
            if isinstance(found, OSError):
                raise found from None
            return found
        self._listen()
        return None

    def replies(self, block: bool = False) -> list[tuple[launch.Launch, tuple[int, int | None] | OSError]]:
        """The starter's answers to the launches :meth:`begin` left waiting, oldest first: those there now, or
        with ``block`` all of them; each the shepherd's pid and start time, or why it was not started."""
        got: list[tuple[launch.Launch, tuple[int, int | None] | OSError]] = []
        if self.starter is None:
            return got
        for spec, answer in self.starter.replies(block):
            if isinstance(answer, ConnectionError):
                got.append((spec, self._lost(spec, answer)))
            elif isinstance(answer, OSError):
                got.append((spec, answer))
            else:
                pid, ticks, fd = answer
                self.fds[pid] = fd
                got.append((spec, (pid, ticks)))
        if not self.starter.waiting and self.starter.readable():
            self.starter.stop()  # it says nothing unasked: its end (started again at the next launch)
        self._listen()
        return got

    def _listen(self) -> None:
        """The starter's socket in the loop's selector, as ``("started", None)``, while there is one."""
        fd = self.starter.sock.fileno() if self.starter is not None and self.starter.sock is not None else -1
        if fd == self.listening:
            return
        if self.listening >= 0:
            try:
                self.sel.unregister(self.listening)
            except (KeyError, ValueError):
                pass
        self.listening = fd
        if fd >= 0:
            self.sel.register(fd, selectors.EVENT_READ, ("started", None))

    def _lost(self, spec: launch.Launch, e: ConnectionError) -> tuple[int, int | None] | OSError:
        """A launch whose starter failed before answering: its shepherd if it is armed (adopted), else the error
        (the cgroups made for it removed)."""
        log.error("job %d: %s", spec.job_id, e)
        found = self._armed(spec)
        if found is None:
            self.unstarted(spec.job_dir, spec.segment)
            return e
        return found

    def _armed(self, spec: launch.Launch) -> tuple[int, int | None] | None:
        """The shepherd of ``spec`` if it was started and armed (wrote its pid file) though its starter died
        before saying so: it runs the job, and the daemon adopts it.  A shepherd not armed yet dies with the
        starter; one about to be armed writes its file at once (a bounded wait for it)."""
        deadline = time.monotonic() + 1.0
        while True:
            info = self.pid_info(Path(spec.job_dir), spec.segment)
            if info is not None and procs.alive(info["pid"], info.get("ticks")):
                return info["pid"], info.get("ticks")
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def ended(self) -> list[tuple[int, int]]:
        """The job segments (job id, segment) whose shepherds have told their end on the pipe of ends since the
        last call.  A line is only a hint: the daemon believes the exit file, which its own user wrote."""
        data = b""
        while True:
            try:
                chunk = os.read(self.ends, 1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                break
            data += chunk
        told = []
        for line in data.split(b"\n"):
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                told.append((int(parts[0]), int(parts[1])))
        return told

    def watch(self, job_id: int, pid: int) -> bool:
        """Wake the loop with ``("job", job_id)`` when the shepherd ``pid`` exits; False if it is gone."""
        fd = self.fds.get(pid)
        if fd is None:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                return False
        self.fds[pid] = fd
        self.sel.register(fd, selectors.EVENT_READ, ("job", job_id))
        return True

    def unwatch(self, pid: int) -> None:
        fd = self.fds.pop(pid, None)
        if fd is not None:
            try:
                self.sel.unregister(fd)
            except (KeyError, ValueError):
                pass
            os.close(fd)
        self.unreaped.add(pid)  # the daemon's own child where it forks the shepherds: reaped once it has exited
        for p in list(self.unreaped):
            try:
                if os.waitpid(p, os.WNOHANG)[0] == 0:
                    continue  # still removing its job's private directory (the end was told on the pipe)
            except ChildProcessError:
                pass  # the starter's child, or adopted after a restart: not the daemon's
            self.unreaped.discard(p)
        if self.starter is not None:
            self.starter.reap()
            self._listen()

    def job(self, shepherd: int, where: Where) -> procs.Job:
        """The processes of the segment ``where`` (job directory, segment) run by ``shepherd``, as its pid file
        names them: checked again at each signal (:mod:`.procs`)."""
        info = self.pid_info(*where) or {}
        if info.get("pid") != shepherd:
            info = {}  # a file of another segment's shepherd, or none yet: only the tree below the shepherd
        leader, ticks = info.get("job"), info.get("job_ticks")
        cgroups = info.get("cgroups")
        return procs.Job(
            shepherd,
            self.fds.get(shepherd),
            info.get("ticks") if isinstance(info.get("ticks"), int) else None,
            leader if isinstance(leader, int) and leader > 1 else None,
            ticks if isinstance(ticks, int) else None,
            tuple(c for c in cgroups if confine.valid(c)) if isinstance(cgroups, list) else (),
        )

    def signal(self, shepherd: int, where: Where, sig: int) -> None:
        """Send ``sig`` once to every process of the job (never to a process group by a remembered number)."""
        procs.signal_job(self.job(shepherd, where), sig)

    def signal_shell(self, shepherd: int, where: Where, sig: int) -> None:
        procs.signal_shell(self.job(shepherd, where), sig)

    def set_affinity(self, shepherd: int, where: Where, cpus: set[int]) -> None:
        procs.set_affinity(self.job(shepherd, where), cpus)

    def alive(self, pid: int, ticks: int | None) -> bool:
        return procs.alive(pid, ticks)

    def exit_info(self, job_dir: Path, segment: int) -> dict[str, Any] | None:
        """How a segment ended, as its shepherd wrote it (None: it has not ended, or its shepherd was killed)."""
        return _read_json(launch.exit_file(job_dir, segment), os.geteuid())

    def pid_info(self, job_dir: Path, segment: int) -> dict[str, Any] | None:
        """The shepherd's pid file of a segment, if the daemon's user wrote it."""
        info = _read_json(launch.pid_file(job_dir, segment), os.geteuid())
        return info if info is not None and isinstance(info.get("pid"), int) else None

    def remove_cgroup(self, path: str) -> None:
        cgroup.remove(Path(path), timeout=0.0)

    def unstarted(self, job_dir: str, segment: int) -> None:
        """A segment whose shepherd never ran its job: the cgroups made for it before its fork are removed."""
        birth.remove_named(cgroup.job_name(job_dir, segment))

    def confinement(self, max_processes: int) -> list[str]:
        """How jobs are confined on this host (:mod:`.confine`), found once and inherited by the shepherds."""
        return confine.setup().lines(max_processes)

    def make_private(self, base: str, job_id: int, uid: int, gid: int, host: str, ncpus: int, ranks: int) -> Private:
        """A job's private directory for one start (:mod:`.jobtmp`): named now (a random name, recorded with the
        start), made by :meth:`begin` once the start is committed, so that a daemon killed in between leaves
        none that a restarted one does not know of.  OSError if its base cannot be used."""
        if not os.path.isdir(base):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), base)
        root = jobtmp.name_for(base, job_id)
        self.unmade[root] = (base, job_id, uid, gid, host, ncpus, ranks)
        return jobtmp.layout(root)


@dataclass
class Stub:
    """An executor that runs nothing: ``started`` lists the launches; :meth:`end` makes a job's shepherd exit."""

    started: list[launch.Launch] = field(default_factory=list)
    signals: list[tuple[int, int]] = field(default_factory=list)  # (job id, signal)
    exits: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)  # shepherd pid -> job id
    next_pid: int = 1 << 22

    def start(self) -> None:
        pass

    def begin(self, spec: launch.Launch) -> tuple[int, int | None] | None:
        return self.spawn(spec)

    def replies(self, block: bool = False) -> list[tuple[launch.Launch, tuple[int, int | None] | OSError]]:
        return []

    def spawn(self, spec: launch.Launch) -> tuple[int, int | None]:
        self.started.append(spec)
        self.next_pid += 1
        self.pids[self.next_pid] = spec.job_id
        return self.next_pid, 0

    def ended(self) -> list[tuple[int, int]]:
        return []

    def watch(self, job_id: int, pid: int) -> bool:
        return pid in self.pids

    def unwatch(self, pid: int) -> None:
        self.pids.pop(pid, None)

    def signal(self, shepherd: int, where: Where, sig: int) -> None:
        self.signals.append((self.pids.get(shepherd, -1), sig))

    def signal_shell(self, shepherd: int, where: Where, sig: int) -> None:
        self.signals.append((self.pids.get(shepherd, -1), sig))

    def set_affinity(self, shepherd: int, where: Where, cpus: set[int]) -> None:
        pass

    def alive(self, pid: int, ticks: int | None) -> bool:
        return pid in self.pids and not any(k[0] == self.pids[pid] for k in self.exits)

    def exit_info(self, job_dir: Path, segment: int) -> dict[str, Any] | None:
        return self.exits.get((int(Path(job_dir).name), segment))

    def pid_info(self, job_dir: Path, segment: int) -> dict[str, Any] | None:
        return None

    def remove_cgroup(self, path: str) -> None:
        pass

    def unstarted(self, job_dir: str, segment: int) -> None:
        pass

    def confinement(self, max_processes: int) -> list[str]:
        return []

    def make_private(self, base: str, job_id: int, uid: int, gid: int, host: str, ncpus: int, ranks: int) -> Private:
        return jobtmp.layout(f"{base}/{jobtmp.PREFIX}{job_id}.stub")  # named, never made

    def end(self, job_id: int, segment: int, **result: Any) -> None:
        """Let segment ``segment`` of job ``job_id`` end with ``result`` (``exit_code``, ``signal``, ``end``)."""
        self.exits[(job_id, segment)] = result
