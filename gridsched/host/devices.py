"""The host's devices (GPUs): discovery and the configuration's share.

Devices come from the topology file's ``[[device]]`` tables when it declares
any (declared devices win), else from discovery on the host:

* NVIDIA: ``nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id
  --format=csv,noheader`` when ``nvidia-smi`` is on ``PATH``; the NUMA node of
  each GPU from ``/sys/bus/pci/devices/BUS/numa_node`` (bus id lower-cased,
  its domain written with 8 digits as nvidia-smi does, 4 as sysfs does);
* AMD: ``/sys/class/drm/card*/device`` with vendor ``0x1002``.

A discovered device hangs on the board whose NUMA node is its own, else on
the first board.  What a job holding devices finds in its environment is
:func:`gridsched.job.env.device_env`; how a user asks for devices,
:mod:`gridsched.protocol.device_asks`; the nodes of the devices in ``/dev``,
:mod:`gridsched.host.device_nodes`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from gridsched.core.topology import Device, MachineMap
from gridsched.core.units import UnitError, parse_size

__all__ = ["discover", "shared", "with_devices"]

SMI_QUERY = ["--query-gpu=index,uuid,name,memory.total,pci.bus_id", "--format=csv,noheader"]
AMD_VENDOR = "0x1002"


def read_sysfs(path: Path) -> str | None:
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
    v = read_sysfs(sysfs / "bus" / "pci" / "devices" / pci_sysfs_name(bus) / "numa_node")
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
        if read_sysfs(dev / "vendor") != AMD_VENDOR:
            continue
        node_v = read_sysfs(dev / "numa_node")
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
