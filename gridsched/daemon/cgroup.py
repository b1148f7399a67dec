"""Memory limits of jobs through cgroups, where the host lets the daemon use them.

A job submitted with ``--mem`` runs in a cgroup of its own, created by its
shepherd inside the daemon's own cgroup (and removed after it), with the limit set
(``memory.max`` on cgroup v2, ``memory.limit_in_bytes`` on v1); the kernel
kills the job's processes when they need more.  After the job, the shepherd
reads the cgroup's OOM-kill count and removes it.  Where no memory cgroup can
be written (an unprivileged daemon, a container without delegation), the job
gets ``RLIMIT_AS`` instead: a cap on its address space, which a program sees
as a failed allocation.

Standard library only; everything here may run in a forked shepherd.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

V2_MOUNTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
V1_MOUNT = "/sys/fs/cgroup/memory"


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """A memory cgroup hierarchy the daemon can create job cgroups in."""

    version: int  # 1 or 2
    base: Path  # the daemon's own cgroup: job cgroups are made in it

    @property
    def limit_file(self) -> str:
        return "memory.max" if self.version == 2 else "memory.limit_in_bytes"

    def describe(self) -> str:
        return f"cgroup v{self.version} ({self.base})"


def _own_path(controller: str | None) -> str | None:
    """This process's cgroup path for ``controller`` (None: the v2 unified line)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, _, rest = line.partition(":")
        ctrls, _, path = rest.partition(":")
        if controller is None and hid == "0" and ctrls == "":
            return path
        if controller is not None and controller in ctrls.split(","):
            return path
    return None


def _v2() -> Hierarchy | None:
    own = _own_path(None)
    if own is None:
        return None
    for mount in V2_MOUNTS:
        root = Path(mount)
        try:
            if "memory" not in (root / "cgroup.controllers").read_text().split():
                continue
        except OSError:
            continue
        base = root / own.lstrip("/")
        try:
            if "memory" not in (base / "cgroup.subtree_control").read_text().split():
                # refused while the daemon's cgroup holds processes (the "no internal
                # processes" rule): such a host needs the daemon started in a delegated subtree
                (base / "cgroup.subtree_control").write_text("+memory")
        except OSError:
            continue
        if os.access(base, os.W_OK):
            return Hierarchy(2, base)
    return None


def _v1() -> Hierarchy | None:
    own = _own_path("memory")
    if own is None or not Path(V1_MOUNT, "memory.limit_in_bytes").exists():
        return None
    base = Path(V1_MOUNT) / own.lstrip("/")
    if not (base / "memory.limit_in_bytes").exists() or not os.access(base, os.W_OK):
        return None
    return Hierarchy(1, base)


def hierarchy() -> Hierarchy | None:
    """The memory hierarchy job cgroups can be made in (v2 preferred), or None."""
    return _v2() or _v1()


def mechanism() -> str:
    """How ``--mem`` is enforced on this host, for people (``gctl info``)."""
    h = hierarchy()
    if h is not None:
        return f"{h.describe()}: each job with --mem in its own cgroup"
    return "RLIMIT_AS (no writable memory cgroup): caps a job's address space"


def job_name(job_dir: str, segment: int) -> str:
    """The cgroup name of a job segment: unique per spool, job and segment."""
    return f"gridsched-{hashlib.sha1(job_dir.encode()).hexdigest()[:12]}-{segment}"


def create(h: Hierarchy, name: str, limit: int) -> Path | None:
    """Make the cgroup ``name`` with a memory limit of ``limit`` bytes; None if it cannot be made."""
    path = h.base / name
    try:
        path.mkdir(exist_ok=True)
        (path / h.limit_file).write_text(str(limit))
        if h.version == 2:
            try:
                (path / "memory.swap.max").write_text("0")  # over the limit means killed, not swapped
            except OSError:
                pass
        else:
            try:
                (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            except OSError:
                pass
    except OSError:
        remove(path)
        return None
    return path


def join(path: Path, pid: int = 0) -> None:
    """Move ``pid`` (0: the calling process, which has one thread: a shepherd, a job's forked process) into the
    cgroup at ``path``; OSError if it cannot.

    The calling process enters a cgroup v1 through ``tasks`` (its one thread, the whole process): a move of the
    caller's own thread takes no part of the kernel's lock over every process's cgroups, whose taking first
    waits for an RCU grace period (11-13 ms on the development machine), as any move through ``cgroup.procs``
    (v1 and v2) does.  What it then starts is born in the cgroup."""
    if pid == 0:
        try:
            fd = os.open(path / "tasks", os.O_WRONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            pass  # cgroup v2
        else:
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
            return
    fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)  # one write: no buffered file's extra calls
    try:
        os.write(fd, str(pid or os.getpid()).encode())
    finally:
        os.close(fd)


def oom_kills(path: Path) -> int:
    """How many processes the kernel killed in the cgroup for want of memory."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (path / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


def peak(path: Path) -> int | None:
    """The most memory the cgroup's processes held at once, in bytes (``memory.peak`` on v2,
    ``memory.max_usage_in_bytes`` on v1), or None where the kernel does not keep it."""
    for name in ("memory.peak", "memory.max_usage_in_bytes"):
        try:
            text = (path / name).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def members(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove(path: Path, timeout: float = 2.0) -> bool:
    """Remove the cgroup at ``path`` once it is empty (waiting up to ``timeout``)."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
