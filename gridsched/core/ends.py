"""When a running job counts as ending, for the shadow time and the profiles (pure)."""

from __future__ import annotations

from .types import Running

# How a running job's end is counted.
USER = 0  # start + estimate (its user walltime)
PLANNED = 1  # start + planned while in the future, then start + estimate
NAIVE = 2  # start + planned while in the future, then now (the cascading reading)


def counted_end(r: Running, now: float, mode: int) -> float:
    """The time ``r`` is counted as ending at under ``mode``; never before ``now``.

    A stopping job counts as ending now: its cores are coming free.
    """
    if r.stopping:
        return now
    e = r.start + r.estimate
    pl = r.planned
    if mode and pl is not None:
        pe = r.start + pl
        if pe > now:
            e = pe
        elif mode == NAIVE:
            e = now
    return e if e > now else now
