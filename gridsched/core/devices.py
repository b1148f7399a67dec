"""Devices (GPUs and any type an admin declares): the model, the slots they count as, and which ones a job gets (pure).

A :class:`~gridsched.core.topology.Device` is one typed, indexed device of the machine (``gpu`` 0,
``fpga`` 1, ...) attached to one board.  Each device is ``share`` *slots*:
``share`` jobs may hold it at once (1: one job).  A job asks for devices with
:class:`DeviceAsk` (a type, optionally a model, a count, how its cores relate
to the devices' boards, and whether it takes its devices whole).

In the scheduling pass devices are counted like floating resources: one
dimension of the resource vector per device type (``device:gpu``, every slot
of that type) and one per type and model (``device:gpu:H100``), each with its
availability profile, so backfilling, reservations and forecasts see them.
:func:`slots` is what a pending job's asks count as, :func:`held` what a
running job's devices count as, :func:`totals` what the machine has.

At a start the concrete devices are chosen by :func:`choose`: distinct
devices (never two slots of one device for one job) of the type and model
asked for, each with a free slot (all its slots for an exclusive ask), and
the job's cores:

``closest`` (the default, as Slurm's)
    devices on a board whose free cores can hold the job first (best fit:
    the fewest free cores, then the lowest board id), else on the boards with
    the most free cores; the job's cores are taken from its devices' boards
    when they can hold it, else anywhere.
``strict``
    as ``closest``, but the job starts only when its cores fit on its
    devices' boards.
``none``
    the lowest-indexed free devices; cores as without devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gridsched.core.model import DeviceAsk, Request
from gridsched.core.placement import assign
from gridsched.core.topology import Device, MachineMap

__all__ = ["BINDS", "Device", "DeviceAsk", "choose", "held", "never_fits", "slots", "totals"]

BINDS = ("closest", "strict", "none")
PREFIX = "device:"


def dim(dtype: str, model: str = "") -> str:
    """The name of the vector dimension counting slots of ``dtype`` (of ``model``)."""
    return f"{PREFIX}{dtype}:{model}" if model else f"{PREFIX}{dtype}"


def totals(devices: Iterable[Device]) -> dict[str, int]:
    """The slots the machine has per dimension: per type, and per type and model."""
    out: dict[str, int] = {}
    for dv in devices:
        k = dim(dv.type)
        out[k] = out.get(k, 0) + dv.share
        if dv.model:
            m = dim(dv.type, dv.model)
            out[m] = out.get(m, 0) + dv.share
    return out


def share_of(devices: Iterable[Device], dtype: str) -> int:
    """The share of the devices of ``dtype`` (1 if there are none)."""
    return max((dv.share for dv in devices if dv.type == dtype), default=1)


def slots(asks: Iterable[DeviceAsk], devices: Sequence[Device]) -> tuple[tuple[str, int], ...]:
    """The slots a pending job with ``asks`` counts for, as ``(dimension, count)`` resources.

    An exclusive ask counts every slot of its devices.  A type the machine
    does not have still gets its dimension (so the job can never start).
    """
    out: dict[str, int] = {}
    for a in asks:
        n = a.count * (share_of(devices, a.type) if a.exclusive else 1)
        out[dim(a.type)] = out.get(dim(a.type), 0) + n
        if a.model:
            out[dim(a.type, a.model)] = out.get(dim(a.type, a.model), 0) + n
    return tuple(sorted(out.items()))


def held(keys: Iterable[tuple[str, int]], devices: Sequence[Device], exclusive: bool) -> tuple[tuple[str, int], ...]:
    """The slots a running job on the devices ``keys`` holds (all of each device's slots if ``exclusive``)."""
    by_key = {dv.key: dv for dv in devices}
    out: dict[str, int] = {}
    for k in keys:
        dv = by_key.get(k)
        if dv is None:
            continue
        n = dv.share if exclusive else 1
        out[dim(dv.type)] = out.get(dim(dv.type), 0) + n
        if dv.model:
            out[dim(dv.type, dv.model)] = out.get(dim(dv.type, dv.model), 0) + n
    return tuple(sorted(out.items()))


def merge(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Two resource lists as one, sorted by name (``a`` alone when ``b`` is empty)."""
    if not b:
        return a
    if not a:
        return b
    out = dict(a)
    for k, v in b:
        out[k] = out.get(k, 0) + v
    return tuple(sorted(out.items()))


def used_slots(
    holders: Iterable[tuple[Iterable[tuple[str, int]], bool]], devices: Sequence[Device]
) -> dict[tuple[str, int], int]:
    """Slots in use per device, from ``(device keys, exclusive)`` of each holder."""
    share = {dv.key: dv.share for dv in devices}
    out: dict[tuple[str, int], int] = {}
    for keys, excl in holders:
        for k in keys:
            if k in share:
                out[k] = out.get(k, 0) + (share[k] if excl else 1)
    return out


def never_fits(asks: Iterable[DeviceAsk], devices: Sequence[Device]) -> str | None:
    """Why ``asks`` can never be met by ``devices`` (one line, naming the option), or None."""
    for a in asks:
        if a.count <= 0:
            return f"asks for {a.count} {a.type} devices, at least 1 is needed"
        if a.bind not in BINDS:
            return f"--gpu-bind {a.bind}: must be one of {', '.join(BINDS)}"
        of_type = [dv for dv in devices if dv.type == a.type]
        if not of_type:
            return f"the machine has no {plural(a.type, 2)}"
        if a.model:
            of_model = [dv for dv in of_type if dv.model.lower() == a.model.lower()]
            if not of_model:
                models = sorted({dv.model for dv in of_type if dv.model})
                known = ", ".join(models) if models else "none is declared"
                return f"the machine has no {a.type} of model {a.model} (models: {known})"
            if a.count > len(of_model):
                return f"the machine has {len(of_model)} {a.model} {plural(a.type, len(of_model))}"
        elif a.count > len(of_type):
            return f"the machine has {len(of_type)} {plural(a.type, len(of_type))}"
    return None


def plural(dtype: str, n: int) -> str:
    """``GPU``/``GPUs`` (acronym types upper-case), else the type name with an ``s``."""
    name = dtype.upper() if dtype in ("gpu", "npu", "fpga", "tpu", "dpu", "ipu") else dtype
    return name if n == 1 else name + "s"


def choose(
    asks: Sequence[DeviceAsk],
    devices: Sequence[Device],
    used: Mapping[tuple[str, int], int],
    machine: MachineMap | None,
    free: frozenset[int] | None,
    ncpus: int,
    place: Request | None,
    only: Iterable[tuple[str, int]] = (),
) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...], frozenset[int]] | None:
    """The devices a job gets now, and its cores: ``(device keys, cores it runs on, cores it holds)``;
    None when it cannot start now (see the module doc).  ``free`` None: count-only, no cores chosen.
    ``only``: the devices it must have (a suspended job continued on the devices it kept)."""
    if only:
        keep = frozenset(only)
        devices = [dv for dv in devices if dv.key in keep]
    taken: set[tuple[str, int]] = set()
    picked: list[tuple[str, int]] = []
    boards: list[int] = []
    # free cores per board id
    fc: dict[int, int] = {}
    if machine is not None and free is not None:
        for b in machine.boards:
            fc[b.id] = sum(1 for c in b.cores if c in free)
    for a in asks:
        need = 1
        cands = []
        for dv in devices:
            if dv.type != a.type or dv.key in taken:
                continue
            if a.model and dv.model.lower() != a.model.lower():
                continue
            left = dv.share - used.get(dv.key, 0)
            need = dv.share if a.exclusive else 1
            if left >= need:
                cands.append(dv)
        if len(cands) < a.count:
            return None
        if a.bind == "none" or not fc:
            got = sorted(cands, key=lambda dv: dv.index)[: a.count]
        else:
            per: dict[int, list[Device]] = {}
            for dv in cands:
                per.setdefault(dv.board, []).append(dv)
            whole = [b for b, ds in per.items() if len(ds) >= a.count and fc.get(b, 0) >= ncpus]
            if whole:
                best = min(whole, key=lambda b: (fc.get(b, 0), b))
                got = sorted(per[best], key=lambda dv: dv.index)[: a.count]
            else:
                got = sorted(cands, key=lambda dv: (-fc.get(dv.board, 0), dv.board, dv.index))[: a.count]
        for dv in got:
            taken.add(dv.key)
            picked.append(dv.key)
            if dv.board not in boards:
                boards.append(dv.board)
    keys = tuple(sorted(picked))
    if free is None:
        return keys, (), frozenset()
    if machine is None:  # placed without a map: the lowest-numbered free cores
        if len(free) < ncpus:
            return None
        first = tuple(sorted(free)[:ncpus])
        return keys, first, frozenset(first)
    bind = asks[0].bind if asks else "none"
    if bind != "none":
        near = frozenset(c for b in machine.boards if b.id in boards for c in b.cores if c in free)
        got_near = assign(machine, near, ncpus, place)
        if got_near is not None:
            return keys, got_near[0], got_near[1]
        if bind == "strict":
            return None
    anywhere = assign(machine, free, ncpus, place)
    if anywhere is None:
        return None
    return keys, anywhere[0], anywhere[1]


def label(ask: DeviceAsk) -> str:
    """How a user asks for ``ask`` on gsub's command line: ``--gpus 2``, ``--gpus H100:2``, ``--gres fpga:1``."""
    if ask.type == "gpu":
        return f"--gpus {ask.model + ':' if ask.model else ''}{ask.count}"
    return f"--gres {ask.type}:{ask.model + ':' if ask.model else ''}{ask.count}"


def refusal(asks: Iterable[DeviceAsk], devices: Iterable[Device]) -> str | None:
    """Why ``asks`` can never be met on a machine with ``devices``: ``--gpus 5: the machine has 4 GPUs``."""
    devs = tuple(devices)
    for a in asks:
        why = never_fits((a,), devs)
        if why:
            return f"{label(a)}: {why}"
    return None
