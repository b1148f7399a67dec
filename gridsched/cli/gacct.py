"""gacct: accounting of finished jobs, as a table, JSON or a Standard Workload Format trace.

Reads the daemon's state db (read-only); works with no daemon.  The SWF
export (version 2.2) lets gsim replay the machine's own history.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import click

from gridsched.cli.common import Command, ExitCode, fail, setup, spool_options
from gridsched.cli.gacct_format import (
    FormatError,
    alloc_tres,
    cpu_time,
    device_seconds,
    fields,
    held_devices,
    memory,
    render,
    total_cpu,
)
from gridsched.cli.gacct_format import parse as parse_format
from gridsched.cli.select import STATE_OF, Selection, parse_ref
from gridsched.cli.select import _split_ids as split_ids
from gridsched.cli.select import label as task_label
from gridsched.core.units import format_duration
from gridsched.protocol.jobs import TERMINAL, JobState
from gridsched.protocol.spool import Spool
from gridsched.protocol.text import dumps, shown

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow as Row
    from gridsched.protocol.view import ViewRow

PROG = "gacct"
TERMINAL_STATES = tuple(sorted(TERMINAL))  # in the order the usage error lists them
# The --json schema: one record per job with exactly these keys, in this order.
# ``jobid`` is the id as sacct shows it (``17_3`` for task 3 of array 17); ``max_rss`` in bytes,
# ``cpu_user``, ``cpu_sys`` and ``total_cpu`` in seconds (null: not measured); ``req_mem`` in bytes;
# ``gpus`` the GPUs it held (last), ``gpu_time`` GPUs held times the time held in seconds, ``alloc_tres``
# as the AllocTRES field.
JSON_KEYS = (
    "id name user state submit_time start_time end_time wait run exit_code exit_signal ncpus "
    "restarts preemptions checkpoints lost devices "
    "jobid array_id array_index max_rss cpu_user cpu_sys total_cpu req_mem gpus gpu_time alloc_tres"
).split()
COLUMNS = (
    "ID",
    "NAME",
    "USER",
    "STATE",
    "SUBMIT",
    "START",
    "END",
    "WAIT",
    "RUN",
    "EXIT",
    "CORES",
    "RESTARTS",
    "PREEMPT",
    "CKPTS",
    "LOST",
    "MAXRSS",
    "TOTALCPU",
)
# The keys of a job's spec gacct shows (the rest of it is not read).
SPEC_KEYS = ("array_id", "array_index", "mem", "devices", "gid", "depend", "workdir")
SWF_STATUS: dict[str, int] = {
    JobState.COMPLETED: 1,
    JobState.FAILED: 0,
    JobState.TIMEOUT: 0,
    JobState.OUT_OF_MEMORY: 0,
    JobState.CANCELLED: 5,
}
# The fields of --parsable without --format (sacct's own default, less what one machine has not).
DEFAULT_FORMAT = "JobID,JobName,User,AllocCPUS,State,ExitCode,Elapsed,MaxRSS,TotalCPU"
_RELATIVE = re.compile(r"^([+-])(\d+(?:\.\d+)?)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_FORMATS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S")


class TimeType(click.ParamType):
    """A point in time: 2026-11-22, 2026-11-22T10:00[:SS], now, today, or relative: -1d, -2h, -30m."""

    name = "TIME"

    def __init__(self, now: float | None = None) -> None:
        self.now = now

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip()
        now = self.now if self.now is not None else time.time()
        if text == "now":
            return now
        if text == "today":
            return datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        m = _RELATIVE.match(text)
        if m:
            delta = float(m.group(2)) * _UNIT[m.group(3)]
            return now - delta if m.group(1) == "-" else now + delta
        for fmt in _FORMATS:
            try:
                return datetime.strptime(text, fmt).timestamp()
            except ValueError:
                continue
        self.fail(
            f"'{value}': not a time (use 2026-11-22, 2026-11-22T10:00, now, today, or -1d, -2h, -30m)", param, ctx
        )


def run_seconds(job: Row) -> float:
    """Seconds the job ran: the sum of its run segments (``elapsed`` when it has none)."""
    segs = [s for s in job.get("segments") or [] if isinstance(s, dict) and s.get("start") is not None]
    if not segs:
        return float(job.get("elapsed") or 0.0)
    total = 0.0
    for s in segs:
        end = s.get("end", job.get("end_time"))
        if end is not None:
            total += max(0.0, float(end) - float(s["start"]))
    return total


def wait_seconds(job: Row) -> float | None:
    start = job.get("start_time")
    if start is None:
        return None
    return max(0.0, float(start) - float(job["submit_time"]))


def label(job: Mapping[str, Any]) -> str:
    """The id as sacct shows it: ``17_3`` for task 3 of array 17, ``17_[5-99]`` for the tasks of array 17
    cancelled before they started (one record for them all, as sacct shows an array's pending part)."""
    if job.get("unmade"):
        return f"{job['id']}_[{job['unmade']}]"
    return task_label(job)


def record(job: Row) -> dict[str, Any]:
    """The --json record of a finished job (the keys of :data:`JSON_KEYS`)."""
    out = {k: job.get(k) for k in JSON_KEYS}
    w = wait_seconds(job)
    out["wait"] = None if w is None else round(w, 3)
    out["run"] = round(run_seconds(job), 3)
    out["lost"] = round(float(job.get("lost") or 0.0), 3)
    out["devices"] = job.get("devices") or ""
    spec = job["spec"]
    out["jobid"] = label(job)
    out["array_id"] = spec.array_id
    out["array_index"] = spec.array_index
    out["total_cpu"] = None if (t := total_cpu(job)) is None else round(t, 6)
    out["req_mem"] = int(spec.mem) if spec.mem else None
    out["gpus"] = held_devices(job).get("gpu", 0)
    out["gpu_time"] = round(device_seconds(job), 3)
    out["alloc_tres"] = alloc_tres(job)
    more: Mapping[str, Any] = job
    if more.get("unmade"):  # tasks cancelled before they started: their indices and count
        out["array_tasks"], out["tasks"] = more["unmade"], more["count"]
    return out


def select(
    jobs: Iterable[Row], user: str | None, states: set[JobState] | None, start: float | None, end: float | None
) -> Iterator[Row]:
    """Finished jobs of ``user`` in ``states`` that ended at or after ``start`` and began by ``end``."""
    for j in jobs:
        if j["state"] not in TERMINAL:
            continue
        if user is not None and j["user"] != user:
            continue
        if states is not None and j["state"] not in states:
            continue
        if start is not None and (j.get("end_time") or 0) < start:
            continue
        began = j.get("start_time") if j.get("start_time") is not None else j.get("submit_time")
        if end is not None and began is not None and began > end:
            continue
        yield j


def swf_trace(jobs: list[Row], max_procs: int | None, host: str = "") -> str:
    """The jobs as a Standard Workload Format 2.2 trace (sorted by submit time)."""
    # the tasks cancelled before they started are one record for many jobs that never ran: not in a trace
    jobs = sorted((j for j in jobs if not j.get("unmade")), key=lambda j: (j["submit_time"], j["id"]))
    t0 = int(jobs[0]["submit_time"]) if jobs else int(time.time())
    lines = [
        "; Version: 2.2",
        f"; Computer: gridsched{' on ' + host if host else ''}",
        "; Installation: exported by gacct --swf",
        f"; UnixStartTime: {t0}",
        f"; StartTime: {time.strftime('%a %b %d %H:%M:%S %Z %Y', time.localtime(t0))}",
        f"; MaxJobs: {len(jobs)}",
        f"; MaxRecords: {len(jobs)}",
        f"; MaxProcs: {max_procs if max_procs else -1}",
        "; MaxNodes: 1",
        "; Note: status 1 completed, 0 failed or timed out, 5 cancelled; times in seconds",
    ]
    for j in jobs:
        spec = j["spec"]
        w = wait_seconds(j)
        started = j.get("start_time") is not None
        mem = spec.mem
        req_mem = int(mem) // 1024 // max(1, j["ncpus"]) if mem else -1
        dep = spec.depend
        first_dep = re.search(r":(\d+)", dep)
        fields = [
            j["id"],
            int(round(j["submit_time"] - t0)),
            int(round(w)) if w is not None else -1,
            int(round(run_seconds(j))) if started else -1,
            j["ncpus"] if started else -1,
            -1,
            -1,
            j["ncpus"],
            j["walltime"],
            req_mem,
            SWF_STATUS.get(j["state"], -1),
            j.get("uid", -1) if j.get("uid") is not None else -1,
            spec.gid,
            -1,
            -1,
            -1,
            int(first_dep.group(1)) if first_dep else -1,
            -1,
        ]
        lines.append(" ".join(str(f) for f in fields))
    return "\n".join(lines) + "\n"


def when(t: float | None) -> str:
    return "" if t is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def print_table(jobs: Iterable[Row], header: bool = True) -> None:
    """The jobs as aligned columns; what a user wrote (name, user) is escaped (``text.shown``).  Only the
    cells are kept as the jobs are read (the widths are known at the end)."""
    rows = [COLUMNS]
    for j in jobs:
        w = wait_seconds(j)
        code = "" if j.get("exit_code") is None else str(j["exit_code"])
        if j.get("exit_signal"):
            code = f"sig{j['exit_signal']}"
        rows.append(
            (
                shown(label(j)),
                shown(j["name"]),
                shown(j["user"]),
                shown(j["state"]),
                when(j["submit_time"]),
                when(j.get("start_time")),
                when(j.get("end_time")),
                "" if w is None else format_duration(w),
                format_duration(run_seconds(j)),
                shown(code),
                shown(f"{j['ncpus']} {j['devices']}" if j.get("devices") else j["ncpus"]),
                shown(j.get("restarts", 0)),
                shown(j.get("preemptions", 0)),
                shown(j.get("checkpoints", 0)),
                format_duration(j.get("lost") or 0),
                memory(j.get("max_rss")),
                cpu_time(total_cpu(j)),
            )
        )
    widths = [max(map(len, col)) for col in zip(*rows)]
    line = "  ".join(f"{{:{'<' if i in (1, 2, 3) else '>'}{w}}}" for i, w in enumerate(widths)).format
    lines = [line(*r).rstrip() for r in (rows if header else rows[1:])]
    if lines:
        click.echo("\n".join(lines))


def parse_ids(raw: str | None) -> Selection | None:
    """-j: ``ID`` (a job, or every task of array ``ID``), ``ID_N``, ``ID_[LIST]``, comma-separated (as gstat)."""
    if raw is None:
        return None
    refs = []
    for part in split_ids(raw):
        r = parse_ref(PROG, part.strip())
        if r not in refs:
            refs.append(r)
    if not refs:
        fail(PROG, f"jobs '{shown(raw)}': no job id", ExitCode.USAGE)
    return Selection(tuple(refs), frozenset(), frozenset(), frozenset())


def parse_states(raw: str | None) -> set[JobState] | None:
    if raw is None:
        return None
    out = set()
    for part in raw.split(","):
        s = STATE_OF.get(part.strip().upper())
        if s is None or s not in TERMINAL:
            fail(PROG, f"state '{shown(part.strip())}': must be one of {', '.join(TERMINAL_STATES)}", ExitCode.USAGE)
        out.add(s)
    return out


def read(
    spool: Spool,
    user: str | None = None,
    states: set[JobState] | None = None,
    window: tuple[float | None, float | None] = (None, None),
) -> Iterator[Row]:
    """The finished jobs in the state db, each decoded as it is read: only those of ``user``, in ``states``
    and in the time ``window`` of :func:`select` are read (the window through the index on end times); the
    tasks of each array cancelled before they started are one record (:func:`fold_unstarted`), in the place of
    the array's id."""
    if not spool.db.exists():
        return
    import heapq
    import sqlite3

    from gridsched.protocol.state import StateDB

    start, end = window
    try:
        db = StateDB(spool.db)
        try:
            st = sorted(states) if states is not None else TERMINAL_STATES
            # a window that starts at or before the epoch takes the rows that have no end time too (as select)
            ended = (start if start is not None and start > 0 else None, end)
            # the state db's rows are the jobs table's columns, decoded (protocol/state.py: _decode_keys)
            rows = db.iter_jobs(states=st, user=user, ended=ended, spec_keys=SPEC_KEYS)
            never = cancelled_tasks(db) if JobState.CANCELLED in st else []
            if never:
                folded = fold_unstarted(db, never, user, ended)
                rows = (r for r in rows if r["id"] not in folded)
            yield from heapq.merge(rows, never, key=lambda j: j["id"])
        finally:
            db.close()
    except sqlite3.Error as e:
        fail(PROG, shown(f"cannot read {spool.db}: {e}"))


def cancelled_tasks(db: Any) -> list[ViewRow]:
    """A record for the tasks of each array cancelled before they were made (they never started), by array
    id; it ended when they were cancelled."""
    from gridsched.protocol.view import unmade_records

    got = [{**r, "end_time": r.get("cancel_time")} for r in unmade_records(db) if r["state"] == JobState.CANCELLED]
    return cast("list[ViewRow]", got)


def fold_unstarted(
    db: Any, records: list[ViewRow], user: str | None = None, window: tuple[float | None, float | None] = (None, None)
) -> set[int]:
    """Fold into each array's record of :func:`cancelled_tasks` the tasks the daemon had made ahead of their
    start (a machine's worth of an array's pending tasks is made at a time) that were cancelled with it,
    never started: sacct shows an array's tasks that never started as one record, whichever the scheduler
    had split off.  A task cancelled at another time (on its own, ``gdel 12_3``) keeps its own line.  Only
    the cancelled rows of ``user`` that ended in ``window`` are read (as :func:`read` reads the others).  The
    ids folded."""
    from gridsched.protocol.arrays import Indices

    by_array = {r["id"]: r for r in records}
    extra: dict[int, list[int]] = {}
    folded: set[int] = set()
    for row in db.iter_jobs(
        states=[JobState.CANCELLED], user=user, ended=window, spec_keys=("array_id", "array_index")
    ):
        spec = row["spec"]
        rec = by_array.get(spec.array_id) if spec.array_id is not None else None
        if rec is None or spec.array_index is None or row.get("start_time") is not None:
            continue
        ended, cancelled = row.get("end_time"), rec.get("cancel_time")
        if ended is None or cancelled is None or abs(float(ended) - float(cancelled)) > 1.0:
            continue
        extra.setdefault(spec.array_id, []).append(int(spec.array_index))
        folded.add(row["id"])
    for aid, indices in extra.items():
        rec = by_array[aid]
        both = Indices.from_text(rec["unmade"]).union(Indices.of(indices))
        rec["unmade"], rec["count"] = both.text, len(both)
    return folded


def machine_cores(spool: Spool) -> int | None:
    """The machine's cores as the daemon recorded them (None: not recorded)."""
    from gridsched.protocol.state import recorded_machine

    try:
        return int(recorded_machine(spool.db)["ncores"])
    except (ValueError, KeyError, TypeError):
        return None


def print_json(jobs: Iterable[Row]) -> None:
    """gacct --json, each record written as its row is read; the same document as one ``dumps`` of it."""
    import sys

    out = sys.stdout
    out.write('{\n  "jobs": [')
    first = True
    for j in jobs:
        out.write(("\n    " if first else ",\n    ") + dumps(record(j), indent=2).replace("\n", "\n    "))
        first = False
    out.write(("]" if first else "\n  ]") + "\n}\n")
    out.flush()


@click.command(
    PROG,
    cls=Command,
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="accounting of finished jobs",
)
@click.option("-u", "--user", metavar="USER", help="Only the jobs of USER.")
@click.option(
    "-s",
    "--state",
    "states",
    metavar="STATE[,STATE...]",
    help="Only jobs that ended in these states: COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY "
    "(or Slurm's short forms CD, F, CA, TO, OOM).",
)
@click.option(
    "-S",
    "--starttime",
    type=TimeType(),
    help="Only jobs that ended at or after TIME: 2026-11-22, 2026-11-22T10:00[:SS], today, now, or "
    "relative to now: -1d, -12h, -30m, -2w.",
)
@click.option(
    "-E",
    "--endtime",
    type=TimeType(),
    help="Only jobs that started (or were submitted) by TIME (the forms of --starttime).",
)
@click.option(
    "-j",
    "--jobs",
    "job_ids",
    metavar="ID[,ID...]",
    help="Only these jobs: ID (a job, or every task of array ID), ARRAYID_N (one task), ARRAYID_[LIST].",
)
@click.option(
    "-o",
    "--format",
    "fmt",
    metavar="FIELD[%WIDTH],...",
    help="Print these fields, named as sacct names them, in any case (gacct --helpformat lists them).",
)
@click.option("-p", "--parsable", is_flag=True, help="Fields separated by '|', one after the last too (sacct -p).")
@click.option("-P", "--parsable2", is_flag=True, help="Fields separated by '|', none after the last (sacct -P).")
@click.option("-n", "--noheader", is_flag=True, help="No header line.")
@click.option("-e", "--helpformat", is_flag=True, help="List the fields --format knows, and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON (schema in gacct(1)).")
@click.option("--swf", is_flag=True, help="Print the jobs as a Standard Workload Format 2.2 trace for gsim.")
@spool_options
def cli(
    user: str | None,
    states: str | None,
    starttime: float | None,
    endtime: float | None,
    job_ids: str | None,
    fmt: str | None,
    parsable: bool,
    parsable2: bool,
    noheader: bool,
    helpformat: bool,
    as_json: bool,
    swf: bool,
    spool_dir: str | None,
    config_file: str | None,
) -> int:
    """Show finished jobs (completed, failed, cancelled, timed out, out of
    memory) from the daemon's state db: when each was submitted, started and
    ended, how long it waited and ran, its exit status and cores, how often
    it was restarted, preempted and checkpointed, and what its processes
    used (peak memory, CPU time).  Array tasks show as ARRAYID_INDEX.

    A job's GPUs show beside its cores (CORES: 2 gpu:0,1); its GPU time is
    the GPUs it held times the time it held them, summed over its run
    segments (--format AllocTRES,GPUTime,GPUTimeRAW; --json gpus, gpu_time,
    alloc_tres).
    """
    known = fields(label, run_seconds, wait_seconds)
    if helpformat:
        click.echo(" ".join(f.name for f in known))
        return ExitCode.OK
    if as_json and swf:
        fail(PROG, "--json and --swf exclude each other", ExitCode.USAGE)
    if parsable and parsable2:
        fail(PROG, "--parsable and --parsable2 exclude each other", ExitCode.USAGE)
    table_only = fmt is not None or parsable or parsable2 or noheader
    if table_only and (as_json or swf):
        fail(
            PROG,
            "--format, --parsable, --parsable2 and --noheader are for the table, not --json or --swf",
            ExitCode.USAGE,
        )
    cols = None
    if fmt is not None:
        try:
            cols = parse_format(fmt, known)
        except FormatError as e:
            fail(PROG, str(e), ExitCode.USAGE)
    sel = parse_ids(job_ids)
    st = parse_states(states)
    s = setup(PROG, spool_dir, config_file)
    jobs: Iterable[Row] = read(s.spool, user=user, states=st, window=(starttime, endtime))
    if sel is not None:
        jobs = (j for j in jobs if sel.named(j) is not None)
    jobs = select(jobs, user, st, starttime, endtime)
    if cols is not None or parsable or parsable2:
        if cols is None:
            cols = parse_format(DEFAULT_FORMAT, known)
        mode = "p" if parsable else "P" if parsable2 else None
        for line in render(list(jobs), cols, mode, not noheader):
            click.echo(line)
    elif swf:
        import socket

        click.echo(swf_trace(list(jobs), machine_cores(s.spool), socket.gethostname()), nl=False)
    elif as_json:
        print_json(jobs)
    else:
        print_table(jobs, header=not noheader)
    return ExitCode.OK


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
