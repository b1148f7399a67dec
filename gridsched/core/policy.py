"""``schedule(snapshot) -> Plan``: the one entry point both drivers call."""

from __future__ import annotations

from .types import Plan, Policy, Snapshot, Start


def free_count(snap: Snapshot) -> int:
    if snap.free is not None:
        return len(snap.free)
    return snap.ncores - sum(r.ncpus for r in snap.running)


def pick(free: frozenset[int] | None, n: int) -> tuple[int, ...]:
    """The cores for a job of ``n`` cores: the lowest-numbered free ones."""
    if free is None:
        return ()
    return tuple(sorted(free)[:n])


def fcfs(snap: Snapshot) -> Plan:
    nfree = free_count(snap)
    free = snap.free
    out: list[Start] = []
    for job in snap.pending:
        if job.ncpus > nfree:
            break
        cores = pick(free, job.ncpus)
        if free is not None:
            free = free - set(cores)
        nfree -= job.ncpus
        out.append(Start(job.id, cores))
    return Plan(tuple(out))


def schedule(snap: Snapshot) -> Plan:
    policy = snap.params.policy
    if policy is Policy.FCFS:
        return fcfs(snap)
    raise NotImplementedError(policy)
