"""The machine map M: boards, their cores, SMT siblings, memory and distances (pure).

A machine is made of *boards* (sockets or NUMA nodes).  Each board holds
declared cores, numbered ``0 .. ncores-1`` over the whole machine; the cores
of a board are grouped into *physical cores* (SMT sibling groups: the hardware
threads that share one core).  A board may know its memory (bytes) and the
host NUMA node it stands for.  ``distance[i][j]`` is the relative cost of
board ``boards[i]`` reaching the memory of ``boards[j]`` (as the Linux NUMA
distance: 10 = local).  Every declared core runs on one host CPU
(``host_cpus[core]``); several declared cores may share one, which lets a file
describe a bigger machine than the host for tests and demos.

:meth:`MachineMap.text` is the canonical text form: a topology file (see
``etc/topology.toml``) that :func:`gridsched.host.topology.parse` reads back to an
equal map.

A :class:`MachineMap` answers what a driver asks of the machine (``ncores``,
``host_cpu``, ``host_set``); a machine without a map is :func:`flat`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field

from gridsched.core import cpuset
from gridsched.core.record import record
from gridsched.core.units import UnitError, format_size, parse_size

LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20


class TopologyError(ValueError):
    """A machine map that cannot be: the message says what is wrong (and where, for a file)."""


@record
class Board:
    """One socket or NUMA node.

    ``cores`` are sorted; ``siblings`` are its physical cores, each a sorted
    tuple of the declared cores that are its hardware threads, every core of
    the board in exactly one group, groups ordered by their first core.
    ``node`` is the host NUMA node this board stands for (None: not a host
    node, e.g. a board of a described machine mapped onto the host).
    """

    id: int
    cores: tuple[int, ...]
    siblings: tuple[tuple[int, ...], ...]
    memory: int | None = None
    node: int | None = None


@record
class Device:
    """One device (a GPU, an FPGA, ...): ``type`` and ``index`` name it (``gpu`` 0); ``board`` is the id of
    the board it hangs on.

    ``model``, ``memory`` (bytes), ``uuid`` and ``pci`` (bus id) when known;
    ``share``: how many jobs may hold it at once (from the configuration, not
    the topology file; see :mod:`gridsched.core.devices`).
    """

    type: str
    index: int
    board: int
    model: str = ""
    memory: int | None = None
    uuid: str = ""
    pci: str = ""
    share: int = 1
    paths: tuple[str, ...] = ()  # its device nodes, when the topology file names them (``path``)

    @property
    def key(self) -> tuple[str, int]:
        return (self.type, self.index)


@record
class MachineMap:
    """The machine map M.  Build with :func:`make` or :func:`flat`; checked on construction."""

    boards: tuple[Board, ...]
    host_cpus: tuple[int, ...]  # host_cpus[core]: the host CPU declared core ``core`` runs on
    distance: tuple[tuple[int, ...], ...]  # by board position; distance[i][i] is local
    devices: tuple[Device, ...] = ()  # by type, then index
    # derived, for fast look-ups: board position and sibling group of each core
    _board_pos: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _group: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.host_cpus)
        pos = [-1] * n
        group: list[tuple[int, ...]] = [()] * n
        ids: set[int] = set()
        if not self.boards:
            raise TopologyError("a machine needs at least one board")
        for i, b in enumerate(self.boards):
            if b.id in ids:
                raise TopologyError(f"board id {b.id} is used twice")
            ids.add(b.id)
            if not b.cores:
                raise TopologyError(f"board {b.id} has no cores")
            if list(b.cores) != sorted(set(b.cores)):
                raise TopologyError(f"board {b.id}: cores must be sorted and distinct")
            for c in b.cores:
                if not 0 <= c < n:
                    raise TopologyError(f"board {b.id}: core {c} is not a core of a {n}-core machine")
                if pos[c] >= 0:
                    raise TopologyError(f"core {c} is on board {self.boards[pos[c]].id} and on board {b.id}")
                pos[c] = i
            seen: set[int] = set()
            for g in b.siblings:
                if not g or list(g) != sorted(set(g)):
                    raise TopologyError(f"board {b.id}: sibling group {g} must be sorted, distinct, non-empty")
                for c in g:
                    if c in seen or c not in b.cores:
                        raise TopologyError(f"board {b.id}: core {c} is in no or several sibling groups")
                    seen.add(c)
                    group[c] = g
            if seen != set(b.cores):
                alone = cpuset.format(set(b.cores) - seen)
                raise TopologyError(f"board {b.id}: cores {alone} are in no sibling group")
            if [g[0] for g in b.siblings] != sorted(g[0] for g in b.siblings):
                raise TopologyError(f"board {b.id}: sibling groups must be ordered by their first core")
        missing = [c for c in range(n) if pos[c] < 0]
        if missing:
            raise TopologyError(f"cores {cpuset.format(missing)} are on no board")
        nb = len(self.boards)
        if len(self.distance) != nb or any(len(row) != nb for row in self.distance):
            raise TopologyError(f"the distance matrix must be {nb} x {nb}")
        if any(d <= 0 for row in self.distance for d in row):
            raise TopologyError("distances must be positive")
        seen_dev: set[tuple[str, int]] = set()
        for dv in self.devices:
            if dv.board not in ids:
                raise TopologyError(f"{dv.type} {dv.index} is on board {dv.board}, which does not exist")
            if dv.key in seen_dev:
                raise TopologyError(f"{dv.type} {dv.index} is declared twice")
            if dv.index < 0 or dv.share < 1:
                raise TopologyError(f"{dv.type} {dv.index}: index must be 0 or more, share at least 1")
            seen_dev.add(dv.key)
        object.__setattr__(self, "_board_pos", tuple(pos))
        object.__setattr__(self, "_group", tuple(group))

    # -- what the flat Machine answers too ---------------------------------------
    @property
    def ncores(self) -> int:
        return len(self.host_cpus)

    def host_cpu(self, core: int) -> int:
        """The host CPU declared core ``core`` runs on."""
        return self.host_cpus[core]

    def host_set(self, cores: Iterable[int]) -> set[int]:
        """The host CPUs a job on ``cores`` is pinned to."""
        return {self.host_cpus[c] for c in cores}

    # -- the map ----------------------------------------------------------------
    def cores(self) -> tuple[int, ...]:
        """Every declared core, ``0 .. ncores-1``."""
        return tuple(range(self.ncores))

    def board_of(self, core: int) -> Board:
        """The board core ``core`` is on."""
        return self.boards[self._board_pos[core]]

    def board_index(self, core: int) -> int:
        """The position in :attr:`boards` of the board core ``core`` is on."""
        return self._board_pos[core]

    def siblings(self, core: int) -> tuple[int, ...]:
        """The hardware threads of the physical core ``core`` belongs to, ``core`` included."""
        return self._group[core]

    def board(self, board_id: int) -> Board:
        for b in self.boards:
            if b.id == board_id:
                return b
        raise KeyError(board_id)

    def board_distance(self, a: int, b: int) -> int:
        """The distance between the boards with ids ``a`` and ``b``."""
        ia = self.boards.index(self.board(a))
        ib = self.boards.index(self.board(b))
        return self.distance[ia][ib]

    def smt(self) -> int:
        """The most hardware threads of any physical core (1 = no SMT)."""
        return max(len(g) for b in self.boards for g in b.siblings)

    def summary(self) -> str:
        """One line: ``2 boards x 4 cores (8 cores, 4 physical, SMT 2)``."""
        sizes = sorted({len(b.cores) for b in self.boards})
        per = f"{sizes[0]}" if len(sizes) == 1 else "/".join(map(str, (len(b.cores) for b in self.boards)))
        phys = sum(len(b.siblings) for b in self.boards)
        nb = len(self.boards)
        return (
            f"{nb} board{'s' if nb != 1 else ''} x {per} cores ({self.ncores} cores, {phys} physical, SMT {self.smt()})"
        )

    def text(self) -> str:
        """The canonical text form: a topology file that reads back to an equal map.

        One ``[[board]]`` table per board in order, with ``id``, ``cores``,
        ``siblings`` (only the groups of two or more threads), ``host_cpus``
        (one host CPU per core, in core order; left out when every core runs
        on the host CPU of its own number), ``memory`` and ``node`` when known,
        and ``distance`` (the board's row of the matrix).
        """
        out = []
        for i, b in enumerate(self.boards):
            out.append("[[board]]")
            out.append(f"id = {b.id}")
            out.append(f'cores = "{cpuset.format(b.cores)}"')
            smt = [g for g in b.siblings if len(g) > 1]
            if smt:
                out.append("siblings = [" + ", ".join(f'"{cpuset.format(g)}"' for g in smt) + "]")
            if any(self.host_cpus[c] != c for c in b.cores):
                out.append("host_cpus = [" + ", ".join(str(self.host_cpus[c]) for c in b.cores) + "]")
            if b.memory is not None:
                size = format_size(b.memory)
                exact = _exact(size, b.memory)
                out.append(f'memory = "{size}"' if exact else f"memory = {b.memory}")
            if b.node is not None:
                out.append(f"node = {b.node}")
            out.append("distance = [" + ", ".join(map(str, self.distance[i])) + "]")
            out.append("")
        for dv in self.devices:
            out.append("[[device]]")
            out.append(f'type = "{dv.type}"')
            out.append(f"index = {dv.index}")
            out.append(f"board = {dv.board}")
            if dv.model:
                out.append(f"model = {_quote(dv.model)}")
            if dv.memory is not None:
                size = format_size(dv.memory)
                out.append(f'memory = "{size}"' if _exact(size, dv.memory) else f"memory = {dv.memory}")
            if dv.uuid:
                out.append(f"uuid = {_quote(dv.uuid)}")
            if dv.pci:
                out.append(f"pci = {_quote(dv.pci)}")
            if len(dv.paths) == 1:
                out.append(f"path = {_quote(dv.paths[0])}")
            elif dv.paths:
                out.append("path = [" + ", ".join(_quote(p) for p in dv.paths) + "]")
            out.append("")
        return "\n".join(out)

    def devices_on(self, board_id: int) -> tuple[Device, ...]:
        """The devices attached to the board with id ``board_id``."""
        return tuple(dv for dv in self.devices if dv.board == board_id)

    def device_summary(self) -> str:
        """``4 gpu (H100), 1 fpga`` or ``no devices``."""
        if not self.devices:
            return "no devices"
        parts = []
        for t in sorted({dv.type for dv in self.devices}):
            ds = [dv for dv in self.devices if dv.type == t]
            models = sorted({dv.model for dv in ds if dv.model})
            parts.append(f"{len(ds)} {t}" + (f" ({', '.join(models)})" if models else ""))
        return ", ".join(parts)


def _quote(text: str) -> str:
    """``text`` as a TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _exact(size: str, n: int) -> bool:
    try:
        return parse_size(size) == n
    except UnitError:
        return False


def default_distance(nboards: int) -> tuple[tuple[int, ...], ...]:
    """10 on the diagonal, 20 elsewhere: the distances Linux assumes without a table."""
    return tuple(tuple(LOCAL_DISTANCE if i == j else REMOTE_DISTANCE for j in range(nboards)) for i in range(nboards))


def make(
    boards: Iterable[Board],
    host_cpus: Iterable[int],
    distance: Iterable[Iterable[int]] | None = None,
    devices: Iterable[Device] = (),
) -> MachineMap:
    """A checked :class:`MachineMap` (``distance`` None: :func:`default_distance`); devices sorted by type
    and index."""
    bs = tuple(boards)
    dist = default_distance(len(bs)) if distance is None else tuple(tuple(r) for r in distance)
    devs = tuple(sorted(devices, key=lambda dv: (dv.type, dv.index)))
    return MachineMap(boards=bs, host_cpus=tuple(host_cpus), distance=dist, devices=devs)


def board(
    board_id: int,
    cores: Iterable[int],
    siblings: Iterable[Iterable[int]] = (),
    memory: int | None = None,
    node: int | None = None,
) -> Board:
    """A :class:`Board`; cores in no group of ``siblings`` are physical cores of their own."""
    cs = tuple(sorted(set(cores)))
    groups = [tuple(sorted(set(g))) for g in siblings]
    grouped = {c for g in groups for c in g}
    groups += [(c,) for c in cs if c not in grouped]
    groups.sort(key=lambda g: g[0] if g else -1)
    return Board(id=board_id, cores=cs, siblings=tuple(groups), memory=memory, node=node)


def flat(ncores: int, host_cpus: Iterable[int]) -> MachineMap:
    """One board of ``ncores`` cores without SMT; core i runs on host CPU ``host_cpus[i % n]``.

    This is the map of a machine declared by its number of cores (``gridsched.host.topology.declared``).
    """
    host = tuple(host_cpus)
    if ncores <= 0 or not host:
        raise TopologyError("a flat machine needs at least one core and one host CPU")
    return make([board(0, range(ncores))], [host[i % len(host)] for i in range(ncores)])
