"""Checks of a job's resource request against the machine (pure).

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
