"""Signalling the processes of a job, and telling processes apart after a restart.

A job's processes are the members of its cgroups (:mod:`.confine`) and the
processes below its shepherd, a child subreaper.  Each is signalled through a
pidfd after it is checked to be one of them, so a signal never reaches a
process that merely took over a number the daemon remembered: a pid, or a
process group id (the daemon never calls ``killpg``: after a restart, the
group a job had may be anybody's).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gridsched.protocol.spool import alive, start_ticks  # noqa: F401 - the daemon's modules find them here too

if TYPE_CHECKING:
    import psutil

# psutil is imported where it is used: the shepherds' starter (launch.py) loads this module, and every page it
# has is copied for each shepherd and each job's first process


def tree(shepherd: int) -> list[psutil.Process]:
    """Every process below the job's shepherd.

    The shepherd is a child subreaper, so processes that left the job's
    process group or session, or whose parent exited, are still found here.
    """
    import psutil

    try:
        return psutil.Process(shepherd).children(recursive=True)
    except psutil.Error:
        return []


@dataclass(frozen=True, slots=True)
class Job:
    """What the daemon knows of the processes of a running job segment: its shepherd (and the daemon's pidfd
    of it, or its start time), and from the shepherd's pid file the job's first process (its batch shell, the
    shepherd's child, which leads the job's process group) with its start time, and the job's cgroups."""

    shepherd: int
    shepherd_fd: int | None = None
    shepherd_ticks: int | None = None
    leader: int | None = None
    leader_ticks: int | None = None
    cgroups: tuple[str, ...] = ()


def shepherd_alive(job: Job) -> bool:
    """Whether the job's shepherd is still the process the daemon started (through its pidfd where there is
    one: a pid may be another process's once the shepherd is reaped)."""
    if job.shepherd_fd is not None:
        try:
            signal.pidfd_send_signal(job.shepherd_fd, 0)
            return True
        except ProcessLookupError:
            return False
        except OSError:
            pass
    return alive(job.shepherd, job.shepherd_ticks)


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rfind(b")") + 2 :].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def below(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is a descendant of ``ancestor`` (its parents, read from /proc, lead to it)."""
    for _ in range(4096):
        parent = _ppid(pid)
        if parent is None or parent <= 1:
            return False
        if parent == ancestor:
            return True
        pid = parent
    return False


def in_cgroups(pid: int, names: set[str]) -> bool:
    """Whether ``pid`` is in a cgroup named one of ``names`` (the job's: unique per spool, job and segment)."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    return any(line.rpartition("/")[2] in names for line in lines)


def members(job: Job) -> set[int]:
    out: set[int] = set()
    for path in job.cgroups:
        try:
            with open(f"{path}/cgroup.procs") as f:
                out.update(int(p) for p in f.read().split())
        except (OSError, ValueError):
            pass
    return out


def job_pids(job: Job) -> list[int]:
    """The processes of the job: the members of its cgroups and the processes below its shepherd (while the
    shepherd lives), never the shepherd or this process."""
    pids = members(job)
    if shepherd_alive(job):
        pids.update(p.pid for p in tree(job.shepherd))
    pids.discard(job.shepherd)
    pids.discard(os.getpid())
    return sorted(pids)


def _send(pid: int, sig: int, is_job: Callable[[int], bool]) -> bool:
    """Send ``sig`` to ``pid`` if it is a process of the job by ``is_job``: through a pidfd opened before the
    check, so the signal reaches the process that was checked or none (a pid is reused; a pidfd is not)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfds (Linux before 5.3): checked, then sent by number
        if not is_job(pid):
            return False
        try:
            os.kill(pid, sig)
            return True
        except OSError:
            return False
    try:
        if not is_job(pid):
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def signal_job(job: Job, sig: int) -> int:
    """Send ``sig`` once to every process of the job (:func:`job_pids`), each checked to be in the job's
    cgroup or below its live shepherd when the signal is sent; a SIGKILL is also ``cgroup.kill`` of the job's
    cgroup v2.  No process group is signalled by number.  How many processes were sent it."""
    names = {os.path.basename(c) for c in job.cgroups}
    up = shepherd_alive(job)
    # cgroup.kill kills every member: not while the shepherd is one (it spawns the job from inside the job's
    # cgroups, and leaves them at once: launch.py); the members are then killed one by one below
    if sig == signal.SIGKILL and not (up and job.shepherd in members(job)):
        for path in job.cgroups:
            try:
                with open(f"{path}/cgroup.kill", "w") as f:
                    f.write("1")
            except OSError:
                pass  # not cgroup v2, or a kernel before 5.14: the members are killed one by one below

    def is_job(pid: int) -> bool:
        return (bool(names) and in_cgroups(pid, names)) or (up and below(pid, job.shepherd))

    return sum(_send(pid, sig, is_job) for pid in job_pids(job))


def signal_shell(job: Job, sig: int) -> bool:
    """Send ``sig`` to the job's batch shell alone (``sbatch --signal B:``): the shepherd's child, if it is still
    the process the shepherd started (its start time) and its shepherd is alive."""
    leader = job.leader
    if not leader or not shepherd_alive(job):
        return False

    def is_job(pid: int) -> bool:
        ticks = start_ticks(pid)
        return (
            _ppid(pid) == job.shepherd and ticks is not None and (job.leader_ticks is None or ticks == job.leader_ticks)
        )

    return _send(leader, sig, is_job)


def kill_tree(pid: int) -> None:
    """SIGKILL every process below ``pid``."""
    import psutil

    for p in tree(pid):
        try:
            p.kill()
        except psutil.Error:
            pass


def set_affinity(job: Job, cpus: set[int]) -> None:
    """Re-pin every process of a job (a suspended job resumed on other cores): its cpuset cgroups first, then
    the affinity of each thread."""
    import psutil

    from gridsched.daemon.confine import set_cpus

    set_cpus(job.cgroups, cpus)
    for pid in job_pids(job):
        try:
            for t in psutil.Process(pid).threads():
                try:
                    os.sched_setaffinity(t.id, cpus)
                except OSError:
                    pass
        except psutil.Error:
            pass


SIGNALS = {s.name.removeprefix("SIG"): s for s in signal.Signals}
