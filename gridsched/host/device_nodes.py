"""The device nodes (``/dev``) of the host's devices, as the daemon denies them to jobs that do not hold them:
read from sysfs and ``/proc/devices``, or declared in the topology file (checked: root's files in root's
directories only)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gridsched.core.topology import Device
from gridsched.host.devices import amd, pci_sysfs_name, read_sysfs

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
    vendor = read_sysfs(dev / "vendor")
    if vendor is None:
        return None
    if vendor == NVIDIA_VENDOR:
        minor = index
        info = read_sysfs(proc / "driver" / "nvidia" / "gpus" / pci_sysfs_name(pci) / "information")
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
            mm = _dev_numbers(read_sysfs(dev / "drm" / name / "dev"))
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
