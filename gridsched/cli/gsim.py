"""gsim: replay a Standard Workload Format trace through the scheduling policies.

``gsim TRACE`` is ``gsim run TRACE``; ``gsim compare`` puts several policies
side by side and ``gsim tune`` searches a grid of ``p`` and ``threshold``.
See gsim(1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click

from gridsched.cli import gsim_inputs as inputs
from gridsched.cli.common import COUNT, ChoiceType, ExitCode, Group, fail, warn
from gridsched.cli.gsim_inputs import PROG
from gridsched.core.types import BackfillOrder, Policy, Predictor
from gridsched.core.units import UnitError, parse_duration

POLICIES = tuple(p.value for p in Policy)
PREDICTORS = (*(p.value for p in Predictor), "auto")
ORDERS = (*(o.value for o in BackfillOrder), "auto")
MODES = ("checkpoint", "requeue", "none")


class SecondsType(click.ParamType):
    """A duration of zero or more seconds (``0``, ``120``, ``30m``, ``1:00:00``)."""

    name = "DURATION"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        return _seconds(str(value), param, ctx, self)


def _seconds(text: str, param: Any, ctx: Any, typ: click.ParamType) -> float:
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        try:
            return float(parse_duration(t))
        except UnitError as e:
            typ.fail(str(e), param, ctx)
    if not v >= 0 or v == float("inf"):
        typ.fail(f"'{text}': must be zero or more seconds", param, ctx)
    return v


class FractionType(click.ParamType):
    """``p``: a number strictly between 0 and 1."""

    name = "P"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, float):
            return value
        try:
            v = float(str(value))
        except ValueError:
            self.fail(f"'{value}': not a number", param, ctx)
        if not 0.0 < v < 1.0:
            self.fail(f"'{value}': must be between 0 and 1, both excluded", param, ctx)
        return v


class ListType(click.ParamType):
    """A comma-separated list of values of another type."""

    def __init__(self, item: click.ParamType, name: str) -> None:
        self.item = item
        self.name = name

    def convert(self, value: Any, param: Any, ctx: Any) -> list[Any]:
        if isinstance(value, list):
            return value
        parts = [x.strip() for x in str(value).split(",")]
        if not all(parts):
            self.fail(f"'{value}': empty item in the list", param, ctx)
        return [self.item.convert(x, param, ctx) for x in parts]


SECONDS = SecondsType()
FRACTION = FractionType()


class _OrAuto(click.ParamType):
    """A value of the type it is mixed into, or ``auto``: chosen during the replay from what has ended."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if str(value).strip().lower() == "auto":
            return "auto"
        return super().convert(value, param, ctx)


class AutoFractionType(_OrAuto, FractionType):
    pass


class AutoSecondsType(_OrAuto, SecondsType):
    pass


def _tune_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--tune-every, --tune-window, --tune-objective, --tune-margin, --tune-warmup (kept in ctx.meta; used with
    --p auto)."""

    def keep(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        ctx.meta[f"gsim.{param.name}"] = value

    opts = [
        click.option(
            "--tune-every",
            type=SECONDS,
            expose_value=False,
            callback=keep,
            help="With auto settings: how often they are chosen again (default: the config's tune_every, 21d).",
        ),
        click.option(
            "--tune-window",
            type=SECONDS,
            expose_value=False,
            callback=keep,
            help="With auto settings: the jobs that ended this long ago at most are replayed (default: the "
            "config's tune_window, 6d).",
        ),
        click.option(
            "--tune-objective",
            type=click.Choice(("bsld", "wait", "mix")),
            expose_value=False,
            callback=keep,
            help="With auto settings: what is optimized (default: the config's tune_objective, mix).",
        ),
        click.option(
            "--tune-margin",
            type=click.FloatRange(0.0, 1.0),
            expose_value=False,
            callback=keep,
            help="With auto settings: adopt a setting only if it beats EASY and the one in force by this "
            "fraction (default: the config's tune_margin, 0.02).",
        ),
        click.option(
            "--tune-warmup",
            type=SECONDS,
            expose_value=False,
            callback=keep,
            help="With auto settings: the jobs that ended this long before the window are replayed ahead of "
            "it, as its backlog, and not scored; 0: the window is replayed from an empty machine (default: "
            "the config's tune_warmup, 1d).",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


class GsimGroup(Group):
    """A group whose default command is ``run``: ``gsim TRACE`` is ``gsim run TRACE``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


def _remember_sacct(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    ctx.meta["gsim.sacct"] = value


def _trace_options(f: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.argument("trace", metavar="TRACE"),
        click.option(
            "--slurm-sacct",
            is_flag=True,
            expose_value=False,
            callback=_remember_sacct,
            help="TRACE is a Slurm cluster's history as sacct --parsable2 prints it (needs --procs; see SLURM "
            "HISTORY in gsim(1)).",
        ),
        click.option("--procs", type=COUNT, help="Machine size (default: MaxProcs of the trace header)."),
        click.option("--nodes", is_flag=True, help="Count the machine and the jobs in nodes (MaxNodes)."),
        click.option("--limit", type=COUNT, metavar="N", help="Replay only the first N jobs of the trace."),
        click.option("--strict", is_flag=True, help="Stop at the first bad line of the trace."),
        click.option(
            "--predictor",
            type=ChoiceType(PREDICTORS, "PREDICTOR"),
            help="How backfilling predicts run times (default: scaled).",
        ),
        click.option(
            "--backfill-order",
            "backfill_order",
            type=ChoiceType(ORDERS, "ORDER"),
            help="easy and checkpoint-backfill: the order in which jobs behind the head are tried: queue (the "
            "default) or shortest (shortest walltime first).",
        ),
        click.option(
            "--checkpoint-overhead",
            "overhead",
            type=SECONDS,
            default=inputs.OVERHEAD,
            show_default=True,
            metavar="S",
            help="Seconds added to a job's run time per checkpoint and per restart.",
        ),
        click.option(
            "--checkpoint",
            "--mode",
            "mode",
            type=ChoiceType(MODES, "MODE"),
            default=inputs.MODE,
            show_default=True,
            help="What a preempted job keeps: checkpoint (its work), requeue (nothing), "
            "none (jobs are never preempted).",
        ),
        click.option(
            "--config",
            "config_file",
            metavar="FILE",
            help="Take policy, p, threshold, predictor and backfill order from this gridsched.toml.",
        ),
        click.option(
            "--cascade", is_flag=True, help="checkpoint-backfill: the naive (cascading) reading, if the core offers it."
        ),
        click.option(
            "--early-room",
            is_flag=True,
            help="checkpoint-backfill: the head makes room as soon as the jobs that cannot be preempted have freed "
            "theirs, not at its reservation time.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _gate_options(f: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option(
            "--dependencies",
            is_flag=True,
            help="Replay SWF fields 17 and 18: a job that names a preceding job may start once that job has "
            "ended plus the think time (see DEPENDENCIES).",
        ),
        click.option(
            "--workload",
            "workload_file",
            metavar="FILE.toml",
            help="Dependencies, arrays with a throttle and holds of the trace's jobs (see WORKLOAD FILE).",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _device_options(f: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option(
            "--devices",
            "devices_file",
            metavar="FILE.csv",
            help="The GPUs each job of the trace asks for: a CSV file with the header job,gpus (and optionally "
            "model), one line per SWF job number (see DEVICES).",
        ),
        click.option(
            "--gpus",
            "gpus",
            metavar="[MODEL:]N",
            help="The simulated machine has N GPUs (of MODEL), spread evenly over its boards (see DEVICES).",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@click.group(name=PROG, cls=GsimGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gridsched", prog_name=PROG)
def main() -> None:
    """Replay an SWF workload trace through gridsched's scheduling policies.

    gsim TRACE [OPTIONS] is short for gsim run TRACE [OPTIONS].
    """


# -- shared steps ----------------------------------------------------------------


# -- commands ----------------------------------------------------------------------


@main.command("run")
@_trace_options
@click.option("--policy", type=ChoiceType(POLICIES, "POLICY"), help="Scheduling policy (default: checkpoint-backfill).")
@click.option(
    "--p",
    "p",
    type=AutoFractionType(),
    help="checkpoint-backfill: factor of long estimates, 0 < P < 1 (default 0.2); auto: chosen during the "
    "replay, every --tune-every, from the jobs that have ended by then, as the daemon does (see TUNING).",
)
@click.option(
    "--threshold",
    type=AutoSecondsType(),
    help="checkpoint-backfill: only walltimes above this are shortened (default 30m); or auto.",
)
@click.option("--jobs-out", metavar="FILE.csv", help="Write one CSV row per job.")
@click.option("--plot", metavar="FILE.png", help="Plot utilization and queue length over time.")
@click.option(
    "--reservations",
    "resv_file",
    metavar="FILE",
    help="Replay the reservations of FILE (CSV or .toml; see RESERVATIONS in gsim(1)) beside the trace.",
)
@click.option(
    "--floating",
    "floating",
    metavar="NAME=COUNT",
    multiple=True,
    help="A floating resource of the machine (licences), for the reservations; repeatable.",
)
@click.option(
    "--gantt",
    "gantt",
    metavar="FILE.png",
    help="Draw the schedule as a Gantt chart (each job's wait and run segments), as gstat --gantt does "
    "for a live queue.",
)
@click.option(
    "--gantt-from",
    "gantt_from",
    type=SECONDS,
    default=None,
    help="--gantt: start of the window, as time since the first submission (default 0).",
)
@click.option(
    "--gantt-hours",
    "gantt_hours",
    type=click.FloatRange(min=0.01),
    default=24.0,
    show_default=True,
    help="--gantt: length of the window in hours (at most 400 jobs are drawn).",
)
@click.option(
    "--topology",
    "topology",
    metavar="FILE",
    help="Place jobs on the machine map of FILE (a topology.toml; see gridsched.toml(5)) instead of "
    "counting cores only; its cores must number the machine's.",
)
@click.option(
    "--place",
    "place",
    type=ChoiceType(("pack", "spread", "board"), "HOW"),
    help="With --topology: the mapping requirement of every job (default pack).",
)
@click.option(
    "--split-jobs-above",
    "split_jobs_above",
    type=click.IntRange(min=0),
    metavar="N",
    help="Replay every job of more than N processors as splittable: one 1-core sub-task per processor, "
    "each taking the job's run time (see SPLITTABLE JOBS).",
)
@click.option(
    "--split-file",
    "split_file",
    metavar="FILE",
    help="Replay the jobs FILE lists as splittable, each with its own sub-tasks: lines JOB NCPUS WALLTIME "
    "[RUNTIME] (see SPLITTABLE JOBS).",
)
@click.option(
    "--per-user",
    "per_user",
    is_flag=True,
    help="Also print each user's (SWF field 12) job count and average wait; in --json as per_user.",
)
@_tune_options
@_gate_options
@_device_options
@click.option(
    "--memory",
    "memory",
    is_flag=True,
    help="Schedule the machine's memory as one pool: each job asks for its requested memory (SWF field 10), "
    "or the config's jobs.default_mem_per_cpu per processor where it is unknown (see MEMORY).",
)
@click.option(
    "--machine-memory",
    "machine_memory",
    metavar="SIZE",
    help="--memory: the machine's memory, such as 256G (default: the boards' of --topology or of the "
    "config's topology file).",
)
def run_cmd(
    trace: str,
    procs: int | None,
    nodes: bool,
    limit: int | None,
    strict: bool,
    predictor: str | None,
    backfill_order: str | None,
    overhead: float,
    mode: str,
    config_file: str | None,
    cascade: bool,
    early_room: bool,
    as_json: bool,
    policy: str | None,
    p: float | None,
    threshold: float | None,
    jobs_out: str | None,
    plot: str | None,
    resv_file: str | None,
    floating: tuple[str, ...],
    gantt: str | None,
    gantt_from: float | None,
    gantt_hours: float,
    topology: str | None,
    place: str | None,
    split_jobs_above: int | None,
    dependencies: bool,
    workload_file: str | None,
    devices_file: str | None = None,
    gpus: str | None = None,
    per_user: bool = False,
    memory: bool = False,
    machine_memory: str | None = None,
    split_file: str | None = None,
) -> None:
    """Replay TRACE under one policy and print its metrics.

    With --reservations, the reservations of FILE are replayed too: flexible
    ones wait in the queue in the order of their creation, fixed ones hold
    their cores from their start; the metrics then include how long each
    waited to become active (from its creation, or from its start if fixed).
    """
    from gridsched.sim import report

    auto = inputs.auto(config_file, p, threshold, predictor, backfill_order)
    params = inputs.params(
        config_file,
        policy,
        None if p == "auto" else p,
        None if threshold == "auto" else threshold,
        None if predictor == "auto" else predictor,
        cascade,
        None if backfill_order == "auto" else backfill_order,
        early_room,
    )
    inputs.check_plot_available(plot or gantt)
    tr = inputs.read_trace(trace, procs, nodes, strict, limit)
    explicit = "auto" in (p, threshold, predictor, backfill_order)
    if explicit and params.policy is not Policy.CHECKPOINT_BACKFILL:
        fail(
            PROG,
            f"auto settings tune checkpoint-backfill (against EASY): not with --policy {params.policy.value}",
            ExitCode.USAGE,
        )
    # a config's auto settings apply under checkpoint-backfill only, as in the daemon
    tuning = auto is not None and auto.active and params.policy is Policy.CHECKPOINT_BACKFILL
    tuner = inputs.tuner(tr, params, overhead, auto) if tuning else None
    resv = inputs.reservations(resv_file, floating, tr.ncores) if resv_file or floating else None
    machine = inputs.topology(topology, tr.ncores) if topology else None
    if place and machine is None:
        fail(PROG, "--place needs --topology", ExitCode.USAGE)
    if machine is not None and place:
        from gridsched.core.placement import Request, never_fits
        from gridsched.sim.swf import UNPLACEABLE, keep_only

        keep_only(tr, [i for i, n in enumerate(tr.size) if never_fits(machine, Request(n, place)) is None], UNPLACEABLE)
    if resv is not None:
        inputs.check_placed(resv, machine, resv_file)
    if memory and (split_jobs_above is not None or split_file):
        fail(PROG, "--memory does not go with --split-jobs-above or --split-file", ExitCode.USAGE)
    subs = inputs.split_tasks(tr, split_file)
    mem = inputs.memory(tr, memory, machine_memory, machine, config_file)
    devs = inputs.devices(tr, devices_file, gpus, machine, workload_file, config_file, strict)
    gates = inputs.gates(tr, dependencies, workload_file)
    res, met, secs = inputs.simulate(
        tr,
        params,
        overhead,
        mode,
        series=plot is not None,
        resv=resv,
        machine=machine,
        place=place,
        split_above=split_jobs_above,
        gates=gates,
        tuner=tuner,
        devices=devs,
        memory=mem,
        split_tasks=subs,
    )
    rec = report.record(res, met, secs)
    if tuner is not None:
        from gridsched.sim.tune import label

        for key in ("p", "threshold", "predictor", "backfill_order"):
            if getattr(auto, key):
                rec[key] = "auto"
        # the settings in force from the start, then at each tuning instant that changed them
        changed = [(0.0, params)] + [
            (t, prm) for k, (t, prm) in enumerate(res.tunings) if prm != (res.tunings[k - 1][1] if k else params)
        ]
        rec["tunings"] = len(res.tunings)
        rec["settings"] = [{"from": t, "setting": label(prm)} for t, prm in changed]
        if not as_json:
            warn(
                PROG,
                f"tuned {len(res.tunings)} times, {len(changed) - 1} changes of setting; "
                f"at the end: {label(changed[-1][1])}",
            )
    if jobs_out is not None:
        try:
            with open(jobs_out, "w", newline="") as f:
                report.write_jobs(f, res)
        except OSError as e:
            fail(PROG, f"--jobs-out {jobs_out}: {e.strerror or e}")
    if plot is not None:
        from gridsched.sim.plot import run_plot

        inputs.plot(run_plot, plot, rec, res.series, min(tr.submit))
    if gantt is not None:
        from gridsched.sim.plot import gantt_plot

        inputs.plot(gantt_plot, gantt, res, min(tr.submit, default=0.0) + (gantt_from or 0.0), gantt_hours)
    if per_user:
        from gridsched.sim.metrics import per_user as by_user

        rec["per_user"] = by_user(res)
    if as_json:
        inputs.emit_json(rec)
    else:
        report.print_run(rec)
        if per_user:
            report.print_per_user(rec["per_user"])


@main.command("compare")
@_trace_options
@click.option(
    "--policies",
    type=ListType(ChoiceType(POLICIES, "POLICY"), "POLICY,..."),
    default=",".join(POLICIES),
    show_default=True,
    help="Policies to compare.",
)
@click.option("--p", "p", type=FRACTION, help="checkpoint-backfill: factor of long estimates (default 0.2).")
@click.option("--threshold", type=SECONDS, help="checkpoint-backfill: threshold (default 30m).")
@click.option(
    "--split-jobs-above",
    "split_jobs_above",
    type=click.IntRange(min=0),
    metavar="N",
    help="Replay every job of more than N processors as splittable: one 1-core sub-task per processor, "
    "each taking the job's run time (see SPLITTABLE JOBS).",
)
@click.option(
    "--split-file",
    "split_file",
    metavar="FILE",
    help="Replay the jobs FILE lists as splittable under every policy, each with its own sub-tasks: lines JOB "
    "NCPUS WALLTIME [RUNTIME] (see SPLITTABLE JOBS).",
)
@_gate_options
@_device_options
def compare_cmd(
    trace: str,
    procs: int | None,
    nodes: bool,
    limit: int | None,
    strict: bool,
    predictor: str | None,
    backfill_order: str | None,
    overhead: float,
    mode: str,
    config_file: str | None,
    cascade: bool,
    early_room: bool,
    as_json: bool,
    policies: list[str],
    p: float | None,
    threshold: float | None,
    split_jobs_above: int | None,
    dependencies: bool,
    workload_file: str | None,
    devices_file: str | None = None,
    gpus: str | None = None,
    split_file: str | None = None,
) -> None:
    """Replay TRACE under several policies; one row each, with the change against easy."""
    from gridsched.sim import report

    names = list(dict.fromkeys(policies))
    settings = [
        inputs.params(
            config_file,
            name,
            p,
            threshold,
            predictor,
            cascade and name == "checkpoint-backfill",
            backfill_order,
            early_room and name == "checkpoint-backfill",
        )
        for name in names
    ]
    tr = inputs.read_trace(trace, procs, nodes, strict, limit)
    subs = inputs.split_tasks(tr, split_file)
    devs = inputs.devices(tr, devices_file, gpus, None, workload_file, config_file, strict)
    gates = inputs.gates(tr, dependencies, workload_file)
    recs = []
    for prm in settings:
        res, met, secs = inputs.simulate(
            tr, prm, overhead, mode, split_above=split_jobs_above, gates=gates, devices=devs, split_tasks=subs
        )
        recs.append(report.record(res, met, secs))
    base = next((r for r in recs if r["policy"] == "easy"), recs[0])
    if as_json:
        for r in recs:
            r["change"] = {
                key: (None if base[key] == 0 else (r[key] - base[key]) / base[key]) for key, _, _, _ in report.COLUMNS
            }
        inputs.emit_json({"trace": tr.path, "baseline": base["policy"], "results": recs})
    else:
        report.print_compare(recs, base)


@main.command("tune")
@_trace_options
@click.option(
    "--policy",
    type=ChoiceType(POLICIES, "POLICY"),
    default="checkpoint-backfill",
    show_default=True,
    help="Policy to tune.",
)
@click.option(
    "--p",
    "ps",
    type=ListType(FRACTION, "P,..."),
    default="0.1,0.2,0.3,0.5",
    show_default=True,
    help="Values of p to try.",
)
@click.option(
    "--threshold",
    "thresholds",
    type=ListType(SECONDS, "T,..."),
    default="10m,30m,1h",
    show_default=True,
    help="Values of the threshold to try.",
)
@click.option(
    "--metric",
    type=ChoiceType(("bsld", "wait", "wait95", "response", "makespan", "utilization"), "METRIC"),
    default="bsld",
    show_default=True,
    help="What the best setting optimizes.",
)
@click.option("--plot", metavar="FILE.png", help="Heat map of the metric over the grid.")
@click.option(
    "--write",
    "write_to",
    metavar="CONFIG",
    help="Write the best setting (scheduler.policy, p, threshold) into the configuration file CONFIG (made if "
    "missing; its other settings kept; written as gctl set writes).",
)
@_device_options
def tune_cmd(
    trace: str,
    procs: int | None,
    nodes: bool,
    limit: int | None,
    strict: bool,
    predictor: str | None,
    backfill_order: str | None,
    overhead: float,
    mode: str,
    config_file: str | None,
    cascade: bool,
    early_room: bool,
    as_json: bool,
    policy: str,
    ps: list[float],
    thresholds: list[float],
    metric: str,
    plot: str | None,
    write_to: str | None,
    devices_file: str | None = None,
    gpus: str | None = None,
) -> None:
    """Replay TRACE for each p and threshold of a grid and pick the best setting."""
    from gridsched.sim import report
    from gridsched.sim.metrics import OBJECTIVES

    ps = list(dict.fromkeys(ps))
    thresholds = list(dict.fromkeys(thresholds))
    key, lower = OBJECTIVES[metric]
    base = inputs.params(config_file, policy, None, None, predictor, cascade, backfill_order, early_room)
    inputs.check_plot_available(plot)
    tr = inputs.read_trace(trace, procs, nodes, strict, limit)
    devs = inputs.devices(tr, devices_file, gpus, None, None, config_file, strict)
    recs = []
    for pv in ps:
        for th in thresholds:
            prm = dataclasses.replace(base, p=pv, threshold=th)
            res, met, secs = inputs.simulate(tr, prm, overhead, mode, task=f"p={pv:g} threshold={th:g}s", devices=devs)
            recs.append(report.record(res, met, secs))
    best = (min if lower else max)(recs, key=lambda r: r[key])
    if plot is not None:
        from gridsched.sim.plot import tune_plot

        inputs.plot(tune_plot, plot, recs, ps, thresholds, key, metric)
    if as_json:
        inputs.emit_json(
            {
                "trace": tr.path,
                "metric": metric,
                "key": key,
                "results": recs,
                "best": {"p": best["p"], "threshold": best["threshold"], key: best[key]},
            }
        )
    else:
        report.print_tune(recs, ps, thresholds, metric, key, best)
    if write_to is not None:
        _write_best(write_to, policy, best["p"], best["threshold"])


def _write_best(path: str, policy: str, p: float, threshold: float) -> None:
    """``gsim tune --write``: the setting into ``path``, checked as the daemon loads it."""
    from pathlib import Path

    from gridsched.core.units import format_duration
    from gridsched.protocol import configwrite

    th = int(threshold) if float(threshold).is_integer() else threshold
    settings = [(["scheduler", "policy"], policy), (["scheduler", "p"], p), (["scheduler", "threshold"], th)]
    target = Path(path)
    try:
        data = configwrite.applied(configwrite.read(target), settings)
        configwrite.check(target, data)
        backup = configwrite.write(target, data)
    except configwrite.SettingError as e:
        fail(PROG, f"--write: {e}")
    kept = f" (the previous file: {backup})" if backup else ""
    warn(
        PROG, f"wrote scheduler.policy = {policy}, p = {p:g}, threshold = {format_duration(threshold)} to {path}{kept}"
    )


def _add_tree_command() -> None:
    """gsim tree: parent-child tree workloads (gsim_tree.py)."""
    from gridsched.cli.gsim_tree import tree_cmd

    main.add_command(tree_cmd)


_add_tree_command()


if __name__ == "__main__":
    main()
