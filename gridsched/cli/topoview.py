"""What ``gctl topology`` shows: the machine map with the state of every core.

The status maps are the scheduler's own: :func:`gridsched.core.placement.status_maps`
computed from what the daemon records in the spool (read-only) -- the RUNNING
and STOPPING jobs with their cores, the cores they hold idle (``run.held``:
SMT siblings of a ``--threads-per-core`` job, the rest of an
``--exclusive-board`` job's boards) and whether they were backfilled and are
checkpointable; the active reservations (with their mapping requirement); the
meta keys ``drained`` (``{"cores": "CPULIST", "reason": "TEXT"}``) and
``yielded`` (the cores yielding parents lend) -- and the free cores are the
free map of those maps, as the daemon gives the scheduler.  Drain and resume
requests not yet taken in by the daemon are counted.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gridsched.core import cpuset
from gridsched.core.placement import Reason, StatusMap, free_map, status_maps
from gridsched.core.topology import MachineMap
from gridsched.core.types import Lent, Resv, Running
from gridsched.core.units import format_size
from gridsched.protocol.jobs import Checkpoint, JobState
from gridsched.protocol.spool import Spool
from gridsched.protocol.text import shown

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow

HOLDING = (JobState.RUNNING, JobState.STOPPING)
# The per-core states, in the order they apply (a core in several maps shows the first).
STATES = ("job", "backfill", "held", "lent", "drained", "reserved", "free")
MAPS = ("allocated", "backfill", "held", "lent", "drained", "reserved")


@dataclass(slots=True)
class Marks:
    """What the spool records of the cores' state, as the core's types."""

    running: list[Running] = field(default_factory=list)
    reservations: list[Resv] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)  # reservation id -> name
    drained: frozenset[int] = frozenset()
    drain_reason: str = ""
    lent: list[Lent] = field(default_factory=list)
    waiting_requests: int = 0  # drain/resume requests not yet taken in
    devices: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # device -> the jobs holding it

    def maps(self, machine: MachineMap) -> tuple[StatusMap, ...]:
        """The status maps, by the scheduler's own function."""
        return status_maps(machine, self.running, self.reservations, self.drained, self.lent)


def _cores(text: Any) -> frozenset[int]:
    try:
        return cpuset.parse(str(text or ""))
    except cpuset.CpuListError:
        return frozenset()


def _running(job: JobRow) -> Running:
    held = (job.get("run") or {}).get("held") or ()
    mode = job["spec"].checkpoint
    return Running(
        job["id"],
        job["ncpus"],
        0.0,
        0.0,
        tuple(sorted(_cores(job["cores"]))),
        backfilled=bool(job.get("backfilled")),
        preemptable=mode is not None and mode is not Checkpoint.NONE,
        held=frozenset(c for c in held if isinstance(c, int)) if isinstance(held, list) else frozenset(),
    )


def _resv(row: dict[str, Any]) -> Resv:
    from gridsched.protocol.reservations import place_request

    cores = tuple(sorted(_cores(row["cores"])))
    return Resv(row["id"], row["ncpus"], 0.0, active=True, cores=cores, place=place_request(len(cores), row))


def read_marks(spool: Spool) -> Marks:
    """The state of the cores as the spool records it (nothing if there is no job table yet)."""
    marks = Marks()
    if spool.db.exists():
        from gridsched.protocol.state import StateDB

        db = StateDB(spool.db)
        try:
            from gridsched.protocol.device_asks import parse_keys

            held_jobs = db.jobs(states=HOLDING)
            marks.running = [_running(job) for job in held_jobs]
            for job in held_jobs:
                for key in parse_keys(job.get("devices") or ""):
                    marks.devices.setdefault(key, []).append(job["id"])
            for row in db.reservations():
                if row["state"] == "ACTIVE":
                    marks.reservations.append(_resv(row))
                    marks.names[row["id"]] = str(row["name"])
            meta = db.meta()
        finally:
            db.close()
        try:
            drained = json.loads(meta.get("drained") or "{}")
            marks.drained = _cores(drained.get("cores"))
            marks.drain_reason = str(drained.get("reason") or "")
        except (ValueError, AttributeError):
            pass
        try:
            for parent, y in json.loads(meta.get("yielded") or "{}").items():
                marks.lent.append(Lent(int(parent), _cores(y.get("cores")), bool(y.get("resuming"))))
        except (ValueError, AttributeError, TypeError):
            pass
    try:
        marks.waiting_requests = sum(
            1 for n in os.listdir(spool.incoming) if n.startswith(("drain-", "undrain-")) and n.endswith(".json")
        )
    except OSError:
        pass
    return marks


def map_cores(machine: MachineMap, maps: tuple[StatusMap, ...]) -> dict[str, list[int]]:
    """One key per status map (:data:`MAPS`) and ``free`` (the free map): the sorted core ids of each."""
    out: dict[str, set[int]] = {k: set() for k in MAPS}
    for m in maps:
        out[m.reason.value].update(m.cores)
    res = {k: sorted(v) for k, v in out.items()}
    res["free"] = sorted(free_map(machine, maps))
    return res


def core_states(machine: MachineMap, marks: Marks) -> list[dict[str, Any]]:
    """Per core: ``core``, ``host_cpu``, ``state`` (the first of :data:`STATES` that applies), ``job`` (the
    job running on it), ``backfill`` (that job is backfilled and preemptable), ``held_by`` (the job that
    keeps the core idle: an SMT sibling of a ``--threads-per-core 1`` job, the rest of an
    ``--exclusive-board`` job's board), ``lent_by`` (the yielding parent lending it), ``drained``,
    ``reserved`` (the reservation's name): the machine's status maps as the scheduler sees them."""
    job: dict[int, int] = {}
    backfill: set[int] = set()
    held: dict[int, int] = {}
    lent: dict[int, int] = {}
    drained: set[int] = set()
    reserved: dict[int, str] = {}
    for m in marks.maps(machine):
        for c in m.cores:
            if m.reason is Reason.ALLOCATED or m.reason is Reason.BACKFILL:
                job[c] = int(m.owner)
                if m.reason is Reason.BACKFILL:
                    backfill.add(c)
            elif m.reason is Reason.HELD:
                held[c] = int(m.owner)
            elif m.reason is Reason.LENT:
                lent[c] = int(m.owner)
            elif m.reason is Reason.DRAINED:
                drained.add(c)
            elif m.reason is Reason.RESERVED:
                reserved[c] = marks.names.get(int(m.owner), f"R{m.owner}")
    out = []
    for c in machine.cores():
        runs = job.get(c)
        state = next(
            k
            for k, on in (
                ("job", c in job and c not in backfill),
                ("backfill", c in backfill),
                ("held", c in held),
                ("lent", c in lent),
                ("drained", c in drained),
                ("reserved", c in reserved),
                ("free", True),
            )
            if on
        )
        out.append(
            {
                "core": c,
                "host_cpu": machine.host_cpu(c),
                "state": state,
                "job": runs,
                "backfill": c in backfill,
                "held_by": held.get(c) if runs is None else None,
                "lent_by": lent.get(c),
                "drained": c in drained,
                "reserved": reserved.get(c),
            }
        )
    return out


def view(machine: MachineMap, states: list[dict[str, Any]], marks: Marks, membind: str | None) -> dict[str, Any]:
    """The ``gctl topology --json`` object."""
    boards = []
    for i, b in enumerate(machine.boards):
        boards.append(
            {
                "id": b.id,
                "cores": cpuset.format(b.cores),
                "memory": b.memory,
                "node": b.node,
                "distance": list(machine.distance[i]),
                "physical_cores": [{"threads": [states[c] for c in g]} for g in b.siblings],
                "devices": [
                    {
                        "type": dv.type,
                        "index": dv.index,
                        "model": dv.model,
                        "memory": dv.memory,
                        "uuid": dv.uuid,
                        "pci": dv.pci,
                        "share": dv.share,
                        "jobs": sorted(marks.devices.get(dv.key, [])),
                    }
                    for dv in machine.devices_on(b.id)
                ],
            }
        )
    counts = {k: sum(1 for s in states if s["state"] == k) for k in STATES}
    return {
        "summary": machine.summary(),
        "ncores": machine.ncores,
        "counts": counts,
        "maps": map_cores(machine, marks.maps(machine)),
        "drained": {"cores": cpuset.format(marks.drained), "reason": marks.drain_reason},
        "requests_waiting": marks.waiting_requests,
        "memory_binding": {"available": membind is None, "why_not": membind},
        "boards": boards,
        "devices": machine.device_summary(),
    }


def _size(n: int) -> str:
    exact = format_size(n)
    return exact if exact[-1] in "TG" else f"{n / (1 << 30):.1f}G"


def _label(s: dict[str, Any]) -> tuple[str, str]:
    """The text of a core's state (escaped: a reservation's name is a user's) and its colour."""
    parts = []
    if s["job"] is not None:
        parts.append(f"job {s['job']}" + (" (backfilled, preemptable)" if s.get("backfill") else ""))
    if s.get("lent_by") is not None:
        parts.append(f"lent by job {s['lent_by']}")
    if s.get("held_by") is not None:
        parts.append(f"held by job {s['held_by']}")
    if s["drained"]:
        parts.append("drained" if s["job"] is None else "draining")
    if s["reserved"] is not None:
        parts.append(f"reserved {shown(s['reserved'])}")
    colour = {
        "free": "green",
        "job": "cyan",
        "backfill": "magenta",
        "held": "blue",
        "lent": "bright_cyan",
        "drained": "red",
        "reserved": "yellow",
    }[s["state"]]
    return (", ".join(parts) or "free"), colour


def tree_lines(data: dict[str, Any]) -> list[str]:
    """The map as a rich tree, rendered: coloured on a terminal, plain text elsewhere."""
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

    tty = sys.stdout.isatty()
    c = data["counts"]
    head = Text(f"machine: {shown(data['summary'])}", style="bold")
    head.append(
        f"  free {c['free']}, busy {c['job']}, backfilled {c['backfill']}, held {c['held']}, lent {c['lent']}, "
        f"drained {c['drained']}, reserved {c['reserved']}",
        style="",
    )
    root = Tree(head)
    for b in data["boards"]:
        info = [f"cores {b['cores']}"]
        if b["memory"] is not None:
            info.append(f"memory {_size(b['memory'])}")
        if b["node"] is not None:
            info.append(f"NUMA node {b['node']}")
        if len(data["boards"]) > 1:
            info.append("distance " + ",".join(map(str, b["distance"])))
        branch = root.add(Text(shown(f"board {b['id']}: " + ", ".join(info)), style="bold"))
        for pc in b["physical_cores"]:
            threads = pc["threads"]
            parent = branch
            if len(threads) > 1:
                parent = branch.add(Text(f"physical core {cpuset.format(t['core'] for t in threads)}"))
            for t in threads:
                label, colour = _label(t)
                line = Text(f"core {t['core']} (host CPU {t['host_cpu']}): ")
                line.append(label, style=colour)
                parent.add(line)
        for dv in b.get("devices", ()):
            what = [x for x in (dv["model"], _size(dv["memory"]) if dv["memory"] else "") if x]
            line = Text(shown(f"{dv['type']} {dv['index']}" + (f" ({', '.join(what)})" if what else "") + ": "))
            jobs = dv["jobs"]
            if jobs:
                held = ", ".join(f"job {j}" for j in jobs)
                line.append(held + (f" ({len(jobs)} of {dv['share']} slots)" if dv["share"] > 1 else ""), style="cyan")
            else:
                line.append("free", style="green")
            branch.add(line)
    lines_out: list[str] = []
    console = Console(highlight=False, width=None if tty else 4096, soft_wrap=not tty)
    with console.capture() as cap:
        console.print(root)
    lines_out = [ln.rstrip() for ln in cap.get().splitlines()]
    d = data["drained"]
    if d["cores"]:
        lines_out.append(f"drained: {d['cores']}" + (f" ({shown(d['reason'])})" if d["reason"] else ""))
    if data["requests_waiting"]:
        n = data["requests_waiting"]
        lines_out.append(f"{n} drain/resume request{'s' if n != 1 else ''} not yet taken in by the daemon")
    mb = data["memory_binding"]
    lines_out.append(
        "memory binding: "
        + ("available (numactl --membind)" if mb["available"] else f"unavailable ({shown(mb['why_not'])})")
    )
    return lines_out
