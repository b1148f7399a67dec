"""gstat: show the queue, one job in full, or both as JSON.

Reads the daemon's state db (read-only) and the submit requests the daemon has
not taken in yet; works with no daemon and with no state db at all.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gridsched.cli.plain import ExitCode, echo, fail, run, setup
from gridsched.core.units import format_duration, format_size
from gridsched.protocol import view
from gridsched.protocol.jobs import ACTIVE, TERMINAL, JobState
from gridsched.protocol.text import dumps, shown
from gridsched.protocol.view import from_submit  # noqa: F401 - part of this module's interface

if TYPE_CHECKING:  # the spool (and pathlib) is loaded when a command reads it, not for --help
    from gridsched.protocol.spool import Spool
    from gridsched.protocol.view import Segment
    from gridsched.protocol.view import ViewRow as Row

PROG = "gstat"

# The --json schema: one record per job with exactly these keys, in this order.
JSON_KEYS = (
    "id name user state ncpus walltime submit_time start_time end_time elapsed predicted_start planned cores "
    "exit_code exit_signal reason restarts preemptions checkpoints backfilled stdout stderr workdir "
    "resources reservation array_id array_index split parent devices reason_code"
).split()
STYLE: dict[str, str] = {
    JobState.PENDING: "yellow",
    JobState.HELD: "magenta",
    JobState.RUNNING: "green",
    JobState.STOPPING: "cyan",
    JobState.SUSPENDED: "cyan",
    JobState.COMPLETED: "dim",
    JobState.FAILED: "red",
    JobState.TIMEOUT: "red",
    JobState.OUT_OF_MEMORY: "red",
    JobState.CANCELLED: "dim red",
}


def run_time(job: Row, now: float) -> float:
    """Seconds the job has run: ``elapsed`` (segments that ended) plus the current segment if it runs."""
    total = float(job.get("elapsed") or 0.0)
    if job["state"] in ACTIVE:
        start = job.get("start_time")
        segs = job.get("segments") or []
        last = segs[-1] if segs else None
        if isinstance(last, dict) and last.get("start") is not None and last.get("end") is None:
            start = last["start"]
        if start is not None:
            total += max(0.0, now - float(start))
    return total


def load_jobs(spool: Spool, ids: list[int] | None = None, **how: bool) -> list[Row]:
    """The jobs of :func:`gridsched.protocol.view.load_jobs` (``how``: its ``live``, ``brief`` and ``folded``);
    an unreadable db is an error."""
    try:
        return view.load_jobs(spool, ids, **how)
    except view.QueueError as e:
        fail(PROG, shown(e))


def split_pieces(spool: Spool, jid: int) -> list[Row]:
    try:
        return view.split_pieces(spool, jid)
    except view.QueueError as e:
        fail(PROG, shown(e))


def print_json(spool: Spool, sel: Any, live: bool, now: float) -> int:
    """gstat --json: the jobs ``sel`` names (``live``: those that have not ended), each record written as its
    row is read, so memory stays bounded however long the queue; the same document as one ``dumps`` of it."""
    import sys

    from gridsched.cli.gstat_tasks import annotate

    out = sys.stdout
    out.write('{\n  "jobs": [')
    first = True
    try:
        for j in view.iter_jobs(spool, live):
            if (sel.filtered or sel.refs) and (sel.named(j) is None or not sel.matches(j)):
                continue
            if j["spec"].split is not None:
                annotate([j], split_pieces(spool, j["id"]), spool.job_dir)
            out.write(("\n    " if first else ",\n    ") + record_text(record(view.private(spool, j), now)))
            first = False
        for j in view.unmade_rows(spool):  # the tasks of arrays not made yet: a record for each array and state
            if live and j["state"] in TERMINAL:
                continue
            if (sel.filtered or sel.refs) and (sel.named(j) is None or not sel.matches(j)):
                continue
            out.write(("\n    " if first else ",\n    ") + record_text(record(j, now)))
            first = False
    except view.QueueError as e:
        out.flush()
        fail(PROG, shown(e))
    daemon = dumps(daemon_record(spool), indent=2).replace("\n", "\n  ")
    out.write(("]" if first else "\n  ]") + f',\n  "daemon": {daemon}\n}}\n')
    out.flush()
    return ExitCode.OK


def record_text(rec: dict[str, Any]) -> str:
    """A --json record as ``dumps(doc, indent=2)`` writes it inside the document (at depth 2).  A record with
    no non-empty object or list in it (most) is written by the C encoder, one line per key, which is faster."""
    if any(isinstance(v, (dict, list, tuple)) and v for v in rec.values()):
        return dumps(rec, indent=2).replace("\n", "\n    ")
    return "{\n      " + dumps(rec, separators=(",\n      ", ": "))[1:-1] + "\n    }"


def record(job: Row, now: float) -> dict[str, Any]:
    """The --json record of a job (the keys of :data:`JSON_KEYS`)."""
    spec = job["spec"]
    out = {k: job.get(k) for k in JSON_KEYS}
    out["elapsed"] = round(run_time(job, now), 3)
    out["backfilled"] = bool(job.get("backfilled"))
    out["cores"] = job.get("cores") or ""
    out["devices"] = job.get("devices") or ""
    out["reason"] = job.get("reason") or ""
    out["reason_code"] = reason_code(job)
    out["resources"] = dict(spec.resources)
    out["reservation"] = spec.reservation
    out["array_id"] = spec.array_id
    out["array_index"] = spec.array_index
    if job.get("unmade"):  # the tasks of an array not made yet, in one state: their indices and count
        out["array_tasks"] = job["unmade"]
        out["tasks"] = job["count"]
    out["parent"] = spec.parent
    out["planned"] = None
    if job.get("planned"):
        from gridsched.cli.gstat_tasks import planned_record

        out["planned"] = planned_record(job)
    out["split"] = None
    if (sp := spec.split) is not None:
        out["split"] = {
            "n": sp.get("n"),
            "ncpus": sp.get("ncpus"),
            "task_time": sp.get("task_time"),
            **job.get("split_counts", {}),
        }
    elif spec.split_of is not None:
        out["split"] = {"of": spec.split_of, "tasks": [i for c in spec.split_chains for i in c]}
    out["stdout"] = spec.stdout
    out["stderr"] = spec.stderr
    out["workdir"] = spec.workdir
    return out


def daemon_record(spool: Spool) -> dict[str, Any]:
    info = spool.daemon_info()
    return {"running": info is not None, "pid": (info or {}).get("pid"), "spool": str(spool.root)}


def when(t: float | None) -> str:
    if t is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def time_column(job: Row, now: float) -> str:
    """A running or finished job's run time; a pending one's time to its predicted start; a held one's run
    time so far (it does not count while held, and a held job has no predicted start)."""
    if job["state"] in ACTIVE or job["state"] in TERMINAL or job["state"] in (JobState.SUSPENDED, JobState.HELD):
        t = run_time(job, now)
        return format_duration(t) if t or job["state"] in ACTIVE else ""
    if (planned := job.get("predicted_start")) is not None:
        return format_duration(planned - now)
    return ""


def waits_for(job: Row) -> str:
    """``can never start`` for a pending job that never will (beside its REASON); "" otherwise (the whole
    reason is in gstat -f and --json)."""
    if job["state"] != JobState.PENDING:
        return ""
    return NEVER if str(job.get("reason") or "").startswith(NEVER) else ""


NEVER = "can never start"


def reason_code(job: Row) -> str:
    """squeue's REASON of a pending or held job (:mod:`gridsched.protocol.reason_codes`); "" for other states."""
    from gridsched.protocol.reason_codes import code

    return code(str(job["state"]), str(job.get("reason") or ""))


def moment(t: float, now: float) -> str:
    """A time to come: the time of day when it is today, else the date and time."""
    lt = time.localtime(t)
    if lt[:3] == time.localtime(now)[:3]:
        return time.strftime("%H:%M:%S", lt)
    return time.strftime("%Y-%m-%d %H:%M:%S", lt)


def note(job: Row, now: float | None = None) -> str:
    """Marks for the table: why a job waits, backfilled, preemptions, restarts, its predicted start."""
    parts = []
    why = waits_for(job)
    if why:
        parts.append(why)
    if job.get("backfilled") and job["state"] in ACTIVE:
        parts.append("backfilled")
    if job.get("preemptions"):
        parts.append(f"preempted {job['preemptions']}")
    if job.get("restarts"):
        parts.append(f"restarts {job['restarts']}")
    if job["state"] == JobState.PENDING and (planned := job.get("predicted_start")) is not None:
        parts.append("start " + moment(planned, time.time() if now is None else now))
    return ", ".join(parts)


COLUMNS = (
    ("ID", "right"),
    ("NAME", "left"),
    ("USER", "left"),
    ("STATE", "left"),
    ("CPUS", "right"),
    ("WALLTIME", "right"),
    ("TIME", "right"),
    ("CORES", "left"),
    ("REASON", "left"),
    ("NOTE", "left"),
)


def table_rows(jobs: list[Row], now: float) -> list[tuple[str, ...]]:
    """The cells of the queue table, one tuple of strings per job, each safe to print (``text.shown``)."""
    return [
        (
            shown(j.get("label") or j["id"]),
            shown(j["name"]),
            shown(j["user"]),
            shown(j["state"]),
            shown(j["ncpus"]),
            format_duration(j["walltime"]) if j["walltime"] else "",
            time_column(j, now),
            shown(cores_text(j)),
            shown(reason_code(j)),
            shown(", ".join(x for x in (j.get("note"), note(j, now)) if x)),
        )
        for j in jobs
    ]


def cores_text(job: Row) -> str:
    """The CORES cell: the cores, and the devices of a running job (``0-1 gpu:0,1``)."""
    cores = str(job.get("cores") or "")
    devs = job.get("devices") or ""
    if devs and job.get("state") in ACTIVE:
        return f"{cores} {devs}" if cores else str(devs)
    return cores


def device_lines(job: Row, spool: Any) -> tuple[str, str]:
    """gstat -f's ``devices`` (indices and models: ``gpu 0 (H100), gpu 1 (H100)``) and ``devices_asked``."""
    from gridsched.protocol.device_asks import label, parse_keys

    asks = job["spec"].device_asks()
    asked = " ".join(label(a) + (" (exclusive)" if a.exclusive else "") for a in asks)
    keys = parse_keys(job.get("devices") or "")
    if not keys:
        return "", asked
    models: dict[tuple[str, int], str] = {}
    try:
        from gridsched.host.topology import parse
        from gridsched.protocol.state import recorded_machine

        text = recorded_machine(spool.db).get("map")
        if isinstance(text, str):
            models = {dv.key: dv.model for dv in parse(text, "the running map").devices}
    except ValueError:
        models = {}
    held = ", ".join(f"{t} {i}" + (f" ({models[(t, i)]})" if models.get((t, i)) else "") for t, i in keys)
    return held, asked


def print_table(jobs: list[Row], now: float) -> None:
    """The queue: a rich table on a terminal, plain aligned columns otherwise (fast for long queues)."""
    import sys

    rows = table_rows(jobs, now)
    if sys.stdout.isatty():
        from rich.console import Console

        Console(highlight=False).print(make_table(jobs, now, True, rows))
        return
    cells = [tuple(c for c, _ in COLUMNS), *rows]
    widths = [max(map(len, col)) for col in zip(*cells)]
    line = "  ".join(f"{{:{'>' if just == 'right' else '<'}{w}}}" for (_, just), w in zip(COLUMNS, widths)).format
    echo("\n".join(line(*r).rstrip() for r in cells))


def make_table(jobs: list[Row], now: float, tty: bool, rows: list[tuple[str, ...]] | None = None) -> Any:
    """The queue as a rich Table (boxed and coloured for a terminal).

    Every cell is a rich ``Text`` of an escaped string: no markup in a job's name or user is interpreted.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=box.SIMPLE_HEAD if tty else None, pad_edge=False, show_edge=False, header_style="bold" if tty else ""
    )
    for col, just in COLUMNS:
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for r in rows if rows is not None else table_rows(jobs, now):
        table.add_row(
            Text(r[0]), Text(r[1]), Text(r[2]), Text(r[3], style=STYLE.get(r[3], "")), *(Text(c) for c in r[4:])
        )
    return table


def segment_text(seg: Segment, now: float) -> str:
    """One run segment for people: when, how long, on which cores and boards, how it ended."""
    start = seg.get("start")
    end = seg.get("end")
    text = when(start)
    if start is not None:
        text += f" to {when(end) if end is not None else 'now'} ({format_duration((end or now) - start)})"
    if seg.get("cores"):
        text += f" on cores {seg['cores']}"
        if seg.get("boards"):
            text += f" (boards {seg['boards']})"
        if seg.get("devices"):
            text += f" with {seg['devices']}"
    if seg.get("resumed"):
        text += ", resumed"
    return text + (f": {seg['outcome']}" if seg.get("outcome") else "")


def split_text(job: Row) -> str:
    """A splittable job's sub-task counts, or a piece's chains (``3,4; 5,6``: one chain per ``;``)."""
    spec = job["spec"]
    if spec.split is not None:
        return str(job.get("note", ""))
    if spec.split_of is not None:
        chains = "; ".join(",".join(map(str, c)) for c in spec.split_chains)
        return f"piece of {spec.split_of}: sub-tasks {chains}"
    return ""


def tree_fields(job: Row) -> list[tuple[str, Any]]:
    """gstat -f lines about the job's tree: parent, children, yielded, recoverable."""
    from gridsched.cli.gstat_tree import fields

    return fields(job)


def print_full(job: Row, now: float, devices: tuple[str, str] = ("", "")) -> None:
    """Every field of one job, one ``key: value`` per line (as qstat -f)."""
    import signal as _signal

    from gridsched.cli import gstat_tasks

    spec = job["spec"]
    sig = job.get("exit_signal")
    if sig:
        try:
            sig_s = f"{sig} ({_signal.Signals(sig).name})"
        except ValueError:
            sig_s = str(sig)
    else:
        sig_s = ""
    segs = job.get("segments") or []
    fields: list[tuple[str, Any]] = [
        ("id", job["id"]),
        ("name", job["name"]),
        ("user", f"{job['user']} (uid {job.get('uid')})" if job.get("uid") is not None else job["user"]),
        ("state", job["state"]),
        ("reason", job.get("reason") or ""),
        ("ncpus", job["ncpus"]),
        ("cores", job.get("cores") or ""),
        ("devices", devices[0]),
        ("devices_asked", devices[1]),
        ("walltime", format_duration(job["walltime"]) if job["walltime"] else ""),
        ("mem", format_size(spec.mem) if spec.mem else ""),
        ("checkpoint", spec.checkpoint_text),
        ("resources", ",".join(f"{k}={v}" for k, v in spec.resources.items())),
        ("reservation", "" if spec.reservation is None else spec.reservation),
        *tree_fields(job),
        (
            "array",
            ""
            if spec.array_id is None
            else f"{spec.array_id}_{spec.array_index}"
            + ("" if spec.array_max is None else f" (at most {spec.array_max} tasks at once)"),
        ),
        ("split", split_text(job)),
        ("planned", gstat_tasks.planned_text(job, when)),
        ("submit_time", when(job.get("submit_time"))),
        ("start_time", when(job.get("start_time"))),
        ("end_time", when(job.get("end_time"))),
        ("predicted_start", when(job.get("predicted_start"))),
        ("elapsed", format_duration(run_time(job, now))),
        ("lost", format_duration(job.get("lost") or 0)),
        ("exit_code", "" if job.get("exit_code") is None else job["exit_code"]),
        ("exit_signal", sig_s),
        ("restarts", job.get("restarts", 0)),
        ("preemptions", job.get("preemptions", 0)),
        ("checkpoints", job.get("checkpoints", 0)),
        ("backfilled", "yes" if job.get("backfilled") else "no"),
        ("segments", len(segs)),
        ("hold", "yes" if spec.hold else "no"),
        ("args", " ".join(spec.args)),
        ("workdir", spec.workdir or ""),
        ("submit_dir", spec.submit_dir or ""),
        ("stdout", spec.stdout or ""),
        ("stderr", spec.stderr or ""),
    ]
    width = max(len(k) for k, _ in fields)
    for k, v in fields:
        echo(f"{k:<{width}}  {shown(v)}")
    for i, seg in enumerate(segs, start=1):
        echo(f"{'segment ' + str(i):<{width}}  {shown(segment_text(seg, now))}")


def show(
    show_all: bool = False,
    user: str | None = None,
    full_id: str | None = None,
    tasks: bool = False,
    as_json: bool = False,
    resv_view: bool = False,
    watch: float | None = None,
    count: int | None = None,
    gantt: bool = False,
    hours: float = 4.0,
    spool_dir: str | None = None,
    config_file: str | None = None,
    tree_view: bool = False,
    names: tuple[str, ...] = (),
    states: tuple[str, ...] = (),
    job_refs: tuple[str, ...] = (),
    fmt: str | None = None,
    sort_keys: str | None = None,
    start_view: bool = False,
    prio_view: bool = False,
) -> int:
    """gstat with its options (:mod:`.gstat_cli`; their defaults here are click's, so that ``gstat`` alone
    runs this without click)."""
    from gridsched.cli import gstat_tasks, select

    sel = select.parse(PROG, job_refs, (user,) if user else (), names, states)

    ids: list[int] | None = None
    if full_id is not None:
        from gridsched.protocol.arrays import ArrayError, parse_ref

        try:
            parse_ref(full_id)
        except ArrayError:
            fail(
                PROG, f"full '{shown(full_id)}': not a job id (ID, or ARRAYID_INDEX for an array task)", ExitCode.USAGE
            )
    s = setup(PROG, spool_dir, config_file)
    if full_id is not None:
        try:
            ids = [view.resolve(s.spool, full_id)]
        except (LookupError, view.QueueError) as e:
            fail(PROG, shown(e))
    if resv_view:
        return show_reservations(s.spool, show_all, as_json)
    if watch is not None or gantt:
        if full_id is not None or as_json:
            fail(PROG, "--watch and --gantt go with neither --full nor --json", ExitCode.USAGE)
        return live(s.spool, show_all, sel, watch, count, gantt, hours)
    now = time.time()
    ended = show_all or bool(sel.states & TERMINAL)  # finished jobs are shown (and read)
    by_task = tasks or any(r.indices is not None for r in sel.refs)
    if full_id is not None:
        jobs = load_jobs(s.spool, ids)
        if not jobs:
            fail(PROG, f"job {ids[0]}: no such job")  # type: ignore[index]
        if jobs[0]["spec"].split is not None:
            gstat_tasks.annotate(jobs, split_pieces(s.spool, jobs[0]["id"]), s.spool.job_dir)
    elif as_json and not prio_view and not tree_view:
        return print_json(s.spool, sel, not ended, now)
    else:
        # the plain table reads brief rows; a format, a sort, the trees and the priorities read whole ones
        brief = not (fmt or sort_keys or start_view or tree_view or prio_view)
        jobs = load_jobs(s.spool, live=not ended, brief=brief, folded=not (as_json or by_task))
        jobs += view.unmade_rows(s.spool)  # the tasks of arrays not made yet
        gstat_tasks.annotate(jobs, jobs, s.spool.job_dir)
        if sel.filtered or sel.refs:  # on the tasks; an array then shows as the tasks selected
            jobs = [j for j, _ in select.pick(sel, jobs)]
        if not as_json:
            jobs = gstat_tasks.label_tasks(jobs) if by_task else gstat_tasks.fold(jobs)
        if not ended:
            jobs = [j for j in jobs if j["state"] not in TERMINAL]
    if prio_view:  # sprio: the core's priority function on the same inputs as the daemon's
        from gridsched.cli import gstat_prio

        return gstat_prio.show(s.spool, s.cfg, jobs, now, as_json)
    if (fmt or sort_keys or start_view) and full_id is None and not as_json and not tree_view:
        from gridsched.cli import gstat_format

        if sort_keys:
            jobs = gstat_format.sort(PROG, sort_keys, jobs, now)
        if start_view:
            echo(gstat_format.start_view(jobs, now))
        elif fmt:
            echo(gstat_format.render(PROG, fmt, jobs, now))
        else:
            print_table(jobs, now)
        return ExitCode.OK
    if tree_view and full_id is None:  # parent-child trees (gstat_tree.py)
        from gridsched.cli import gstat_tree

        return gstat_tree.show(s.spool, jobs, as_json)
    if as_json:  # gstat -f ID --json
        doc = {"jobs": [record(view.private(s.spool, j), now) for j in jobs], "daemon": daemon_record(s.spool)}
        echo(dumps(doc, indent=2))
    elif full_id is not None:
        from gridsched.cli import gstat_tree

        job = view.private(s.spool, jobs[0])
        gstat_tree.annotate(s.spool, job)
        print_full(job, now, device_lines(job, s.spool))
    else:
        print_table(jobs, now)
    return ExitCode.OK


def show_reservations(spool: Spool, show_all: bool, as_json: bool) -> int:
    """gstat -r: the reservations, as gresv list shows them."""
    from gridsched.cli.gresv import print_table as resv_table
    from gridsched.cli.gresv import read
    from gridsched.cli.gresv import record as resv_record
    from gridsched.protocol.reservations import LIVE

    resvs, jobs = read(spool)
    recs = [resv_record(r, jobs) for r in resvs if show_all or r["state"] in LIVE]
    if as_json:
        echo(dumps({"reservations": recs}, indent=2))
    else:
        resv_table(recs, time.time())
    return ExitCode.OK


def live(
    spool: Spool, show_all: bool, sel: Any, interval: float | None, count: int | None, chart: bool, hours: float
) -> int:
    """gstat --watch and --gantt (once, without --watch), of the jobs ``sel`` (a :class:`.select.Selection`) names."""
    from gridsched.cli import gstat_live, select

    def selected() -> list[Row]:
        jobs = load_jobs(spool, live=not show_all)
        if not show_all:
            jobs = [j for j in jobs if j["state"] not in TERMINAL]
        return [j for j, _ in select.pick(sel, jobs)] if sel.filtered or sel.refs else jobs

    def snapshot(now: float) -> Any:
        if chart:
            from rich.text import Text

            return Text(gstat_live.gantt(selected(), now, hours))
        return make_table(selected(), now, True)

    def show(now: float) -> None:
        if chart:
            echo(gstat_live.gantt(selected(), now, hours))
        else:
            print_table(selected(), now)

    if interval is None:
        show(time.time())
        return ExitCode.OK
    return gstat_live.watch(snapshot, show, interval, count)


def main() -> None:
    import os
    import sys

    if sys.argv[1:] or "_GSTAT_COMPLETE" in os.environ:  # options, --help, shell completion: click reads them
        from gridsched.cli.gstat_cli import cli

        cli.main(prog_name=PROG)
    run(PROG, show)  # gstat alone, the commonest call: the default view, without loading click


def __getattr__(name: str) -> Any:
    """``cli``: gstat's click command (:mod:`.gstat_cli`), loaded when it is asked for."""
    if name == "cli":
        from gridsched.cli.gstat_cli import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
