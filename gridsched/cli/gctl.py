"""gctl: administer the daemon of a spool (reload and show its configuration, show the
machine map, drain and resume cores)."""

from __future__ import annotations

import json
import os
import tomllib
from typing import Any

import click

from gridsched.cli.common import ExitCode, Group, fail, setup, spool_options
from gridsched.protocol.config import PACKAGED
from gridsched.protocol.spool import Spool
from gridsched.protocol.text import dumps, shown

PROG = "gctl"


def effective_values(path: str) -> dict[str, dict[str, Any]]:
    """The values in force: the packaged defaults overlaid with the file at ``path``."""
    with open(PACKAGED, "rb") as f:
        values: dict[str, dict[str, Any]] = tomllib.load(f)
    if path != str(PACKAGED):
        with open(path, "rb") as f:
            for table, kv in tomllib.load(f).items():
                values[table] = {**values.get(table, {}), **kv}
    return values


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


# What each admin request does, for the line that refuses it to anyone else.
ADMIN_WHAT = {
    "reload": "reload the configuration",
    "drain": "drain cores",
    "resume": "resume cores",
    "set": "change the configuration",
}


def require_admin(spool: Spool, kind: str) -> None:
    """Refuse ``kind`` (reload, drain, resume) in one line unless the caller administers the spool.

    Admins are root and the owner of the spool's directory (:mod:`gridsched.protocol.admin`); the
    check comes before anything is written into the spool.
    """
    from gridsched.protocol.admin import admin_uids, is_admin

    if is_admin(os.getuid(), spool.root):
        return
    owner = max(admin_uids(spool.root))
    fail(PROG, f"{kind}: only root or the spool's owner (uid {owner}) may {ADMIN_WHAT[kind]}")


def send(spool: Spool, kind: str, **fields: Any) -> None:
    """Write request ``kind`` into the spool; a full or read-only spool is one error line."""
    try:
        spool.request(kind, **fields)
    except OSError as e:
        fail(PROG, shown(f"cannot write the {kind} request to {spool.root}: {e.strerror or e}"))


@click.group(
    PROG, cls=Group, context_settings={"help_option_names": ["-h", "--help"]}, short_help="administer the daemon"
)
def cli() -> None:
    """Administer the gridsched daemon of a spool."""


@cli.command("reload")
@spool_options
def reload(spool_dir: str | None, config_file: str | None) -> int:
    """Check the configuration file and ask the daemon to reload it (root or the spool's owner only).

    A changed machine map (machine.cores, machine.cpus or the topology file) is
    refused, in one line, and the running map stays: running jobs hold cores of
    it.  It takes effect at the next start of the daemon.  Until then gsub and
    gctl check requests against the running map."""
    s = setup(PROG, spool_dir, config_file)  # refuses a bad file before the daemon sees it
    require_admin(s.spool, "reload")
    info = s.spool.daemon_info()
    if info is None:
        fail(PROG, shown(f"no daemon runs on {s.spool.root}"))
    new = _machine(s.cfg)  # a bad topology file is refused here, in the daemon's words
    from gridsched.host.topology import changed_map, running_map

    running = running_map(s.spool)
    if running is not None and running.text() != new.text():  # canonical texts
        fail(PROG, shown(changed_map(new, running)))
    send(s.spool, "reload")
    click.echo(f"{PROG}: reload requested from pid {shown(info.get('pid'))} ({shown(s.cfg.path)})")
    return ExitCode.OK


@cli.command("set", short_help="change settings of the configuration file")
@click.argument("settings", nargs=-1, required=True, metavar="TABLE.KEY=VALUE...")
@spool_options
def set_(settings: tuple[str, ...], spool_dir: str | None, config_file: str | None) -> int:
    """Write settings into the configuration file in force and reload the daemon (root or the spool's
    owner only): gctl set scheduler.p=0.3 scheduler.threshold=45m.

    VALUE is read as TOML where it is a TOML value (0.3, true, "a b") and as a
    string otherwise (45m).  The file with every setting applied is checked as
    the daemon loads it; one bad setting refuses all, in one line, and nothing
    is written.  When the configuration in force is the packaged defaults, the
    settings go into the spool's own gridsched.toml (read before them).  The
    file is written whole, with tomli-w, which does not keep comments and
    layout: the previous text is kept as FILE.bak.  A change of the machine map
    (machine.*) is refused while a daemon runs on it, as gctl reload refuses it.
    """
    from pathlib import Path

    from gridsched.protocol import configwrite

    s = setup(PROG, spool_dir, config_file)
    require_admin(s.spool, "set")
    target = Path(s.cfg.path)
    if target == PACKAGED:
        target = s.spool.root / "gridsched.toml"
    try:
        wanted = [configwrite.parse_setting(x) for x in settings]
        data = configwrite.applied(configwrite.read(target), wanted)
        new = configwrite.check(target, data)
    except configwrite.SettingError as e:
        fail(PROG, shown(f"set: {e}; nothing written"))
    info = s.spool.daemon_info()
    if info is not None:
        from gridsched.host.topology import changed_map, running_map

        running = running_map(s.spool)
        fresh = _machine(new)
        if running is not None and running.text() != fresh.text():
            fail(PROG, shown(f"set: {changed_map(fresh, running)}; nothing written"))
    if target.parent == s.spool.root:
        s.spool.ensure()
    try:
        backup = configwrite.write(target, data)
    except configwrite.SettingError as e:
        fail(PROG, shown(f"set: {e}"))
    said = ", ".join(f"{'.'.join(k)} = {toml_value(v)}" for k, v in wanted)
    kept = f" (the previous file: {backup})" if backup else ""
    click.echo(shown(f"{PROG}: set {said} in {target}{kept}"))
    if info is None:
        click.echo(shown(f"{PROG}: no daemon runs on {s.spool.root}: the settings take effect when one starts"))
        return ExitCode.OK
    send(s.spool, "reload")
    click.echo(f"{PROG}: reload requested from pid {shown(info.get('pid'))}")
    return ExitCode.OK


@cli.command("tune", short_help="choose p, threshold and predictor from this machine's history")
@click.option("--dry-run", is_flag=True, help="Print the table and the choice; change nothing.")
@click.option(
    "--window",
    metavar="DURATION",
    help="History: jobs that ended this long ago at most (default: scheduler.tune_window, 6d).",
)
@click.option(
    "--objective",
    type=click.Choice(("bsld", "wait", "mix")),
    help="bsld (average bounded slowdown), wait (average wait), or mix (their mean, each relative to EASY's); "
    "default: scheduler.tune_objective, mix.",
)
@click.option(
    "--margin",
    type=click.FloatRange(0.0, 1.0),
    help="Adopt the best only if it beats both EASY and the setting in force by this fraction "
    "(default: scheduler.tune_margin, 0.02).",
)
@click.option(
    "--warmup",
    metavar="DURATION",
    help="Jobs that ended this long before the window are replayed ahead of it, not scored; 0: none "
    "(default: scheduler.tune_warmup, 1d).",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0.0),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="With auto settings: how long to wait for the daemon's answer.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
@spool_options
def tune(
    dry_run: bool,
    window: str | None,
    objective: str | None,
    margin: float | None,
    warmup: str | None,
    wait_s: float,
    as_json: bool,
    spool_dir: str | None,
    config_file: str | None,
) -> int:
    """Replay the jobs that ended in the last --window through EASY and a grid of checkpoint-backfill
    settings (p 0.1-0.5, threshold 10 min-1 h, the three predictors; the configured backfill order, or both
    when scheduler.backfill_order is "auto") and adopt the best if it beats both EASY (in queue order) and
    the setting in force by --margin; with fewer than 100 jobs of history the setting in force is kept.
    The jobs that ended in the scheduler.tune_warmup before the window (7d) are replayed ahead of it, so that
    it starts with the backlog it had, and are not scored.

    When scheduler.p, threshold, predictor or backfill_order is "auto" (the first three are by default),
    only those vary, and the daemon
    tunes: gctl tune asks it to tune now, waits for its answer and prints it (the daemon keeps the
    setting it adopts; the configuration file is not changed).  Otherwise the setting adopted is
    written into the configuration as gctl set writes, and the daemon reloads it.  Root or the spool's
    owner only, unless --dry-run."""
    import dataclasses
    import time

    from gridsched.core.units import UnitError, format_duration, parse_duration
    from gridsched.sim import autotune as tuning
    from gridsched.sim import tune as tuner

    s = setup(PROG, spool_dir, config_file)
    if not dry_run:
        require_admin(s.spool, "set")
    auto = _tunes(s.cfg)
    t = s.cfg.tuning
    options = (("--window", window), ("--objective", objective), ("--margin", margin), ("--warmup", warmup))
    given = [o for o, v in options if v is not None]
    if auto and not dry_run and given:
        fail(
            PROG,
            f"{'/'.join(given)}: the daemon tunes its auto settings with its configuration's "
            "(gctl set scheduler.tune_...); with --dry-run these try others",
            ExitCode.USAGE,
        )
    try:
        span = parse_duration(window) if window is not None else t.window
    except UnitError as e:
        fail(PROG, f"--window {e}", ExitCode.USAGE)
    lead = t.warmup
    if warmup is not None:
        try:
            lead = 0 if warmup.strip() == "0" else parse_duration(warmup)
        except UnitError as e:
            fail(PROG, f"--warmup {e}", ExitCode.USAGE)
    t = dataclasses.replace(
        t,
        window=span,
        objective=objective or t.objective,
        margin=t.margin if margin is None else margin,
        warmup=lead,
    )
    if not auto:  # the whole grid, as before settings could be auto
        t = dataclasses.replace(t, p=True, threshold=True, predictor=True)
    machine = _machine(s.cfg, s.spool)
    current = _in_force(s)
    if auto and not dry_run:
        return _tune_by_daemon(s, wait_s, as_json)
    now = time.time()
    dec = tuning.decide(s.spool.db, now, machine.ncores, current, t)
    _print_decision(dec, machine.ncores, format_duration(span), as_json)
    if dec["adopt"] is None or dry_run or auto:
        return ExitCode.OK
    d_adopt = tuning.applied(current, dec["adopt"])
    return _write_tuned(s, d_adopt, tuner.label(d_adopt))


def _in_force(s: Any) -> Any:
    """The scheduler's settings in force: the configuration's, with the daemon's tuned ones if any."""
    from gridsched.sim import autotune as tuning

    if not _tunes(s.cfg):
        return s.cfg.params
    rec = _tuning_state(s)
    if rec.get("in_force"):
        try:
            return tuning.applied(s.cfg.params, rec["in_force"], s.cfg.tuning.backfill_order)
        except (KeyError, ValueError, TypeError):
            pass
    return s.cfg.params


def _print_decision(dec: dict[str, Any], ncores: int, window: str, as_json: bool) -> None:
    from gridsched.core.units import format_duration

    if as_json:
        keys = ("jobs", "warmup_jobs", "objective", "rows", "best", "adopt_label", "beats_easy_by", "why", "time")
        out = {k: dec.get(k) for k in keys}
        out["adopt"] = out.pop("adopt_label")
        click.echo(dumps(out, indent=2))
        return
    warm = f" (after {dec['warmup_jobs']} of the warm-up before it)" if dec.get("warmup_jobs") else ""
    click.echo(f"{dec['jobs']} jobs ended in the last {window}{warm} on {ncores} cores; objective {dec['objective']}")
    if dec["rows"]:
        click.echo(f"{'setting':56} {'wait':>10} {'bsld':>8} {'score':>7}")
        for r in dec["rows"]:
            mark = " *" if dec["best"] == r["setting"] else ""
            click.echo(
                f"{r['setting']:56} {format_duration(r['wait_avg']):>10} {r['bsld_avg']:8.2f} {r['score']:7.3f}{mark}"
            )
    click.echo(f"{PROG}: {dec['why']}")


def _tune_by_daemon(s: Any, wait_s: float, as_json: bool) -> int:
    """Auto settings: the daemon tunes now; wait for its record of the decision and print it."""
    import time

    from gridsched.core.units import format_duration

    info = s.spool.daemon_info()
    if info is None:
        fail(
            PROG,
            f"no daemon runs on {s.spool.root}: auto settings are tuned by the daemon "
            "(gctl tune --dry-run prints the table now)",
        )
    asked = time.time()
    send(s.spool, "tune")
    click.echo(f"{PROG}: tuning requested from pid {shown(info.get('pid'))}", err=as_json)
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        last = _tuning_record(s).get("last") or {}
        if isinstance(last.get("time"), (int, float)) and last["time"] >= asked - 1.0:
            break
        if time.monotonic() > deadline:
            fail(PROG, f"no answer from the daemon within {wait_s:g} s: it logs the choice when it has one")
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)
    _print_decision(last, _machine(s.cfg, s.spool).ncores, format_duration(s.cfg.tuning.window), as_json)
    if last.get("adopt_label"):
        click.echo(f"{PROG}: the daemon adopted {last['adopt_label']}", err=as_json)
    return ExitCode.OK


def _write_tuned(s: Any, a: Any, said: str) -> int:
    """Settings that are not auto: the adopted ones written into the configuration, then reloaded."""
    from pathlib import Path

    from gridsched.protocol import configwrite

    target = Path(s.cfg.path)
    if target == PACKAGED:
        target = s.spool.root / "gridsched.toml"
    settings: list[tuple[list[str], Any]] = [(["scheduler", "policy"], a.policy.value)]
    if a.policy.value == "checkpoint-backfill":
        settings += [
            (["scheduler", "p"], a.p),
            (["scheduler", "threshold"], int(a.threshold)),
            (["scheduler", "predictor"], a.predictor.value),
            (["scheduler", "backfill_order"], a.backfill_order.value),
        ]
    try:
        data = configwrite.applied(configwrite.read(target), settings)
        configwrite.check(target, data)
        if target.parent == s.spool.root:
            s.spool.ensure()
        configwrite.write(target, data)
    except configwrite.SettingError as e:
        fail(PROG, shown(f"tune: {e}"))
    click.echo(shown(f"{PROG}: adopted {said} in {target}"))
    if s.spool.daemon_info() is not None:
        send(s.spool, "reload")
        click.echo(f"{PROG}: reload requested")
    return ExitCode.OK


@cli.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@spool_options
def config(as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Print the configuration file in force and its values (defaults filled in)."""
    s = setup(PROG, spool_dir, config_file)
    values = effective_values(s.cfg.path)
    if as_json:
        click.echo(dumps({"path": s.cfg.path, "spool": str(s.spool.root), "config": values}, indent=2))
        return ExitCode.OK
    click.echo(f"# config file: {shown(s.cfg.path)}")
    click.echo(f"# spool: {shown(s.spool.root)}")
    for table, kv in values.items():
        click.echo(f"\n[{table}]")
        for k, v in kv.items():
            click.echo(f"{k} = {toml_value(v)}")
    return ExitCode.OK


@cli.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@spool_options
def info(as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Show what this host offers: CPUs, pidfds, cgroup v2, how --mem is enforced, NUMA nodes, CRIU, the
    devices (GPUs) and where they came from (declared in the topology file, nvidia-smi, sysfs, or none), and
    whether jobs are kept from the device nodes of devices they do not hold: by the cgroup v1 devices
    controller, by a cgroup v2 device program, or not (then only by CUDA_VISIBLE_DEVICES and the like)."""
    from gridsched.core import cpuset
    from gridsched.host.facts import device_isolation, facts
    from gridsched.host.topology import declared

    s = setup(PROG, spool_dir, config_file)
    f = facts()
    ncores, host_cpus = declared(s.cfg)
    f["declared_cores"] = ncores
    from gridsched.host.topology import TopologyError, load_with_source

    try:
        m, source = load_with_source(s.cfg)
        f["devices"] = {"summary": m.device_summary(), "source": source}
        f["device_isolation"] = device_isolation(m.devices, s.cfg.device_enforce, s.cfg.system)
    except TopologyError as e:
        f["devices"] = {"summary": "", "source": f"the topology file cannot be read: {e}"}
        f["device_isolation"] = {"enforced": False, "how": "not known: the topology file cannot be read"}
    f["confinement"] = _confinement(s)
    tuning_state = _tuning_state(s)
    f["tuning"] = tuning_state
    if as_json:
        click.echo(dumps(f, indent=2))
        return ExitCode.OK
    click.echo(f"host CPUs:      {cpuset.format(f['host_cpus'])}")  # type: ignore[arg-type]
    click.echo(f"cores handed out: {ncores} (on host CPUs {cpuset.format(host_cpus)})")
    click.echo(f"NUMA nodes:     {', '.join(f['numa_nodes']) or 'none reported'}")  # type: ignore[arg-type]
    click.echo(f"pidfd:          {'yes' if f['pidfd'] else 'no'}")
    click.echo(f"cgroup v2:      {f['cgroup_v2'] or 'not available (jobs are tracked by their shepherd)'}")
    click.echo(f"--mem enforced by: {f['memory_limit']}")
    conf = f["confinement"]
    assert isinstance(conf, dict)
    for line in conf["lines"]:
        click.echo(line)
    click.echo(f"checkpoint criu: not available: {f['criu']}")
    dv = f["devices"]
    assert isinstance(dv, dict)
    click.echo(f"devices:        {dv['summary'] or 'none'} (from: {dv['source']})")
    iso = f["device_isolation"]
    assert isinstance(iso, dict)
    click.echo(f"device access:  {iso['how']}")
    for key, why in iso.get("no_node", {}).items():
        click.echo(f"  {key.replace(':', ' ')} not isolated: {why}")
    for line in _tuning_lines(tuning_state):
        click.echo(line)
    return ExitCode.OK


def _confinement(s: Any) -> dict[str, Any]:
    """How jobs are confined (their processes, a process cap, their cores): as the daemon found it when it
    started (the state db's meta ``confinement``), else as this command can find it."""
    rec = _meta_json(s, "confinement")
    lines = rec.get("lines")
    if isinstance(lines, list) and lines and all(isinstance(x, str) for x in lines):
        return {"from": "the daemon, when it started", "lines": [shown(x) for x in lines]}
    if s.cfg.system and os.geteuid() != 0:
        why = (
            f"not known: the system daemon has not recorded it, and gctl info as uid {os.geteuid()} cannot try "
            "what root can"
        )
        return {"from": "gctl info", "lines": [f"job confinement: {why}"]}
    from gridsched.host.facts import job_confinement

    return {"from": "gctl info", "lines": job_confinement(s.cfg.max_processes)}


def _tunes(cfg: Any) -> bool:
    """Whether the daemon tunes settings of ``cfg`` (some are "auto", under checkpoint-backfill)."""
    return bool(cfg.tuning.active and cfg.params.policy.value == "checkpoint-backfill")


def _tuning_record(s: Any) -> dict[str, Any]:
    """The daemon's record of tuning in the state db (meta ``tuning``); {} where there is none."""
    return _meta_json(s, "tuning")


def _meta_json(s: Any, key: str) -> dict[str, Any]:
    """The JSON object the daemon keeps under meta ``key`` of the state db; {} where there is none."""
    import sqlite3

    from gridsched.protocol.state import StateDB

    try:
        db = StateDB(s.spool.db)
        try:
            rec = json.loads(db.meta().get(key) or "{}")
        finally:
            db.close()
    except (OSError, ValueError, sqlite3.Error):
        return {}
    return rec if isinstance(rec, dict) else {}


def _tuning_state(s: Any) -> dict[str, Any]:
    """What gctl info shows of tuning: the configuration's auto settings and the daemon's record."""
    from gridsched.sim import autotune as tuning
    from gridsched.sim.tune import label as tune_label

    out: dict[str, Any] = {"auto": _tunes(s.cfg)}
    if not out["auto"]:
        return out
    out["describe"] = s.cfg.tuning.describe()
    out["order"] = s.cfg.params.backfill_order.value  # the configured (or, if auto, not yet tuned) order
    # as the daemon runs before its first tuning: the configured settings, the published ones for "auto" ones
    out["configured"] = tune_label(s.cfg.params)
    rec = _tuning_record(s)
    in_force = rec.get("in_force")
    if isinstance(in_force, dict):
        try:  # as the daemon puts it in force (its configured backfill order, unless that is tuned)
            in_force = tuning.setting(tuning.applied(s.cfg.params, in_force, s.cfg.tuning.backfill_order))
        except (KeyError, ValueError, TypeError):
            pass
    out["in_force"] = in_force
    out["since"] = rec.get("since")
    last = rec.get("last") or {}
    out["last"] = {k: last.get(k) for k in ("time", "jobs", "objective", "best", "adopt_label", "beats_easy_by", "why")}
    return out


def _tuning_lines(t: dict[str, Any]) -> list[str]:
    if not t.get("auto"):
        return ["tuning:         off (no scheduler setting is auto under checkpoint-backfill)"]
    import time

    def when(t: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))

    lines = [f"tuning:         {t['describe']}"]
    s = t.get("in_force")
    if s:
        what = (
            s["policy"]
            if s["policy"] != "checkpoint-backfill"
            else (f"p={s['p']:g} threshold={s['threshold']:g}s predictor={s['predictor']}")
        )
        if s.get("backfill_order", "queue") != "queue":
            what += f" backfill={s['backfill_order']}"
        lines.append(f"  in force:     {what}, since {when(t['since'])}")
    else:
        lines.append(f"  in force:     the configured settings ({t['configured']}), none adopted yet")
    last = t.get("last") or {}
    if last.get("time"):
        lines.append(f"  last tuning:  {when(last['time'])}, {last.get('jobs')} jobs: {last.get('why')}")
    else:
        lines.append("  last tuning:  none yet")
    return lines


# -- the machine map: topology, drain, resume ---------------------------------------


class CpuListType(click.ParamType):
    """A cpu list such as ``0-3,8`` (at least one core)."""

    name = "CORES"

    def convert(self, value: Any, param: Any, ctx: Any) -> frozenset[int]:
        from gridsched.core import cpuset

        if isinstance(value, frozenset):
            return value
        try:
            cores = cpuset.parse(str(value))
        except cpuset.CpuListError as e:
            self.fail(f"'{value}': not a cpu list ({e})", param, ctx)
        if not cores:
            self.fail(f"'{value}': no cores", param, ctx)
        return cores


CORES = CpuListType()


def _machine(cfg: Any, spool: Any = None) -> Any:
    """The machine map of ``cfg`` (with ``spool``: the running daemon's, if one runs), or a one-line error."""
    from gridsched.host.topology import TopologyError, in_force, load_machine

    try:
        return load_machine(cfg) if spool is None else in_force(spool, cfg)
    except TopologyError as e:
        fail(PROG, f"topology {e}")


def _core_request(kind: str, cores: frozenset[int], reason: str, spool_dir: str | None, config_file: str | None) -> int:
    from gridsched.core import cpuset

    s = setup(PROG, spool_dir, config_file)
    require_admin(s.spool, kind)
    m = _machine(s.cfg, s.spool)
    unknown = sorted(c for c in cores if c >= m.ncores)
    if unknown:
        what = (
            f"core {unknown[0]} is not a core" if len(unknown) == 1 else f"cores {cpuset.format(unknown)} are not cores"
        )
        fail(PROG, f"{what} of this machine (cores {cpuset.format(m.cores())})")
    text = cpuset.format(cores)
    if kind == "drain":
        send(s.spool, "drain", cores=text, reason=reason)
    else:  # the request that returns cores to service is "undrain": "resume" is a yielding job's
        send(s.spool, "undrain", cores=text)
    note = "" if s.spool.daemon_info() else " (no daemon runs: it takes the request when it starts)"
    click.echo(f"{PROG}: {kind} of core{'s' if len(cores) > 1 else ''} {text} requested{note}")
    return ExitCode.OK


@cli.command("drain")
@click.argument("cores", type=CORES)
@click.option("--reason", default="", metavar="TEXT", help="Why the cores are drained (shown by gctl topology).")
@spool_options
def drain(cores: frozenset[int], reason: str, spool_dir: str | None, config_file: str | None) -> int:
    """Take CORES (a cpu list such as 0-3,8) out of service.

    Drained cores take no new job; jobs running on them finish normally.  The
    request is written into the spool; the daemon carries it out (at once, or
    when it starts) and gctl topology shows the cores as drained.  Only root
    and the spool's owner may drain and resume cores.
    """
    return _core_request("drain", cores, " ".join(reason.split()), spool_dir, config_file)


@cli.command("resume")
@click.argument("cores", type=CORES)
@spool_options
def resume(cores: frozenset[int], spool_dir: str | None, config_file: str | None) -> int:
    """Put drained CORES (a cpu list such as 0-3,8) back in service (root or the spool's owner only)."""
    return _core_request("resume", cores, "", spool_dir, config_file)


@cli.command("topology")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@spool_options
def topology(as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Show the machine map: boards, physical cores and their SMT threads, each core
    with the host CPU it runs on and its state as the scheduler sees it: the
    job running on it (marked if backfilled and preemptable), held idle by a
    job (SMT siblings of --threads-per-core, the rest of an --exclusive-board
    job's board), lent by a yielding parent, drained, reserved, or free.
    --json adds "maps": one list of core ids per status map, and "free"."""
    from gridsched.cli.topoview import core_states, read_marks, tree_lines, view
    from gridsched.host.topology import membind_unavailable

    s = setup(PROG, spool_dir, config_file)
    m = _machine(s.cfg, s.spool)
    if m.devices and s.cfg.devices:  # the share is the configuration's, not the map's
        from dataclasses import replace

        from gridsched.host.devices import shared

        m = replace(m, devices=shared(m, {t: dc.share for t, dc in s.cfg.devices.items()}))
    marks = read_marks(s.spool)
    states = core_states(m, marks)
    data = view(m, states, marks, membind_unavailable(m))
    if as_json:
        click.echo(dumps(data, indent=2))
        return ExitCode.OK
    for line in tree_lines(data):
        click.echo(line)
    return ExitCode.OK


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
