"""Status maps, the free map F of a job, and placement of a request within F (pure).

The model
---------
M is the machine map (:class:`~gridsched.core.topology.MachineMap`).  Status
maps Y1..Yn mark cores that are not simply free, each for a reason and an
owner:

========== ======================== ==============================================
reason     owner                    meaning
========== ======================== ==============================================
allocated  job id                   a running job holds the cores
backfill   job id                   a preemptable backfilled job holds the cores
reserved   reservation id           an active reservation holds the cores
drained    "" (or who drained them) an admin took the cores out of service
lent       parent job id            a yielding parent lends its cores
held       job id                   a job holds the cores without running on them
                                    (SMT siblings, the rest of an exclusive board)
========== ======================== ==============================================

:func:`status_maps` computes them from what a driver knows (running jobs,
active reservations, drained cores, lending parents); the daemon's free cores
and ``gctl topology`` both come from it.

A core held by a job is in exactly one of that job's ``allocated``,
``backfill`` or ``lent`` maps: a driver moves cores from ``allocated`` to
``lent`` when their job yields them and back when it resumes.  A job started
on lent cores is ``allocated`` on them as well, so the other descendants of
the parent cannot take them twice.

The free map of one job is ``F = M - (union of the status maps it may not
use)``: a core is free for the job when every status map covering it is one
the job may use (``may_use``, pairs of reason and owner: its reservation's
cores, the backfill maps for the head job, the lent maps of its ancestors;
see :func:`usable`).  So a drained core stays out of everyone's F even if it
is also lent or reserved.

Placement
---------
:func:`place` chooses ``ncpus`` cores within F for a :class:`Request`, or
returns None when F cannot hold it now; :func:`never_fits` says why a request
can never be met, even on an idle machine (and is None exactly when
``place(M, all cores, request)`` succeeds).  The cores a job *holds* can be
more than those it runs on (:func:`claimed`).

Physical cores and ``threads_per_core``
    ``0`` (the default): any hardware thread may be used; the threads of one
    physical core are taken together, so a job's cores share physical cores
    as much as possible.  ``t >= 1``: at most ``t`` threads of each physical
    core; such a job takes only physical cores whose threads are *all* free,
    runs on the first ``t`` of them, and *holds* the others (they are in
    :func:`claimed`, so they are in its ``allocated`` map and no other job
    shares the physical core).  A physical core with ``t`` threads or fewer is
    used whole, as with ``0``.

Boards
    ``pack`` (the default): the fewest boards.  If one board can hold the job,
    the one that holds it with the fewest usable cores to spare (best fit),
    ties to the lowest board id.  Otherwise the boards with the most usable
    cores (ties: lowest id) are filled, and the rest goes on the board that
    fits it best (ties: nearest to the boards already chosen, then lowest id).
    ``spread``: round-robin over the boards in id order, one core from each
    board in turn (and within a board, one thread from each physical core in
    turn), skipping boards that have no usable core left.  ``board``: all
    cores on one board, chosen as ``pack`` chooses a single board.

``exclusive_board``
    The job takes whole boards: only boards whose cores are *all* in F are
    used, and every core of a board it uses is held by it (:func:`claimed`).
    The boards are chosen as for ``pack`` (``spread`` then deals the cores
    round-robin over those boards, rather than over every board).

Within the chosen cores the result is sorted.  Everything is deterministic:
the same M, F and request give the same cores.  Cost: linear in the number of
cores plus a sort of the boards.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum
from typing import TYPE_CHECKING

from gridsched.core.model import Request as Request
from gridsched.core.record import record
from gridsched.core.topology import MachineMap

if TYPE_CHECKING:  # annotations only: gsub reaches this module and need not build the core's types
    from gridsched.core.types import Lent, Resv, Running


class Reason(str, Enum):
    ALLOCATED = "allocated"
    BACKFILL = "backfill"
    RESERVED = "reserved"
    DRAINED = "drained"
    LENT = "lent"
    HELD = "held"


@record
class StatusMap:
    """Cores marked for ``reason`` on behalf of ``owner`` (a job id, a reservation id, ...)."""

    reason: Reason
    owner: int | str
    cores: frozenset[int]


PLACES = ("pack", "spread", "board")


def status_maps(
    machine: MachineMap,
    running: Iterable[Running],
    reservations: Iterable[Resv] = (),
    drained: Iterable[int] = (),
    lent: Iterable[Lent] = (),
) -> tuple[StatusMap, ...]:
    """The status maps of the machine now (see the module doc), in a fixed order.

    A running job's cores are its ``allocated`` map, or its ``backfill`` map
    when it was backfilled and is checkpointable (preemptable), or -- for the
    cores a yielding parent lends -- the parent's ``lent`` map; the cores it
    holds without running on them (``Running.held``) are its ``held`` map.  An
    active reservation's ``reserved`` map is its cores and the cores it holds
    for its requirement (:func:`claimed`).  Cores outside the machine are left out.
    """
    every = frozenset(range(machine.ncores))
    lending = {x.parent: x.cores for x in lent}
    out: list[StatusMap] = []
    for r in running:
        own = frozenset(r.cores) & every
        given = lending.get(r.id, frozenset()) & own
        if given:
            out.append(StatusMap(Reason.LENT, r.id, given))
            own = own - given
        if own:
            reason = Reason.BACKFILL if r.backfilled and r.preemptable else Reason.ALLOCATED
            out.append(StatusMap(reason, r.id, own))
        held = (r.held & every) - frozenset(r.cores)
        if held:
            out.append(StatusMap(Reason.HELD, r.id, held))
    for rv in reservations:
        if rv.active and rv.cores:
            cores = claimed(machine, rv.cores, rv.place) if rv.place is not None else frozenset(rv.cores)
            out.append(StatusMap(Reason.RESERVED, rv.id, cores & every))
    gone = frozenset(drained) & every
    if gone:
        out.append(StatusMap(Reason.DRAINED, "", gone))
    return tuple(out)


def free_map(
    machine: MachineMap,
    status_maps: Iterable[StatusMap],
    may_use: Iterable[tuple[Reason | str, int | str]] = (),
) -> frozenset[int]:
    """F: the cores of ``machine`` covered by no status map outside ``may_use``."""
    allowed = {(Reason(r), o) for r, o in may_use}
    blocked: set[int] = set()
    for s in status_maps:
        if (s.reason, s.owner) not in allowed:
            blocked |= s.cores
    return frozenset(range(machine.ncores)) - blocked


def usable(
    status_maps: Iterable[StatusMap],
    *,
    reservation: int | str | None = None,
    ancestors: Iterable[int] = (),
    head: bool = False,
) -> frozenset[tuple[Reason, int | str]]:
    """The ``may_use`` pairs of a job: its reservation's cores, its ancestors' lent
    cores, and (for the head job) the cores of every preemptable backfilled job."""
    anc = set(ancestors)
    out: set[tuple[Reason, int | str]] = set()
    for s in status_maps:
        if (
            (s.reason is Reason.RESERVED and reservation is not None and s.owner == reservation)
            or (s.reason is Reason.LENT and s.owner in anc)
            or (s.reason is Reason.BACKFILL and head)
        ):
            out.add((s.reason, s.owner))
    return frozenset(out)


# -- placement -----------------------------------------------------------------


def _board_units(machine: MachineMap, free: frozenset[int], req: Request, spread: bool) -> list[list[int]]:
    """Per board (by position): the cores the job may take there, in the order it takes them."""
    tpc = req.threads_per_core
    if tpc <= 0 and not req.exclusive_board:
        # read the free cores when they are few, or without SMT (where that is cheap at any number)
        if 4 * len(free) <= len(machine.host_cpus) or all(len(b.siblings) == len(b.cores) for b in machine.boards):
            return _free_threads(machine, free, spread)
    out: list[list[int]] = []
    for b in machine.boards:
        if req.exclusive_board and not all(c in free for c in b.cores):
            out.append([])
            continue
        groups: list[Sequence[int]] = []
        for g in b.siblings:
            if tpc <= 0 or tpc >= len(g):
                taken = [c for c in g if c in free]
                if taken:
                    groups.append(taken)
            elif all(c in free for c in g):
                groups.append(g[:tpc])
        if not spread:
            out.append([c for g in groups for c in g])
        else:  # one thread of each physical core in turn
            units: list[int] = []
            depth = max((len(g) for g in groups), default=0)
            for k in range(depth):
                units.extend(g[k] for g in groups if k < len(g))
            out.append(units)
    return out


def _free_threads(machine: MachineMap, free: frozenset[int], spread: bool) -> list[list[int]]:
    """:func:`_board_units` when any thread may be used and no board is taken whole.

    Read from the free cores rather than from the whole map: each board's free
    cores in sibling-group order (groups by their first core, threads in
    order), or for ``spread`` the first free thread of each group, then the
    second, and so on.
    """
    pos, group = machine._board_pos, machine._group
    n = len(pos)
    out: list[list[int]] = [[] for _ in machine.boards]
    smt = False
    for c in sorted(free):
        if 0 <= c < n:
            out[pos[c]].append(c)
            if len(group[c]) > 1:
                smt = True
    if not smt:  # every group is one core: core order is group order
        return out
    for i, cs in enumerate(out):
        # the groups with a free thread, by their first core (groups are disjoint)
        taken = [[c for c in g if c in free] for g in sorted({group[c] for c in cs})]
        if not spread:
            out[i] = [c for g in taken for c in g]
        else:
            units: list[int] = []
            depth = max((len(g) for g in taken), default=0)
            for k in range(depth):
                units.extend(g[k] for g in taken if k < len(g))
            out[i] = units
    return out


def _choose_boards(machine: MachineMap, caps: list[int], n: int) -> list[tuple[int, int]] | None:
    """``pack``: (board position, cores taken there) on the fewest boards, or None."""
    ids = [b.id for b in machine.boards]
    fit = [i for i, c in enumerate(caps) if c >= n]
    if fit:
        best = min(fit, key=lambda i: (caps[i], ids[i]))
        return [(best, n)]
    if sum(caps) < n:
        return None
    order = sorted((i for i, c in enumerate(caps) if c > 0), key=lambda i: (-caps[i], ids[i]))
    chosen: list[tuple[int, int]] = []
    left = n
    for i in order:
        if left <= caps[i]:
            break
        chosen.append((i, caps[i]))
        left -= caps[i]
    # the fewest boards: fill the largest, then the best fit for what is left
    used = {i for i, _ in chosen}
    cands = [i for i in order if i not in used and caps[i] >= left]
    dist = machine.distance
    last = min(cands, key=lambda i: (caps[i], sum(dist[j][i] for j in used), ids[i]))
    chosen.append((last, left))
    return chosen


def place(machine: MachineMap, free: frozenset[int], req: Request) -> tuple[int, ...] | None:
    """The cores (sorted, ``req.ncpus`` of them, all in ``free``) the job runs on, or None
    if ``free`` cannot hold the request now.  The cores it holds: :func:`claimed`."""
    n = req.ncpus
    if n <= 0:
        return None
    if req.place not in PLACES:
        raise ValueError(f"unknown placement {req.place!r}")
    spread = req.place == "spread"
    units = _board_units(machine, free, req, spread)
    caps = [len(u) for u in units]
    if req.place == "board":
        fit = [i for i, c in enumerate(caps) if c >= n]
        if not fit:
            return None
        best = min(fit, key=lambda i: (caps[i], machine.boards[i].id))
        return tuple(sorted(units[best][:n]))
    if spread and not req.exclusive_board:
        boards = sorted((i for i, c in enumerate(caps) if c > 0), key=lambda i: machine.boards[i].id)
    else:
        chosen = _choose_boards(machine, caps, n)
        if chosen is None:
            return None
        if not spread:
            return tuple(sorted(c for i, k in chosen for c in units[i][:k]))
        boards = sorted((i for i, _ in chosen), key=lambda i: machine.boards[i].id)
    picked: list[int] = []
    depth = 0
    while len(picked) < n:
        progressed = False
        for i in boards:
            if depth < caps[i]:
                picked.append(units[i][depth])
                progressed = True
                if len(picked) == n:
                    break
        if not progressed:
            return None
        depth += 1
    return tuple(sorted(picked))


def claimed(machine: MachineMap, cores: Iterable[int], req: Request) -> frozenset[int]:
    """The cores a job placed on ``cores`` for ``req`` holds: ``cores``, plus the other
    threads of its physical cores when ``threads_per_core`` leaves some unused, plus
    every core of its boards when ``exclusive_board``."""
    held = set(cores)
    tpc = req.threads_per_core
    for c in list(held):
        if tpc > 0 and tpc < len(machine.siblings(c)):
            held.update(machine.siblings(c))
        if req.exclusive_board:
            held.update(machine.board_of(c).cores)
    return frozenset(held)


def never_fits(machine: MachineMap, req: Request) -> str | None:
    """Why ``req`` can never be met on ``machine`` (one line), or None if it fits an idle machine."""
    n = req.ncpus
    if n <= 0:
        return f"asks for {n} cores, at least 1 is needed"
    if req.place not in PLACES:
        return f"--place {req.place}: must be one of {', '.join(PLACES)}"
    tpc = req.threads_per_core
    if tpc < 0:
        return f"--threads-per-core {tpc}: must be 0 (any) or at least 1"
    caps = [len(u) for u in _board_units(machine, frozenset(range(machine.ncores)), req, False)]
    limited = tpc > 0 and any(tpc < len(g) for b in machine.boards for g in b.siblings)
    per = f" at {tpc} per physical core" if limited else ""
    total = sum(caps)
    if n > total:
        if limited:
            return f"--threads-per-core {tpc}: asks for {n} cores, the machine offers {total}{per}"
        return f"asks for {n} cores, the machine has {total}"
    if req.place == "board" and max(caps) < n:
        return f"--place board: no board has {n} cores{per} (largest: {max(caps)})"
    return None


def assign(
    machine: MachineMap | None, free: frozenset[int], ncpus: int, req: Request | None = None
) -> tuple[tuple[int, ...], frozenset[int]] | None:
    """Cores for a job now: ``(cores it runs on, cores it holds)``, or None if ``free`` cannot hold it.

    Without a machine map: the lowest-numbered free cores.  With one:
    :func:`place` for ``req`` (default: pack, any thread), and the job holds
    :func:`claimed` (more than it runs on with ``threads_per_core`` or
    ``exclusive_board``).
    """
    if machine is None:
        if len(free) < ncpus:
            return None
        first = tuple(sorted(free)[:ncpus])
        return first, frozenset(first)
    if req is None:
        req = Request(ncpus)
    c = place(machine, free, req)
    if c is None:
        return None
    return c, (claimed(machine, c, req) if req.threads_per_core or req.exclusive_board else frozenset(c))


def place_inside(
    machine: MachineMap | None, cores: frozenset[int], extra: frozenset[int], n: int, req: Request | None
) -> tuple[tuple[int, ...], frozenset[int]] | None:
    """Cores for a job bound to a reservation: within the reservation's free ``cores``, for ``req``.

    A ``--threads-per-core`` job takes only physical cores whose threads are all free: the
    SMT siblings the reservation itself holds idle (``extra``) count as free for that test,
    but the job runs only on ``cores``.
    """
    if extra and req is not None and req.threads_per_core and machine is not None:
        got = assign(machine, cores | extra, n, req)
        if got is not None and cores.issuperset(got[0]):
            return got
    return assign(machine, cores, n, req)
