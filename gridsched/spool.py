"""The spool directory: where requests arrive and the daemon keeps its state.

Layout (all under the spool root)::

    incoming/     requests from commands, one JSON file each, written atomically
    quarantine/   request files that could not be read, with a .why beside each
    jobs/ID/      per job: script, checkpoint/, shepherd pid and exit files
    state.db      the job table (SQLite, written by the daemon only)
    seq           the last job id handed out (guarded by seq.lock)
    gschedd.lock  held by the running daemon (one per spool)
    gschedd.pid   the running daemon's pid and start time
    gschedd.sock  datagram socket: a command sends a byte to wake the daemon
    gschedd.log   the daemon's log

This module imports only the standard library: it is on the path of every
command.
"""

from __future__ import annotations

import _thread
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

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


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
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
        self.lock = self.root / "gschedd.lock"
        self.pidfile = self.root / "gschedd.pid"
        self.sock = self.root / "gschedd.sock"
        self.log = self.root / "gschedd.log"
        self.seq = self.root / "seq"

    def ensure(self) -> None:
        for d in (self.root, self.incoming, self.quarantine, self.jobs):
            d.mkdir(parents=True, exist_ok=True)

    def ensure_system(self) -> None:
        """Make the spool of a daemon that serves every user of the machine (run as root).

        ``incoming/`` is writable by all with the sticky bit (a user can
        remove only their own requests); ``state.db`` is readable by all;
        ``seq`` and ``seq.lock`` are writable by all, as every submitter
        takes a job id (:meth:`next_id` does not trust ``seq`` there); ``jobs/`` and ``quarantine/`` can be passed through but not
        listed.  Everything else is root's.
        """
        self.ensure()
        modes = {self.root: 0o755, self.incoming: 0o1777, self.quarantine: 0o711, self.jobs: 0o711}
        for d, m in modes.items():
            st = os.lstat(d)
            if not os.path.isdir(d) or os.path.islink(d):
                raise OSError(f"{d}: not a directory")
            if st.st_uid != os.geteuid():
                os.chown(d, os.geteuid(), os.getegid())
            os.chmod(d, m)
        for f, m in ((self.seq, 0o666), (self.root / "seq.lock", 0o666), (self.db, 0o644)):
            # created before the daemon opens them, so they (and state.db's -wal and -shm,
            # which SQLite creates with the database's mode) have these modes
            fd = os.open(f, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, m)
            try:
                os.fchmod(fd, m)
            finally:
                os.close(fd)

    def job_dir(self, job_id: int) -> Path:
        return self.jobs / str(job_id)

    # -- job ids -----------------------------------------------------------
    def next_id(self, count: int = 1) -> int:
        """Hand out the next job id, or the first of ``count`` consecutive ones (an exclusive lock on seq.lock guards the counter).

        The id is above the counter in ``seq`` and every submit request
        waiting in ``incoming/``.  In a spool shared by many users (one whose
        directory the caller cannot write: a system spool), or when ``seq``
        is missing or unreadable, it is above every id in the job table too,
        so a counter rolled back or spoiled by someone never gives an id
        twice; there ``seq`` is rewritten in place.
        """
        self.ensure()
        self.check_space()
        fd = os.open(self.root / "seq.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            shared = not os.access(self.root, os.W_OK)
            last = self._seq_value()
            if shared or last < 0:
                last = max(last, self._highest_in_table())
            nid = max(last, self._highest_request()) + 1
            data = f"{nid + count - 1}\n".encode()
            if shared or self._seq_shared():
                out = os.open(self.seq, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    os.ftruncate(out, 0)
                    os.pwrite(out, data, 0)
                finally:
                    os.close(out)
            else:
                atomic_write(self.seq, data)
            return nid
        finally:
            os.close(fd)

    def _seq_shared(self) -> bool:
        """Whether ``seq`` is writable by every user (a system spool): then it is rewritten in place, keeping its mode."""
        try:
            return bool(os.stat(self.seq).st_mode & 0o002)
        except OSError:
            return False

    def check_space(self) -> None:
        """``OSError`` (ENOSPC) if the spool's file system has too little room left for a request."""
        st = os.statvfs(self.root)
        if st.f_bavail * st.f_frsize < MIN_FREE:
            raise OSError(errno.ENOSPC, f"No space left on device (less than {MIN_FREE >> 10} KiB free)")

    def _seq_value(self) -> int:
        """The counter in ``seq``; -1 if it is missing or not a number."""
        try:
            text = self.seq.read_text().strip()
        except OSError:
            return -1
        return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else -1

    def _highest_request(self) -> int:
        # listed before the table is read: the daemon commits a job before removing its request
        try:
            names = os.listdir(self.incoming)
        except FileNotFoundError:
            return 0
        best = 0
        for n in names:
            if n.startswith(SUBMIT_PREFIX) and n.endswith(".json"):
                digits = n[len(SUBMIT_PREFIX) : -5]
                if digits.isascii() and digits.isdigit() and len(digits) < 19:
                    best = max(best, int(digits))
        return best

    def _highest_in_table(self) -> int:
        if not self.db.exists():
            return 0
        import sqlite3

        try:
            con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
            try:
                row = con.execute("SELECT MAX(id) FROM jobs").fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            return 0  # not created yet, or unreadable: seq and the requests still count
        return int(row[0] or 0)

    # -- requests ----------------------------------------------------------
    def put_request(self, name: str, payload: dict[str, Any]) -> Path:
        """Publish one request file atomically and wake the daemon."""
        self.ensure()
        path = self.incoming / name
        # private to the user: a submission holds the script and the environment
        atomic_write(path, json.dumps(payload, separators=(",", ":")).encode(), mode=0o600)
        self.wake()
        return path

    def submit(self, spec: dict[str, Any]) -> Path:
        return self.put_request(f"{SUBMIT_PREFIX}{spec['id']:010d}.json", {"type": "submit", "job": spec})

    def request(self, kind: str, **fields: Any) -> Path:
        """A control request (cancel, hold, release, reload, ...)."""
        name = f"{kind}-{time.time_ns()}-{os.getpid()}.json"
        return self.put_request(name, {"type": kind, **fields})

    def wake(self) -> None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.setblocking(False)
                s.sendto(b"!", str(self.sock))
        except OSError:
            pass  # no daemon, or it is busy: it rescans the spool anyway

    def pending_submits(self) -> list[dict[str, Any]]:
        """Jobs submitted but not yet taken in by the daemon (readable ones only)."""
        out = []
        try:
            names = sorted(n for n in os.listdir(self.incoming) if n.startswith(SUBMIT_PREFIX))
        except FileNotFoundError:
            return out
        for n in names:
            try:
                with open(self.incoming / n, "rb") as f:
                    req = json.loads(f.read(4 << 20))
                out.append(req["job"])
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                continue
        return out

    # -- the daemon ----------------------------------------------------------
    def daemon_info(self) -> dict[str, Any] | None:
        """``{"pid": ..., "started": ...}`` of the daemon holding this spool, or None."""
        try:
            fd = os.open(self.lock, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except PermissionError:
            info = self._pid_info()
            return info if _alive(info.get("pid")) else None
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

    def _pid_info(self) -> dict[str, Any]:
        try:
            info = json.loads(self.pidfile.read_text())
            if isinstance(info, dict):
                return info
        except (OSError, ValueError, RecursionError):
            pass
        return {"pid": None, "started": None}
