"""Reservations and floating resources as the commands and the daemon check them.

A reservation asks for cores and floating resources (``[resources.floating]``
of the config) for a duration.  Without a start it is *flexible*: it waits in
the queue like a job and becomes active when its turn comes and the resources
are free for the whole duration.  With a start it is *fixed* (an advance
reservation).  States: ``WAITING`` -> ``ACTIVE`` -> ``ENDED``, or
``DELETED`` (gresv delete).  Reservation ids come from the job id sequence,
so a flexible reservation's place in the queue is its id, as for a job.

A reservation may have a mapping requirement, as a job (``--place``,
``--threads-per-core``, ``--exclusive-board``): it is activated only on cores
that meet it, and one that can never be met on the machine is refused.  A job
bound to an active reservation that can never be placed inside its cores, with
its own requirement, is refused too.

The checks here are shared by gresv, gsub and the daemon, so that all refuse
the same requests with the same words.  Standard library only (and the pure core).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from gridsched.core import cpuset
from gridsched.core.memory import MEMORY
from gridsched.core.units import UnitError, format_duration, parse_duration, parse_size
from gridsched.protocol.jobs import ACTIVE
from gridsched.protocol.spool import Spool

if TYPE_CHECKING:
    from gridsched.core.placement import Request
    from gridsched.core.topology import MachineMap
    from gridsched.protocol.view import JobRow

CREATE = "resv_create"
DELETE = "resv_delete"
ALTER = "resv_alter"


class RState(str, Enum):
    WAITING = "WAITING"
    ACTIVE = "ACTIVE"
    ENDED = "ENDED"
    DELETED = "DELETED"


LIVE = (RState.WAITING.value, RState.ACTIVE.value)


class ResvError(Exception):
    """A reservation request or a binding that is refused; the message is one line."""


# -- floating resources ----------------------------------------------------------

_ITEM = re.compile(r"\s*([A-Za-z][A-Za-z0-9_.-]*)\s*=\s*([0-9]+)\s*\Z")
_MEM_ITEM = re.compile(r"\s*mem\s*=\s*(\S+)\s*\Z")


def parse_resources(items: Iterable[str], floating: Mapping[str, int]) -> dict[str, int]:
    """``NAME=COUNT`` items (repeatable, or comma-separated) as a dict, checked against the machine's.  Where
    ``floating`` has the memory pool (:data:`gridsched.core.memory.MEMORY`, MiB), ``mem=SIZE`` asks for
    memory (``mem=40G``; a bare number is MiB)."""
    out: dict[str, int] = {}
    for item in items:
        for part in str(item).split(","):
            m = _ITEM.match(part)
            mem = _MEM_ITEM.match(part) if MEMORY in floating else None
            if mem is not None:
                name, count = MEMORY, _mebibytes(mem.group(1))
            elif not m:
                raise ResvError(f"resource '{part.strip()}': expected NAME=COUNT, such as matlab=1")
            else:
                name, count = m.group(1), int(m.group(2))
            if name not in floating:
                known = ", ".join(sorted(floating)) or "none are configured"
                raise ResvError(f"resource '{name}': unknown floating resource ({known})")
            if count < 1:
                raise ResvError(f"resource '{name}={count}': the count must be at least 1")
            out[name] = out.get(name, 0) + count
    for name, count in out.items():
        if count > floating[name]:
            raise ResvError(f"resource '{name}={count}': the machine has {floating[name]}")
    return dict(sorted(out.items()))


def _mebibytes(text: str) -> int:
    try:
        return -(-parse_size(text) // (1 << 20))
    except UnitError as e:
        raise ResvError(f"resource 'mem={text}': {str(e).split(': ', 1)[-1]}") from None


def resource_text(res: Mapping[str, int] | Iterable[tuple[str, int]]) -> str:
    """``matlab=1,comsol=2`` (empty for none)."""
    items = res.items() if isinstance(res, Mapping) else res
    return ",".join(f"{k.removeprefix('device:')}={v}" for k, v in items)


# -- times -------------------------------------------------------------------------


def parse_start(text: str, now: float) -> float:
    """A start time: ``2026-11-22T14:00`` (ISO, local time), ``14:00`` (today), ``+30m`` (from now).

    It must lie in the future.
    """
    t = text.strip()
    when: float
    if t.startswith("+"):
        try:
            when = now + parse_duration(t[1:])
        except UnitError as e:
            raise ResvError(f"start '{text}': {str(e).split(': ', 1)[-1]}") from None
    else:
        m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", t)
        try:
            if m:
                base = datetime.fromtimestamp(now)
                h, mi, se = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
                dt = base.replace(hour=h, minute=mi, second=se, microsecond=0)
            else:
                dt = datetime.fromisoformat(t)
                if dt.tzinfo is None:
                    dt = dt.astimezone()
        except ValueError:
            raise ResvError(f"start '{text}': not a time (use 2026-11-22T14:00, 14:00 or +30m)") from None
        when = dt.timestamp()
    if when <= now:
        raise ResvError(f"start '{text}': in the past")
    return when


def check_request(
    ncpus: int,
    duration: int,
    resources: Mapping[str, int],
    ncores: int,
    floating: Mapping[str, int],
    max_duration: int,
    machine: MachineMap | None = None,
    place: Request | None = None,
) -> None:
    """Refuse a reservation that can never be had, with the reason.

    With ``machine`` and a mapping requirement ``place``: refused when the
    requirement can never be met there, in the words a job is refused in
    (:func:`gridsched.core.placement.never_fits`).
    """
    if ncpus < 1:
        raise ResvError(f"ncpus {ncpus}: at least 1 core is needed")
    if ncpus > ncores:
        raise ResvError(f"ncpus {ncpus}: the machine has {ncores} cores")
    if machine is not None and place is not None:
        from gridsched.core.placement import never_fits

        why = never_fits(machine, place)
        if why:
            raise ResvError(f"can never be placed: {why}")
    if duration <= 0:
        raise ResvError(f"duration {duration}: must be positive")
    if duration > max_duration:
        raise ResvError(
            f"duration {format_duration(duration)} is longer than the maximum "
            f"{format_duration(max_duration)} (reservations.max_duration)"
        )
    for name, count in resources.items():
        if name not in floating:
            raise ResvError(f"resource '{name}': unknown floating resource")
        if not 1 <= count <= floating[name]:
            raise ResvError(f"resource '{name}={count}': the machine has {floating[name]}")


# -- placement ---------------------------------------------------------------------

PLACE_KEYS = ("place", "threads_per_core", "exclusive_board")


def place_request(ncpus: int, fields: Mapping[str, Any]) -> Request | None:
    """The mapping requirement in a job spec or a reservation row (keys of :data:`PLACE_KEYS`),
    for ``ncpus`` cores; None when it has none (the fewest boards, any thread)."""
    place = fields.get("place")
    tpc = int(fields.get("threads_per_core") or 0)
    excl = bool(fields.get("exclusive_board"))
    if place is None and not tpc and not excl:
        return None
    from gridsched.core.placement import Request

    return Request(ncpus, str(place or "pack"), tpc, excl)


def place_text(fields: Mapping[str, Any]) -> str:
    """The requirement as gsub's and gresv's options say it (``--place board --exclusive-board``; "" for none)."""
    out = []
    if fields.get("place"):
        out.append(f"--place {fields['place']}")
    if fields.get("threads_per_core"):
        out.append(f"--threads-per-core {fields['threads_per_core']}")
    if fields.get("exclusive_board"):
        out.append("--exclusive-board")
    return " ".join(out)


def never_inside(resv: Mapping[str, Any], machine: MachineMap, req: Request | None) -> str | None:
    """Why a job with requirement ``req`` can never be placed inside active reservation ``resv``, or None.

    The test is the core's own (:func:`gridsched.core.placement.place_inside`) on the
    reservation's cores with nothing running in it.  A waiting reservation has no cores
    yet: None.
    """
    if req is None or resv.get("state") != RState.ACTIVE.value:
        return None
    from gridsched.core.placement import claimed, place_inside

    try:
        cores = cpuset.parse(str(resv.get("cores") or ""))
    except cpuset.CpuListError:
        return None
    if not cores or max(cores) >= machine.ncores:
        return None
    own = place_request(len(cores), resv)
    extra = claimed(machine, cores, own) - cores if own is not None else frozenset()
    if place_inside(machine, cores, extra, req.ncpus, req) is not None:
        return None
    opts = place_text(
        {"place": req.place, "threads_per_core": req.threads_per_core, "exclusive_board": req.exclusive_board}
    )
    boards = "; ".join(
        f"board {b.id}: {cpuset.format(cores.intersection(b.cores))}"
        for b in machine.boards
        if cores.intersection(b.cores)
    )
    return f"asks for {req.ncpus} cores with {opts or 'its placement'}, which its cores ({boards}) can never hold"


# -- reading -----------------------------------------------------------------------


def from_request(req: dict[str, Any]) -> dict[str, Any]:
    """A reservation row for a create request the daemon has not taken in yet."""
    r = req.get("resv") or {}
    return {
        "id": r.get("id"),
        "state": RState.WAITING.value,
        "user": r.get("user", ""),
        "uid": r.get("uid"),
        "name": r.get("name", ""),
        "ncpus": r.get("ncpus"),
        "resources": r.get("resources") or {},
        "duration": r.get("duration"),
        "start": r.get("start"),
        "create_time": r.get("create_time"),
        "activate_time": None,
        "end_time": None,
        "predicted": None,
        "cores": "",
        "users": r.get("users") or [],
        "kill": bool(r.get("kill", True)),
        "reason": "created, not yet taken in by the daemon",
        "place": r.get("place"),
        "threads_per_core": r.get("threads_per_core") or 0,
        "exclusive_board": bool(r.get("exclusive_board")),
        "nice": r.get("nice") or 0,
        "priority": r.get("priority"),
    }


def load(spool: Spool, ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """Every reservation the spool knows of: the state db's, then create requests not taken in."""
    idl = None if ids is None else list(ids)
    rows: dict[int, dict[str, Any]] = {}
    if spool.db.exists():
        from gridsched.protocol.state import StateDB

        db = StateDB(spool.db)
        try:
            for r in db.reservations(idl):
                rows[r["id"]] = r
        finally:
            db.close()
    for raw in spool.pending(CREATE, "resv"):
        try:
            r = from_request({"resv": raw})
        except (ValueError, TypeError, AttributeError, KeyError):
            continue
        rid = r["id"]
        if isinstance(rid, int) and rid not in rows and (idl is None or rid in idl):
            rows[rid] = r
    return [rows[k] for k in sorted(rows)]


def parse_id(text: str) -> int:
    """A reservation id as given: ``17`` or ``R17``."""
    t = str(text).strip()
    if t[:1] in ("R", "r"):
        t = t[1:]
    if not t.isdigit() or int(t) <= 0:
        raise ResvError(f"reservation '{text}': not a reservation id")
    return int(t)


def may_bind(resv: Mapping[str, Any], uid: int, user: str) -> bool:
    """Whether ``uid`` (login ``user``) may bind jobs to ``resv``: root, the owner, a listed user."""
    return uid == 0 or resv.get("uid") == uid or user in (resv.get("users") or [])


def check_bind(resv: Mapping[str, Any] | None, rid: int, uid: int, user: str) -> None:
    """Refuse binding a job of ``uid`` to reservation ``rid`` (``resv`` its row, None if unknown)."""
    if resv is None:
        raise ResvError(f"reservation {rid}: no such reservation")
    if resv["state"] not in LIVE:
        raise ResvError(f"reservation {rid}: {resv['state'].lower()}")
    if not may_bind(resv, uid, user):
        raise ResvError(
            f"reservation {rid}: owned by {resv.get('user') or resv.get('uid')}, and {user} is not among its users"
        )


def check_fit(
    resv: Mapping[str, Any],
    ncpus: int,
    walltime: int,
    resources: Mapping[str, int],
    now: float,
    machine: MachineMap | None = None,
    place: Request | None = None,
) -> str | None:
    """Why a job can never run inside ``resv`` (its cores, units and time; with ``machine``,
    its mapping requirement ``place`` within the cores of an active one), or None."""
    if ncpus > resv["ncpus"]:
        return f"asks for {ncpus} cores, the reservation has {resv['ncpus']}"
    if machine is not None:
        why = never_inside(resv, machine, place)
        if why:
            return why
    have = resv.get("resources") or {}
    for name, count in resources.items():
        if count > have.get(name, 0):
            return f"asks for {name}={count}, the reservation has {name}={have.get(name, 0)}"
    if not resv.get("kill", True):
        return None  # its jobs may outlive it
    if resv["state"] == RState.ACTIVE.value and resv.get("end_time") is not None:
        left = resv["end_time"] - now
        if walltime > left:
            return (
                f"walltime {format_duration(walltime)} is longer than the reservation's time left "
                f"({format_duration(max(0, int(left)))})"
            )
    else:
        if walltime > resv["duration"]:
            return (
                f"walltime {format_duration(walltime)} is longer than the reservation "
                f"({format_duration(resv['duration'])})"
            )
    return None


def in_use(resv: Mapping[str, Any], jobs: Iterable[JobRow]) -> tuple[int, dict[str, int]]:
    """Cores and units used now by the running jobs bound to ``resv``."""
    n = 0
    res: dict[str, int] = {}
    for j in jobs:
        spec = j["spec"]
        if spec.reservation == resv["id"] and j["state"] in ACTIVE:
            n += j["ncpus"]
            for k, v in spec.resources.items():
                res[k] = res.get(k, 0) + v
    return n, res


def end_of(resv: Mapping[str, Any]) -> float | None:
    """When an active reservation ends, or a fixed waiting one would."""
    if resv.get("end_time") is not None:
        return float(resv["end_time"])
    if resv.get("start") is not None:
        return float(resv["start"]) + resv["duration"]
    return None


def check_job(
    spool: Spool,
    floating: Mapping[str, int],
    ncpus: int,
    walltime: int,
    items: Iterable[str],
    resv_text: str | None,
    wait_resv: bool,
    uid: int,
    user: str,
    now: float,
    machine: MachineMap | None = None,
    place: Request | None = None,
) -> tuple[dict[str, int], int | None]:
    """The floating resources and reservation of a job being submitted (gsub -l, --reservation).

    A job bound to an active reservation must fit in what the reservation has
    left now (cores, units, time) unless it may wait for it (``wait_resv``),
    and its mapping requirement ``place`` must be one its cores can hold (with
    ``machine``); one bound to a waiting reservation must fit in the whole
    reservation.
    """
    resources = parse_resources(items, floating)
    if resv_text is None:
        if wait_resv:
            raise ResvError("--wait-resv needs --reservation")
        return resources, None
    rid = parse_id(resv_text)
    rows = load(spool, [rid])
    row = rows[0] if rows else None
    check_bind(row, rid, uid, user)
    assert row is not None
    why = check_fit(row, ncpus, walltime, resources, now, machine, place)
    if why:
        raise ResvError(f"job cannot run in reservation {rid}: it {why}")
    if row["state"] == RState.ACTIVE.value and not wait_resv:
        from gridsched.protocol.view import load_jobs

        n, used = in_use(row, load_jobs(spool))
        left = row["ncpus"] - n
        if ncpus > left:
            raise ResvError(
                f"reservation {rid}: only {left} of its {row['ncpus']} cores are free now (--wait-resv waits for them)"
            )
        have = row.get("resources") or {}
        for name, count in resources.items():
            if count > have.get(name, 0) - used.get(name, 0):
                raise ResvError(
                    f"reservation {rid}: only {have.get(name, 0) - used.get(name, 0)} {name} "
                    "free now (--wait-resv waits for them)"
                )
    return resources, rid
