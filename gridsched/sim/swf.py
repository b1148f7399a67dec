"""Reading Standard Workload Format (SWF) traces of the Parallel Workloads Archive.

An SWF file has ``;`` comment lines (the header, with keys such as
``MaxProcs`` and ``MaxNodes``) and one line per job of 18 whitespace-separated
numeric fields, ``-1`` meaning unknown.  The fields read here are 1 (job id),
2 (submit time), 4 (run time), 5 (allocated processors), 8 (requested
processors), 9 (requested time), 11 (status), 12 (user id), 17 (preceding job
number) and 18 (think time from the preceding job); see gsim(1) for how each
is used.
"""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TypeVar

from gridsched.core.devices import DeviceAsk

NFIELDS = 18
# The fields the replay reads (1, 2, 4, 5, 8, 9, 11, 12, 17, 18, counted from 1) and what a line made
# only of whole numbers (and points, in the fields not read) is left with once they are deleted.
_READ = itemgetter(0, 1, 3, 4, 7, 8, 9, 10, 11, 16, 17)
_PLAIN = str.maketrans("", "", "0123456789-. \t\r\n")

# Reasons a job is left out of a simulation, in report order.
NO_RUNTIME = "no run time"
NO_PROCS = "no processors"
TOO_LARGE = "larger than the machine"
BAD_LINE = "bad line"
UNPLACEABLE = "cannot be placed on the topology"
TOO_MANY_DEVICES = "more devices than the machine has"
REASONS = (NO_RUNTIME, NO_PROCS, TOO_LARGE, BAD_LINE, UNPLACEABLE, TOO_MANY_DEVICES)
MAX_PROBLEMS = 5  # problem messages kept for the report; the rest are counted


class TraceError(Exception):
    """A trace that cannot be used; the message names the file and line."""


@dataclass(slots=True)
class Trace:
    """The jobs of a trace that can be simulated, in submit order (parallel lists)."""

    path: str
    ncores: int
    max_procs: int | None
    max_nodes: int | None
    ids: list[int] = field(default_factory=list)  # SWF job ids
    submit: list[float] = field(default_factory=list)
    size: list[int] = field(default_factory=list)  # cores
    walltime: list[float] = field(default_factory=list)  # the user's estimate
    run: list[float] = field(default_factory=list)  # actual run time, cut at the walltime
    user: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    problems: list[str] = field(default_factory=list)  # first bad lines, "path:line: why"
    cut: int = 0  # jobs whose run time exceeded the request and were cut at it
    lines: int = 0  # job lines read
    # SWF job id -> (preceding job's id, think time): fields 17 and 18, for the jobs that give one.
    preceding: dict[int, tuple[int, float]] = field(default_factory=dict)
    # SWF job id -> status (field 11) of the jobs that did not complete: 0 failed, 5 cancelled.
    status: dict[int, int] = field(default_factory=dict)
    # SWF job id -> the devices it asks for (gsim --devices, or gpus/gres in the workload file); a job
    # missing here asks for none.
    devices: dict[int, tuple[DeviceAsk, ...]] = field(default_factory=dict)
    # the memory each job asks for, in KiB: field 10 (KiB per processor) times its processors; -1 = unknown
    mem: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


def _open(path: str):  # type: ignore[no-untyped-def]
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory") from None
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror}") from None
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="ascii", errors="replace")
    return open(path, encoding="ascii", errors="replace")


def _number(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(text)
    return v


def _header_int(line: str, key: str) -> int | None:
    """The value of ``; Key: N`` comment lines (``None`` if absent or not a number)."""
    body = line[1:].strip()
    name, sep, value = body.partition(":")
    if not sep or name.strip().lower() != key.lower():
        return None
    try:
        return int(value.split()[0])
    except (ValueError, IndexError):
        return None


def read(
    path: str,
    procs: int | None = None,
    nodes: bool = False,
    strict: bool = False,
    limit: int | None = None,
) -> Trace:
    """Read the trace at ``path`` (plain or gzip-compressed).

    ``procs`` overrides the machine size of the header; with ``nodes`` the
    machine is counted in nodes (``MaxNodes``) and each job in the nodes it
    needs.  ``limit`` keeps the first ``limit`` job lines.  A bad line raises
    :class:`TraceError` with ``strict``, else it is skipped and counted.
    """
    max_procs: int | None = None
    max_nodes: int | None = None
    lineno_of: list[int] = []
    ids: list[int] = []
    submit: list[float] = []
    size: list[int] = []
    walltime: list[float] = []
    run: list[float] = []
    user: list[str] = []
    mem: list[int] = []
    skipped = dict.fromkeys(REASONS, 0)
    problems: list[str] = []
    cut = 0
    njob_lines = 0
    preceding: dict[int, tuple[int, float]] = {}
    status: dict[int, int] = {}
    last_submit = -math.inf

    def bad(lineno: int, why: str) -> None:
        msg = f"{path}:{lineno}: {why}"
        if strict:
            raise TraceError(msg)
        skipped[BAD_LINE] += 1
        if len(problems) < MAX_PROBLEMS:
            problems.append(msg)

    with _open(path) as f:
        try:
            for lineno, line in enumerate(f, 1):
                if line.startswith(";"):
                    if max_procs is None:
                        max_procs = _header_int(line, "MaxProcs")
                    if max_nodes is None:
                        max_nodes = _header_int(line, "MaxNodes")
                    continue
                fs = line.split()
                if not fs:
                    continue
                if limit is not None and njob_lines >= limit:
                    break
                njob_lines += 1
                if len(fs) != NFIELDS:
                    bad(lineno, f"{len(fs)} fields, expected {NFIELDS}")
                    continue
                # Nearly every line of a real trace is whole numbers in the fields read, and int() is
                # much faster than float(); any other line is read with float(), every field checked.
                try:
                    if line.translate(_PLAIN):
                        raise ValueError
                    vals: tuple[float, ...] = tuple(map(int, _READ(fs)))
                except ValueError:
                    try:
                        every = list(map(float, fs))
                        if not math.isfinite(sum(every)):
                            raise ValueError from None
                    except ValueError:
                        col = next(i for i, x in enumerate(fs, 1) if not _is_number(x))
                        bad(lineno, f"field {col} is not a number: {fs[col - 1]!r}")
                        continue
                    vals = _READ(every)
                f_id, f_sub, f_run, f_procs, f_req, f_reqt, f_mem, f_status, f_user, f_prev, f_think = vals
                t_sub, t_run, t_req = float(f_sub), float(f_run), float(f_reqt)
                if t_sub < 0:
                    bad(lineno, f"negative submit time {fs[1]}")
                    continue
                if t_run < 0 and t_run != -1:
                    bad(lineno, f"negative run time {fs[3]}")
                    continue
                if t_req < 0 and t_req != -1:
                    bad(lineno, f"negative requested time {fs[8]}")
                    continue
                if t_sub < last_submit:
                    bad(
                        lineno,
                        f"submit time {fs[1]} is earlier than the previous job's ({last_submit:g}): "
                        "the trace is not sorted by submit time",
                    )
                    continue
                last_submit = t_sub
                if t_run == -1:
                    skipped[NO_RUNTIME] += 1
                    continue
                n = int(f_req) if f_req > 0 else int(f_procs)
                if n <= 0:
                    skipped[NO_PROCS] += 1
                    continue
                est = t_req if t_req > 0 else t_run
                if t_run > est:
                    t_run = est
                    cut += 1
                lineno_of.append(lineno)
                ids.append(int(f_id))
                submit.append(t_sub)
                size.append(n)
                walltime.append(est)
                run.append(t_run)
                user.append(fs[11] if f_user >= 0 else "")
                mem.append(int(f_mem * n) if f_mem > 0 else -1)
                if f_prev > 0:
                    preceding[int(f_id)] = (int(f_prev), float(f_think) if f_think > 0 else 0.0)
                if f_status == 0 or f_status == 5:
                    status[int(f_id)] = int(f_status)
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise TraceError(f"{path}: cannot read: {e}") from None

    ncores, size = _machine(path, procs, nodes, max_procs, max_nodes, size)
    trace = Trace(path, ncores, max_procs, max_nodes, skipped=skipped, problems=problems, cut=cut)
    trace.lines = njob_lines
    trace.preceding, trace.status = preceding, status
    if max(size, default=0) > ncores:
        unit = "nodes" if nodes else "processors"
        keep = [i for i, n in enumerate(size) if n <= ncores]
        first = next(i for i, n in enumerate(size) if n > ncores)
        msg = (
            f"{path}:{lineno_of[first]}: job {ids[first]} needs {size[first]} {unit}, more than the machine's {ncores}"
        )
        if strict:
            raise TraceError(msg)
        skipped[TOO_LARGE] += len(size) - len(keep)
        if len(problems) < MAX_PROBLEMS:
            problems.append(msg)
        ids, submit, size = _keep(ids, keep), _keep(submit, keep), _keep(size, keep)
        walltime, run, user = _keep(walltime, keep), _keep(run, keep), _keep(user, keep)
        mem = _keep(mem, keep)
    trace.ids, trace.submit, trace.size = ids, submit, size
    trace.walltime, trace.run, trace.user, trace.mem = walltime, run, user, mem
    if not ids:
        if njob_lines == 0:
            raise TraceError(f"{path}: no jobs in the trace")
        raise TraceError(f"{path}: none of the {njob_lines} jobs can be simulated ({_skip_text(skipped)})")
    return trace


def _machine(
    path: str, procs: int | None, nodes: bool, max_procs: int | None, max_nodes: int | None, size: list[int]
) -> tuple[int, list[int]]:
    """The machine's size (``procs``, else the header's; in nodes with ``nodes``) and each job's size in
    that unit (``size``: in processors)."""
    if nodes:
        if not max_nodes or not max_procs:
            raise TraceError(f"{path}: --nodes needs MaxNodes and MaxProcs in the header")
        per_node = max(1, max_procs // max_nodes)
        size = [-(-n // per_node) for n in size]
        ncores = procs if procs is not None else max_nodes
    else:
        ncores = procs if procs is not None else (max_procs or 0)
    if ncores <= 0:
        what = "MaxNodes" if nodes else "MaxProcs"
        raise TraceError(f"{path}: machine size unknown (no {what} in the header): give --procs")
    return ncores, size


def _is_number(text: str) -> bool:
    try:
        _number(text)
    except ValueError:
        return False
    return True


def _skip_text(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in skipped.items() if n) or "none skipped"


_T = TypeVar("_T")


def _keep(col: list[_T], keep: list[int]) -> list[_T]:
    return [col[i] for i in keep]


def keep_only(trace: Trace, keep: list[int], reason: str) -> None:
    """Leave out every job whose index is not in ``keep`` (sorted), counting them under ``reason``."""
    trace.skipped[reason] = trace.skipped.get(reason, 0) + len(trace.ids) - len(keep)
    for name in ("ids", "submit", "size", "walltime", "run", "user", "mem"):
        col = getattr(trace, name)
        setattr(trace, name, [col[i] for i in keep])
