"""Whether a job's resource request can ever fit the machine (pure).

Two kinds of "no": a request that does not fit *now* waits in the queue; a
request that can *never* fit is refused at submission, with the reason.  This
module answers the second question, so that gsub and the daemon refuse the
same requests for the same reasons.
"""

from __future__ import annotations


def infeasible(ncpus: int, ncores: int) -> str | None:
    """Why a job asking for ``ncpus`` cores can never run on ``ncores`` cores, or None if it can."""
    if ncpus <= 0:
        return f"asks for {ncpus} cores, at least 1 is needed"
    if ncpus > ncores:
        return f"asks for {ncpus} cores, the machine has {ncores}"
    return None


def _size(n: int) -> str:
    for unit, mult in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20)):
        if n >= mult:
            return f"{n // mult}{unit}" if n % mult == 0 else f"{n / mult:.1f}{unit}"
    return f"{n}B"


def too_much_memory(mem: int, total: int | None) -> str | None:
    """Why a job asking for ``mem`` bytes can never run on a machine of ``total`` bytes (None: unknown)."""
    if total and mem > total:
        return f"asks for {_size(mem)} of memory, the machine has {_size(total)}"
    return None
