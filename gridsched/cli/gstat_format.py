"""gstat --format, --sort and --start: squeue's field letters over gstat's jobs."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gridsched.cli.common import ExitCode, fail
from gridsched.core.units import format_duration
from gridsched.protocol.jobs import WAITING
from gridsched.protocol.text import shown

if TYPE_CHECKING:
    from gridsched.protocol.view import ViewRow as Job


def _date(t: Any) -> str:
    return "N/A" if t is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(float(t)))


def _fields(now: float) -> dict[str, tuple[str, Callable[[Job], str], Callable[[Job], Any]]]:
    """letter -> (header, cell, sort key); the letters are squeue's (--format %X, --sort X)."""
    from gridsched.cli import gstat
    from gridsched.cli.select import SHORT_OF

    def used(j: Job) -> float:
        return gstat.run_time(j, now)

    def start(j: Job) -> Any:
        """When the job started; for a pending one its predicted start, else its begin time still ahead."""
        if j["state"] not in WAITING:
            return j.get("start_time")
        if j.get("predicted_start") is not None:
            return j["predicted_start"]
        begin = j["spec"].begin
        return begin if isinstance(begin, (int, float)) and begin > now else None

    return {
        "i": ("JOBID", lambda j: str(j.get("label") or j["id"]), lambda j: j["id"]),
        "A": ("JOBID", lambda j: str(j["id"]), lambda j: j["id"]),
        "j": ("NAME", lambda j: str(j["name"]), lambda j: str(j["name"])),
        "u": ("USER", lambda j: str(j["user"]), lambda j: str(j["user"])),
        "T": ("STATE", lambda j: str(j["state"]), lambda j: str(j["state"])),
        "t": ("ST", lambda j: SHORT_OF.get(j["state"], str(j["state"])), lambda j: str(j["state"])),
        "M": ("TIME", lambda j: format_duration(used(j)), used),
        "r": ("TIME", lambda j: format_duration(used(j)), used),
        "l": (
            "TIME_LIMIT",
            lambda j: format_duration(j["walltime"]) if j["walltime"] else "UNLIMITED",
            lambda j: j["walltime"] or 0,
        ),
        "C": ("CPUS", lambda j: str(j["ncpus"]), lambda j: j["ncpus"]),
        "D": ("NODES", lambda j: "1", lambda j: 1),
        "R": ("REASON", gstat.reason_code, gstat.reason_code),
        "S": ("START_TIME", lambda j: _date(start(j)), lambda j: float(start(j) or 0.0)),
        "e": ("END_TIME", lambda j: _date(j.get("end_time")), lambda j: j.get("end_time") or 0.0),
        "V": ("SUBMIT_TIME", lambda j: _date(j.get("submit_time")), lambda j: j.get("submit_time") or 0.0),
        "P": ("PARTITION", lambda j: "gridsched", lambda j: ""),
        "c": ("CORES", lambda j: str(j.get("cores") or ""), lambda j: str(j.get("cores") or "")),
        "b": ("GRES", _gres, _gres),
    }


def _gres(job: Job) -> str:
    """The devices a job asked for, as squeue's %b (``gpu:2``); the ones it holds once it runs (``gpu:0,1``)."""
    if job.get("devices"):
        return str(job["devices"])
    from gridsched.protocol.device_asks import label

    return " ".join(label(a) for a in job["spec"].device_asks())


LETTERS = "i A j u T t M r l C D R S e V P c b"
# --sort by name as well as by letter
SORT_NAMES = {
    "id": "i",
    "name": "j",
    "user": "u",
    "state": "T",
    "time": "M",
    "limit": "l",
    "cpus": "C",
    "reason": "R",
    "start": "S",
    "end": "e",
    "submit": "V",
}
_SPEC = re.compile(r"%(\.?)(\d*)(.?)")


def render(prog: str, fmt: str, jobs: list[Job], now: float) -> str:
    """The jobs as ``fmt`` says (squeue --format: ``%[.][WIDTH]X`` fields and plain text), with a header.

    A field is as wide as its widest cell, or WIDTH (cut to it); ``.`` aligns it right."""
    fields = _fields(now)
    parts: list[Any] = []
    pos = 0
    for m in _SPEC.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        letter = m.group(3)
        pos = m.end()
        if m.group(0) == "%%":
            parts.append("%")
            continue
        if letter not in fields:
            fail(
                prog,
                f"--format: '{shown(m.group(0))}': not a field (one of %{', %'.join(LETTERS.split())})",
                ExitCode.USAGE,
            )
        parts.append((m.group(1) == ".", int(m.group(2) or 0), letter))
    parts.append(fmt[pos:])
    rows = [[fields[p[2]][0] if isinstance(p, tuple) else p for p in parts]]
    rows += [[shown(fields[p[2]][1](j)) if isinstance(p, tuple) else p for p in parts] for j in jobs]
    widths = {}
    for k, p in enumerate(parts):
        if isinstance(p, tuple):
            widths[k] = p[1] or max(len(r[k]) for r in rows)
    out = []
    for r in rows:
        cells = []
        for k, p in enumerate(parts):
            if isinstance(p, tuple):
                w = widths[k]
                cell = r[k][:w] if p[1] else r[k]
                cells.append(cell.rjust(w) if p[0] else cell.ljust(w))
            else:
                cells.append(r[k])
        out.append("".join(cells).rstrip())
    return "\n".join(out)


def sort(prog: str, keys: str, jobs: list[Job], now: float) -> list[Job]:
    """--sort: comma-separated field letters or :data:`SORT_NAMES`, ``-`` before one for descending order
    (as squeue --sort)."""
    fields = _fields(now)
    order: list[tuple[str, bool]] = []
    for raw in keys.split(","):
        k = raw.strip()
        desc = k.startswith("-")
        k = k.lstrip("+-")
        k = SORT_NAMES.get(k.lower(), k) if len(k) > 1 else k
        if k not in fields:
            fail(
                prog,
                f"--sort: '{shown(raw)}': not a field (one of {', '.join([*LETTERS.split(), *SORT_NAMES])})",
                ExitCode.USAGE,
            )
        order.append((k, desc))
    out = list(jobs)
    for k, desc in reversed(order):
        out.sort(key=fields[k][2], reverse=desc)
    return out


def start_view(jobs: list[Job], now: float) -> str:
    """--start: the pending and held jobs with their predicted start (date and time) and REASON."""
    start = _fields(now)["S"][2]
    from gridsched.cli.gstat_tasks import planned_rows

    waiting = [row for j in jobs if j["state"] in WAITING for row in planned_rows(j)]
    waiting.sort(key=lambda j: (not start(j), start(j), j["id"]))
    return render("gstat", "%i %j %u %T %S %R", waiting, now)
