"""Filling a backfill window with sub-tasks of a splittable job.

A splittable job is ``n`` independent sub-tasks, each needing ``ncpus``
cores for at most ``task_time``.  A backfill window is ``width`` cores free
for ``length`` seconds.  :func:`fill_window` chooses which sub-tasks go into
the window and how: in *chains*, each chain a list of sub-tasks run one after
another on the same ``ncpus`` cores.  A chain holds at most
``floor(length / task_time)`` sub-tasks, so it ends within the window even if
every sub-task runs for its whole time; there are at most
``floor(width / ncpus)`` chains, so their cores add up to at most ``width``.

Among the ways to place ``k`` sub-tasks, the one chosen ends soonest and,
at that end, uses the fewest chains: all chains get ``ceil(k / chains)``
sub-tasks except the last.  Sub-tasks are taken in the order given (the
lowest indices first), so the job keeps the rest at its place in the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import floor


def fill_window(
    tasks_left: Sequence[int], task_ncpus: int, task_time: float, width: int, length: float
) -> list[tuple[int, ...]]:
    """The chains of sub-tasks to run in a window of ``width`` cores and ``length`` seconds.

    ``tasks_left`` are the indices of the sub-tasks not yet run.  Returns a
    list of chains (each a tuple of indices, in the order they run); empty if
    not one sub-task fits.  Every index appears at most once.
    """
    if task_ncpus <= 0 or task_time <= 0 or width < task_ncpus or length < task_time or not tasks_left:
        return []
    per_chain = floor(length / task_time)
    nchains = width // task_ncpus
    k = min(len(tasks_left), per_chain * nchains)
    per = -(-k // nchains)  # the fewest rounds that place k sub-tasks on nchains chains
    return [tuple(tasks_left[i : i + per]) for i in range(0, k, per)]
