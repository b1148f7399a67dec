"""gsub: submit a job script to the queue.

The script's ``#GS`` directive lines are parsed with the same option
definitions as the command line; options on the command line win.  A script
without them may carry ``#SBATCH`` or ``#PBS`` lines (see :mod:`.compat`).  gsub
validates the request, writes it into the spool and prints the job id; it
decides nothing about when or where the job runs.

Imports stay small (no rich, psutil or daemon code): gsub runs often.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gridsched.cli.plain import ExitCode, PlainSetup, echo, fail, plain_setup, run, setup, warn
from gridsched.protocol.jobs import GPU_OPTIONS, Checkpoint, Hint
from gridsched.protocol.spool import Spool
from gridsched.submission import compat
from gridsched.submission.devopts import asked, device_spec
from gridsched.submission.submit import (  # noqa: F401 - output_path, job_exit_status, read_script: part of gsub's interface
    Options,
    Script,
    ScriptError,
    SubmitError,
    check_array,
    choose_shell,
    job_exit_status,
    output_path,
    read_script,
    submit,
    wait_array,
    wait_job,
)

if TYPE_CHECKING:
    import click

PROG = "gsub"
DIRECTIVE = "#GS"
# Parameters a directive may not set: they choose what the script is or where it goes.
NOT_IN_DIRECTIVES = {
    "script": "a script",
    "args": "arguments",
    "wrap": "--wrap",
    "emit": "--emit",
    "spool_dir": "--spool",
    "config_file": "--config",
}
# The parameters that describe the job (what --emit translates).
JOB_PARAMS = (
    "name",
    "ncpus",
    "ntasks",
    "ntasks_per_node",
    "cpus_per_task",
    "walltime",
    "mem",
    "output",
    "error",
    "chdir",
    "hold",
    "wait",
    "checkpoint",
    "depend",
    "array",
    "mem_per_cpu",
    "mem_per_gpu",
    "join",
    "shell",
    "begin",
    "open_mode",
    "signal",
    "estimate",
    # devices (gridsched.submission.devopts.PARAMS)
    "gpus",
    "gpus_per_node",
    "gpus_per_task",
    "gres",
    "gpu_bind",
    "exclusive_gpu",
    "nice",
    "priority",
    "exclusive",
    "export",
    "hold_jid",
    "mail_type",
    "mail_user",
    "get_user_env",
    "account",
    "hint",
    "pe",
)


def directives(text: str) -> list[tuple[int, str]]:
    """``(line number, option text)`` of each ``#GS`` line at the top of ``text``.

    Scanning skips the shebang, blank lines and comments and stops at the
    first other line, as Slurm does for ``#SBATCH``.
    """
    return compat.scan(text, DIRECTIVE)


def directive_tokens(script: Script) -> tuple[list[tuple[str, list[str]]], str | None, str]:
    """``(where, option tokens)`` of the script's directives, whose script it is, and what separates
    the job id from an array task's index in default file names (:attr:`.compat.Translation.task_sep`):
    :func:`gridsched.submission.directives.read`, with a warning on standard error for each line of
    another scheduler that is ignored.

    The ``#GS`` lines; in a script without any, its ``#SBATCH``, ``#PBS`` or
    ``#$`` lines translated, and the dialect: "slurm", "pbs", "sge" (None for #GS
    lines or none).  ``where`` names the script, the line and, for a
    translated line, the directive as written.
    """
    from gridsched.submission import directives

    try:
        found = directives.read(script)
    except SubmitError as e:
        fail(PROG, str(e), e.code)
    for w in found.warnings:
        warn(PROG, f"warning: {w}")
    return found.lines, found.dialect, found.task_sep


def apply_directives(ctx: Any, params: dict[str, Any], script: Script) -> dict[str, Any]:
    """``params`` with the script's directives filled in where the command line set nothing
    (and ``_dialect``: whose directives they were; ``_task_sep``: see :func:`directive_tokens`)."""
    merged = dict(params)
    tokens_of, merged["_dialect"], merged["_task_sep"] = directive_tokens(script)
    for where, tokens in tokens_of:
        import click  # directives are read with the options' own definitions

        from gridsched.cli.common import usage_message
        from gridsched.cli.gsub_types import DIRECTIVES

        try:
            dctx = ctx.command.make_context(PROG, tokens, help_option_names=[], obj=DIRECTIVES)
        except click.UsageError as e:
            fail(PROG, f"{where}: {usage_message(e)}", ExitCode.USAGE)
        for name, value in dctx.params.items():
            if not on_command_line(dctx, name):
                continue
            if name in NOT_IN_DIRECTIVES:
                what = NOT_IN_DIRECTIVES[name]
                if name == "script":
                    what = f"an argument ({value!r}): directives take options only"
                else:
                    what = f"{what} cannot be given in a directive"
                fail(PROG, f"{where}: {what}", ExitCode.USAGE)
            if not on_command_line(ctx, name):
                merged[name] = value
    return merged


def on_command_line(ctx: Any, name: str) -> bool:
    """Whether parameter ``name`` was given on the command line (``ctx``: click's context, or a
    :class:`gridsched.cli.gsub_quick.Given`)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def given(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    """The job options set on the command line or in directives (not defaults)."""
    default = {p.name: p.get_default(ctx) for p in ctx.command.params}
    return {k: params[k] for k in JOB_PARAMS if params.get(k) != default.get(k)}


def submission(ctx: Any) -> int:
    """gsub: the submission ``ctx.params`` describe (``ctx``: click's context of :mod:`.gsub_cli`'s command, or
    :class:`gridsched.cli.gsub_quick.Given` for a command line read without click)."""
    p0 = ctx.params
    script, args, wrap, spool_dir, config_file = (p0[k] for k in ("script", "args", "wrap", "spool_dir", "config_file"))
    sc, p = _script_params(ctx, script, wrap)
    shell = _shell(sc, p)
    if p["emit"] is not None:
        return _emit(ctx, sc, p, shell, spool_dir, config_file)
    _warn_patterns(p)
    s, opts, extra = _options(p, shell, spool_dir, config_file)
    if p["mail_type"] and not s.cfg.mail_sendmail:
        warn(PROG, "warning: --mail-type: mail is not configured on this machine ([mail] sendmail): no mail is sent")
    if (p["priority"] is not None or (p["nice"] or 0) < 0) and not _admin(s.spool):
        what = "--priority" if p["priority"] is not None else f"--nice {p['nice']}"
        fail(PROG, f"{what}: only an admin may raise a job's priority", ExitCode.USAGE)

    try:
        spec = submit(s.spool, s.cfg, sc, opts, args, extra=extra)
    except SubmitError as e:
        fail(PROG, str(e), e.code)
    _print_job(s.spool, spec, bool(p["as_json"]))
    _daemon_note(s)
    if p["wait"]:
        return wait_for(s.spool, spec["id"], len(check_array(spec["array"], s.cfg).indices) if "array" in spec else 0)
    return ExitCode.OK


def _script_params(ctx: Any, script: str | None, wrap: str | None) -> tuple[Script, dict[str, Any]]:
    """The job script and the parameters of the submission: the command line's, its directives' where the
    command line set nothing, the tasks checked (:func:`check_tasks`), and one of --mem and --mem-per-cpu."""
    if wrap is not None and script is not None:
        fail(PROG, "--wrap and a script file exclude each other", ExitCode.USAGE)
    try:
        sc = read_script(script, wrap)
    except ScriptError as e:
        fail(PROG, str(e), e.code)
    p = apply_directives(ctx, ctx.params, sc) if wrap is None else {**ctx.params, "_dialect": None, "_task_sep": "_"}
    p = check_tasks(PROG, ctx, p)
    sep = getattr(ctx, "meta", {}).get("gsub.task_sep")  # gsub_types.TASK_SEP: qsub's array on the command line
    if sep is not None and on_command_line(ctx, "array"):
        p["_task_sep"] = sep
    return sc, one_memory(PROG, ctx, p)


MEMORY = ("mem", "mem_per_cpu", "mem_per_gpu")


def one_memory(prog: str, ctx: Any, p: dict[str, Any]) -> dict[str, Any]:
    """``p`` with one of --mem, --mem-per-cpu and --mem-per-gpu: the command line's wins over a directive's;
    two given alike (both on the command line, or both in directives) exclude each other, as in sbatch."""
    set_ = [k for k in MEMORY if p.get(k) is not None]
    if len(set_) < 2:
        return p
    cmd = [k for k in set_ if on_command_line(ctx, k)]
    if len(cmd) != 1:
        both = cmd if cmd else set_
        flags = [f"--{k.replace('_', '-')}" for k in both]
        fail(prog, f"{', '.join(flags[:-1])} and {flags[-1]} exclude each other", ExitCode.USAGE)
    return {**p, **{k: None for k in set_ if k != cmd[0]}}


def _shell(sc: Script, p: dict[str, Any]) -> str | None:
    """What runs the script when it has no ``#!`` (:func:`.submit.choose_shell`), its notes warned of."""
    import os

    try:
        shell, notes = choose_shell(sc.text, sc.label, p["_dialect"], p["shell"], os.getuid())
    except SubmitError as e:
        fail(PROG, str(e), e.code)
    for n in notes:
        warn(PROG, f"warning: {n}")
    return shell


def _emit(
    ctx: click.Context,
    sc: Script,
    p: dict[str, Any],
    shell: str | None,
    spool_dir: str | None,
    config_file: str | None,
) -> int:
    """--emit: print the script as the other system would read it, with the interpreter chosen here."""
    emit = compat.emit_slurm if p["emit"] == "slurm" else compat.emit_pbs
    emitted = {**given(ctx, p), **({"shell": shell} if shell else {})}
    if emitted.get("checkpoint") == Checkpoint.SIGNAL:  # the signal and grace the daemon would use
        cfg = setup(PROG, spool_dir, config_file).cfg
        emitted.update(_checkpoint_signal=cfg.checkpoint_signal, _checkpoint_grace=cfg.checkpoint_grace)
    import click

    click.echo(emit(sc.text, emitted), nl=False)
    return ExitCode.OK


# sbatch's options gsub takes and ignores (an account is kept: SLURM_JOB_ACCOUNT)
IGNORED = ("partition", "qos")


def ignored() -> dict[str, str]:
    """sbatch's options gsub takes and ignores, with why: the words of the same #SBATCH lines (compat.SLURM,
    loaded only when one of them is given)."""
    return {r.flags[-1].removeprefix("--"): r.why for r in compat.SLURM if r.flags[-1].removeprefix("--") in IGNORED}


def warn_ignored(prog: str, p: dict[str, Any]) -> None:
    """Warn of each of sbatch's options given that means nothing here (-p, -q)."""
    if any(p.get(key) is not None for key in IGNORED):
        for key, why in ignored().items():
            if p.get(key) is not None:
                warn(prog, f"warning: --{key} {p[key]} ignored: {why}")


def _warn_patterns(p: dict[str, Any]) -> None:
    """Warn of each ``%`` in -o and -e that is not one of sbatch's file name patterns, and of sbatch's options
    that mean nothing here."""
    warn_ignored(PROG, p)
    for opt in ("output", "error"):
        text = p[opt] or ""
        bad = compat.unknown_patterns(text) if "%" in text and p["_dialect"] in (None, "slurm") else []
        if bad:
            warn(
                PROG,
                f"warning: {opt} '{p[opt]}': {', '.join(dict.fromkeys(bad))} is not a file name pattern "
                "(known: %A %a %j %J %N %n %s %t %u %x %%); it stays as written",
            )


def _options(
    p: dict[str, Any], shell: str | None, spool_dir: str | None, config_file: str | None
) -> tuple[PlainSetup, Options, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The spool and configuration in force, the submission's :class:`.submit.Options`, and what adds the
    spec keys they do not hold (the ``extra`` of :func:`.submit.submit`).  Changes ``p`` as it fills it in."""
    dialect = p["_dialect"]
    if p["ntasks_per_node"] is not None and p["ntasks"] is None:  # one node: its tasks are the node's
        p["ntasks"] = p["ntasks_per_node"]
    if p["hint"] is not None and Hint(p["hint"]).one_thread and p["threads_per_core"] is None:  # as Slurm
        p["threads_per_core"] = 1
    if p["exclusive"] and p["ncpus"] is not None:  # the cores it asked stay its tasks' shape; it holds them all
        n, c = p["ntasks"], p["cpus_per_task"]
        n = n if n is not None else max(1, p["ncpus"] // (c or p["ncpus"]))
        p["ntasks"], p["cpus_per_task"] = n, c if c is not None else max(1, p["ncpus"] // n)
    export: compat.Export | None = p["export"]  # None: all of it (Export(True)), nothing set
    depend_spec = p["depend"]
    join, default_output = p["join"], None
    if dialect == "slurm":  # sbatch: slurm-%j.out in the working directory, standard error joined to it
        default_output = compat.slurm_output(p["array"] is not None)
        if join is None and p["error"] is None:
            join = "oe"
    begin = None
    if p["begin"] is not None:
        import time

        begin = compat.parse_begin(p["begin"], time.time())
    mem = p["mem"]
    if p["mem_per_cpu"] is not None:
        mem = p["mem_per_cpu"] * (p["ncpus"] or 0)  # no -n: the default cores, filled in below

    s = plain_setup(PROG, spool_dir, config_file)
    if p["mem_per_cpu"] is not None and not p["ncpus"]:
        mem = p["mem_per_cpu"] * s.cfg.default_ncpus
    if p["ntasks"] and not p["ncpus"]:
        p["ncpus"] = p["ntasks"]
    if p["hold_jid"]:
        depend_spec = _hold_jid(s.spool, p["hold_jid"], depend_spec)
    resources, resv = resv_options(PROG, s.spool, s.cfg, p)
    split_devices: list[dict[str, Any]] | None = None
    split_wave: int | None = None
    if p["gpus_per_task"] is not None and (p["split"] is not None or p["split_file"] is not None):
        split_devices, split_wave = _split_devices(s.spool, s.cfg, p)
        devices: list[dict[str, Any]] = []
    else:
        devices = device_options(PROG, s.spool, s.cfg, p)
    if p["mem_per_gpu"] is not None:
        mem = p["mem_per_gpu"] * gpus_of(split_devices, devices)
    opts = Options(
        name=p["name"],
        ncpus=p["ncpus"],
        walltime=p["walltime"],
        mem=mem,
        output=p["output"],
        error=p["error"],
        chdir=p["chdir"],
        hold=bool(p["hold"]),
        checkpoint=p["checkpoint"],
        depend=depend_spec,
        array=p["array"],
        split=p["split"],
        task_time=p["task_time"],
        split_file=p["split_file"],
        split_retries=p["split_retries"],
        split_devices=split_devices,
        split_device_wave=split_wave,
        parent=p["parent"],
        no_parent=bool(p["no_parent"]),
        recoverable=bool(p["recoverable"]),
        shell=shell,
        join=None if join == "n" else join,
        default_output=default_output,
        task_sep=p["_task_sep"],
        # qsub makes a relative -o/-e absolute in its own directory, whatever -d says
        paths_from_submit_dir=dialect == "pbs",
        # Grid Engine writes the default files in the job's working directory (-wd)
        defaults_in_workdir=dialect == "sge",
        # sbatch: %a of a job that is not an array is NO_VAL, 4294967294
        no_index="4294967294" if dialect == "slurm" else "0",
        begin=begin,
        open_mode=p["open_mode"],
        export_all=export.all if export is not None else True,
        export_names=export.names if export is not None else (),
        env_set=export.values if export is not None else (),
        exclusive=bool(p["exclusive"]),
    )
    return s, opts, _extra(s, p, resources, resv, devices)


def _extra(
    s: PlainSetup, p: dict[str, Any], resources: dict[str, int], resv: int | None, devices: list[dict[str, Any]]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What gives the spec keys of the options :class:`.submit.Options` does not hold, checked against
    the spec's cores and walltime once they are known."""

    def extra(spec: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if resources:
            out["resources"] = resources
        if resv is not None:
            out.update(reservation=resv, wait_resv=bool(p["wait_resv"]))
        if p["place"] or p["threads_per_core"] or p["exclusive_board"]:
            out.update(place_options(PROG, s.cfg, s.spool, spec["ncpus"], p))
        if devices:
            out["devices"] = devices
        if p["ntasks"] is not None:
            out["ntasks"] = p["ntasks"]
        if p["cpus_per_task"] is not None:
            out["cpus_per_task"] = p["cpus_per_task"]
        if p["estimate"] is not None:
            from gridsched.protocol.requests import estimate_problem

            if p["estimate"] > spec["walltime"]:
                raise SubmitError(f"--estimate {estimate_problem(p['estimate'], spec['walltime'])}", ExitCode.USAGE)
            out["estimate"] = p["estimate"]
        if p["signal"] is not None:
            from gridsched.protocol.requests import parse_signal

            try:
                out["signal"] = parse_signal(p["signal"], spec["walltime"]).text()
            except ValueError as e:
                raise SubmitError(f"--signal {e}", ExitCode.USAGE) from None
        if p["mail_type"]:
            out["mail_type"] = ",".join(p["mail_type"])
        if p["mail_user"]:
            out["mail_user"] = list(p["mail_user"])
        if p["get_user_env"] is not None:
            out["get_user_env"] = p["get_user_env"].text()
        if p.get("_dialect"):
            out["dialect"] = p["_dialect"]
        if p["mem_per_cpu"] is not None:
            out["mem_per_cpu"] = p["mem_per_cpu"]
        if p["mem_per_gpu"] is not None:
            out["mem_per_gpu"] = p["mem_per_gpu"]
        if p["gpus_per_task"] is not None:
            out["gpus_per_task"] = int(p["gpus_per_task"])
        if p["account"]:
            out["account"] = p["account"]
        if p["ntasks_per_node"] is not None:
            out["ntasks_per_node"] = p["ntasks_per_node"]
        if p["hint"] is not None:
            out["hint"] = p["hint"]
        gpu_options = [k for k in GPU_OPTIONS if p[k]]
        if gpu_options:
            out["gpu_options"] = gpu_options
        if p["pe"] is not None:
            out["pe"] = p["pe"]
        if p["array"] is not None and p["_task_sep"] == "-":  # Torque -t: subjobs are named NAME-INDEX
            out["name_per_task"] = True
        if p["nice"]:
            out["nice"] = p["nice"]
        if p["priority"] is not None:
            out["priority"] = p["priority"]
        return out

    return extra


def gpus_of(split_devices: list[dict[str, Any]] | None, devices: list[dict[str, Any]], prog: str = PROG) -> int:
    """--mem-per-gpu's multiplier: the job's GPUs; none is refused."""
    if split_devices is not None:
        fail(
            prog, "--mem-per-gpu goes with the GPUs of the whole job, not --gpus-per-task of sub-tasks", ExitCode.USAGE
        )
    n = sum(int(d["count"]) for d in devices if d["type"] == "gpu")
    if n == 0:
        fail(
            prog,
            "--mem-per-gpu needs GPUs: give --gpus, --gpus-per-node, --gpus-per-task or --gres gpu:N",
            ExitCode.USAGE,
        )
    return n


def _print_job(spool: Spool, spec: dict[str, Any], as_json: bool) -> None:
    """Print the submitted job: its id, or (--json) its main keys as JSON."""
    if not as_json:
        echo(str(spec["id"]))
        return
    shown = {
        k: spec[k]
        for k in (
            "id",
            "name",
            "user",
            "ncpus",
            "walltime",
            "mem",
            "checkpoint",
            "hold",
            "depend",
            "workdir",
            "stdout",
            "stderr",
            "submit_time",
        )
    }
    shown.update(array=spec.get("array"), split=spec.get("split"), shell=spec.get("shell"))
    echo(json.dumps({**shown, "spool": str(spool.root)}))


def _daemon_note(s: PlainSetup) -> None:
    """When no daemon runs on the spool: start a personal one (config ``autostart``), or say that none runs."""
    spool = s.spool
    if spool.daemon_info() is None:
        if s.cfg.autostart:
            from gridsched.protocol.autostart import autostart

            if autostart(spool, s.config_file):  # (not where another command has just started one)
                warn(PROG, f"note: started a personal daemon on {spool.root} (gschedd stop stops it; log: {spool.log})")
        else:
            warn(PROG, f"note: no daemon runs on {spool.root}; the job waits until one starts (gschedd start)")


def check_tasks(prog: str, ctx: Any, p: dict[str, Any]) -> dict[str, Any]:
    """``p`` with --ntasks and --cpus-per-task checked against -n (their product when -n is not given).

    A -n on the command line wins over tasks that directives ask for: they are dropped when they do not
    make its cores.
    """
    n, c, ncpus = p["ntasks"], p["cpus_per_task"], p["ncpus"]
    if n is None and c is None:
        return p
    if p["split"] is not None or p["split_file"] is not None:
        fail(prog, "--ntasks and --cpus-per-task describe a plain job, not --split or --split-file", ExitCode.USAGE)
    out = dict(p)
    if ncpus is None:
        out["ncpus"] = (n or 1) * (c or 1)
        return out
    if (n * c == ncpus) if n is not None and c is not None else ncpus % (n or c or 1) == 0:
        return out
    if on_command_line(ctx, "ncpus") and not any(on_command_line(ctx, k) for k in ("ntasks", "cpus_per_task")):
        out.update(ntasks=None, cpus_per_task=None)  # the script's tasks give way to the command line's -n
        return out
    tasks = " x ".join(f"{flag} {v}" for flag, v in (("--ntasks", n), ("--cpus-per-task", c)) if v is not None)
    fail(prog, f"-n {ncpus} cores cannot be {tasks}: give -n as their product, or leave it out", ExitCode.USAGE)


def _hold_jid(spool: Spool, items: str, depend_spec: str | None) -> str | None:
    """``depend_spec`` with the jobs --hold-jid names added as afterany (a name that matches none is warned of)."""
    import os

    from gridsched.submission.submit import hold_jid

    try:
        ids, unmatched = hold_jid(spool, items, os.getuid())
    except SubmitError as e:
        fail(PROG, str(e), e.code)
    for name in unmatched:
        warn(PROG, f"warning: --hold-jid {name}: no job of yours pending or running has this name; not waited for")
    if not ids:
        return depend_spec
    after = "afterany:" + ":".join(map(str, ids))
    return f"{depend_spec},{after}" if depend_spec else after


def resv_options(prog: str, spool: Spool, cfg: Any, p: dict[str, Any]) -> tuple[dict[str, int], int | None]:
    """The checked -l, --reservation and --wait-resv of a submission."""
    if not p["resource"] and p["reservation"] is None and not p["wait_resv"]:
        return {}, None  # nothing asked: what check_job would say, without loading the reservations
    import os
    import time

    from gridsched.protocol.reservations import ResvError, check_job
    from gridsched.submission.submit import user_name

    ncpus = p["ncpus"] or cfg.default_ncpus
    walltime = p["walltime"] or cfg.default_walltime
    uid = os.getuid()
    machine, place = None, None
    if p["reservation"] is not None and (p["place"] or p["threads_per_core"] or p["exclusive_board"]):
        from gridsched.core.placement import Request
        from gridsched.host.topology import in_force

        # a bound job's own requirement must be one the reservation's cores can hold
        place = Request(ncpus, p["place"] or "pack", p["threads_per_core"] or 0, bool(p["exclusive_board"]))
        try:
            machine = in_force(spool, cfg)
        except ValueError as e:  # the machine's topology file cannot be read
            fail(prog, str(e))
    try:
        return check_job(
            spool,
            cfg.floating,
            ncpus,
            walltime,
            p["resource"] or (),
            p["reservation"],
            bool(p["wait_resv"]),
            uid,
            user_name(uid),
            time.time(),
            machine,
            place,
        )
    except ResvError as e:
        fail(prog, str(e))


def device_options(prog: str, spool: Spool, cfg: Any, p: dict[str, Any]) -> list[dict[str, Any]]:
    """The checked device options of a submission (--gpus, --gres, ...): the spec's ``devices``."""
    if not asked(p):
        if p["gpu_bind"] or p["exclusive_gpu"]:
            fail(prog, f"{'--gpu-bind' if p['gpu_bind'] else '--exclusive-gpu'} needs --gpus or --gres")
        return []
    from gridsched.host.topology import in_force

    try:
        return device_spec(cfg, in_force(spool, cfg), p)
    except ValueError as e:  # a bad option, or the machine's topology file cannot be read
        fail(prog, str(e))


def _split_devices(spool: Spool, cfg: Any, p: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """--split with --gpus-per-task G: each sub-task's devices (G GPUs, as Slurm's --gpus-per-task gives
    each task), and how many sub-tasks the machine's GPUs hold at once."""
    if p["split_file"] is not None:
        fail(PROG, "--gpus-per-task goes with --split, not --split-file", ExitCode.USAGE)
    if p["gres"]:
        fail(PROG, "--gres goes with a splittable job only as devices for the whole job, not with --gpus-per-task")
    from gridsched.core.devices import slots, totals
    from gridsched.host.topology import in_force
    from gridsched.protocol.device_asks import asks_to_spec
    from gridsched.submission.devopts import device_asks

    try:
        machine = in_force(spool, cfg)
        asks, _ = device_asks(cfg, machine, dict(p, ntasks=1))
    except ValueError as e:
        fail(PROG, str(e))
    have = totals(machine.devices)
    wave = min((have.get(k, 0) // n for k, n in slots(asks, machine.devices) if n > 0), default=0)
    return asks_to_spec(asks), max(1, wave)


def place_options(prog: str, cfg: Any, spool: Spool, ncpus: int, p: dict[str, Any]) -> dict[str, Any]:
    """The mapping requirement of a submission, refused here if the machine can never meet it."""
    from gridsched.core.placement import Request, never_fits
    from gridsched.host.topology import in_force

    req = Request(ncpus, p["place"] or "pack", p["threads_per_core"] or 0, bool(p["exclusive_board"]))
    try:
        why = never_fits(in_force(spool, cfg), req)
    except ValueError as e:  # the machine's topology file cannot be read
        fail(prog, str(e))
    if why:
        fail(prog, f"job can never run: {why}")
    return {"place": req.place, "threads_per_core": req.threads_per_core, "exclusive_board": req.exclusive_board}


def wait_for(spool: Spool, job_id: int, tasks: int = 0) -> int:
    """Block until job ``job_id`` (the ``tasks`` tasks of array ``job_id``) has ended; its exit status."""
    try:
        if tasks:
            return max(job_exit_status(j) for j in wait_array(spool, job_id, tasks))
        return job_exit_status(wait_job(spool, job_id))
    except SubmitError as e:
        fail(PROG, str(e), e.code)


def _admin(spool: Spool) -> bool:
    """Whether the submitter administers ``spool`` (root or its owner, gridsched.protocol.admin)."""
    import os

    from gridsched.protocol.admin import is_admin

    return is_admin(os.getuid(), spool.root)


def main() -> None:
    import os
    import sys

    from gridsched.cli.gsub_quick import given_on

    given = None if "_GSUB_COMPLETE" in os.environ else given_on(sys.argv[1:])
    if given is None:  # anything but the commonest options, --help, shell completion: click reads it
        from gridsched.cli.gsub_cli import cli

        cli.main(prog_name=PROG)
    run(PROG, lambda: submission(given))  # read without loading click


def __getattr__(name: str) -> Any:
    """``cli``: gsub's click command (:mod:`.gsub_cli`), loaded when it is asked for."""
    if name == "cli":
        from gridsched.cli.gsub_cli import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
