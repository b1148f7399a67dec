"""The machine's memory as one pool of the scheduling pass (Slurm's CR_Core_Memory, the machine as one node).

Memory is a floating resource named :data:`MEMORY`
counted in MiB: the pool holds the machine's memory less what is left to the
system, and each job asks for its ``--mem`` (``--mem-per-cpu`` times its
cores), or, without a request, the default per core times its cores (none
when that is 0).  Reservations, preemption and forecasts count it as they
count every floating resource; a suspended job keeps its memory (its processes
stay in memory, as Slurm keeps a suspended job's).  Memory per board (NUMA node):
:mod:`gridsched.core.board_memory`.
"""

from __future__ import annotations

from gridsched.core.record import record

# The memory's name among the floating resources of the pass (the configuration refuses it as the name of a
# floating resource of its own)
MEMORY = "mem"
MIB = 1 << 20


@record
class MemoryPool:
    """``total`` MiB handed out (``reserved`` MiB are left to the system); a job without a request asks for
    ``per_cpu`` MiB per core."""

    total: int
    per_cpu: int = 0
    reserved: int = 0  # MiB left to the system (``total`` is the machine's memory less this)

    def ask(self, mem: int | None, ncpus: int) -> int:
        """MiB a job of ``ncpus`` cores asking for ``mem`` bytes (None: no request) takes from the pool."""
        if mem:
            return -(-mem // MIB)
        return self.per_cpu * ncpus

    def asks(self, resources: tuple[tuple[str, int], ...], mem: int | None, ncpus: int) -> tuple[tuple[str, int], ...]:
        """A job's floating resources with its memory among them (sorted by name, as every resource list)."""
        n = self.ask(mem, ncpus)
        if n <= 0:
            return resources
        return tuple(sorted((*resources, (MEMORY, n))))


def pool(machine_bytes: int | None, reserved: int, per_cpu: int) -> MemoryPool | None:
    """The pool of a machine of ``machine_bytes`` (None: unknown) less ``reserved`` MiB; None without memory."""
    if not machine_bytes:
        return None
    total = machine_bytes // MIB - reserved
    return MemoryPool(total, per_cpu, reserved) if total > 0 else None


def floating(names: dict[str, int], memory: MemoryPool | None) -> dict[str, int]:
    """The floating resources of a pass: ``names`` (the configuration's) and the memory pool."""
    if memory is None:
        return names
    return {**names, MEMORY: memory.total}
