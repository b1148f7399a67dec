"""What ``gctl topology`` shows: the machine map with the state of every core.

The state comes from the job table in the spool (read-only): the cores of
RUNNING and STOPPING jobs, and two meta keys the daemon keeps --
``drained``: ``{"cores": "CPULIST", "reason": "TEXT"}`` and ``reserved``:
``{"RESERVATION": "CPULIST", ...}`` (cores held by active reservations).
Drain and resume requests not yet taken in by the daemon are counted.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from ..core import cpuset
from ..core.topology import MachineMap
from ..core.units import format_size
from ..spool import Spool
from ..text import shown

HOLDING = ("RUNNING", "STOPPING")


@dataclass(slots=True)
class Marks:
    jobs: dict[int, int] = field(default_factory=dict)  # core -> job id
    held: dict[int, int] = field(default_factory=dict)  # core -> job that holds it unused (SMT sibling, board)
    drained: frozenset[int] = frozenset()
    drain_reason: str = ""
    reserved: dict[int, str] = field(default_factory=dict)  # core -> reservation
    waiting_requests: int = 0  # drain/resume requests not yet taken in


def _cores(text: Any) -> frozenset[int]:
    try:
        return cpuset.parse(str(text or ""))
    except cpuset.CpuListError:
        return frozenset()


def read_marks(spool: Spool) -> Marks:
    """The state of the cores as the spool records it (nothing if there is no job table yet)."""
    marks = Marks()
    if spool.db.exists():
        from ..state import StateDB

        db = StateDB(spool.db)
        try:
            for job in db.jobs(states=HOLDING):
                for c in _cores(job["cores"]):
                    marks.jobs[c] = job["id"]
                held = (job.get("run") or {}).get("held") or ()
                for c in held if isinstance(held, list) else ():
                    if isinstance(c, int):
                        marks.held[c] = job["id"]
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
            for name, text in json.loads(meta.get("reserved") or "{}").items():
                for c in _cores(text):
                    marks.reserved[c] = str(name)
        except (ValueError, AttributeError):
            pass
    try:
        marks.waiting_requests = sum(
            1 for n in os.listdir(spool.incoming) if n.startswith(("drain-", "undrain-")) and n.endswith(".json")
        )
    except OSError:
        pass
    return marks


def core_states(machine: MachineMap, marks: Marks) -> list[dict[str, Any]]:
    """Per core: ``core``, ``host_cpu``, ``state`` (free | job | held | drained | reserved: the first
    that applies, in that order), ``job``, ``held_by`` (the job that keeps the core idle: an SMT sibling
    of a ``--threads-per-core 1`` job, the rest of an ``--exclusive-board`` job's board), ``drained``,
    ``reserved``: the machine's status maps as the scheduler sees them."""
    out = []
    for c in machine.cores():
        job = marks.jobs.get(c)
        held = marks.held.get(c) if job is None else None
        drained = c in marks.drained
        resv = marks.reserved.get(c)
        state = (
            "job"
            if job is not None
            else "held"
            if held is not None
            else "drained"
            if drained
            else "reserved"
            if resv is not None
            else "free"
        )
        out.append(
            {
                "core": c,
                "host_cpu": machine.host_cpu(c),
                "state": state,
                "job": job,
                "held_by": held,
                "drained": drained,
                "reserved": resv,
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
            }
        )
    counts = {k: sum(1 for s in states if s["state"] == k) for k in ("free", "job", "held", "drained", "reserved")}
    return {
        "summary": machine.summary(),
        "ncores": machine.ncores,
        "counts": counts,
        "drained": {"cores": cpuset.format(marks.drained), "reason": marks.drain_reason},
        "requests_waiting": marks.waiting_requests,
        "memory_binding": {"available": membind is None, "why_not": membind},
        "boards": boards,
    }


def _size(n: int) -> str:
    exact = format_size(n)
    return exact if exact[-1] in "TG" else f"{n / (1 << 30):.1f}G"


def _label(s: dict[str, Any]) -> tuple[str, str]:
    """The text of a core's state (escaped: a reservation's name is a user's) and its colour."""
    parts = []
    if s["job"] is not None:
        parts.append(f"job {s['job']}")
    if s.get("held_by") is not None:
        parts.append(f"held by job {s['held_by']}")
    if s["drained"]:
        parts.append("drained" if s["job"] is None else "draining")
    if s["reserved"] is not None:
        parts.append(f"reserved {shown(s['reserved'])}")
    colour = {"free": "green", "job": "cyan", "held": "blue", "drained": "red", "reserved": "yellow"}[s["state"]]
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
        f"  free {c['free']}, busy {c['job']}, held {c['held']}, drained {c['drained']}, reserved {c['reserved']}",
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
