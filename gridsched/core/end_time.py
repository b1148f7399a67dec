"""When a running job counts as ending, for the shadow time and the profiles, and how long a job is
planned to run with its own estimate (pure).  (What ends a reservation, a yield or a subtree is
:mod:`gridsched.core.endings`.)"""

from __future__ import annotations

from gridsched.core.types import Running

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


def soft_left(walltime_left: float, soft: float | None, ran: float) -> float:
    """The time a job is planned to take from its start, given its own estimate ``soft`` (PBS
    ``soft_walltime``, gsub ``--estimate``; None: none) and the time it has already ``ran`` in this segment.

    The scheduler plans with the estimate, never beyond the walltime (``walltime_left``, which still
    ends the job).  A job that has outlived it is planned to run one more estimate, as PBS extends a
    soft walltime by the original one each time it is exceeded: ``soft``, then ``2 * soft``, ...  A waiting
    job (``ran`` 0) is planned at ``soft``.
    """
    if soft is None or soft >= walltime_left:
        return walltime_left
    if ran < soft:
        return soft
    k = int(ran // soft) + 1  # the first multiple of the estimate still ahead
    e = k * soft
    return e if e < walltime_left else walltime_left
