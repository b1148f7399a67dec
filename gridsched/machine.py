"""The machine the scheduler hands out: its cores and the host CPU each runs on."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .config import Config
from .core import cpuset


@dataclass(frozen=True, slots=True)
class Machine:
    ncores: int
    host_cpus: tuple[int, ...]  # host_cpus[i % len(host_cpus)] runs declared core i

    def host_cpu(self, core: int) -> int:
        return self.host_cpus[core % len(self.host_cpus)]

    def host_set(self, cores: tuple[int, ...] | list[int]) -> set[int]:
        return {self.host_cpu(c) for c in cores}


def from_config(cfg: Config) -> Machine:
    """The machine as the config declares it on this host.

    ``machine.cpus`` (or every CPU this process may use) are the host CPUs;
    ``machine.cores`` (0 = one per host CPU) is the number of cores handed out.
    """
    allowed = sorted(os.sched_getaffinity(0))
    if cfg.cpus:
        wanted = cpuset.parse(cfg.cpus)
        host = tuple(c for c in allowed if c in wanted) or tuple(sorted(wanted))
    else:
        host = tuple(allowed)
    return Machine(ncores=cfg.cores or len(host), host_cpus=host)
