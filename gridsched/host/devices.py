"""The host's devices (GPUs): discovery, the configuration's share, and what a job's environment says of them.

Devices come from the topology file's ``[[device]]`` tables when it declares
any (declared devices win), else from discovery on the host:

* NVIDIA: ``nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id
  --format=csv,noheader`` when ``nvidia-smi`` is on ``PATH``; the NUMA node of
  each GPU from ``/sys/bus/pci/devices/BUS/numa_node`` (bus id lower-cased,
  its domain written with 8 digits as nvidia-smi does, 4 as sysfs does);
* AMD: ``/sys/class/drm/card*/device`` with vendor ``0x1002``.

A discovered device hangs on the board whose NUMA node is its own, else on
the first board.  :func:`device_env` is what a job with devices finds in its
environment; a job without devices gets nothing from here.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from gridsched.core.devices import DeviceAsk
from gridsched.core.devices import never_fits as core_never_fits
from gridsched.core.topology import Device, MachineMap
from gridsched.core.units import UnitError, parse_size

__all__ = ["device_env", "discover", "with_devices"]

SMI_QUERY = ["--query-gpu=index,uuid,name,memory.total,pci.bus_id", "--format=csv,noheader"]
AMD_VENDOR = "0x1002"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def pci_sysfs_name(bus: str) -> str:
    """A PCI bus id as sysfs names it: ``00000000:3B:00.0`` -> ``0000:3b:00.0``."""
    bus = bus.strip().lower()
    m = re.match(r"([0-9a-f]+):([0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f])\Z", bus)
    if not m:
        return bus
    return f"{int(m.group(1), 16):04x}:{m.group(2)}"


def _numa(sysfs: Path, bus: str) -> int | None:
    v = _read(sysfs / "bus" / "pci" / "devices" / pci_sysfs_name(bus) / "numa_node")
    try:
        n = int(v) if v is not None else -1
    except ValueError:
        return None
    return n if n >= 0 else None


def nvidia(sysfs: str | Path = "/sys", smi: str | None = None) -> list[tuple[Device, int | None]] | None:
    """The NVIDIA GPUs ``nvidia-smi`` lists, each with its NUMA node; None if it is not on PATH or fails."""
    exe = smi or shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, *SMI_QUERY], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        idx, uuid, name, mem, bus = parts
        memory = None
        m = re.match(r"(\d+)\s*MiB\Z", mem)
        if m:
            memory = int(m.group(1)) * 1024 * 1024
        else:
            try:
                memory = parse_size(mem.replace(" ", ""))
            except UnitError:
                memory = None
        model = re.sub(r"[^A-Za-z0-9 ._:+/()-]", "", name)[:64]
        pci = pci_sysfs_name(bus)
        out.append((Device("gpu", int(idx), 0, model, memory, uuid[:64], pci), _numa(Path(sysfs), bus)))
    return out


def amd(sysfs: str | Path = "/sys") -> list[tuple[Device, int | None]]:
    """The AMD GPUs under ``SYSFS/class/drm/card*/device`` (vendor 0x1002), numbered in card order."""
    root = Path(sysfs) / "class" / "drm"
    out: list[tuple[Device, int | None]] = []
    cards = sorted(
        (p for p in root.glob("card[0-9]*") if re.fullmatch(r"card\d+", p.name)), key=lambda p: int(p.name[4:])
    )
    for card in cards:
        dev = card / "device"
        if _read(dev / "vendor") != AMD_VENDOR:
            continue
        node_v = _read(dev / "numa_node")
        try:
            node = int(node_v) if node_v is not None else -1
        except ValueError:
            node = -1
        try:
            pci = os.path.basename(os.path.realpath(dev))
        except OSError:
            pci = ""
        if not re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]", pci):
            pci = ""
        out.append((Device("gpu", len(out), 0, "", None, "", pci), node if node >= 0 else None))
    return out


def discover(machine: MachineMap, sysfs: str | Path = "/sys") -> tuple[tuple[Device, ...], str]:
    """The host's GPUs placed on ``machine``'s boards, and where they came from (``nvidia-smi``, ``sysfs``,
    ``none``)."""
    found = nvidia(sysfs)
    source = "nvidia-smi"
    if not found:
        found = amd(sysfs)
        source = "sysfs"
    if not found:
        return (), "none"
    by_node = {b.node: b.id for b in machine.boards if b.node is not None}
    first = machine.boards[0].id
    return tuple(replace(dv, board=by_node.get(-1 if node is None else node, first)) for dv, node in found), source


def with_devices(machine: MachineMap, declared_in: str, sysfs: str | Path = "/sys") -> tuple[MachineMap, str]:
    """``machine`` with its devices: those declared (in the file ``declared_in``) if any, else the host's.
    The second value says where they came from: ``declared in FILE``, ``nvidia-smi``, ``sysfs`` or ``none``."""
    if machine.devices:
        return machine, f"declared in {declared_in}"
    found, source = discover(machine, sysfs)
    if not found:
        return machine, "none"
    return replace(machine, devices=found), source


def shared(machine: MachineMap, share: Mapping[str, int]) -> tuple[Device, ...]:
    """The machine's devices with the share the configuration gives their type."""
    return tuple(
        replace(dv, share=share.get(dv.type, 1)) if share.get(dv.type, 1) != 1 else dv for dv in machine.devices
    )


def device_env(keys: Iterable[tuple[str, int]], devices: Iterable[Device], compat: bool = True) -> dict[str, str]:
    """The environment of a job holding the devices ``keys`` (empty when it holds none).

    GPUs: ``CUDA_VISIBLE_DEVICES`` (UUIDs where known, else indices),
    ``ROCR_VISIBLE_DEVICES`` and ``HIP_VISIBLE_DEVICES``, ``GPU_DEVICE_ORDINAL``
    and ``GS_GPUS`` (indices), and with ``compat`` the Slurm names
    ``SLURM_JOB_GPUS`` and ``SLURM_GPUS_ON_NODE``.  Every type: ``GS_DEVICES``
    (``gpu:0,gpu:1,fpga:0``).
    """
    mine = sorted(set(keys))
    if not mine:
        return {}
    by_key = {dv.key: dv for dv in devices}
    env = {"GS_DEVICES": ",".join(f"{t}:{i}" for t, i in mine)}
    gpus = [i for t, i in mine if t == "gpu"]
    if gpus:
        idx = ",".join(map(str, gpus))
        uuids = [by_key[("gpu", i)].uuid if ("gpu", i) in by_key else "" for i in gpus]
        env.update(
            CUDA_VISIBLE_DEVICES=",".join(uuids) if all(uuids) else idx,
            ROCR_VISIBLE_DEVICES=idx,
            HIP_VISIBLE_DEVICES=idx,
            GPU_DEVICE_ORDINAL=idx,
            GS_GPUS=idx,
        )
        if compat:
            env.update(SLURM_JOB_GPUS=idx, SLURM_GPUS_ON_NODE=str(len(gpus)))
    return env


def format_keys(keys: Iterable[tuple[str, int]]) -> str:
    """``gpu:0,1;fpga:2``: a job's devices in one short text (empty for none)."""
    per: dict[str, list[int]] = {}
    for t, i in sorted(set(keys)):
        per.setdefault(t, []).append(i)
    return ";".join(f"{t}:{','.join(map(str, ix))}" for t, ix in per.items())


def parse_keys(text: str) -> tuple[tuple[str, int], ...]:
    """The inverse of :func:`format_keys` (what cannot be read is left out)."""
    out = []
    for part in (text or "").split(";"):
        t, _, ix = part.partition(":")
        for i in ix.split(","):
            if t and i.strip().isdigit():
                out.append((t, int(i)))
    return tuple(sorted(set(out)))


# -- requests ----------------------------------------------------------------------------------

TYPE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z")


class AskError(ValueError):
    """A device request that cannot be read: the message names the option and the value."""


def _count(opt: str, text: str) -> int:
    t = text.strip()
    if not t.isdigit():
        raise AskError(f"{opt}: {t!r} is not a count of devices")
    n = int(t)
    if n < 1:
        raise AskError(f"{opt}: at least 1 device is needed")
    if n > 4096:
        raise AskError(f"{opt}: at most 4096 devices")
    return n


def parse_gpus(text: str, opt: str = "--gpus") -> tuple[str, int]:
    """``--gpus N`` or ``--gpus MODEL:N`` (as Slurm's ``--gpus [type:]N``): ``(model, count)``."""
    shown = f"{opt} {text}"
    model, _, n = text.strip().rpartition(":")
    if model and not MODEL_NAME.match(model):
        raise AskError(f"{shown}: {model!r} is not a model name")
    return model, _count(shown, n)


def parse_gres(text: str, opt: str = "--gres") -> tuple[str, str, int]:
    """``--gres NAME[:MODEL][:N]`` (Slurm's form; N defaults to 1): ``(type, model, count)``."""
    shown = f"{opt} {text}"
    parts = text.strip().split(":")
    name = parts[0].lower()
    if not TYPE_NAME.match(name):
        raise AskError(f"{shown}: {parts[0]!r} is not a device type (such as gpu)")
    if len(parts) == 1:
        return name, "", 1
    if len(parts) == 2:
        if parts[1].strip().isdigit() or parts[1].strip().lstrip("-").isdigit():
            return name, "", _count(shown, parts[1])
        if not MODEL_NAME.match(parts[1]):
            raise AskError(f"{shown}: {parts[1]!r} is not a model name")
        return name, parts[1], 1
    if len(parts) == 3:
        if not MODEL_NAME.match(parts[1]):
            raise AskError(f"{shown}: {parts[1]!r} is not a model name")
        return name, parts[1], _count(shown, parts[2])
    raise AskError(f"{shown}: expected NAME[:MODEL][:COUNT] such as gpu:2 or gpu:a100:2")


def label(ask: DeviceAsk) -> str:
    """How a user asks for ``ask`` on gsub's command line: ``--gpus 2``, ``--gpus H100:2``, ``--gres fpga:1``."""
    if ask.type == "gpu":
        return f"--gpus {ask.model + ':' if ask.model else ''}{ask.count}"
    return f"--gres {ask.type}:{ask.model + ':' if ask.model else ''}{ask.count}"


def refusal(asks: Iterable[DeviceAsk], devices: Iterable[Device]) -> str | None:
    """Why ``asks`` can never be met on a machine with ``devices``: ``--gpus 5: the machine has 4 GPUs``."""
    devs = tuple(devices)
    for a in asks:
        why = core_never_fits((a,), devs)
        if why:
            return f"{label(a)}: {why}"
    return None


def asks_to_spec(asks: Iterable[DeviceAsk]) -> list[dict[str, object]]:
    """The ``devices`` of a job's spec."""
    return [
        {"type": a.type, "count": a.count, "model": a.model, "bind": a.bind, "exclusive": a.exclusive} for a in asks
    ]


def asks_from_spec(raw: object) -> tuple[DeviceAsk, ...]:
    """The inverse of :func:`asks_to_spec` for a spec already checked at the boundary."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        DeviceAsk(
            str(x["type"]),
            int(x["count"]),
            str(x.get("model", "")),
            str(x.get("bind", "closest")),
            bool(x.get("exclusive", False)),
        )
        for x in raw
        if isinstance(x, dict)
    )


# -- device nodes --------------------------------------------------------------------------------

NVIDIA_MAJOR = 195  # /dev/nvidiaN is char 195:N; nvidiactl (195:255) and nvidia-modeset (195:254) are shared
NVIDIA_VENDOR = "0x10de"
NO_NODE = 'no device node known (declare it with path = "/dev/..." in the topology file)'


@dataclass(frozen=True, slots=True, order=True)
class Node:
    """A device node by its number: ``c 195:1`` (``kind`` is ``c`` for a char device, ``b`` for a block one)."""

    kind: str
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.kind} {self.major}:{self.minor}"


@dataclass(frozen=True, slots=True)
class NodeMap:
    """The device nodes of each of the machine's devices (by ``(type, index)``), and the devices whose nodes
    are not known (each with why)."""

    nodes: Mapping[tuple[str, int], tuple[Node, ...]]
    unknown: tuple[tuple[tuple[str, int], str], ...] = ()

    def denied(self, held: Iterable[tuple[str, int]]) -> tuple[Node, ...]:
        """The nodes a job holding the devices ``held`` must not open: those of every other device, except a
        node one of its own devices has too."""
        mine = set(held)
        allowed = {n for k in mine for n in self.nodes.get(k, ())}
        return tuple(sorted({n for k, ns in self.nodes.items() if k not in mine for n in ns} - allowed))

    def describe_unknown(self) -> str:
        return "; ".join(f"{t} {i}: {why}" for (t, i), why in self.unknown)


class NodeError(ValueError):
    """A declared device node that cannot be used (the message says why)."""


def _root_only(st: os.stat_result) -> bool:
    """Owned by root and writable by root only (or, for a directory, sticky: nobody renames root's files)."""
    if st.st_uid != 0:
        return False
    return not st.st_mode & 0o022 or (stat.S_ISDIR(st.st_mode) and bool(st.st_mode & stat.S_ISVTX))


def _trusted_dirs(path: str) -> None:
    """Every directory from ``/`` down to ``path``'s own is root's: no user can swap what the path names."""
    cur = "/"
    for part in ["", *(p for p in path.split("/")[:-1] if p)]:
        cur = os.path.join(cur, part)
        st = os.lstat(cur)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid != 0:
                raise NodeError(f"{cur} is a link a user owns")
            continue  # a link of root's (/var/run): what it leads to is checked as the walk goes on
        if not _root_only(st):
            raise NodeError(f"{cur} can be changed by users other than root")


def stat_node(path: str) -> Node:
    """The number of the device node at ``path`` (an absolute path the admin declared).

    Links are followed (``/dev/dri/by-path/...``), but only through
    directories and links root alone can change, both on the way to the link
    and to its target; the node itself must be a char or block device owned by
    root.  Anything else is a :class:`NodeError` saying why.
    """
    try:
        _trusted_dirs(path)  # the links on the way are root's
        if stat.S_ISLNK(os.lstat(path).st_mode) and os.lstat(path).st_uid != 0:
            raise NodeError("it is a link a user owns")
        real = os.path.realpath(path)
        _trusted_dirs(real)  # and so is every directory they lead to
        st = os.lstat(real)
    except FileNotFoundError:
        raise NodeError("no such device node") from None
    except OSError as e:
        raise NodeError(e.strerror or str(e)) from None
    if stat.S_ISCHR(st.st_mode):
        kind = "c"
    elif stat.S_ISBLK(st.st_mode):
        kind = "b"
    else:
        raise NodeError("not a device node")
    if st.st_uid != 0:
        raise NodeError("the node is not owned by root")
    return Node(kind, os.major(st.st_rdev), os.minor(st.st_rdev))


def _dev_numbers(text: str | None) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d+):(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _pci_nodes(pci: str, index: int, sysfs: Path, proc: Path) -> tuple[Node, ...] | None:
    """The nodes of the GPU at PCI address ``pci``: NVIDIA's ``c 195:MINOR`` (the driver's minor, else the
    index), or the DRM nodes (``card``, ``renderD``) sysfs lists under the device; None if not found."""
    dev = sysfs / "bus" / "pci" / "devices" / pci_sysfs_name(pci)
    vendor = _read(dev / "vendor")
    if vendor is None:
        return None
    if vendor == NVIDIA_VENDOR:
        minor = index
        info = _read(proc / "driver" / "nvidia" / "gpus" / pci_sysfs_name(pci) / "information")
        m = re.search(r"Device Minor:\s*(\d+)", info or "")
        if m:
            minor = int(m.group(1))
        return (Node("c", NVIDIA_MAJOR, minor),)
    out = []
    try:
        names = sorted(os.listdir(dev / "drm"))
    except OSError:
        return None
    for name in names:
        if re.fullmatch(r"(card|renderD)\d+", name):
            mm = _dev_numbers(_read(dev / "drm" / name / "dev"))
            if mm:
                out.append(Node("c", *mm))
    return tuple(out) or None


def nodes_of(dv: Device, sysfs: str | Path = "/sys", proc: str | Path = "/proc") -> tuple[Node, ...]:
    """The device nodes of ``dv``: those its ``path`` names, else for a GPU those the host's drivers give it
    (found through its PCI address in sysfs, else NVIDIA's ``/dev/nvidiaINDEX`` when the NVIDIA driver is
    loaded, else the INDEX-th AMD card in ``/sys/class/drm``).  :class:`NodeError` when none is known."""
    if dv.paths:
        out = []
        for p in dv.paths:
            try:
                out.append(stat_node(p))
            except NodeError as e:
                raise NodeError(f"{p}: {e}") from None
        return tuple(out)
    if dv.type != "gpu":
        raise NodeError(NO_NODE)
    sysfs, proc = Path(sysfs), Path(proc)
    if dv.pci:
        found = _pci_nodes(dv.pci, dv.index, sysfs, proc)
        if found:
            return found
    if (proc / "driver" / "nvidia").is_dir():
        return (Node("c", NVIDIA_MAJOR, dv.index),)
    cards = [d for d, _ in amd(sysfs)]
    if dv.index < len(cards) and cards[dv.index].pci:
        found = _pci_nodes(cards[dv.index].pci, dv.index, sysfs, proc)
        if found:
            return found
    raise NodeError(NO_NODE)


def node_map(devices: Iterable[Device], sysfs: str | Path = "/sys", proc: str | Path = "/proc") -> NodeMap:
    """The nodes of every device in ``devices`` (see :func:`nodes_of`)."""
    nodes: dict[tuple[str, int], tuple[Node, ...]] = {}
    unknown = []
    for dv in devices:
        try:
            nodes[dv.key] = nodes_of(dv, sysfs, proc)
        except NodeError as e:
            unknown.append((dv.key, str(e)))
    return NodeMap(nodes, tuple(unknown))
