"""What gsim's commands read and run: the trace and its machine, the workload, devices, gates,
reservations and a machine map, the replay itself and its progress, the auto-tuner, plots and JSON."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from gridsched.cli.plain import ExitCode, echo, fail, warn
from gridsched.core.types import BackfillOrder, Params, Policy, Predictor

PROG = "gsim"
OVERHEAD = 120.0  # seconds per checkpoint and per restart (--checkpoint-overhead)
MODE = "checkpoint"  # what a preempted job keeps (--checkpoint)
# The Params field that selects the naive (cascading) reading of checkpoint-backfill, if the core has one.
CASCADE_FIELD = "cascade"


def load_config(path: str) -> Any:
    """The config file at ``path`` (imported here: a replay without --config never reads one); a bad one
    fails with one line."""
    from gridsched.protocol.config import ConfigError, load

    try:
        return load(path)
    except ConfigError as e:
        fail(PROG, f"config {e}")


def params(
    config_file: str | None,
    policy: str | None,
    p: float | None,
    threshold: float | None,
    predictor: str | None,
    cascade: bool,
    backfill_order: str | None = None,
    early_room: bool = False,
) -> Params:
    base = Params()
    if config_file is not None:
        base = load_config(config_file).params
    kw: dict[str, Any] = {}
    if policy is not None:
        kw["policy"] = Policy(policy)
    if p is not None:
        kw["p"] = p
    if threshold is not None:
        kw["threshold"] = float(threshold)
    if predictor == "auto":
        fail(PROG, "--predictor auto: only gsim run tunes settings during the replay", ExitCode.USAGE)
    if predictor is not None:
        kw["predictor"] = Predictor(predictor)
    if backfill_order == "auto":
        fail(PROG, "--backfill-order auto: only gsim run tunes settings during the replay", ExitCode.USAGE)
    if backfill_order is not None:
        kw["backfill_order"] = BackfillOrder(backfill_order)
    if cascade:
        if CASCADE_FIELD not in {f.name for f in dataclasses.fields(Params)}:
            fail(PROG, "--cascade: this version of the scheduling core has no cascading reading", ExitCode.USAGE)
        kw[CASCADE_FIELD] = True
    if early_room:
        kw["early_room"] = True
    return dataclasses.replace(base, **kw)


def read_trace(  # type: ignore[no-untyped-def]
    trace: str,
    procs: int | None,
    nodes: bool,
    strict: bool,
    limit: int | None,
    quiet: bool = False,
    slurm: bool | None = None,
):
    """The trace of ``gsim ... TRACE``; ``slurm``: a Slurm history (None: as --slurm-sacct says)."""
    from gridsched.sim.swf import BAD_LINE, MAX_PROBLEMS, TraceError, read

    if slurm is None:
        import click

        slurm = bool(click.get_current_context().meta.get("gsim.sacct"))
    try:
        if slurm:
            from gridsched.sim import sacct

            if nodes:
                fail(PROG, "--slurm-sacct: the history is replayed in CPUs; --nodes does not apply", ExitCode.USAGE)
            tr = sacct.read(trace, procs, strict=strict, limit=limit)
        else:
            tr = read(trace, procs=procs, nodes=nodes, strict=strict, limit=limit)
    except TraceError as e:
        fail(PROG, str(e))
    if not quiet:
        for msg in tr.problems:
            warn(PROG, f"warning: skipped {msg}")
        more = tr.skipped[BAD_LINE] - min(tr.skipped[BAD_LINE], MAX_PROBLEMS)
        if more > 0:
            warn(PROG, f"warning: skipped {more} more bad lines")
    return tr


def simulate(
    tr: Any,
    params: Params,
    overhead: float,
    mode: str,
    series: bool = False,
    task: str = "",
    resv: Any = None,
    machine: Any = None,
    place: str | None = None,
    split_above: int | None = None,
    gates: Any = None,
    tuner: Any = None,
    devices: tuple[Any, ...] = (),
    memory: Any = None,
    split_tasks: Any = None,
) -> tuple[Any, Any, float]:
    from gridsched.sim.engine import Mode, SimulationError, simulate
    from gridsched.sim.metrics import compute

    t0 = time.perf_counter()
    try:
        with progress(len(tr), task or params.policy.value) as tick:
            res = simulate(
                tr,
                params,
                overhead=overhead,
                mode=Mode(mode),
                series=series,
                progress=tick,
                reservations=resv.reservations if resv else None,
                floating=resv.floating if resv else None,
                machine=machine,
                place=place,
                split_above=split_above,
                gates=gates,
                tuner=tuner,
                devices=devices,
                memory=memory,
                split_tasks=split_tasks,
            )
    except NotImplementedError:
        fail(PROG, f"policy {params.policy.value} is not available in this version of the scheduling core")
    except SimulationError as e:
        fail(PROG, str(e))
    return res, compute(res), time.perf_counter() - t0


def workload(path: str | None) -> Any:
    """The workload file of --workload (None: none), read once."""
    if path is None:
        return None
    import click

    from gridsched.sim.workload import WorkloadError, read

    cache = click.get_current_context().meta.setdefault("gsim.workload", {})
    if path not in cache:
        try:
            cache[path] = read(path)
        except WorkloadError as e:
            fail(PROG, f"workload {e}")
    return cache[path]


def devices(
    tr: Any,
    devices_file: str | None,
    gpus: str | None,
    machine: Any,
    workload_file: str | None,
    config_file: str | None,
    strict: bool,
    quiet: bool = False,
) -> tuple[Any, ...]:
    """The simulated machine's devices (--gpus, or those of --topology), the [devices.TYPE] share of
    --config on them; the trace's jobs given the devices of --devices and of the workload file."""
    if gpus is None and machine is None and devices_file is None and workload_file is None and not tr.devices:
        return ()  # no devices, none asked for
    from gridsched.sim.devices import DevicesError, JobDevices, attach, machine_devices, read_csv, shared

    devs: tuple[Any, ...] = ()
    if gpus is not None:
        if machine is not None and machine.devices:
            fail(PROG, "--gpus: the --topology file declares devices already", ExitCode.USAGE)
        try:
            devs = machine_devices(gpus, machine)
        except DevicesError as e:
            fail(PROG, str(e), ExitCode.USAGE)
    elif machine is not None:
        devs = machine.devices
    if devs and config_file is not None:
        share = {t: dc.share for t, dc in load_config(config_file).devices.items()}
        devs = shared(devs, share)
    # a Slurm history's GPUs (AllocTRES gres/gpu), replaced by what the files say of the same job
    history = [JobDevices(j, a, f"{tr.path}: job {j}") for j, a in tr.devices.items()]
    tr.devices = {}
    if history and not devs:
        if not quiet:
            warn(PROG, f"note: {len(history)} jobs of the history held GPUs (AllocTRES); --gpus N replays them")
        history = []
    jobs: list[JobDevices] = []
    if devices_file is not None:
        try:
            jobs = read_csv(devices_file)
        except DevicesError as e:
            fail(PROG, f"devices {e}")
    wl = workload(workload_file)
    if wl is not None:
        given = {j.id: j.where for j in jobs}
        for k, jg in enumerate(wl.jobs, start=1):
            if not jg.devices:
                continue
            if jg.id in given:
                fail(PROG, f"workload {wl.path}: job {k}: job {jg.id}'s devices are given in {given[jg.id]} too")
            jobs.append(JobDevices(jg.id, jg.devices, f"{wl.path}: job {k}"))
    named = {j.id for j in jobs}
    jobs = [j for j in history if j.id not in named] + jobs
    if not jobs:
        return devs
    try:
        problems, _unknown = attach(tr, jobs, devs, strict)
    except DevicesError as e:
        why = str(e)
        if devices_file is not None and why.startswith(devices_file):
            why = f"devices {why}"
        elif wl is not None and why.startswith(wl.path):
            why = f"workload {why}"
        fail(PROG, why)
    if not quiet:
        for msg in problems:
            warn(PROG, f"warning: {msg}")
    return devs


def gates(tr: Any, dependencies: bool, workload_file: str | None, quiet: bool = False) -> Any:
    """The dependencies, arrays and holds of --dependencies and --workload (None: none asked for)."""
    if not dependencies and workload_file is None:
        if tr.preceding and not quiet:
            warn(
                PROG, f"note: {len(tr.preceding)} jobs name a preceding job (SWF field 17); --dependencies replays them"
            )
        return None
    from gridsched.sim.workload import WorkloadError, gates

    try:
        g, ignored = gates(tr, dependencies, workload(workload_file))
    except WorkloadError as e:
        fail(PROG, f"workload {e}")
    if ignored and not quiet:
        warn(
            PROG,
            f"warning: {ignored} jobs name a preceding job that is not replayed; "
            "they are replayed at their submit time",
        )
    return g


class progress:
    """A rich progress bar on standard error when it is a terminal; otherwise nothing."""

    def __init__(self, total: int, what: str) -> None:
        self.total, self.what = total, what
        self.bar: Any = None

    def __enter__(self) -> Callable[[int], None] | None:
        if not sys.stderr.isatty():
            return None
        from rich.console import Console
        from rich.progress import Progress

        bar = self.bar = Progress(console=Console(stderr=True), transient=True)
        bar.start()
        task = bar.add_task(self.what, total=self.total)
        return lambda done: bar.update(task, completed=done)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()


def emit_json(obj: Any) -> None:
    echo(json.dumps(obj, sort_keys=False))


def plot(fn: Callable[..., object], *args: Any) -> None:
    from gridsched.sim.plot import PlotError

    try:
        fn(*args)
    except PlotError as e:
        fail(PROG, str(e))
    except OSError as e:
        fail(PROG, f"--plot {args[0]}: {e.strerror or e}")


def check_plot_available(path: str | None) -> None:
    """Fail before a long simulation if --plot cannot be honoured."""
    if path is None:
        return
    from gridsched.sim.plot import PlotError, _pyplot

    try:
        _pyplot()
    except PlotError as e:
        fail(PROG, str(e))


def auto(config_file: str | None, p: Any, threshold: Any, predictor: str | None, order: str | None = None) -> Any:
    """Which settings are tuned during the replay: the options' ``auto``, else the config file's (None:
    none can be, no option says ``auto`` and there is no config file)."""
    if config_file is None and "auto" not in (p, threshold, predictor, order):
        return None
    import click

    from gridsched.protocol.config import Tuning

    base = Tuning()
    if config_file is not None:
        base = load_config(config_file).tuning
    meta = click.get_current_context().meta

    def pick(given: Any, key: str) -> Any:
        v = meta.get(f"gsim.tune_{key}")
        return getattr(base, key) if v is None else v

    return dataclasses.replace(
        base,
        p=p == "auto" or (p is None and base.p),
        threshold=threshold == "auto" or (threshold is None and base.threshold),
        predictor=predictor == "auto" or (predictor is None and base.predictor),
        backfill_order=order == "auto" or (order is None and base.backfill_order),
        every=pick(None, "every"),
        window=pick(None, "window"),
        objective=pick(None, "objective"),
        margin=pick(None, "margin"),
        warmup=pick(None, "warmup"),
    )


def tuner(tr: Any, params: Params, overhead: float, auto: Any) -> Any:
    """Auto settings: the tuner of the replay (gridsched.sim.tune's grid over the settings that are auto)."""
    from gridsched.sim import tune

    if auto.every < 60:
        fail(PROG, "--tune-every: must be at least a minute", ExitCode.USAGE)
    if auto.window <= 0:
        fail(PROG, "--tune-window: must be positive", ExitCode.USAGE)
    return tune.in_replay(
        tr,
        auto.every,
        auto.window,
        tune.grid_for(params, auto.p, auto.threshold, auto.predictor, auto.backfill_order),
        auto.objective,
        auto.margin,
        overhead=overhead,
        warmup=auto.warmup,
    )


def topology(path: str, ncores: int) -> Any:
    """The machine map of --topology FILE, with as many cores as the trace's machine."""
    from pathlib import Path

    from gridsched.host.topology import read

    try:
        m = read(Path(path), None)  # a simulated machine: its cores are not checked against this host
    except (OSError, ValueError) as e:
        fail(PROG, f"--topology {e}")
    if m.ncores != ncores:
        fail(PROG, f"--topology {path}: declares {m.ncores} cores, the machine has {ncores} (use --procs)")
    return m


def check_placed(resv: Any, machine: Any, path: str | None) -> None:
    """A reservation with a mapping requirement needs --topology, and must fit the map."""
    from gridsched.core.placement import never_fits

    for k, r in enumerate(resv.reservations, start=1):
        if r.place is None:
            continue
        if machine is None:
            fail(
                PROG,
                f"reservations {path}: reservation {k}: place, threads_per_core and exclusive_board need --topology",
            )
        why = never_fits(machine, r.place)
        if why is not None:
            fail(PROG, f"reservations {path}: reservation {k}: {why}")


def reservations(path: str | None, floating: tuple[str, ...], ncores: int) -> Any:
    """The reservation list of --reservations, checked against the machine and --floating."""
    from gridsched.sim.reservations import ResvFileError, ResvList, read

    totals: dict[str, int] = {}
    for item in floating:
        name, eq, count = item.partition("=")
        if not eq or not name.strip() or not count.strip().isdigit() or int(count) < 1:
            fail(PROG, f"floating '{item}': expected NAME=COUNT with a count of at least 1", ExitCode.USAGE)
        totals[name.strip()] = int(count)
    lst = ResvList([], {})
    if path is not None:
        try:
            lst = read(path)
        except ResvFileError as e:
            fail(PROG, f"reservations {e}")
    totals = {**lst.floating, **totals}
    for k, r in enumerate(lst.reservations, start=1):
        if r.ncpus > ncores:
            fail(PROG, f"reservations {path}: reservation {k} asks for {r.ncpus} cores, the machine has {ncores}")
        for rname, units in r.resources:
            if rname not in totals:
                fail(
                    PROG,
                    f"reservations {path}: reservation {k}: unknown floating resource '{rname}' "
                    "(give it with --floating NAME=COUNT)",
                )
            if units > totals[rname]:
                fail(
                    PROG,
                    f"reservations {path}: reservation {k} asks for {rname}={units}, the machine has {totals[rname]}",
                )
    return ResvList(lst.reservations, totals)


NO_MEMORY_ROOM = "more memory than the machine's"  # the reason a job is left out under --memory


def memory(tr: Any, on: bool, size: str | None, machine: Any, config_file: str | None) -> Any:
    """The memory pool of --memory (None without it): the machine's memory (--machine-memory, else the
    boards' of --topology or of the config's topology file) less the config's ``[machine]
    memory_reserved``; each job asks for its SWF requested memory (field 10, KiB per processor), else the
    config's ``[jobs] default_mem_per_cpu`` times its processors.  A job asking for more than the pool holds
    is left out (it could never run)."""
    from gridsched.core.memory import pool
    from gridsched.core.units import UnitError, parse_size
    from gridsched.sim.records import SimMemory
    from gridsched.sim.swf import keep_only

    if not on:
        if size is not None:
            fail(PROG, "--machine-memory goes with --memory", ExitCode.USAGE)
        return None
    cfg = None
    if config_file is not None:
        cfg = load_config(config_file)
    if size is not None:
        try:
            total: int | None = parse_size(size)
        except UnitError as e:
            fail(PROG, f"--machine-memory {e}", ExitCode.USAGE)
    else:
        total = _boards_memory(machine, cfg)
    if not total:
        fail(PROG, "--memory needs the machine's memory: give --machine-memory SIZE", ExitCode.USAGE)
    reserved, per_cpu = (cfg.memory_reserved, cfg.default_mem_per_cpu) if cfg is not None else (0, 0)
    p = pool(total, reserved, per_cpu)
    if p is None:
        fail(PROG, f"--memory: machine.memory_reserved leaves none of the machine's {size or total} bytes")
    kib = tr.mem or [-1] * len(tr.ids)
    asks = [-(-k // 1024) if k > 0 else p.ask(None, n) for k, n in zip(kib, tr.size, strict=True)]
    keep = [i for i, a in enumerate(asks) if a <= p.total]
    if len(keep) < len(asks):
        keep_only(tr, keep, NO_MEMORY_ROOM)
        asks = [asks[i] for i in keep]
        if not asks:
            fail(PROG, f"{tr.path}: every job asks for {NO_MEMORY_ROOM}")
    return SimMemory(p.total, asks)


def _boards_memory(machine: Any, cfg: Any) -> int | None:
    """Bytes of memory of the boards of ``machine`` (--topology), else of the config's topology file; None
    unless every board declares its memory."""
    if machine is None and cfg is not None and cfg.topology:
        from pathlib import Path

        from gridsched.host.topology import read

        try:
            machine = read(Path(cfg.path).parent / cfg.topology, None)
        except (OSError, ValueError) as e:
            fail(PROG, f"config {cfg.path}: topology {e}")
    boards = getattr(machine, "boards", ())
    if boards and all(b.memory for b in boards):
        return int(sum(b.memory for b in boards))
    return None


def split_tasks(tr: Any, path: str | None) -> Any:
    """gsim run --split-file: the sub-tasks of the jobs it lists (:mod:`gridsched.sim.splits`), those jobs
    made the whole of their sub-tasks in ``tr``; None without one."""
    if path is None:
        return None
    from gridsched.protocol.text import shown
    from gridsched.sim import splits
    from gridsched.sim.records import SimulationError

    try:
        tasks = splits.read(path, tr)
    except SimulationError as e:
        fail(PROG, shown(e), ExitCode.USAGE)
    splits.apply(tr, tasks)
    return tasks
