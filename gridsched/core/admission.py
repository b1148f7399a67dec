"""Admission: whether a job can ever run on this machine, the one question a submission and a change
must answer before they are queued (pure).

The daemon asks it of every submission and every change (galter) it takes in, and the commands ask it
before they send one, so that a job that could never start is refused at once, in one line, for the
same reason everywhere.  Each part of the answer is in the module that knows the resource: cores
(:mod:`.feasible`), a placement on the machine's boards (:mod:`.placement`), memory (the machine's and
the boards', :mod:`.board_memory`), devices
(:mod:`.devices`), the walltime limit.
"""

from __future__ import annotations

from collections.abc import Iterable

from gridsched.core import board_memory
from gridsched.core.devices import refusal
from gridsched.core.feasible import infeasible, too_much_memory
from gridsched.core.model import DeviceAsk, Request
from gridsched.core.placement import never_fits
from gridsched.core.topology import MachineMap


def never_runs(
    machine: MachineMap,
    memory: int | None,
    max_walltime: int,
    *,
    ncpus: int,
    walltime: int,
    placement: Request | None = None,
    mem: int | None = None,
    devices: Iterable[tuple[DeviceAsk, ...]] = (),
) -> str | None:
    """Why a job can never run on ``machine`` (of ``memory`` bytes, None if unknown, and a walltime limit of
    ``max_walltime`` seconds), or None: ``ncpus`` cores for ``walltime`` seconds, placed as ``placement``
    asks (None: anywhere), ``mem`` bytes, and each group of ``devices`` (the job's own, its sub-tasks')."""
    bad = infeasible(ncpus, machine.ncores)
    if bad is None and placement is not None:
        why = never_fits(machine, placement)
        bad = f"can never run: {why}" if why else None
    if bad is None and mem:
        why = too_much_memory(mem, memory)
        bad = f"can never run: it {why}" if why else None
    if bad is None and mem and memory:
        why = board_memory.never(machine, memory >> 20, -(-mem >> 20), ncpus, placement)
        bad = f"can never run: it {why}" if why else None
    for asks in devices:
        if bad is None and asks:
            why = refusal(asks, machine.devices)
            bad = f"can never run: {why}" if why else None
    if bad is None and walltime > max_walltime:
        bad = "walltime longer than the maximum"
    return bad
