"""The devices of a replay: the simulated machine's GPUs, and the GPUs each trace job asks for.

SWF has no field for devices, so they come from beside the trace:

* a devices file (``gsim run TRACE --devices FILE.csv``)::

      # SWF job number, GPUs it asks for, and optionally their model
      job,gpus,model
      12,2,
      13,1,H100

  The header names the columns (``job`` and ``gpus``, optionally ``model``,
  in any order); lines starting with ``#`` and blank lines are skipped.  A
  count is a whole number of zero or more (0: no GPU, as a job not listed).
* ``gpus = N`` (or ``"MODEL:N"``, as ``gsub --gpus``) and ``gres =
  "TYPE[:MODEL][:N]"`` (as ``gsub --gres``) in the ``[[job]]`` tables of the
  workload file (:mod:`gridsched.sim.workload`).

The machine's devices are those of ``--topology FILE`` (its ``[[device]]``
tables) or ``--gpus [MODEL:]N``: N GPUs spread evenly over the boards (all on
the one board without a topology), in index order.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from typing import Any

from gridsched.core.devices import DeviceAsk, never_fits
from gridsched.core.topology import Device, MachineMap
from gridsched.sim.swf import TOO_MANY_DEVICES, Trace, keep_only

COLUMNS = ("job", "gpus", "model")
MAX_COUNT = 4096  # as gsub: at most this many devices for one job


class DevicesError(Exception):
    """A devices file or option that cannot be used; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class JobDevices:
    """The devices SWF job ``id`` asks for, and where that was read (``FILE:LINE``, for messages)."""

    id: int
    asks: tuple[DeviceAsk, ...]
    where: str


def read_csv(path: str) -> list[JobDevices]:
    """The devices file at ``path`` (see the module doc); :class:`DevicesError` on the first bad line."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise DevicesError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise DevicesError(f"{path}: not a text file (UTF-8)") from None
    body = [(k, ln) for k, ln in enumerate(lines, start=1) if ln.strip() and not ln.lstrip().startswith("#")]
    if not body:
        raise DevicesError(f"{path}: empty: expected a header line such as job,gpus")
    rows = list(csv.reader([ln for _, ln in body]))
    hline, head = body[0][0], [h.strip().lower() for h in rows[0]]
    for h in head:
        if h not in COLUMNS:
            raise DevicesError(f"{path}:{hline}: unknown column {h!r} (the columns: job, gpus and optionally model)")
    if len(set(head)) != len(head):
        raise DevicesError(f"{path}:{hline}: a column is named twice")
    for need in ("job", "gpus"):
        if need not in head:
            raise DevicesError(f"{path}:{hline}: no {need!r} column (the header must name job and gpus)")
    col = {h: k for k, h in enumerate(head)}
    out: list[JobDevices] = []
    seen: dict[int, str] = {}
    for (lineno, _), row in zip(body[1:], rows[1:]):
        where = f"{path}:{lineno}"
        if len(row) != len(head):
            raise DevicesError(f"{where}: {len(row)} fields, the header names {len(head)}")
        jtext = row[col["job"]].strip()
        if not jtext.isdigit() or int(jtext) < 1:
            raise DevicesError(f"{where}: job {jtext!r}: expected an SWF job number (1 or more)")
        jid = int(jtext)
        if jid in seen:
            raise DevicesError(f"{where}: job {jid} is already given at {seen[jid]}")
        seen[jid] = where
        n = _count(row[col["gpus"]], f"{where}: gpus")
        model = row[col["model"]].strip() if "model" in col else ""
        if model and not _model_ok(model):
            raise DevicesError(f"{where}: model {model!r}: not a model name")
        out.append(JobDevices(jid, (DeviceAsk("gpu", n, model),) if n else (), where))
    return out


def _count(text: str, where: str) -> int:
    t = text.strip()
    if not t.isdigit():
        raise DevicesError(f"{where}: {t!r}: must be a whole number of zero or more")
    n = int(t)
    if n > MAX_COUNT:
        raise DevicesError(f"{where}: {n}: at most {MAX_COUNT} devices")
    return n


def _model_ok(model: str) -> bool:
    from gridsched.protocol.device_asks import MODEL_NAME

    return bool(MODEL_NAME.match(model))


def from_workload(value: Any, key: str, where: str) -> DeviceAsk | None:
    """``gpus = N``, ``gpus = "MODEL:N"`` or ``gres = "TYPE[:MODEL][:N]"`` of a workload ``[[job]]`` table
    (None: 0 GPUs); ``ValueError`` with the line to print."""
    from gridsched.protocol.device_asks import AskError, parse_gpus, parse_gres

    if key == "gpus" and isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{where}: gpus {value}: must be a whole number of zero or more")
        if value > MAX_COUNT:
            raise ValueError(f"{where}: gpus {value}: at most {MAX_COUNT} devices")
        return DeviceAsk("gpu", value) if value else None
    if not isinstance(value, str):
        form = '2 or "H100:2"' if key == "gpus" else '"gpu:2" or "gpu:H100:2"'
        raise ValueError(f"{where}: {key} {value!r}: expected {form}")
    try:
        if key == "gpus":
            model, n = parse_gpus(value, "gpus")
            return DeviceAsk("gpu", n, model)
        dtype, model, n = parse_gres(value, "gres")
        return DeviceAsk(dtype, n, model)
    except AskError as e:
        raise ValueError(f"{where}: {e}") from None


def machine_devices(spec: str, machine: MachineMap | None) -> tuple[Device, ...]:
    """``--gpus [MODEL:]N``: N GPUs, spread evenly over the boards of ``machine`` (board 0 without one)."""
    from gridsched.protocol.device_asks import AskError, parse_gpus

    try:
        model, n = parse_gpus(spec)
    except AskError as e:
        raise DevicesError(str(e)) from None
    boards = [b.id for b in machine.boards] if machine is not None else [0]
    return tuple(Device("gpu", i, boards[i * len(boards) // n], model) for i in range(n))


def shared(devices: tuple[Device, ...], share: dict[str, int]) -> tuple[Device, ...]:
    """The devices with the ``share`` of their type (``[devices.TYPE] share`` of the configuration)."""
    return tuple(replace(d, share=share[d.type]) if share.get(d.type, 1) != 1 else d for d in devices)


def attach(
    trace: Trace, jobs: list[JobDevices], devices: tuple[Device, ...], strict: bool = False
) -> tuple[list[str], int]:
    """Give the trace's jobs the devices of ``jobs``; leave out (and report) those the machine can never
    hold.  Returns the problems to print (the first few) and how many jobs named are not replayed.

    A job named that is not replayed (not in the trace, skipped, beyond ``--limit``) is not an error:
    it is counted, the first one named in the message.  A job asking for devices when the machine has
    none is an error (:class:`DevicesError`), as is, with ``strict``, one the machine cannot hold.
    """
    from gridsched.sim.swf import MAX_PROBLEMS

    ids = set(trace.ids)
    unknown = [j for j in jobs if j.id not in ids]
    problems: list[str] = []
    if unknown:
        first = unknown[0]
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        problems.append(
            f"{first.where}: job {first.id} is not replayed (not in the trace, skipped, or beyond --limit); "
            f"its devices are ignored{more}"
        )
    asks = {j.id: j.asks for j in jobs if j.asks and j.id in ids}
    if asks and not devices:
        first = next(j for j in jobs if j.asks and j.id in ids)
        raise DevicesError(
            f"{first.where}: job {first.id} asks for devices, and the machine has none "
            "(give --gpus N, or a --topology with [[device]] tables)"
        )
    bad: set[int] = set()
    shown = 0
    where = {j.id: j.where for j in jobs}
    for jid, a in asks.items():
        why = never_fits(a, devices)
        if why is None:
            continue
        msg = f"{where[jid]}: job {jid} {_asked(a)}: {why}"
        if strict:
            raise DevicesError(msg)
        bad.add(jid)
        if shown < MAX_PROBLEMS:
            problems.append(msg)
            shown += 1
    if len(bad) > shown:
        problems.append(f"{len(bad) - shown} more jobs ask for more devices than the machine has")
    if bad:
        keep_only(trace, [i for i, j in enumerate(trace.ids) if j not in bad], TOO_MANY_DEVICES)
        for jid in bad:
            del asks[jid]
    trace.devices = asks
    return problems, len(unknown)


def _asked(asks: tuple[DeviceAsk, ...]) -> str:
    parts = [f"{a.count} {a.type}" + (f" of model {a.model}" if a.model else "") for a in asks]
    return "asks for " + " and ".join(parts)
