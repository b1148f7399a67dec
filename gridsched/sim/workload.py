"""What decides when trace jobs may start besides the machine: dependencies, arrays, holds.

Two sources, both turned into one :class:`~gridsched.sim.records.Gates`
that the core's eligibility reads, as the daemon's does:

* SWF fields 17 and 18 (``gsim run --dependencies``): a job that names a
  preceding job depends on it (``afterany``) and may start once it has
  ended plus the think time.  A preceding job that is not replayed (not in
  the trace, skipped, beyond ``--limit``, or the job itself) is ignored: the
  job is replayed at its submit time, and counted (:attr:`Gates` users warn).
* A workload file (``gsim run --workload FILE.toml``), job numbers being the
  SWF job numbers::

      [[job]]
      id = 20                        # the SWF job number
      name = "post"                  # its name (needed by singleton)
      dependency = "afterok:12:13"   # as gsub --dependency
      hold_until = 7200              # held from its submission to then (trace seconds or a duration)
      gpus = 2                       # the GPUs it asks for (or "H100:2"), as gsub --gpus
      gres = "fpga:1"                # other devices, as gsub --gres TYPE[:MODEL][:N]

      [[array]]
      jobs = [12, 13, 14, 15]        # these jobs form one array ...
      max = 2                        # ... of which at most 2 run at once (%2)

A job's end state, for afterok and afternotok, is its SWF status (field 11):
0 FAILED, 5 CANCELLED, anything else COMPLETED.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from typing import Any

from gridsched.core import depend
from gridsched.core.devices import DeviceAsk
from gridsched.core.units import UnitError, parse_duration
from gridsched.sim.records import Gates
from gridsched.sim.swf import Trace

ENDED = {0: "FAILED", 5: "CANCELLED"}


class WorkloadError(Exception):
    """The workload file cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class JobGates:
    """One ``[[job]]`` entry, by SWF job number."""

    id: int
    name: str = ""
    dependency: tuple[depend.Dep, ...] = ()
    hold_until: float | None = None
    devices: tuple[DeviceAsk, ...] = ()  # gpus and gres


@dataclass(frozen=True, slots=True)
class Workload:
    jobs: tuple[JobGates, ...] = ()
    arrays: tuple[tuple[tuple[int, ...], int], ...] = ()  # (SWF job numbers, max running)
    path: str = ""


def _whole(v: Any, where: str, least: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
        raise WorkloadError(f"{where}: {v!r}: expected a whole number of at least {least}")
    return v


def _seconds(v: Any, where: str) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        x = float(v)
    elif isinstance(v, str):
        try:
            x = float(parse_duration(v.strip()))
        except (UnitError, ValueError):
            raise WorkloadError(f"{where}: {v!r}: not a number of seconds or a duration") from None
    else:
        raise WorkloadError(f"{where}: {v!r}: not a number of seconds or a duration")
    if not math.isfinite(x) or x < 0:
        raise WorkloadError(f"{where}: {v!r}: must be zero or more seconds")
    return x


def read(path: str) -> Workload:
    """The workload file at ``path`` (TOML), checked on its own; :func:`gates` checks it against a trace."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as e:
        raise WorkloadError(f"{path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise WorkloadError(f"{path}: {e}") from None
    unknown = set(data) - {"job", "array"}
    if unknown:
        raise WorkloadError(f"{path}: unknown key {sorted(unknown)[0]!r} (expected [[job]] and [[array]] tables)")
    jobs: list[JobGates] = []
    seen: set[int] = set()
    for k, t in enumerate(_tables(data, "job", path), start=1):
        where = f"{path}: job {k}"
        extra = set(t) - {"id", "name", "dependency", "hold_until", "gpus", "gres"}
        if extra:
            raise WorkloadError(f"{where}: unknown key {sorted(extra)[0]!r}")
        if "id" not in t:
            raise WorkloadError(f"{where}: missing 'id' (the SWF job number)")
        jid = _whole(t["id"], f"{where}: id", 1)
        if jid in seen:
            raise WorkloadError(f"{where}: id {jid}: job {jid} has two [[job]] tables")
        seen.add(jid)
        name = t.get("name", "")
        if not isinstance(name, str):
            raise WorkloadError(f"{where}: name {name!r}: expected a string")
        spec = t.get("dependency", "")
        if not isinstance(spec, str):
            raise WorkloadError(f'{where}: dependency {spec!r}: expected a string such as "afterok:12"')
        try:
            deps = depend.parse(spec)
        except depend.DependError as e:
            raise WorkloadError(f"{where}: dependency {e}") from None
        if any(d.kind == "singleton" for d in deps) and not name:
            raise WorkloadError(f"{where}: dependency singleton needs the job's name (name = ...)")
        if jid in depend.job_ids(deps):
            raise WorkloadError(f"{where}: dependency {spec!r}: job {jid} depends on itself")
        hold = _seconds(t["hold_until"], f"{where}: hold_until") if "hold_until" in t else None
        jobs.append(JobGates(jid, name, deps, hold, _devices(t, where)))
    arrays: list[tuple[tuple[int, ...], int]] = []
    member: dict[int, int] = {}
    for k, t in enumerate(_tables(data, "array", path), start=1):
        where = f"{path}: array {k}"
        extra = set(t) - {"jobs", "max"}
        if extra:
            raise WorkloadError(f"{where}: unknown key {sorted(extra)[0]!r}")
        for need in ("jobs", "max"):
            if need not in t:
                raise WorkloadError(f"{where}: missing {need!r}")
        ids = t["jobs"]
        if not isinstance(ids, list) or not ids:
            raise WorkloadError(f"{where}: jobs: expected a list of SWF job numbers such as [12, 13, 14]")
        for x in ids:
            jid = _whole(x, f"{where}: jobs", 1)
            if jid in member:
                raise WorkloadError(f"{where}: jobs: job {jid} is already in array {member[jid]}")
            member[jid] = k
        arrays.append((tuple(ids), _whole(t["max"], f"{where}: max", 1)))
    return Workload(tuple(jobs), tuple(arrays), path)


def _devices(t: dict[str, Any], where: str) -> tuple[DeviceAsk, ...]:
    """The devices of a ``[[job]]`` table: ``gpus`` and ``gres`` (:func:`gridsched.sim.devices.from_workload`)."""
    from gridsched.sim.devices import from_workload

    out: list[DeviceAsk] = []
    for key in ("gpus", "gres"):
        if key in t:
            try:
                a = from_workload(t[key], key, where)
            except ValueError as e:
                raise WorkloadError(str(e)) from None
            if a is not None:
                if any(b.type == a.type for b in out):
                    raise WorkloadError(f"{where}: gres {t[key]!r}: {a.type} devices are already asked for (gpus)")
                out.append(a)
    return tuple(out)


def _tables(data: dict[str, Any], key: str, path: str) -> list[dict[str, Any]]:
    v = data.get(key, [])
    if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
        raise WorkloadError(f"{path}: {key}: expected [[{key}]] tables")
    return v


def gates(trace: Trace, dependencies: bool = False, workload: Workload | None = None) -> tuple[Gates, int]:
    """The gates of the trace's jobs (indices), and how many SWF preceding jobs were ignored (not replayed).

    ``dependencies``: read SWF fields 17 and 18.  A workload file naming a job
    that is not replayed raises :class:`WorkloadError`.
    """
    index = {jid: i for i, jid in enumerate(trace.ids)}
    deps: dict[int, tuple[depend.Dep, ...]] = {}
    think: dict[int, tuple[int, float]] = {}
    ignored = 0
    if dependencies:
        for jid, (prev, t) in trace.preceding.items():
            i = index.get(jid)
            if i is None:
                continue  # the job itself is not replayed
            p = index.get(prev)
            if p is None or p == i:
                ignored += 1
                continue
            deps[i] = (depend.Dep("afterany", (p,)),)
            think[i] = (p, t)
    arrays: dict[int, tuple[int, int]] = {}
    holds: dict[int, float] = {}
    names: dict[int, str] = {}
    if workload is not None:
        path = workload.path

        def at(jid: int, where: str) -> int:
            i = index.get(jid)
            if i is None:
                raise WorkloadError(
                    f"{path}: {where}: job {jid} is not replayed (not in the trace, skipped, or beyond --limit)"
                )
            return i

        for k, jg in enumerate(workload.jobs, start=1):
            if jg.devices and not (jg.name or jg.hold_until is not None or jg.dependency):
                continue  # devices only (gridsched.sim.devices)
            i = at(jg.id, f"job {k}: id")
            if jg.name:
                names[i] = jg.name
            if jg.hold_until is not None:
                holds[i] = jg.hold_until
            if jg.dependency:
                mine = tuple(
                    depend.Dep(d.kind, tuple(at(x, f"job {k}: dependency") for x in d.ids)) for d in jg.dependency
                )
                deps[i] = deps.get(i, ()) + mine
        for k, (ids, mx) in enumerate(workload.arrays, start=1):
            for jid in ids:
                arrays[at(jid, f"array {k}: jobs")] = (k, mx)
    ended = {}
    if deps:
        ended = {index[jid]: ENDED[s] for jid, s in trace.status.items() if jid in index and s in ENDED}
    return Gates(deps, think, arrays, holds, names, ended), ignored
