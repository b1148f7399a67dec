"""The spool directory: where requests arrive and the daemon keeps its state.

Layout (all under the spool root)::

    incoming/     requests from commands, one JSON file each, written atomically
    quarantine/   request files that could not be read, with a .why beside each
    jobs/ID/      per job: script, checkpoint/, shepherd pid and exit files
    state.db      the job table (SQLite, written by the daemon only); in system
                  mode a read-only copy the daemon publishes (see below)
    gschedd.lock  held by the running daemon (one per spool)
    gschedd.pid   the running daemon's pid and start time
    private/      system mode only: root's alone (0700), the daemon's live job
                  table (state.db) and its lock (gschedd.lock)
    gschedd.sock  datagram socket: a command sends a byte to wake the daemon
    gschedd.log   the daemon's log

A system daemon keeps the files it writes and locks where no user can open
them: a user who can open a file can lock it (a read lock on SQLite's
shared-memory index stops every write of the database's writer; a shared
``flock`` on the daemon's lock keeps the next daemon from starting).  The
commands read ``state.db``, a copy the daemon replaces by ``rename`` after its
writes and never opens again, so no lock on it reaches the daemon; they learn
whether a daemon runs from the root-written pid file and the process it names.

This module imports only the standard library: it is on the path of every
command.
"""

from __future__ import annotations

import _thread
import errno
import fcntl
import json
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

SUBMIT_PREFIX = "submit-"
MIN_FREE = 256 << 10  # bytes the spool's file system must have free to take a submission


def default_root() -> Path:
    env = os.environ.get("GRIDSCHED_SPOOL")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "gridsched"


def atomic_write(path: Path, data: bytes, mode: int = 0o644, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` so that readers see all of it or none of it.

    ``fsync`` makes it survive a power loss too; without it the file still
    survives the death of any process.  The temporary file is created new
    (``O_EXCL``), so a link planted under its name is never written through.
    An ``OSError`` (a full or read-only disk) leaves ``path`` as it was.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{_thread.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, mode)
    except FileExistsError:  # left by a process of the same pid that died, or planted
        os.unlink(tmp)
        fd = os.open(tmp, flags, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def sync_dir(path: Path) -> None:
    """fsync a directory: the names made and removed in it survive a power loss (``OSError`` if it cannot)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class IdTaken(Exception):
    """The new id a request was to bring is someone else's: choose another (:meth:`Spool.next_id`)."""


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:  # an open, one read (the file is one short line, read whole) and a close: no buffered file's extra calls
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 8192)
    except OSError:
        return None
    finally:
        os.close(fd)
    # the command name may hold spaces and parentheses: split after the last ')'
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def alive(pid: int, ticks: int | None) -> bool:
    """Whether ``pid`` is still the process that started at ``ticks`` (pids are reused)."""
    t = start_ticks(pid)
    if t is None:
        return False
    if ticks is not None and t != ticks:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        state = data[data.rfind(b")") + 2 : data.rfind(b")") + 3]
        return state != b"Z"
    except OSError:
        return False


def _alive(pid: Any, ticks: Any = None, owner: int | None = None) -> bool:
    """Whether ``pid`` runs; with ``ticks`` (and ``owner``), whether it is still the process that started then
    (as ``owner``): a pid reused by another process is not the daemon."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if isinstance(ticks, int) and not isinstance(ticks, bool):
        if not alive(pid, ticks):
            return False
        try:
            return owner is None or os.stat(f"/proc/{pid}").st_uid == owner
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    return True


class Spool:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        self.incoming = self.root / "incoming"
        self.quarantine = self.root / "quarantine"
        self.jobs = self.root / "jobs"
        self.db = self.root / "state.db"
        self.private = self.root / "private"
        self.pidfile = self.root / "gschedd.pid"
        self.sock = self.root / "gschedd.sock"
        self.log = self.root / "gschedd.log"

    @property
    def system(self) -> bool:
        """Whether the spool is laid out for a system daemon (it has the root-only ``private/``)."""
        return self.private.is_dir()

    @property
    def lock(self) -> Path:
        """The file the running daemon holds locked: root's alone in a system spool."""
        return (self.private if self.system else self.root) / "gschedd.lock"

    @property
    def live_db(self) -> Path:
        """The job table the daemon writes: ``state.db`` itself, or in a system spool its private original
        (``state.db`` is then the copy the daemon publishes for the commands)."""
        return self.private / "state.db" if self.system else self.db

    def ensure(self) -> None:
        for d in (self.root, self.incoming, self.quarantine, self.jobs):
            d.mkdir(parents=True, exist_ok=True)

    def ensure_system(self) -> None:
        """Make the spool of a daemon that serves every user of the machine (run as root).

        ``incoming/`` is writable by all with the sticky bit (a user can
        remove or replace only their own requests); ``state.db``, the copy of
        the job table the daemon publishes, is readable by all; ``jobs/`` and
        ``quarantine/`` can be passed through but not listed; ``private/``
        (the live job table and the daemon's lock) is root's alone.
        Everything else is root's, and nothing in it is writable by users.
        Job ids need no shared counter: a new id is taken by creating its
        request's name (:meth:`publish_new`).
        """
        self.ensure()
        self.private.mkdir(mode=0o700, exist_ok=True)
        modes = {self.root: 0o755, self.incoming: 0o1777, self.quarantine: 0o711, self.jobs: 0o711, self.private: 0o700}
        for d, m in modes.items():
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                st = os.fstat(fd)
                if st.st_uid != os.geteuid() or st.st_gid != os.getegid():
                    os.fchown(fd, os.geteuid(), os.getegid())
                os.fchmod(fd, m)
            finally:
                os.close(fd)
        for old in (self.root / "seq", self.root / "seq.lock"):  # the shared counter of earlier versions
            try:
                os.unlink(old)
            except FileNotFoundError:
                pass

    def job_dir(self, job_id: int) -> Path:
        return self.jobs / str(job_id)

    # -- job ids -----------------------------------------------------------
    def next_id(self) -> int:
        """The id a new submission should try: above every id in the job and reservation tables and every
        new id waiting in ``incoming/`` (ids more than half the daemon's window beyond those are ignored).

        The id is only a candidate: it is taken by :meth:`publish_new`, which
        fails with :class:`IdTaken` if someone took it meanwhile.
        """
        from gridsched.protocol.requests import ID_WINDOW, id_of_name

        self.ensure()
        self.check_space()
        try:  # listed before the tables are read: the daemon commits a job before removing its request
            names = os.listdir(self.incoming)
        except FileNotFoundError:
            names = []
        base = self.highest_id()
        best = base
        # names waiting up to half the daemon's window are counted: the daemon accepts ids up to ID_WINDOW beyond
        # the highest it has (never below ``base``), so the id chosen is never one it drops as too far, whatever
        # name someone put at the window's edge and took away again before the daemon read it
        for n in names:
            i = id_of_name(n)
            if i is not None and best < i <= base + ID_WINDOW // 2:
                best = i
        return best + 1

    def highest_id(self) -> int:
        """The highest job, reservation or request id the daemon has recorded (0 for none).

        ``OSError`` if the job table exists but cannot be read: an id chosen
        without it could be someone's.
        """
        if not self.db.exists():
            return 0
        import sqlite3

        from gridsched.protocol.state import connect_ro

        try:
            con = connect_ro(self.db)
            try:
                best = 0
                for table in ("jobs", "reservations", "ids"):
                    try:
                        row = con.execute(f"SELECT MAX(id) FROM {table}").fetchone()
                    except sqlite3.OperationalError:
                        continue  # an older table set
                    best = max(best, int(row[0] or 0))
                return best
            finally:
                con.close()
        except sqlite3.Error as e:
            raise OSError(errno.EIO, f"cannot read the job table {self.db}: {e}") from None

    def check_space(self) -> None:
        """``OSError`` (ENOSPC) if the spool's file system has too little room left for a request."""
        st = os.statvfs(self.root)
        if st.f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, "Read-only file system")
        if st.f_bavail * st.f_frsize < MIN_FREE:
            raise OSError(errno.ENOSPC, f"No space left on device (less than {MIN_FREE >> 10} KiB free)")

    def claim_ids(self, count: int) -> list[int]:
        """Take ``count`` new ids for the daemon itself (the tasks of an array, the pieces of a split job).

        Each is taken as a submission's is: by creating its request name,
        here as an empty file, which the daemon removes once the ids are
        committed (:meth:`release_claims`).  Consecutive where nobody else
        took one meanwhile.
        """
        from gridsched.protocol.requests import id_name

        out: list[int] = []
        nid = self.next_id()
        while len(out) < count:
            try:
                fd = os.open(
                    self.incoming / id_name(nid),
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                )
                os.close(fd)
                out.append(nid)
            except FileExistsError:
                pass
            nid += 1
        return out

    def release_claims(self, ids: list[int]) -> None:
        from gridsched.protocol.requests import id_name

        for i in ids:
            try:
                os.unlink(self.incoming / id_name(i))
            except FileNotFoundError:
                pass

    # -- requests ----------------------------------------------------------
    def publish(self, name: str, data: bytes) -> Path:
        """Publish one request file atomically (private to its writer: it may hold a script and an
        environment) and wake the daemon."""
        self.ensure()
        path = self.incoming / name
        atomic_write(path, data, mode=0o600)
        self.wake()
        return path

    def publish_new(self, name: str, data: bytes) -> Path:
        """Publish a request that brings a new id: its name is taken only if nobody has it
        (:class:`IdTaken` otherwise), so the id is the writer's."""
        self.ensure()
        path = self.incoming / name
        # the temporary name tells nobody which id is about to be taken (someone watching incoming/ could take it
        # first, again and again)
        tmp = self.incoming / f".new-{os.urandom(12).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.link(tmp, path)  # fails if the name exists: never replaces someone's request
            except FileExistsError:
                raise IdTaken(name) from None
            finally:
                os.unlink(tmp)
            # the daemon may start on it while it is made durable and its id checked: a request whose id turns
            # out taken is withdrawn below, and the daemon refuses it as it would have at its next scan
            self.wake()
            try:
                # before the id is reported: the data, the new name and the temporary one gone, in one sync on
                # the usual file systems (ext4, XFS: the file's sync carries the names made and removed before
                # it), and the directory's sync that POSIX asks for the names, with little left to do
                os.fsync(fd)
                sync_dir(self.incoming)
                taken = self._taken_meanwhile(path, data)
            except OSError:
                path.unlink(missing_ok=True)  # cannot tell whether the id is ours: withdrawn
                raise
        finally:
            os.close(fd)
        if taken:
            raise IdTaken(name)
        return path

    def _taken_meanwhile(self, path: Path, data: bytes) -> bool:
        """Whether the id of ``path`` was taken in from someone else's request between choosing and
        publishing it; then the request is withdrawn (the daemon would refuse it as a taken id).  The
        daemon may already have taken in this very request (``data``): the id is then ours."""
        from gridsched.protocol.requests import id_of_name

        nid = id_of_name(path.name)
        digest = None if nid is None else self.id_digest(nid)
        if digest is None:
            return False  # the common case: nobody has the id (a hash is loaded only to compare)
        try:  # CPython's own SHA-256 module: hashlib would load OpenSSL too, which costs more than this submission
            from _sha256 import sha256  # type: ignore[import-not-found]
        except ImportError:
            from hashlib import sha256

        if digest == sha256(data).hexdigest():
            return False
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass  # already read and refused
        return True

    def id_digest(self, nid: int) -> str | None:
        """The digest of the request the daemon took id ``nid`` from ('' where it keeps none: a job or a
        reservation recorded without it), or None if the daemon has not recorded ``nid``."""
        if not self.db.exists():
            return None
        import sqlite3

        from gridsched.protocol.state import connect_ro

        try:
            con = connect_ro(self.db)
            try:
                # one read transaction for the tables read below: each statement of a connection in autocommit
                # mode reads the table as it is then, and the daemon's commit of this very id (its row in ids
                # and its job) falling between the two would show the job without the row that says it is ours
                con.execute("BEGIN")
                try:
                    row = con.execute("SELECT digest FROM ids WHERE id = ?", (nid,)).fetchone()
                    if row is not None:
                        return str(row[0] or "")
                except sqlite3.OperationalError:
                    pass
                for table in ("jobs", "reservations"):
                    try:
                        if con.execute(f"SELECT 1 FROM {table} WHERE id = ?", (nid,)).fetchone():
                            return ""
                    except sqlite3.OperationalError:
                        continue
                return None
            finally:
                con.close()
        except sqlite3.Error as e:
            raise OSError(errno.EIO, f"cannot read the job table {self.db}: {e}") from None

    def submit(self, spec: dict[str, Any]) -> Path:
        """Publish the submission of the job spec ``spec`` under its id (:class:`IdTaken` if that is taken).

        The commands go through :func:`gridsched.submission.submit.submit`, which also
        checks the request as the daemon will; this is for programs that
        build specs themselves (benchmarks, tests).
        """
        from gridsched.protocol.requests import encode, id_name

        return self.publish_new(id_name(spec["id"]), encode({"type": "submit", "job": spec}))

    def put_request(self, name: str, payload: dict[str, Any]) -> Path:
        """Publish a request object under ``name`` as it is (no checks: for tests and benchmarks)."""
        return self.publish(name, json.dumps(payload, separators=(",", ":")).encode())

    def request(self, kind: str, **fields: Any) -> Path:
        """A control request (cancel, hold, release, reload, ...)."""
        from gridsched.protocol.requests import encode

        name = f"{kind}-{time.time_ns()}-{os.getpid()}.json"
        return self.publish(name, encode({"type": kind, **fields}))

    def wake(self) -> None:
        # _socket, not socket: the commands send this one datagram, and building the socket module's
        # enums would add a few milliseconds to their start.
        import _socket

        try:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
            try:
                s.setblocking(False)
                s.sendto(b"!", str(self.sock))
            finally:
                s.close()
        except OSError:
            pass  # no daemon, or it is busy: it rescans the spool anyway

    def pending_submits(self) -> list[dict[str, Any]]:
        """Jobs submitted but not yet taken in by the daemon (those the caller may read)."""
        return self.pending("submit", "job")

    def pending(self, kind: str, key: str) -> list[dict[str, Any]]:
        """The objects ``key`` of the requests of ``kind`` that bring new ids and wait in ``incoming/`` (those
        the caller may read: a user reads their own), by id."""
        out: list[dict[str, Any]] = []
        try:
            names = sorted(n for n in os.listdir(self.incoming) if n.startswith(SUBMIT_PREFIX))
        except FileNotFoundError:
            return out
        for n in names:
            try:
                fd = os.open(self.incoming / n, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size > 8 << 20 or st.st_size == 0:
                    continue  # a FIFO or device is never read: a reader would block
                with os.fdopen(os.dup(fd), "rb") as f:
                    req = json.loads(f.read(8 << 20))
                obj = req.get(key) if req.get("type") == kind else None
                if isinstance(obj, dict):
                    obj["uid"], obj["user"] = st.st_uid, _user_name(st.st_uid)  # the writer, not its claim
                    out.append(obj)
            except (OSError, ValueError, TypeError, AttributeError, RecursionError):
                continue
            finally:
                os.close(fd)
        return out

    # -- the daemon ----------------------------------------------------------
    def daemon_info(self) -> dict[str, Any] | None:
        """``{"pid": ..., "started": ...}`` of the daemon holding this spool, or None.

        Whoever may open the lock asks it (a daemon holds it while it runs).
        Others (users of a system spool) read the pid file, which only the
        daemon writes, and check that the process it names is still that one
        (its start time) and root's: no user can fake a running daemon, and
        none can hide one.
        """
        try:
            fd = os.open(self.lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except PermissionError:
            info = self._pid_info()
            return info if _alive(info.get("pid"), info.get("ticks"), self._pid_owner()) else None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                return self._pid_info()
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def _pid_owner(self) -> int | None:
        """The owner the daemon of this spool runs as: the owner of the spool root (root for a system spool)."""
        try:
            return os.stat(self.root).st_uid
        except OSError:
            return None

    def _pid_info(self) -> dict[str, Any]:
        try:
            info = json.loads(self.pidfile.read_text())
            if isinstance(info, dict):
                return info
        except (OSError, ValueError, RecursionError):
            pass
        return {"pid": None, "started": None}


def spawn_daemon(spool: Spool, config_file: str | None) -> subprocess.Popen[bytes]:
    """Start ``gschedd run`` on ``spool`` in the background, detached; return the process.

    The daemon's output goes to ``spool/gschedd.log``.  This does not wait for
    it to take the spool lock.
    """
    import subprocess
    import sys

    spool.ensure()
    cmd = [sys.executable, "-m", "gridsched.cli.gschedd", "run", "--spool", str(spool.root)]
    if config_file:
        cmd += ["--config", str(Path(config_file).absolute())]
    env = dict(os.environ)
    if env.get("GRIDSCHED_CONFIG"):  # the daemon runs in /: a relative path would change meaning
        env["GRIDSCHED_CONFIG"] = os.path.abspath(env["GRIDSCHED_CONFIG"])
    with open(os.devnull, "rb") as devnull, open(spool.log, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdin=devnull,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    return proc
