"""What this host offers a scheduler: facts for ``gctl info`` and for refusing what it lacks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def criu_unavailable() -> str | None:
    """Why transparent checkpointing (CRIU) cannot be used here, or None if it can."""
    exe = shutil.which("criu")
    if exe is None:
        return "no criu binary found"
    try:
        r = subprocess.run([exe, "check"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"'criu check' could not run ({e})"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["failed"])[-1]
        return f"'criu check' fails: {last}"
    # criu works on this host, but gridsched does not drive it yet
    return "gridsched does not drive criu yet"


def cgroup_v2() -> str | None:
    """The mount point of a cgroup v2 hierarchy with controllers, or None."""
    for p in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if Path(p, "cgroup.controllers").is_file() and Path(p, "cgroup.controllers").read_text().strip():
            return p
    return None


def pidfd() -> bool:
    try:
        fd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return False
    os.close(fd)
    return True


def describe() -> str:
    """One line naming this machine for benchmark reports: CPU model, CPUs, Python, kernel."""
    import platform

    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, Linux {platform.release()}"


def facts() -> dict[str, object]:
    from .daemon.cgroup import mechanism

    return {
        "host_cpus": sorted(os.sched_getaffinity(0)),
        "pidfd": pidfd(),
        "cgroup_v2": cgroup_v2(),
        "memory_limit": mechanism(),
        "criu": criu_unavailable(),
        "numa_nodes": sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*")),
    }
