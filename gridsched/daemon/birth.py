"""A shepherd born in its job's cgroup v2: the job's first instruction does not wait for a move into it.

A process that enters a cgroup v2 (``cgroup.procs``) takes, for writing, the
lock the kernel holds over every process's cgroups, and taking it first waits
for an RCU grace period (8-13 ms on the development machine) unless another
move took it within about a grace period before: on an idle machine every
start paid it, on the job's path.  A cgroup v1 is entered through ``tasks``
(the caller's one thread), which takes no part of that lock.

So where the shepherd spawns its job with everything inherited (``launch._direct``),
its parent (the shepherds' starter, or the daemon where there is none) makes
the job's cgroups before the fork (:func:`ahead`, what the shepherd made
itself before) and forks it straight into the job's cgroup v2: ``clone3``
with ``CLONE_INTO_CGROUP`` (Linux 5.7), which takes only the reading side of
that lock.  The shepherd enters the cgroup v1 ones through ``tasks``, spawns
the job (born there as well) and leaves them, the cgroup v2 included: that
move waits, if it must, while the job runs.  Where ``clone3`` cannot do this
(an older kernel, a sandbox that refuses the call), the parent forks as
before and the shepherd enters the cgroup it was meant to be born in.

The child of :func:`fork_into` is a copy of a Python process made without
the C library's ``fork``: the shepherd runs no threads, takes no lock another
thread held, and uses nothing that reads its thread id from the C library
(which still holds the parent's; ``raise`` would signal the parent), as
``posix_spawn`` and every system call it makes do not.

Standard library only; runs in the shepherds' starter.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path
from typing import Any

from gridsched.daemon import cgroup, confine

SYS_CLONE3 = 435  # the same number on every architecture Linux gives clone3
CLONE_INTO_CGROUP = 0x200000000


class _CloneArgs(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags",
            "pidfd",
            "child_tid",
            "parent_tid",
            "exit_signal",
            "stack",
            "stack_size",
            "tls",
            "set_tid",
            "set_tid_size",
            "cgroup",
        )
    ]


_syscall: Any
try:
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
    _syscall.restype = ctypes.c_long
except (OSError, AttributeError):  # pragma: no cover - every Linux C library has syscall
    _syscall = None

_refused = False  # clone3 into a cgroup failed once here: the parent forks as before from then on


def ahead(name: str, cpus: frozenset[int], max_processes: int) -> tuple[list[Path], list[str], Path | None]:
    """Make the job cgroups ``name`` of a segment now (:func:`.confine.create`): their paths, what could not be
    done, and the one of them to be born in (the cgroup v2; None where there is none)."""
    s = confine.setup()
    paths, notes = confine.create(s, name, cpus, max_processes)
    if _refused or _syscall is None:
        return paths, notes, None
    v2 = {p.base / name for p in (s.track, s.pids, s.cpuset) if p is not None and p.version == 2}
    return paths, notes, next((p for p in paths if p in v2), None)


def fork_into(path: Path) -> int:
    """``fork`` with the child born in the cgroup v2 at ``path``: the child's pid in the parent, 0 in the child;
    -1 where it cannot be done here (nothing was forked: the caller forks as before)."""
    global _refused
    threads = sys.modules.get("threading")
    if _syscall is None or (threads is not None and threads.active_count() > 1):
        return -1  # a copy made without the C library's fork is safe only of a process of one thread
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return -1
    try:
        args = _CloneArgs(flags=CLONE_INTO_CGROUP, exit_signal=signal.SIGCHLD, cgroup=fd)
        pid = int(_syscall(ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args))))
    finally:
        os.close(fd)
    if pid < 0:
        _refused = True  # ENOSYS (before Linux 5.3, or a sandbox), E2BIG/EINVAL (before 5.7)
        return -1
    return pid


def go(fd: int) -> bool:
    """Whether the daemon said go on ``fd`` (the read end of the pipe that came with the launch; closed here):
    it writes ``g`` once the job's private directory is made, ``n`` if it cannot be; a pipe closed unsaid (the
    daemon died) is a no.  No pipe (-1): go."""
    if fd < 0:
        return True
    try:
        return os.read(fd, 1) == b"g"
    except OSError:
        return False
    finally:
        os.close(fd)


def undo(paths: list[Path], born: Path | None) -> None:
    """Remove the cgroups :func:`ahead` made (a shepherd that runs no job): it leaves the one it was born in."""
    if born is not None:
        try:
            cgroup.join(born.parent)
        except OSError:
            pass
    for path in paths:
        cgroup.remove(path, timeout=0.5)


def remove_named(name: str) -> None:
    """Remove the empty job cgroups ``name`` of a segment whose shepherd never ran its job (it died before it was
    armed, with its starter): made ahead of its fork, nothing else removes them."""
    s = confine.setup()
    for place in dict.fromkeys(p for p in (s.track, s.pids, s.cpuset) if p is not None):
        cgroup.remove(place.base / name, timeout=0.0)
