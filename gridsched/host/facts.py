"""What this host offers a scheduler: facts for ``gctl info`` and for refusing what it lacks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any


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
    from gridsched.daemon.cgroup import mechanism

    return {
        "host_cpus": sorted(os.sched_getaffinity(0)),
        "pidfd": pidfd(),
        "cgroup_v2": cgroup_v2(),
        "memory_limit": mechanism(),
        "criu": criu_unavailable(),
        "numa_nodes": sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*")),
    }


def job_confinement(max_processes: int) -> list[str]:
    """How jobs are confined here (their processes, a process cap, their cores), as the caller can find it:
    probed with cgroups the caller makes and removes (so only root sees what a system daemon can do)."""
    from gridsched.daemon import confine

    return confine.setup().lines(max_processes)


def device_isolation(devices: tuple[Any, ...], enforce: str, system: bool) -> dict[str, Any]:
    """Whether (and how) jobs are kept from the device nodes of devices they do not hold, as far as the caller
    can tell: the probe runs as the caller, so in system mode only root sees what the daemon can do."""
    from gridsched.daemon import devcgroup

    if not devices:
        return {"enforced": False, "how": "nothing to isolate (no devices)", "enforce": enforce}
    if system and os.geteuid() != 0 and enforce != "off":
        how = (
            f"not known: the system daemon runs as root, gctl info as uid {os.geteuid()} cannot try what root "
            "can (run it as root)"
        )
        return {"enforced": None, "how": how, "enforce": enforce}
    on, how = devcgroup.describe(enforce, system)
    out: dict[str, Any] = {"enforced": on, "how": how, "enforce": enforce}
    if on and enforce == "required" and not system:
        out["how"] += ' (enforce = "required" fails jobs in system mode only)'
    if enforce != "off":
        m = devcgroup.nodes(tuple(devices))
        out["nodes"] = {f"{t}:{i}": [str(n) for n in ns] for (t, i), ns in sorted(m.nodes.items())}
        out["no_node"] = {f"{t}:{i}": why for (t, i), why in m.unknown}
    return out
