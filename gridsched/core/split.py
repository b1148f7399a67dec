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

Sub-tasks of their own sizes (one ``(ncpus, time)`` each, from a split
file) are placed by :func:`fill_mixed`: a chain holds sub-tasks of one core
count, so each runs on exactly the cores it asked for; each sub-task, in
order, joins the fullest chain of its core count in which it still ends
within the window (best fit: the window's time is packed, emptier chains are
kept for longer sub-tasks), else opens a new chain if the window has cores
left for it; a sub-task that fits nowhere stays with the job.

Sub-tasks that ask for devices (``gsub --split N --gpus-per-task G``) hold
them per chain: each chain is its own piece with its own devices
(:func:`per_chain` deals the devices chosen for ``k`` chains out, ``G`` of
each type per chain, :func:`chain_cores` the cores, near each chain's
devices), so a window holds at most as many chains as its devices have
slots free until its end, and a job started whole is started as pieces of
one chain each (:func:`as_chains`).

The forecast plans what the passes to come will do with a splittable job
(:func:`plan_tasks`): its sub-tasks, in order, go into the windows of the
forecast's cores profile that close by the job's own predicted start (the
revised schedule), and those left run in that start, as soon as its cores
allow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from math import floor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from gridsched.core.devices import DeviceAsk
    from gridsched.core.profile import Profile
    from gridsched.core.topology import Device, MachineMap

Keys = tuple[tuple[str, int], ...]
Planned = tuple[tuple[int, float, float], ...]


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


def fill_mixed(
    tasks_left: Sequence[int], sizes: Sequence[tuple[int, float]], width: int, length: float
) -> list[tuple[int, tuple[int, ...]]]:
    """The chains of sub-tasks of their own sizes to run in a window of ``width`` cores and ``length`` seconds.

    ``sizes[i]`` is sub-task ``i``'s ``(ncpus, time)``.  Returns ``(cores,
    chain)`` pairs: every sub-task of a chain needs exactly ``cores``, the
    chains' cores add up to at most ``width``, and each chain's times add up
    to at most ``length``.  Every index appears at most once.
    """
    if width <= 0 or length <= 0:
        return []
    chains: list[list[int]] = []
    wide: list[int] = []
    used: list[float] = []
    room = width
    for i in tasks_left:
        c, t = sizes[i]
        if c <= 0 or t <= 0 or c > width or t > length:
            continue
        best = -1
        for k, u in enumerate(used):
            if wide[k] == c and u + t <= length and (best < 0 or u > used[best]):
                best = k
        if best >= 0:
            chains[best].append(i)
            used[best] += t
        elif c <= room:
            chains.append([i])
            wide.append(c)
            used.append(t)
            room -= c
    return [(wide[k], tuple(ch)) for k, ch in enumerate(chains)]


def as_chains(tasks_left: Sequence[int], nchains: int, task_time: float, estimate: float) -> list[tuple[int, ...]]:
    """The sub-tasks a whole start of ``nchains`` slots runs, as at most ``nchains`` chains.

    The sub-tasks left are dealt out in order, as evenly as they go (as
    :func:`fill_window` does), each chain ending within ``estimate`` (at
    least one sub-task each); what does not fit stays with the job.
    """
    if nchains <= 0 or task_time <= 0 or not tasks_left:
        return []
    per_chain = max(1, floor(estimate / task_time))
    k = min(len(tasks_left), per_chain * nchains)
    per = -(-k // nchains)
    return [tuple(tasks_left[i : i + per]) for i in range(0, k, per)]


def per_chain(asks: Sequence[DeviceAsk], keys: Keys, devices: Sequence[Device], nchains: int) -> tuple[Keys, ...]:
    """The devices ``keys`` (chosen for ``nchains`` chains of sub-tasks, each asking ``asks``) dealt out:
    chain ``i`` gets, of each ask's type, the ``i``-th ``count`` of them in board then index order, so a
    chain's devices sit together where they can.  Empty when ``keys`` are too few."""
    board = {dv.key: dv.board for dv in devices}
    out: list[list[tuple[str, int]]] = [[] for _ in range(nchains)]
    for a in asks:
        mine = sorted((k for k in keys if k[0] == a.type), key=lambda k: (board.get(k, 0), k[1]))
        if len(mine) < a.count * nchains:
            return ()
        for i in range(nchains):
            out[i].extend(mine[i * a.count : (i + 1) * a.count])
    return tuple(tuple(sorted(ch)) for ch in out)


def chain_cores(
    cores: Sequence[int],
    ncpus: int,
    chains: Sequence[Keys],
    devices: Sequence[Device],
    machine: MachineMap | None,
    spare: Iterable[int] = (),
) -> tuple[int, ...]:
    """The cores of ``len(chains)`` chains of ``ncpus`` each, one chain after another: chain ``i``'s on the
    boards of its devices ``chains[i]`` where ``cores`` (first) and the free ``spare`` cores have enough
    of them there, else the lowest of ``cores`` left.  Without a map, ``cores`` as they are."""
    if machine is None or not chains:
        return tuple(cores)
    board = {dv.key: dv.board for dv in devices}
    own = sorted(cores)
    extra = sorted(set(spare).difference(own))
    out: list[int] = []
    for keys in chains:
        near = {board[k] for k in keys if k in board}
        mine = [c for c in own if machine.board_of(c).id in near][:ncpus]
        if len(mine) < ncpus:
            mine += [c for c in extra if machine.board_of(c).id in near][: ncpus - len(mine)]
        if len(mine) < ncpus:
            mine = own[:ncpus]
        taken = set(mine)
        own = [c for c in own if c not in taken]
        extra = [c for c in extra if c not in taken]
        out.extend(mine)
    return tuple(out)


def plan_tasks(
    prof: Profile,
    hold: Callable[[float, float, int], None],
    tasks_left: Sequence[int],
    size: Callable[[int], tuple[int, float]],
    not_before: float,
    whole: float,
    wave: int,
    length: float,
    same: bool = False,
) -> tuple[Planned, bool]:
    """The planned ``(index, start, end)`` of each sub-task left, in order, and whether the job still
    starts whole at ``whole``.

    ``prof`` is the cores profile with everything ahead of the job held;
    ``size(i)`` is sub-task ``i``'s ``(ncpus, time)`` (``same``: every one's
    is the first's).  Each sub-task in turn takes the earliest time, not
    before ``not_before`` nor before the one planned ahead of it (so planned
    starts follow the sub-tasks' order), at which the profile has its cores
    free for its whole time, if it ends by ``whole`` (the job's predicted
    start as one wave of ``wave`` cores: a window closes there at the
    latest); ``hold(start, time, ncpus)`` then holds it in the profile (the
    sub-tasks of one size that start together, at once).  From the first
    sub-task that fits no window on, the rest run in the whole start, each as
    soon as the wave's cores free from those ahead of it allow, if it ends
    within the start's ``length`` (its walltime).  A sub-task never planned
    is left out.
    """
    out: list[tuple[int, float, float]] = []
    after = not_before
    k, n = 0, len(tasks_left)
    while k < n:
        c, t = size(tasks_left[k])
        s = prof.earliest_start(c, t, after) if c > 0 else math.inf
        if s == math.inf or s + t > whole:
            break
        m = min(n - k, prof.min_free(s, s + t) // c) if same else 1
        hold(s, t, m * c)
        out.extend((i, s, s + t) for i in tasks_left[k : k + m])
        after = s
        k += m
    rest = tasks_left[k:]
    if not rest or whole == math.inf:
        return tuple(out), bool(rest) and whole < math.inf
    if same:  # in waves of the slots the whole start has
        c, t = size(rest[0])
        slots = wave // c if c > 0 else 0
        s = whole if slots else math.inf
        for j, i in enumerate(rest):
            if j and j % slots == 0:
                s += t  # the next wave, as the ends of the one before
            if s + t > whole + length:
                break
            out.append((i, s, s + t))
        return tuple(out), True
    import heapq

    ends: list[tuple[float, int]] = []  # the whole start's sub-tasks running: (end, cores)
    free, after = wave, whole
    for i in rest:  # each as soon as the cores of those ahead of it, ending, leave it room (in order)
        c, t = size(i)
        if not 0 < c <= wave:
            break
        while free < c:
            end, back = heapq.heappop(ends)
            free += back
            after = max(after, end)
        if after + t > whole + length:
            break
        heapq.heappush(ends, (after + t, c))
        free -= c
        out.append((i, after, after + t))
    return tuple(out), True


def in_order(sizes: Iterable[tuple[int, float]], ncpus: int) -> float:
    """How long sub-tasks of ``(ncpus, time)`` take on ``ncpus`` cores, each started, in order, as soon as
    the cores it needs are free (how a job started whole runs them); ``inf`` if one needs more than ``ncpus``."""
    import heapq

    ends: list[tuple[float, int]] = []
    free, now, last = ncpus, 0.0, 0.0
    for c, t in sizes:
        if c > ncpus:
            return math.inf
        while free < c:
            now, back = heapq.heappop(ends)
            free += back
        heapq.heappush(ends, (now + t, c))
        free -= c
        last = max(last, now + t)
    return last
