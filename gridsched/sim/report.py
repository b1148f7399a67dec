"""gsim's output: records for ``--json``, rich tables for people, the per-job CSV."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from typing import IO, Any

from gridsched.core.units import format_duration
from gridsched.sim.metrics import Metrics, gpu_metrics
from gridsched.sim.records import Result

# (key in the record, column title, format, lower is better) of the compared metrics.
COLUMNS: tuple[tuple[str, str, str, bool], ...] = (
    ("wait_avg", "avg wait", "dur", True),
    ("wait_p95", "p95 wait", "dur", True),
    ("bsld_avg", "avg bsld", "num", True),
    ("response_avg", "avg response", "dur", True),
    ("utilization", "util", "pct", False),
    ("makespan", "makespan", "dur", True),
    ("checkpoints", "ckpts", "int", True),
)


def record(result: Result, metrics: Metrics, seconds: float | None = None) -> dict[str, Any]:
    """One flat JSON-ready record of a run: setting, metrics, cost of the simulation."""
    prm = result.params
    rec: dict[str, Any] = {
        "trace": result.trace.path,
        "ncores": result.trace.ncores,
        "policy": prm.policy.value,
        "p": prm.p,
        "threshold": prm.threshold,
        "predictor": prm.predictor.value,
        "backfill_order": prm.backfill_order.value,
        "checkpoint": result.mode.value,
        "checkpoint_overhead": result.overhead,
    }
    for extra in ("cascade", "early_room"):
        if hasattr(prm, extra):
            rec[extra] = getattr(prm, extra)
    rec.update(metrics.as_dict())
    rec["cut_at_walltime"] = result.trace.cut
    g = gpu_metrics(result)
    if g is not None:
        rec.update(g)
    if result.reservations:
        rec["reservations"] = reservation_metrics(result)
    if result.split_jobs:
        rec["split"] = {"jobs": result.split_jobs, "pieces": result.pieces, "sub_tasks": result.split_tasks}
    rec["passes"] = result.passes
    if seconds is not None:
        rec["seconds"] = round(seconds, 3)
    return rec


def reservation_metrics(result: Result) -> dict[str, Any]:
    """How long the reservations waited to become active: from their creation (flexible) or start (fixed)."""
    delays = []
    never = 0
    for r, t in zip(result.reservations, result.activated):
        if t < 0:
            never += 1
        else:
            delays.append(t - (r.create if r.start is None else r.start))
    delays.sort()
    return {
        "count": len(result.reservations),
        "activated": len(delays),
        "never_activated": never,
        "activation_delay_avg": sum(delays) / len(delays) if delays else 0.0,
        "activation_delay_max": delays[-1] if delays else 0.0,
        "activation_delays": [round(d, 3) for d in delays],
    }


def fmt(value: float, kind: str) -> str:
    if kind == "dur":
        return format_duration(value)
    if kind == "pct":
        return f"{100.0 * value:.1f} %"
    if kind == "int":
        return str(int(value))
    return f"{value:.2f}"


def relative(value: float, base: float) -> str:
    """The change of ``value`` against ``base``, in percent."""
    if base == 0:
        return "=" if value == 0 else "n/a"
    return f"{100.0 * (value - base) / base:+.1f} %"


def _console(stderr: bool = False):  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def label(rec: dict[str, Any]) -> str:
    """A short name of the setting of a record: ``checkpoint-backfill p=0.2 30m``."""
    name = rec["policy"]
    if rec["policy"] == "checkpoint-backfill":
        p, t = rec["p"], rec["threshold"]
        name += f" p={p if isinstance(p, str) else format(p, 'g')}"
        name += f" t={t if isinstance(t, str) else format_duration(t)}"
        if rec.get("predictor") == "auto":
            name += " predictor=auto"
        if rec["checkpoint"] != "checkpoint":
            name += f" {rec['checkpoint']}"
        else:
            name += f" o={rec['checkpoint_overhead']:g}s"
        if rec.get("cascade"):
            name += " cascade"
        if rec.get("early_room"):
            name += " early-room"
    if rec["predictor"] != "scaled":
        name += f" {rec['predictor']}"
    if rec.get("backfill_order", "queue") != "queue":
        name += f" backfill={rec['backfill_order']}"
    return name


def print_run(rec: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"gsim: {rec['trace']}", show_header=False, title_justify="left")
    t.add_column("metric", style="bold")
    t.add_column("value", justify="right")
    t.add_row(
        "machine",
        f"{rec['ncores']} cores" + (f", {rec['gpus']} GPU" + "s" * (rec["gpus"] != 1) if rec.get("gpus") else ""),
    )
    t.add_row("policy", label(rec))
    skipped = ", ".join(f"{n} {why}" for why, n in rec["skipped_by"].items())
    t.add_row("jobs simulated", str(rec["jobs"]))
    t.add_row("jobs skipped", f"{rec['skipped']}" + (f" ({skipped})" if skipped else ""))
    t.add_row("run time cut at request", str(rec["cut_at_walltime"]))
    t.add_row("makespan", format_duration(rec["makespan"]))
    t.add_row("utilization", fmt(rec["utilization"], "pct"))
    t.add_row("average wait", format_duration(rec["wait_avg"]))
    t.add_row("95th percentile wait", format_duration(rec["wait_p95"]))
    t.add_row("average bounded slowdown", f"{rec['bsld_avg']:.2f}")
    t.add_row("average response", format_duration(rec["response_avg"]))
    t.add_row("checkpoints (jobs preempted)", f"{rec['checkpoints']} ({rec['preempted_jobs']})")
    t.add_row("core-hours of checkpoint overhead", f"{rec['overhead_core_hours']:.1f}")
    t.add_row("core-hours lost to reruns", f"{rec['rerun_core_hours']:.1f}")
    if rec.get("gpus"):
        t.add_row("GPU utilization", fmt(rec["gpu_utilization"], "pct"))
        t.add_row("GPU-hours (jobs with GPUs)", f"{rec['gpu_hours']:.2f} ({rec['gpu_jobs']})")
    if rec.get("cancelled"):
        t.add_row("cancelled (dependencies never met)", str(rec["cancelled"]))
    if "reservations" in rec:
        rv = rec["reservations"]
        t.add_row("reservations activated", f"{rv['activated']} of {rv['count']}")
        t.add_row("average activation delay", format_duration(rv["activation_delay_avg"]))
        t.add_row("longest activation delay", format_duration(rv["activation_delay_max"]))
    if "seconds" in rec:
        t.add_row("simulation", f"{rec['seconds']:.2f} s, {rec['passes']} scheduling passes")
    _console().print(t)


def print_compare(recs: Sequence[dict[str, Any]], base: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(
        title=f"gsim compare: {recs[0]['trace']} ({recs[0]['ncores']} cores, {recs[0]['jobs']} jobs); "
        f"change against {label(base)}",
        title_justify="left",
    )
    t.add_column("policy", style="bold")
    for _, title, _, _ in COLUMNS:
        t.add_column(title, justify="right")
    for rec in recs:
        cells = []
        for key, _, kind, _ in COLUMNS:
            cell = fmt(rec[key], kind)
            if rec is not base:
                cell += f" ({relative(rec[key], base[key])})"
            cells.append(cell)
        t.add_row(label(rec), *cells)
    _console().print(t)


def print_tune(
    recs: Sequence[dict[str, Any]],
    ps: Sequence[float],
    thresholds: Sequence[float],
    metric: str,
    key: str,
    best: dict[str, Any],
) -> None:
    from rich.table import Table

    t = Table(title=f"gsim tune: {recs[0]['trace']}, {metric} ({key}) by p and threshold", title_justify="left")
    t.add_column("p \\ threshold", style="bold")
    for th in thresholds:
        t.add_column(format_duration(th), justify="right")
    kind = next((k for c, _, k, _ in COLUMNS if c == key), "num")
    by = {(r["p"], r["threshold"]): r for r in recs}
    for p in ps:
        cells = []
        for th in thresholds:
            r = by[(p, th)]
            cell = fmt(r[key], kind)
            cells.append(f"[bold]{cell}[/bold]" if r is best else cell)
        t.add_row(f"{p:g}", *cells)
    con = _console()
    con.print(t)
    con.print(f"best: p={best['p']:g} threshold={format_duration(best['threshold'])} {metric}={fmt(best[key], kind)}")


def write_jobs(out: IO[str], result: Result) -> None:
    """One CSV row per job: times in the trace's seconds, run segments as ``start-end;...``; ``wait`` counts
    from ``eligible`` (the submit time, or when the job's dependencies were met or its hold released);
    a job cancelled for dependencies never met has start and end -1 and no wait; ``gpus``: the GPUs it
    asked for and held while it ran (0: none)."""
    tr = result.trace
    w = csv.writer(out)
    w.writerow(
        [
            "id",
            "submit",
            "start",
            "end",
            "procs",
            "walltime",
            "run",
            "wait",
            "segments",
            "checkpoints",
            "eligible",
            "gpus",
        ]
    )
    eligible = result.eligible or tr.submit
    gone = set(result.cancelled)
    gpus = result.gpus or [0] * len(tr)
    for i in range(len(tr)):
        segs = ";".join(f"{_num(a)}-{_num(b)}" for a, b in result.runs(i))
        w.writerow(
            [
                tr.ids[i],
                _num(tr.submit[i]),
                _num(result.start[i]),
                _num(result.end[i]),
                tr.size[i],
                _num(tr.walltime[i]),
                _num(tr.run[i]),
                "" if i in gone else _num(result.start[i] - eligible[i]),
                "" if i in gone else segs,
                result.checkpoints[i],
                _num(eligible[i]),
                gpus[i],
            ]
        )


def _num(x: float) -> str:
    """A time as a whole number when it is one, else in full precision."""
    return str(int(x)) if x == int(x) else repr(x)


def print_per_user(rows: list[dict[str, Any]]) -> None:
    """gsim run --per-user: each user's job count and average wait."""
    from rich.table import Table

    t = Table(title="per user", title_justify="left")
    t.add_column("user")
    t.add_column("jobs", justify="right")
    t.add_column("average wait", justify="right")
    for r in rows:
        t.add_row(str(r["user"]) or "-", str(r["jobs"]), format_duration(r["wait_avg"]))
    _console().print(t)
