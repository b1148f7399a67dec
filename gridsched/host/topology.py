"""The machine map of this host: read from a topology file or from Linux sysfs.

:func:`load_machine` is what the daemon and ``gctl`` use: the file named by
``[machine] topology`` in the configuration, else the host's own topology
restricted to the CPUs the daemon uses, else (when ``[machine] cores`` declares
more cores than there are host CPUs) one flat board.

:func:`parse` reads the text of a topology file (format: ``etc/topology.toml``
and gridsched.toml(5)); every error is a :class:`TopologyError` whose message
starts with ``FILE:LINE:`` when the error has a line.  :func:`detect` reads
``/sys/devices/system/cpu`` and ``/sys/devices/system/node``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gridsched.core import cpuset
from gridsched.core.topology import Board, Device, MachineMap, TopologyError, board, flat, make
from gridsched.core.units import UnitError, parse_size
from gridsched.protocol.config import Settings

__all__ = [
    "TopologyError",
    "changed_map",
    "detect",
    "in_force",
    "load_machine",
    "membind_unavailable",
    "parse",
    "read",
    "running_map",
]

SYSFS = Path("/sys/devices/system")
BOARD_KEYS = ("id", "cores", "siblings", "memory", "node", "host_cpus", "distance")


# -- the topology file -------------------------------------------------------------


class _Lines:
    """Where each ``[[board]]`` header and each key of a board is in the text (1-based)."""

    _HEADER = re.compile(r"^\s*\[\[\s*(\S+?)\s*\]\]")
    _TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")
    _KEY = re.compile(r"""^\s*["']?([A-Za-z0-9_-]+)["']?\s*=""")

    def __init__(self, text: str) -> None:
        self.headers: list[int] = []
        self.keys: dict[tuple[int, str], int] = {}
        self.top: dict[str, int] = {}
        self.dev_headers: list[int] = []
        self.dev_keys: dict[tuple[int, str], int] = {}
        section = -1  # -1: top level; -2: another table; i >= 0: the i-th board; -3 - i: the i-th device
        for no, line in enumerate(text.splitlines(), 1):
            if m := self._HEADER.match(line):
                if m.group(1) == "board":
                    self.headers.append(no)
                    section = len(self.headers) - 1
                elif m.group(1) == "device":
                    self.dev_headers.append(no)
                    section = -3 - (len(self.dev_headers) - 1)
                else:
                    self.top.setdefault(m.group(1), no)
                    section = -2
            elif m := self._TABLE.match(line):
                self.top.setdefault(m.group(1), no)
                section = -2
            elif m := self._KEY.match(line):
                if section >= 0:
                    self.keys.setdefault((section, m.group(1)), no)
                elif section <= -3:
                    self.dev_keys.setdefault((-3 - section, m.group(1)), no)
                elif section == -1:
                    self.top.setdefault(m.group(1), no)

    def device(self, i: int, key: str | None = None) -> int | None:
        if key is not None and (i, key) in self.dev_keys:
            return self.dev_keys[(i, key)]
        return self.dev_headers[i] if i < len(self.dev_headers) else None

    def board(self, i: int, key: str | None = None) -> int | None:
        if key is not None and (i, key) in self.keys:
            return self.keys[(i, key)]
        return self.headers[i] if i < len(self.headers) else None


def _strict_cpulist(text: str) -> list[int]:
    """The cores of a cpulist in the order written, repeats kept (so they can be refused)."""
    parse_ok = cpuset.parse(text)  # raises CpuListError on a malformed list
    out: list[int] = []
    for part in text.split(","):
        out.extend(sorted(cpuset.parse(part)))
    assert set(out) == parse_ok
    return out


def parse(text: str, source: str = "<topology>", host_cpus: Iterable[int] | None = None) -> MachineMap:
    """The machine map a topology file describes.

    ``host_cpus``: the host CPUs jobs may be pinned to; a core mapped (or, with
    no ``host_cpus`` key, numbered) outside them is an error.  None: unchecked.
    """
    host = None if host_cpus is None else frozenset(host_cpus)
    lines = _Lines(text)

    def err(msg: str, line: int | None = None) -> TopologyError:
        return TopologyError(f"{source}:{line}: {msg}" if line else f"{source}: {msg}")

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column \d+\)$", msg)
        if m:
            raise err("TOML syntax error: " + msg[: m.start()].strip(), int(m.group(1))) from None
        raise err(f"TOML syntax error: {msg}") from None
    for key in data:
        if key not in ("board", "device"):
            raise err(
                f"unknown key or table {key!r} (a topology file holds [[board]] and [[device]] tables)",
                lines.top.get(key),
            )
    raw = data.get("board")
    if not isinstance(raw, list) or not raw or not all(isinstance(b, dict) for b in raw):
        raise err("no [[board]] table: a topology file describes at least one board", lines.top.get("board"))

    owner: dict[int, int] = {}  # core -> board position
    boards: list[Board] = []
    mapped: dict[int, int] = {}  # core -> host CPU
    ids: dict[int, int] = {}
    rows: list[list[int] | None] = []
    for i, b in enumerate(raw):
        where = f"board {b.get('id', i)}" if isinstance(b.get("id", i), int) else f"board #{i + 1}"

        def bad(msg: str, key: str | None = None, i: int = i, where: str = where) -> TopologyError:
            return err(f"{where}: {msg}", lines.board(i, key))

        for key in b:
            if key not in BOARD_KEYS:
                raise bad(f"unknown key {key!r} (known: {', '.join(BOARD_KEYS)})", key)
        bid = b.get("id", i)
        if not isinstance(bid, int) or isinstance(bid, bool) or bid < 0:
            raise bad(f"id = {bid!r}: must be a whole number, 0 or more", "id")
        if bid in ids:
            raise bad(f"id {bid} is already the id of board #{ids[bid] + 1} (line {lines.board(ids[bid], 'id')})", "id")
        ids[bid] = i
        cores_v = b.get("cores")
        if cores_v is None:
            raise bad('has no cores (cores = "0-7")')
        if not isinstance(cores_v, str):
            raise bad(f'cores = {cores_v!r}: must be a cpu list such as "0-7"', "cores")
        try:
            listed = _strict_cpulist(cores_v)
        except cpuset.CpuListError as e:
            raise bad(f"cores = {cores_v!r}: not a cpu list ({e})", "cores") from None
        if not listed:
            raise bad('is empty: cores = ""', "cores")
        seen: set[int] = set()
        for c in listed:
            if c in seen:
                raise bad(f"core {c} is listed twice in cores = {cores_v!r}", "cores")
            seen.add(c)
            if c in owner:
                j = owner[c]
                raise bad(f"core {c} is already on board {boards[j].id} (line {lines.board(j, 'cores')})", "cores")
            owner[c] = i
        cores = sorted(seen)

        groups = _siblings(b.get("siblings", []), seen, bad)

        memory = _memory(b.get("memory"), bad, "64G")
        node = b.get("node")
        if node is not None and (not isinstance(node, int) or isinstance(node, bool) or node < 0):
            raise bad(f"node = {node!r}: must be a NUMA node number", "node")

        mapped.update(_host_cpus(b.get("host_cpus"), cores, host, bad))

        dist = b.get("distance")
        if dist is not None:
            if not isinstance(dist, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dist
            ):
                raise bad(f"distance = {dist!r}: must be a list of positive whole numbers", "distance")
            if len(dist) != len(raw):
                raise bad(f"distance has {len(dist)} entries, the file has {len(raw)} boards", "distance")
        rows.append(dist)
        boards.append(board(bid, cores, groups, memory=memory, node=node))

    n = len(owner)
    gaps = [c for c in range(n) if c not in owner]
    if gaps:
        first = gaps[0]
        above = min(c for c in owner if c > first)
        raise err(
            f"cores must be numbered 0 to {n - 1} without gaps: core {first} is on no board",
            lines.board(owner[above], "cores"),
        )
    if any(r is not None for r in rows):
        if any(r is None for r in rows):
            k = rows.index(None)
            raise err(f"board {boards[k].id}: no distance, while other boards give theirs", lines.board(k))
        distance: Any = rows
    else:
        distance = None
    devices = _devices(data.get("device"), {b.id for b in boards}, lines, err)
    try:
        return make(boards, [mapped[c] for c in range(n)], distance, devices)
    except TopologyError as e:  # should not happen: everything was checked above
        raise err(str(e)) from None


def _siblings(sib: object, seen: set[int], bad: Any) -> list[list[int]]:
    """A board's ``siblings``: groups of its cores that share a physical core (SMT threads)."""
    groups: list[list[int]] = []
    if not isinstance(sib, list) or not all(isinstance(g, str) for g in sib):
        raise bad('siblings must be a list of cpu lists such as ["0,4", "1,5"]', "siblings")
    grouped: dict[int, str] = {}
    for g in sib:
        try:
            members = _strict_cpulist(g)
        except cpuset.CpuListError as e:
            raise bad(f"siblings {g!r}: not a cpu list ({e})", "siblings") from None
        if not members:
            raise bad("siblings: an empty group", "siblings")
        for c in members:
            if c not in seen:
                raise bad(f"siblings {g!r}: core {c} is not a core of this board", "siblings")
            if c in grouped:
                raise bad(f"siblings: core {c} is in {grouped[c]!r} and in {g!r}", "siblings")
            grouped[c] = g
        groups.append(members)
    return groups


def _host_cpus(hc: object, cores: list[int], host: frozenset[int] | None, bad: Any) -> dict[int, int]:
    """A board's cores -> the host CPUs they run on: its ``host_cpus`` (a cpu list cycled over, or one CPU per
    core), else the same numbers; each one the host offers (``host``; None: unchecked)."""
    mapped: dict[int, int] = {}
    if hc is None:
        for c in cores:
            if host is not None and c not in host:
                raise bad(
                    f"core {c} would run on host CPU {c}, which this host does not offer "
                    f"(it offers {cpuset.format(host)}); map the board's cores with host_cpus",
                    "cores",
                )
            mapped[c] = c
    else:
        if isinstance(hc, str):
            try:
                cycle = sorted(cpuset.parse(hc))
            except cpuset.CpuListError as e:
                raise bad(f"host_cpus = {hc!r}: not a cpu list ({e})", "host_cpus") from None
            if not cycle:
                raise bad("host_cpus is empty", "host_cpus")
            per_core = [cycle[k % len(cycle)] for k in range(len(cores))]
        elif isinstance(hc, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in hc):
            if len(hc) != len(cores):
                raise bad(
                    f"host_cpus lists {len(hc)} CPUs for {len(cores)} cores (one per core, "
                    "in core order, or a cpu list to cycle over)",
                    "host_cpus",
                )
            per_core = list(hc)
        else:
            raise bad(f'host_cpus = {hc!r}: must be a cpu list such as "0-1" or a list of CPU numbers', "host_cpus")
        for c, cpu in zip(cores, per_core):
            if host is not None and cpu not in host:
                raise bad(f"host CPU {cpu} is not one this host offers ({cpuset.format(host)})", "host_cpus")
            mapped[c] = cpu
    return mapped


DEVICE_KEYS = ("type", "index", "board", "model", "memory", "uuid", "pci", "path")
DEVICE_PATH = re.compile(r"/[A-Za-z0-9._+:/-]{1,254}\Z")
MAX_DEVICE_PATHS = 16
DEVICE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
DEVICE_TEXT = re.compile(r"[A-Za-z0-9 ._:+/()-]{1,64}\Z")


def _devices(raw: Any, board_ids: set[int], lines: _Lines, err: Any) -> list[Device]:
    """The ``[[device]]`` tables of a topology file, checked (errors name the line)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise err("device must be [[device]] tables", lines.top.get("device"))
    out: list[Device] = []
    seen: dict[tuple[str, int], int] = {}
    for i, t in enumerate(raw):

        def bad(msg: str, key: str | None = None, i: int = i) -> TopologyError:
            return err(f"device #{i + 1}: {msg}", lines.device(i, key))  # type: ignore[no-any-return]

        for key in t:
            if key not in DEVICE_KEYS:
                raise bad(f"unknown key {key!r} (known: {', '.join(DEVICE_KEYS)})", key)
        dtype = t.get("type")
        if not isinstance(dtype, str) or not DEVICE_TYPE.match(dtype):
            raise bad(f'type = {dtype!r}: must be a lower-case name such as "gpu" or "fpga"', "type")
        idx = t.get("index")
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx <= 4095:
            raise bad(f"index = {idx!r}: must be a whole number from 0 to 4095", "index")
        if (dtype, idx) in seen:
            raise bad(f"{dtype} {idx} is declared twice (first on line {seen[(dtype, idx)]})", "index")
        seen[(dtype, idx)] = lines.device(i) or 0
        if "board" not in t:
            raise bad(f"{dtype} {idx} is on no board (board = ID)")
        bid = t["board"]
        if not isinstance(bid, int) or isinstance(bid, bool):
            raise bad(f"board = {bid!r}: must be a board id", "board")
        if bid not in board_ids:
            known = ", ".join(map(str, sorted(board_ids)))
            raise bad(f"{dtype} {idx} is on board {bid}, which does not exist (boards: {known})", "board")
        texts = {}
        for key in ("model", "uuid", "pci"):
            v = t.get(key, "")
            if not isinstance(v, str) or (v and not DEVICE_TEXT.match(v)):
                raise bad(f"{key} = {v!r}: must be a short name (letters, digits, . _ : + / - and spaces)", key)
            texts[key] = v
        memory = _memory(t.get("memory"), bad, "80G")
        paths = _device_paths(t.get("path"), bad)
        out.append(Device(dtype, idx, bid, texts["model"], memory, texts["uuid"], texts["pci"].lower(), paths=paths))
    return out


def _device_paths(raw: object, bad: Callable[..., Exception]) -> tuple[str, ...]:
    """A device's ``path``: one absolute path of a device node, or a list of them (its nodes)."""
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items or len(items) > MAX_DEVICE_PATHS:
        raise bad(
            f'path = {raw!r}: must be a device node such as "/dev/nvidia0", or a list of 1 to '
            f"{MAX_DEVICE_PATHS} of them",
            "path",
        )
    out: list[str] = []
    for p in items:
        if (
            not isinstance(p, str)
            or not DEVICE_PATH.match(p)
            or any(part in (".", "..") for part in p.split("/"))
            or "//" in p
        ):
            raise bad(f'path = {p!r}: must be the absolute path of a device node such as "/dev/nvidia0"', "path")
        if p not in out:
            out.append(p)
    return tuple(out)


def read(path: str | Path, host_cpus: Iterable[int] | None = None) -> MachineMap:
    """The machine map in the topology file at ``path`` (see :func:`parse`)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise TopologyError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TopologyError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    return parse(text, str(path), host_cpus)


# -- the host ---------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(path: Path, default: int) -> int:
    v = _read(path)
    try:
        return int(v) if v is not None else default
    except ValueError:
        return default


def _cpus(path: Path) -> frozenset[int]:
    v = _read(path)
    if not v:
        return frozenset()
    try:
        return cpuset.parse(v)
    except cpuset.CpuListError:
        return frozenset()


def _node_memory(node_dir: Path) -> int | None:
    text = _read(node_dir / "meminfo") or ""
    m = re.search(r"MemTotal:\s+(\d+)\s*kB", text)
    return int(m.group(1)) * 1024 if m else None


def _nodes_add_up(sysfs: Path, meminfo: Path) -> bool:
    """Whether the NUMA nodes' memory adds up to the host's (within 5 %); True where either is unknown."""
    m = re.search(r"MemTotal:\s+(\d+)\s*kB", _read(meminfo) or "")
    if not m:
        return True
    nodes = [_node_memory(d) for d in (sysfs / "node").glob("node[0-9]*")]
    if not nodes or None in nodes:
        return True
    host = int(m.group(1)) * 1024
    return abs(sum(n for n in nodes if n) - host) <= host // 20


def detect(
    cpus: Iterable[int] | None = None, sysfs: str | Path = SYSFS, meminfo: str | Path | None = None
) -> MachineMap:
    """The host's topology, restricted to ``cpus`` (default: the CPUs this process may use).

    Declared core ``i`` runs on the ``i``-th of those CPUs in increasing order.
    Boards are the NUMA nodes when the CPUs span two or more of them (with
    their memory and distance table), else the sockets (physical packages).
    SMT siblings come from ``thread_siblings_list``.  Whatever sysfs does not
    say is taken as: one socket, no SMT, memory of the whole host.  The NUMA
    nodes' memory is the boards' only where the nodes' add up to the host's
    (``meminfo``, default /proc/meminfo for the host's own sysfs; unchecked
    for another): on some virtual machines node 0 reports a fraction of it.
    """
    sysfs = Path(sysfs)
    if meminfo is None and sysfs == Path(SYSFS):
        meminfo = "/proc/meminfo"
    host = sorted(set(cpus) if cpus is not None else os.sched_getaffinity(0))
    if not host:
        raise TopologyError("no host CPUs to build a machine from")
    core_of = {cpu: i for i, cpu in enumerate(host)}
    cpu_dir = sysfs / "cpu"

    nodes: dict[int, frozenset[int]] = {}
    for d in sorted((sysfs / "node").glob("node[0-9]*")):
        mine = _cpus(d / "cpulist") & core_of.keys()
        if mine:
            nodes[int(d.name[4:])] = mine
    node_of = {cpu: n for n, cs in nodes.items() for cpu in cs}

    by_numa = len(nodes) >= 2
    members: dict[int, list[int]] = {}
    for cpu in host:
        key = node_of.get(cpu, 0) if by_numa else _int(cpu_dir / f"cpu{cpu}" / "topology" / "physical_package_id", 0)
        members.setdefault(max(key, 0), []).append(cpu)

    single_node = next(iter(nodes)) if len(nodes) == 1 else None
    boards: list[Board] = []
    for bid in sorted(members):
        bcpus = members[bid]
        groups: list[list[int]] = []
        done: set[int] = set()
        for cpu in bcpus:
            if cpu in done:
                continue
            sib = _cpus(cpu_dir / f"cpu{cpu}" / "topology" / "thread_siblings_list") or frozenset({cpu})
            g = sorted(s for s in sib | {cpu} if s in bcpus and s not in done)
            done.update(g)
            groups.append([core_of[s] for s in g])
        if by_numa:
            memory, node = _node_memory(sysfs / "node" / f"node{bid}"), bid
        elif single_node is not None:
            node = single_node
            memory = _node_memory(sysfs / "node" / f"node{single_node}") if len(members) == 1 else None
        else:
            node, memory = None, None
        boards.append(board(bid, [core_of[c] for c in bcpus], groups, memory=memory, node=node))
    if meminfo is not None and not _nodes_add_up(sysfs, Path(meminfo)):
        boards = [dataclasses.replace(b, memory=None) for b in boards]

    distance: Any = None
    if by_numa:
        ids = [b.id for b in boards]
        rows = []
        for bid in ids:
            raw = (_read(sysfs / "node" / f"node{bid}" / "distance") or "").split()
            try:
                full = [int(x) for x in raw]
                rows.append([full[j] for j in ids])
            except (ValueError, IndexError):
                rows = []
                break
        distance = rows or None
    return make(boards, host, distance)


def membind_unavailable(machine: MachineMap) -> str | None:
    """Why a job's memory cannot be bound to its boards' NUMA nodes here, or None if it can."""
    nodes = {b.node for b in machine.boards}
    if None in nodes:
        return "the boards are not host NUMA nodes"
    return None


def declared(cfg: Settings) -> tuple[int, tuple[int, ...]]:
    """The number of cores handed out and the host CPUs they run on, as the config declares them here.

    ``machine.cpus`` (or every CPU this process may use) are the host CPUs;
    ``machine.cores`` (0: one per host CPU) is the number of cores; core *i*
    runs on host CPU *i* mod the number of host CPUs.
    """
    allowed = sorted(os.sched_getaffinity(0))
    if cfg.cpus:
        wanted = cpuset.parse(cfg.cpus)
        host = tuple(c for c in allowed if c in wanted) or tuple(sorted(wanted))
    else:
        host = tuple(allowed)
    return cfg.cores or len(host), host


def running_map(spool: Any) -> MachineMap | None:
    """The machine map of the daemon running on ``spool``, as it recorded it at its start.

    None when no daemon runs there or it recorded none.  Commands check
    requests against this map while a daemon runs (a topology file changed
    since takes effect only at the daemon's next start), so what a command
    accepts, the daemon accepts.
    """
    from gridsched.protocol.state import recorded_machine

    if spool.daemon_info() is None:
        return None
    text = recorded_machine(spool.db).get("map")
    if not isinstance(text, str):
        return None
    try:
        return parse(text, "the running map")
    except TopologyError:
        return None


def in_force(spool: Any, cfg: Settings) -> MachineMap:
    """The map requests are checked against: the running daemon's, else the configuration's."""
    return running_map(spool) or load_machine(cfg)


def changed_map(new: MachineMap, running: MachineMap) -> str:
    """Why a reload with the map ``new`` is refused while the daemon runs on ``running``."""
    if new.summary() != running.summary():
        what = new.summary()
    elif new.devices != running.devices and new.boards == running.boards and new.host_cpus == running.host_cpus:
        what = f"devices: {new.device_summary()}, or their share"
    else:
        what = "other cores or host CPUs"
    return (
        f"the machine map changed ({what}, running: {running.summary()}); "
        "it takes effect at the next start of the daemon (gschedd stop, then gschedd start)"
    )


def load_machine(cfg: Settings) -> MachineMap:
    """The machine map the daemon hands out, as ``cfg`` describes it (see the module doc).

    The host CPUs are those of :func:`declared`.  With a topology file,
    ``machine.cores`` must be 0 or the number of cores the file declares.
    Devices: those the file declares, else the host's
    (:func:`gridsched.host.devices.with_devices`), each with the share
    ``[devices.TYPE]`` gives its type.
    """
    return load_with_source(cfg)[0]


def load_with_source(cfg: Settings) -> tuple[MachineMap, str]:
    """:func:`load_machine`, and where its devices came from (``declared in FILE``, ``nvidia-smi``,
    ``sysfs``, ``none``)."""
    from gridsched.host.devices import shared, with_devices

    ncores, host = declared(cfg)
    where = ""
    if cfg.topology:
        path = Path(os.path.expanduser(cfg.topology))
        if not path.is_absolute():
            path = Path(cfg.path).parent / path
        m = read(path, host)
        if cfg.cores and cfg.cores != m.ncores:
            raise TopologyError(f"{path}: declares {m.ncores} cores, but machine.cores = {cfg.cores}")
        where = str(path)
    elif ncores > len(host):
        m = flat(ncores, host)
    else:
        m = detect(host[:ncores])
    m, source = with_devices(m, where)
    if cfg.devices and m.devices:
        from dataclasses import replace

        m = replace(m, devices=shared(m, {t: dc.share for t, dc in cfg.devices.items()}))
    return m, source


def _memory(memory: object, bad: Callable[[str, str], Exception], example: str) -> int | None:
    """A table's ``memory``: a size such as ``example`` or a positive number of bytes (None: not given)."""
    if memory is None:
        return None
    if isinstance(memory, bool) or not isinstance(memory, (int, str)):
        raise bad(f'memory = {memory!r}: must be a size such as "{example}" or a number of bytes', "memory")
    if isinstance(memory, int):
        if memory <= 0:
            raise bad(f"memory = {memory}: must be positive", "memory")
        return memory
    try:
        return parse_size(memory)
    except UnitError as e:
        raise bad(f"memory = {e}", "memory") from None
