"""gstat --tree (jobs as parent-child trees) and the tree fields of gstat -f."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from gridsched.protocol import tree
from gridsched.protocol.spool import Spool
from gridsched.protocol.text import dumps, shown

if TYPE_CHECKING:
    from gridsched.protocol.tree import Yielded
    from gridsched.protocol.view import ViewRow as Row

COLUMNS = ("ID", "STATE", "CPUS", "CORES", "NAME")


def annotate(spool: Spool, job: Row) -> None:
    """Add ``children`` and ``yielded`` to a job row for :func:`fields`."""
    try:
        job["children"] = tree.children(spool, job["id"])
        job["yielded"] = tree.yielded(spool).get(job["id"])
    except tree.TreeError:
        job["children"], job["yielded"] = [], None


def yield_text(y: Yielded | None) -> str:
    if not y:
        return "no"
    resuming = ", resuming (waits for the tasks on them)" if y.get("resuming") else ""
    return f"cores {shown(y.get('cores', ''))}{resuming}"


def fields(job: Row) -> list[tuple[str, Any]]:
    """``(key, value)`` lines of gstat -f about the job's tree."""
    spec = job["spec"]
    parent = spec.parent
    return [
        ("parent", "" if parent is None else parent),
        ("children", ",".join(str(c) for c in job.get("children") or [])),
        ("yielded", yield_text(job.get("yielded"))),
        ("recoverable", "yes" if spec.recoverable else "no"),
    ]


def forest(jobs: list[Row]) -> tuple[list[int], dict[int, list[int]]]:
    """The roots among ``jobs`` (a job whose parent is not among them is one) and each job's children, by id."""
    ids = {j["id"] for j in jobs}
    kids: dict[int, list[int]] = {}
    roots = []
    for j in sorted(jobs, key=lambda j: j["id"]):
        p = j["spec"].parent
        if isinstance(p, int) and p in ids and p != j["id"]:
            kids.setdefault(p, []).append(j["id"])
        else:
            roots.append(j["id"])
    return roots, kids


def lines(jobs: list[Row], lent: dict[int, Yielded]) -> list[str]:
    """The text of gstat --tree: one line per job, children under their parent."""
    by_id = {j["id"]: j for j in jobs}
    roots, kids = forest(jobs)
    rows: list[tuple[str, ...]] = [COLUMNS]

    def walk(jid: int, prefix: str, branch: str, seen: set[int]) -> None:
        if jid in seen:
            return
        seen.add(jid)
        j = by_id[jid]
        name = branch + shown(j.get("name"))
        if jid in lent:
            name += "  [yielded" + (", resuming]" if lent[jid].get("resuming") else "]")
        rows.append((str(jid), shown(j["state"]), shown(j.get("ncpus") or ""), shown(j.get("cores")), name))
        cs = kids.get(jid, [])
        for i, c in enumerate(cs):
            last = i == len(cs) - 1
            walk(c, prefix + ("   " if last else "|  "), prefix + ("`- " if last else "|- "), seen)

    seen: set[int] = set()
    for r in roots:
        walk(r, "", "", seen)
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    out = []
    for row in rows:
        cells = [
            row[0].rjust(widths[0]),
            row[1].ljust(widths[1]),
            row[2].rjust(widths[2]),
            row[3].ljust(widths[3]),
            row[4],
        ]
        out.append("  ".join(cells).rstrip())
    return out


def nested(jobs: list[Row], lent: dict[int, Yielded]) -> list[dict[str, Any]]:
    """gstat --tree --json: each root with its ``children``, recursively."""
    by_id = {j["id"]: j for j in jobs}
    roots, kids = forest(jobs)

    def node(jid: int, seen: set[int]) -> dict[str, Any]:
        seen.add(jid)
        j = by_id[jid]
        return {
            "id": jid,
            "name": j.get("name"),
            "state": j["state"],
            "ncpus": j.get("ncpus"),
            "cores": j.get("cores") or "",
            "parent": j["spec"].parent,
            "yielded": lent.get(jid),
            "children": [node(c, seen) for c in kids.get(jid, []) if c not in seen],
        }

    return [node(r, set()) for r in roots]


def show(spool: Spool, jobs: list[Row], as_json: bool) -> int:
    try:
        lent = tree.yielded(spool)
    except tree.TreeError:
        lent = {}
    if as_json:
        click.echo(dumps({"trees": nested(jobs, lent)}, indent=2))
    else:
        click.echo("\n".join(lines(jobs, lent)))
    return 0
