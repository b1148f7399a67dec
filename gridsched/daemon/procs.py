"""Signalling a job's whole process tree, and telling processes apart after a restart."""

from __future__ import annotations

import os
import signal

import psutil


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
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


def tree(shepherd: int) -> list[psutil.Process]:
    """Every process below the job's shepherd.

    The shepherd is a child subreaper, so processes that left the job's
    process group or session, or whose parent exited, are still found here.
    """
    try:
        return psutil.Process(shepherd).children(recursive=True)
    except psutil.Error:
        return []


def signal_job(shepherd: int, pgid: int | None, sig: int) -> None:
    """Send ``sig`` to the job's process group and every process below its shepherd."""
    if pgid:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    for p in tree(shepherd):
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def signal_once(shepherd: int, sig: int) -> None:
    """Send ``sig`` once to every process below the job's shepherd (a signal the job may trap and count:
    not a second time through the process group as :func:`signal_job` does)."""
    for p in tree(shepherd):
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def signal_shell(shepherd: int, pgid: int | None, sig: int) -> None:
    """Send ``sig`` to the job's batch shell alone: the leader of its process group, the shepherd's child."""
    if not pgid:
        return
    try:
        if psutil.Process(pgid).ppid() != shepherd:
            return  # the script has ended (and its pid may be another process's now)
        os.kill(pgid, sig)
    except (psutil.Error, OSError):
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL every process below ``pid``."""
    for p in tree(pid):
        try:
            p.kill()
        except psutil.Error:
            pass


def set_affinity(shepherd: int, cpus: set[int]) -> None:
    """Re-pin every process of a job (used when a suspended job resumes on other cores)."""
    for p in tree(shepherd):
        try:
            for t in p.threads():
                try:
                    os.sched_setaffinity(t.id, cpus)
                except OSError:
                    pass
        except psutil.Error:
            pass


SIGNALS = {s.name.removeprefix("SIG"): s for s in signal.Signals}
