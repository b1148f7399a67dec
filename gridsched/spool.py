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

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

SUBMIT_PREFIX = "submit-"


def default_root() -> Path:
    env = os.environ.get("GRIDSCHED_SPOOL")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "gridsched"


def atomic_write(path: Path, data: bytes, mode: int = 0o644, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` so that readers see all of it or none of it.

    ``fsync`` makes it survive a power loss too; without it the file still
    survives the death of any process.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)


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

    def job_dir(self, job_id: int) -> Path:
        return self.jobs / str(job_id)

    # -- job ids -----------------------------------------------------------
    def next_id(self) -> int:
        """Hand out the next job id (an exclusive lock on seq.lock guards the counter)."""
        self.ensure()
        fd = os.open(self.root / "seq.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                last = int(self.seq.read_text().strip() or 0)
            except (FileNotFoundError, ValueError):
                last = 0
            nid = last + 1
            atomic_write(self.seq, f"{nid}\n".encode())
            return nid
        finally:
            os.close(fd)

    # -- requests ----------------------------------------------------------
    def put_request(self, name: str, payload: dict[str, Any]) -> Path:
        """Publish one request file atomically and wake the daemon."""
        self.ensure()
        path = self.incoming / name
        atomic_write(path, json.dumps(payload, separators=(",", ":")).encode())
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
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    # -- the daemon ----------------------------------------------------------
    def daemon_info(self) -> dict[str, Any] | None:
        """``{"pid": ..., "started": ...}`` of the daemon holding this spool, or None."""
        try:
            fd = os.open(self.lock, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                try:
                    return json.loads(self.pidfile.read_text())
                except (OSError, ValueError):
                    return {"pid": None, "started": None}
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)
