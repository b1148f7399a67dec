"""Why a pending job waits, in words: the core's reasons (:class:`~gridsched.core.types.Wait`) as gstat shows them.

The core decides why a job waits (:func:`gridsched.core.policy.forecast_reasons`);
this module only words it.  Ordinary waiting jobs get Slurm's squeue reasons,
first word first: ``Resources: ...`` (next to start, waiting for resources in
use: the cores, the devices of a type, or the memory, it lacks now, with how
many are free or in use), ``Licenses: ...`` (a licence is all it lacks now) and
``Priority: ...`` (jobs ahead of it start first).  A job that can never
start says so (``can never start ...``), naming the drained cores or what the
machine lacks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gridsched.core import cpuset, eligible
from gridsched.core.devices import PREFIX, share_of
from gridsched.core.memory import MEMORY
from gridsched.core.types import Wait, WaitKind
from gridsched.core.units import format_size
from gridsched.protocol.reservations import never_inside, place_text

if TYPE_CHECKING:
    from gridsched.core.devices import Device
    from gridsched.core.topology import MachineMap
    from gridsched.daemon.reservations import RRec
    from gridsched.daemon.table import Rec

NEVER = "can never start"
BEHIND = "waiting for cores, while"
BOUND_NEVER = "it would not end before the reservation ends its jobs"
RESOURCES = "Resources: next to start, waiting for the resources it needs to come free"
PRIORITY = "Priority: waiting for jobs ahead of it in the queue to start first"
TOPOLOGY = "(see gctl topology)"

# the kinds eligibility decides (the daemon words them when it schedules: gridsched.daemon.apply.note_reasons)
ELIGIBILITY = frozenset(
    {
        WaitKind.HELD,
        WaitKind.BEGIN_TIME,
        WaitKind.DEPENDENCY,
        WaitKind.DEPENDENCY_NEVER,
        WaitKind.ARRAY_LIMIT,
        WaitKind.CPU_LIMIT,
    }
)


@dataclass(frozen=True)
class Facts:
    """What the wording needs of the machine: its devices, its reservations and its map (None: not known)."""

    devices: tuple[Device, ...] = ()
    resvs: Mapping[int, RRec] = field(default_factory=dict)
    machine: MachineMap | None = None


def eligibility_text(rec: Rec, why: str) -> str:
    """An eligibility reason as gstat shows it: a begin time as the local date and time."""
    if rec.begin is not None and why == eligible.not_before(rec.begin):
        return "begin time " + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(rec.begin))
    return why


def text(rec: Rec, w: Wait, facts: Facts | None = None) -> str:
    """The reason of pending job ``rec`` that waits for ``w``, in words."""
    k = w.kind
    if k in ELIGIBILITY:
        return eligibility_text(rec, w.text)
    if k is WaitKind.RESOURCES:
        if w.resv is not None:
            return f"Resources: waiting for room in reservation {w.resv}"
        return _resources(facts, w)
    if k is WaitKind.LICENSES:
        return f"Licenses: waiting for {w.what}={w.asks} ({w.free} of {w.has} free)"
    if k is WaitKind.PRIORITY:
        return PRIORITY
    if k is WaitKind.DRAINED:
        cores = cpuset.format(w.cores)
        if w.never:
            return f"{NEVER} while cores {cores} are drained {TOPOLOGY}"
        return f"{BEHIND} cores {cores} are drained {TOPOLOGY}"
    if k is WaitKind.RESERVATION:
        return f"Reservation: waiting for reservation {w.resv} to be activated"
    if k is WaitKind.BOUND_NEVER:
        return f"{NEVER} in reservation {w.resv}: {_bound_never(facts, rec, w)}"
    return _never_fits(rec, w)


def _resources(facts: Facts | None, w: Wait) -> str:
    """The next job's wait for what it lacks now: cores, devices of a type, memory, or (by count) nothing."""
    if w.what == MEMORY:
        return f"Resources: next to start, waits for memory: asks {_mib(w.asks)}, {_mib(w.free)} free now"
    if w.what == "cores":
        return f"Resources: next to start, waiting for {w.asks} cores ({w.free} of {w.has} free)"
    if w.what.startswith(PREFIX):
        dtype, _, model = w.what[len(PREFIX) :].partition(":")
        share = share_of(facts.devices, dtype) if facts is not None else 1
        what = f"{dtype} {model}" if model else dtype
        unit = f"{what} slots" if share > 1 else what
        return f"Resources: next to start, waiting for {w.asks} {unit} ({w.has - w.free} of {w.has} in use)"
    return RESOURCES


def _mib(n: int) -> str:
    """MiB as a memory size (``40G``, ``1536M``)."""
    return format_size(n << 20) if n > 0 else "0M"


def _bound_never(facts: Facts | None, rec: Rec, w: Wait) -> str:
    if w.what == "resv":
        return "the reservation can never be activated"
    if w.what == "place" and facts is not None and facts.machine is not None:
        r = facts.resvs.get(w.resv) if w.resv is not None else None
        inside = never_inside(r.row(), facts.machine, rec.place) if r is not None else None
        if inside:
            return f"it {inside}"
    return BOUND_NEVER


def _never_fits(rec: Rec, w: Wait) -> str:
    if (w.what.startswith(PREFIX) or (w.what == "unknown" and PREFIX in w.text)) and rec.dev_asks:
        from gridsched.protocol.device_asks import label

        asks = " ".join(label(a) for a in rec.dev_asks)
        return f"{NEVER}: {asks}: the machine does not have these devices (gctl topology)"
    if w.what == "cores":
        return f"{NEVER} with the cores of this machine: it asks for {w.asks}, {w.has} are in service {TOPOLOGY}"
    if w.what == "placement":
        req = rec.place
        opts = (
            place_text(
                {"place": req.place, "threads_per_core": req.threads_per_core, "exclusive_board": req.exclusive_board}
            )
            if req is not None
            else ""
        )
        return (
            f"{NEVER} with the cores of this machine: it asks for {w.asks} cores with {opts or 'its placement'}, "
            f"and no board has more than {w.has} in service {TOPOLOGY}"
        )
    if w.what == "unknown":
        return f"{NEVER}: the machine has no resource {w.text}"
    if w.what == MEMORY:
        return f"{NEVER}: it asks for {_mib(w.asks)} of memory, the scheduler hands out {_mib(w.has)}"
    if w.what:
        return f"{NEVER}: it asks for {w.what}={w.asks}, the machine has {w.what}={w.has}"
    return f"{NEVER} with the cores of this machine {TOPOLOGY}"
