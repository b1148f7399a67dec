"""Memory per board: a job starts only where the boards it is placed on have its memory free (pure).

The machine's memory is one pool of the pass (:mod:`gridsched.core.memory`).  Where
the machine map knows each board's memory (a NUMA node's, or the topology file's
``memory``), the pool is also cut into the boards', in proportion to their memory
(so that they add up to the pool, the memory left to the system taken from each in
the same proportion), and a job's memory is taken from the boards its cores are on,
in proportion to its cores on each: a job of 4 cores and 8 GiB placed 3 and 1 takes
6 GiB of the first board and 2 of the second (PBS Pro likewise takes a chunk's
``mem`` from the vnodes its cores come from).  A running job holds its share of
each board until it ends.

:func:`fit` restricts the free cores a placement may use to those the boards'
free memory pays for, and checks the placement found: a job starts on it, and its
planned start (the head's reservation, a forecast) is the first time at which the
cores and the boards' memory free then pass it (``PassState.placed_earliest``,
the boards' memory then from ``PassState.board_memory_at``).  A suspended job
keeps its memory on the boards it ran on (``Snapshot.kept_boards``, its shares
of them), though it let their cores go: it is held there until the job is
continued, on cores of those boards whose shares are the ones it keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gridsched.core.memory import MEMORY
from gridsched.core.model import Request
from gridsched.core.placement import assign
from gridsched.core.topology import MachineMap
from gridsched.core.units import format_size

Place = Callable[[frozenset[int]], "tuple[tuple[int, ...], frozenset[int]] | None"]


def capacities(machine: MachineMap | None, pool: int | None) -> list[int] | None:
    """Each board's part of the ``pool`` (MiB), in proportion to the boards' memory; None when the map or a
    board's memory is unknown, or the machine has one board (the pool is all there is to count)."""
    if machine is None or pool is None or len(machine.boards) < 2:
        return None
    sizes = [b.memory for b in machine.boards]
    if any(s is None or s <= 0 for s in sizes):
        return None
    whole = sum(s for s in sizes if s is not None)
    return [pool * s // whole for s in sizes if s is not None]


def mem_of(resources: Iterable[tuple[str, int]]) -> int:
    """The MiB of memory among ``resources`` (0: none asked)."""
    return sum(n for name, n in resources if name == MEMORY)


def shares(machine: MachineMap, cores: Iterable[int], mib: int) -> dict[int, int]:
    """The MiB a job of ``mib`` on ``cores`` takes from each board (by board position): in proportion to
    its cores there, the remainder to the boards with the largest fractions, so that they add up to ``mib``."""
    count: dict[int, int] = {}
    for c in cores:
        b = machine.board_index(c)
        count[b] = count.get(b, 0) + 1
    n = sum(count.values())
    if not n or mib <= 0:
        return {}
    out = {b: mib * k // n for b, k in count.items()}
    left = mib - sum(out.values())
    for b in sorted(count, key=lambda b: (-(mib * count[b] % n), b))[:left]:
        out[b] += 1
    return out


def used(machine: MachineMap, running: Iterable[tuple[Iterable[int], int]], nboards: int) -> list[int]:
    """MiB held on each board by ``running`` (their cores and memory)."""
    out = [0] * nboards
    for cores, mib in running:
        if mib > 0:
            for b, k in shares(machine, cores, mib).items():
                out[b] += k
    return out


def fit(
    machine: MachineMap, free: frozenset[int], free_mem: list[int], mib: int, ncpus: int, place: Place
) -> frozenset[int] | None:
    """The free cores on which ``place`` (the job's placement) finds cores whose boards have its ``mib`` of
    memory free (``free_mem``: MiB free on each board), or None when none does.

    Each board may give the job as many cores as its free memory pays for (``mib / ncpus`` a core): on the
    free cores so capped a placement fits by construction (a job too big for one board's memory is spread
    over several).  Where the cap leaves the placement no cores it can use (whole physical cores, a board to
    itself), the boards short of their share are left out instead, one round at a time.
    """
    by_board: dict[int, list[int]] = {}
    for c in sorted(free):
        by_board.setdefault(machine.board_index(c), []).append(c)
    capped = frozenset(
        c for b, cs in by_board.items() for c in cs[: max(0, free_mem[b]) * ncpus // mib if mib > 0 else len(cs)]
    )
    tries = [capped] if capped != free else []
    cores = free
    for _ in range(len(machine.boards) + 2):
        here = tries.pop(0) if tries else cores
        got = place(here)
        if got is not None:
            short = {b for b, k in shares(machine, got[0], mib).items() if k > free_mem[b]}
            if not short:
                return here
            if here is cores:
                cores = frozenset(c for c in cores if machine.board_index(c) not in short)
        elif here is cores:
            return None
    return None


def never(machine: MachineMap, pool: int, mib: int, ncpus: int, req: Request | None) -> str | None:
    """Why a job of ``ncpus`` cores placed as ``req`` asks and ``mib`` of memory can never have its memory on
    the boards its cores would be on, the whole machine free (its ``pool`` MiB cut into the boards'); None
    when it can, or the boards' memory is not counted."""
    caps = capacities(machine, pool)
    if caps is None or mib <= 0:
        return None
    cores = frozenset(machine.cores())
    if fit(machine, cores, caps, mib, ncpus, lambda cs: assign(machine, cs, ncpus, req)) is not None:
        return None
    most = format_size(max(caps) << 20)
    return (
        f"asks for {format_size(mib << 20)} of memory on the boards of its {ncpus} core{'s' if ncpus != 1 else ''}, "
        "more than they hold "
        f"(each board's memory is bound to its cores; the largest has {most})"
    )
