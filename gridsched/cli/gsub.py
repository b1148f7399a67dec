"""gsub: submit a job script to the queue.

The script's ``#GS`` directive lines are parsed with the same option
definitions as the command line; options on the command line win.  gsub
validates the request, writes it into the spool and prints the job id; it
decides nothing about when or where the job runs.

Imports stay small (no rich, psutil or daemon code): gsub runs often.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import click

from ..core.request import infeasible
from ..core.units import format_duration
from ..jobs import TERMINAL, JobState
from ..spool import Spool
from .common import (
    COUNT,
    DURATION,
    SIZE,
    ChoiceType,
    Command,
    ExitCode,
    Setup,
    fail,
    setup,
    spawn_daemon,
    spool_options,
    usage_message,
    warn,
)

PROG = "gsub"
DIRECTIVE = "#GS"
MAX_SCRIPT = 1 << 20  # bytes; a job script, not a data file
CHECKPOINT_CHOICES = ("none", "signal", "suspend", "requeue", "criu")
# Parameters a directive may not set: they choose what the script is or where it goes.
NOT_IN_DIRECTIVES = {
    "script": "a script",
    "args": "arguments",
    "wrap": "--wrap",
    "spool_dir": "--spool",
    "config_file": "--config",
}
WAIT_FIRST, WAIT_MAX = 0.05, 2.0  # seconds between state polls of --wait: growing, bounded


class ScriptError(Exception):
    """A script that cannot be submitted; the message names it."""


class Script:
    """The job script's text, where it came from and its default job name."""

    def __init__(self, text: str, label: str, default_name: str) -> None:
        self.text = text
        self.label = label  # for messages: the path as given, or "stdin"
        self.default_name = default_name


def read_script(arg: str | None, wrap: str | None) -> Script:
    if wrap is not None:
        if not wrap.strip():
            raise ScriptError("--wrap: empty command")
        return Script(f"#!/bin/sh\n{wrap}\n", "--wrap", "wrap")
    if arg is None or arg == "-":
        if arg is None and sys.stdin.isatty():
            raise ScriptError("no script: give a script file, --wrap 'COMMAND', or the script on standard input")
        data = sys.stdin.buffer.read(MAX_SCRIPT + 1)
        return Script(_decode(data, "stdin"), "stdin", "stdin")
    path = Path(arg)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCRIPT + 1)
    except FileNotFoundError:
        raise ScriptError(f"{arg}: no such file") from None
    except IsADirectoryError:
        raise ScriptError(f"{arg}: is a directory, not a script") from None
    except PermissionError:
        raise ScriptError(f"{arg}: permission denied") from None
    except OSError as e:
        raise ScriptError(f"{arg}: {e.strerror}") from None
    return Script(_decode(data, arg), arg, path.name)


def _decode(data: bytes, label: str) -> str:
    if len(data) > MAX_SCRIPT:
        raise ScriptError(f"{label}: larger than {MAX_SCRIPT >> 20} MiB, not a job script")
    if b"\0" in data:
        raise ScriptError(f"{label}: binary file (NUL bytes), not a script")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScriptError(f"{label}: not UTF-8 text (a binary file?), not a script") from None
    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        raise ScriptError(f"{label}: empty script (nothing but blank lines and comments)")
    return text


def directives(text: str) -> list[tuple[int, str]]:
    """``(line number, option text)`` of each ``#GS`` line at the top of ``text``.

    Scanning skips the shebang, blank lines and comments and stops at the
    first other line, as Slurm does for ``#SBATCH``.
    """
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if n == 1 and s.startswith("#!"):
            continue
        if s and not s.startswith("#"):
            break
        if s == DIRECTIVE or s.startswith((DIRECTIVE + " ", DIRECTIVE + "\t")):
            out.append((n, s[len(DIRECTIVE):].strip()))
    return out


def apply_directives(ctx: click.Context, params: dict[str, Any], script: Script) -> dict[str, Any]:
    """``params`` with the script's directives filled in where the command line set nothing."""
    cmd = ctx.command
    merged = dict(params)
    for lineno, text in directives(script.text):
        where = f"{script.label}:{lineno}"
        try:
            tokens = shlex.split(text, comments=True)
        except ValueError as e:
            fail(PROG, f"{where}: {str(e).lower()}", ExitCode.USAGE)
        try:
            dctx = cmd.make_context(PROG, tokens, help_option_names=[])
        except click.UsageError as e:
            fail(PROG, f"{where}: {usage_message(e)}", ExitCode.USAGE)
        for name, value in dctx.params.items():
            if dctx.get_parameter_source(name) != click.core.ParameterSource.COMMANDLINE:
                continue
            if name in NOT_IN_DIRECTIVES:
                what = NOT_IN_DIRECTIVES[name]
                if name == "script":
                    what = f"an argument ({value!r}): directives take options only"
                else:
                    what = f"{what} cannot be given in a directive"
                fail(PROG, f"{where}: {what}", ExitCode.USAGE)
            if ctx.get_parameter_source(name) != click.core.ParameterSource.COMMANDLINE:
                merged[name] = value
    return merged


_SUBST = re.compile(r"%[jx%]")


def output_path(template: str | None, default: str, job_id: int, name: str, workdir: Path,
                submit_dir: Path) -> Path:
    """The absolute path of an output file.

    ``%j`` is the job id, ``%x`` the job name, ``%%`` a percent sign.  A
    relative path is relative to the working directory; an existing directory
    receives the default file name.  No option: ``default`` in the submit
    directory.
    """
    if template is None:
        return submit_dir / default
    text = _SUBST.sub(lambda m: {"%j": str(job_id), "%x": name, "%%": "%"}[m.group()], template)
    p = Path(os.path.expanduser(text))
    if not p.is_absolute():
        p = workdir / p
    if p.is_dir():
        p = p / default
    return p


def check_output_dir(what: str, p: Path) -> None:
    d = p.parent
    if not d.is_dir():
        fail(PROG, f"{what} '{p}': directory {d} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        fail(PROG, f"{what} '{p}': directory {d} is not writable")


def machine_cores(spool: Spool, s: Setup) -> int:
    """Cores of the machine: as the running daemon recorded it, else as the config declares it."""
    if spool.db.exists():
        try:
            from ..state import StateDB

            db = StateDB(spool.db)
            try:
                raw = db.meta().get("machine")
            finally:
                db.close()
            if raw:
                n = json.loads(raw)["ncores"]
                if isinstance(n, int) and n > 0:
                    return n
        except Exception:  # noqa: BLE001 - an unreadable state db only costs the better answer
            pass
    from ..machine import from_config

    return from_config(s.cfg).ncores


def user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return os.environ.get("USER") or str(uid)


def job_exit_status(job: dict[str, Any]) -> int:
    """The exit status gsub --wait gives for a finished job (as a shell reports a child)."""
    if job.get("exit_signal"):
        return 128 + int(job["exit_signal"])
    if job.get("exit_code") is not None:
        return int(job["exit_code"])
    return 0 if job["state"] == JobState.COMPLETED else 1


def wait_for(spool: Spool, job_id: int, request: Path) -> int:
    """Block until job ``job_id`` is finished (polling the state db); its exit status."""
    from ..state import StateDB

    db: StateDB | None = None
    delay = WAIT_FIRST
    quarantined = spool.quarantine / request.name
    terminal = {s.value for s in TERMINAL}
    while True:
        if db is None and spool.db.exists():
            db = StateDB(spool.db)
        if db is not None:
            job = db.job(job_id)
            if job is not None and job["state"] in terminal:
                db.close()
                return job_exit_status(job)
        if quarantined.exists():
            fail(PROG, f"job {job_id}: the daemon refused the request (see {quarantined}.why)")
        time.sleep(delay)
        delay = min(delay * 1.5, WAIT_MAX)


@click.command(
    PROG,
    cls=Command,
    context_settings={"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]},
    short_help="submit a job script",
)
@click.argument("script", required=False, metavar="[SCRIPT | -]")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]...")
@click.option("-N", "--name", metavar="NAME", help="Job name (default: the script's file name, 'wrap' for --wrap, "
              "'stdin' for a script read from standard input).")
@click.option("-n", "--ncpus", type=COUNT, help="Number of cores (default: jobs.default_ncpus).")
@click.option("-t", "--walltime", type=DURATION,
              help="Walltime: the job is stopped when it has run this long (SS, MM:SS, HH:MM:SS, D-HH:MM:SS, "
              "or 90s, 30m, 2h, 1d; default: jobs.default_walltime, at most jobs.max_walltime).")
@click.option("--mem", type=SIZE, help="Memory (512M, 4G; a bare number is MiB).")
@click.option("-o", "--output", metavar="PATH",
              help="Standard output file; %j is the job id, %x the job name (default: NAME.oJOBID in the "
              "submit directory).")
@click.option("-e", "--error", metavar="PATH",
              help="Standard error file; %j is the job id, %x the job name (default: NAME.eJOBID in the "
              "submit directory).")
@click.option("-D", "--chdir", metavar="DIR", help="Working directory of the job (default: the submit directory).")
@click.option("--hold", is_flag=True, help="Submit the job held: it does not start until released.")
@click.option("--wait", is_flag=True,
              help="Wait until the job has finished and exit with its exit status.")
@click.option("--checkpoint", type=ChoiceType(CHECKPOINT_CHOICES, "MODE"),
              help="How the job may be preempted: none (never), signal (the job saves its state when "
              "signalled), suspend (stopped and continued), requeue (rerun from the start), criu "
              "(transparent; only where criu works). Default: jobs.checkpoint.")
@click.option("--wrap", metavar="COMMAND", help="Run COMMAND with /bin/sh instead of a script file.")
@click.option("--json", "as_json", is_flag=True, help="Print the submitted job as JSON.")
@spool_options
def cli(
    script: str | None,
    args: tuple[str, ...],
    wrap: str | None,
    spool_dir: str | None,
    config_file: str | None,
    **_: Any,
) -> int:
    """Submit a job script to the queue and print its job id.

    The script is SCRIPT, the command given with --wrap, or standard input
    (no SCRIPT, or SCRIPT is -).  ARGS are passed to the script.  Options may
    also be given in #GS lines at the top of the script; options on the
    command line win.
    """
    ctx = click.get_current_context()
    if wrap is not None and script is not None:
        fail(PROG, "--wrap and a script file exclude each other", ExitCode.USAGE)
    try:
        sc = read_script(script, wrap)
    except ScriptError as e:
        fail(PROG, str(e))
    p = apply_directives(ctx, ctx.params, sc) if wrap is None else dict(ctx.params)

    s = setup(PROG, spool_dir, config_file)
    cfg = s.cfg
    name = p["name"] if p["name"] is not None else sc.default_name
    if not name.strip() or "/" in name or any(ord(c) < 32 for c in name):
        fail(PROG, f"name {name!r}: must be non-empty, without '/' or control characters", ExitCode.USAGE)
    walltime = p["walltime"] if p["walltime"] is not None else cfg.default_walltime
    if walltime > cfg.max_walltime:
        fail(PROG, f"walltime {format_duration(walltime)} is longer than the maximum "
             f"{format_duration(cfg.max_walltime)} (jobs.max_walltime)")
    ncpus = p["ncpus"] if p["ncpus"] is not None else cfg.default_ncpus
    why = infeasible(ncpus, machine_cores(s.spool, s))
    if why:
        fail(PROG, f"job can never run: it {why}")
    checkpoint = p["checkpoint"] or cfg.checkpoint
    if checkpoint == "criu":
        from ..host import criu_unavailable

        reason = criu_unavailable()
        if reason:
            fail(PROG, f"checkpoint mode 'criu': transparent checkpointing is not available on this host "
                 f"({reason}); use signal, suspend or requeue")
    submit_dir = Path.cwd()
    workdir = submit_dir
    if p["chdir"] is not None:
        workdir = (submit_dir / os.path.expanduser(p["chdir"])).resolve()
        if not workdir.is_dir():
            fail(PROG, f"chdir '{p['chdir']}': no such directory")

    spool = s.spool
    job_id = spool.next_id()
    stdout = output_path(p["output"], f"{name}.o{job_id}", job_id, name, workdir, submit_dir)
    stderr = output_path(p["error"], f"{name}.e{job_id}", job_id, name, workdir, submit_dir)
    check_output_dir("output", stdout)
    check_output_dir("error", stderr)
    uid = os.getuid()
    spec = {
        "id": job_id,
        "name": name,
        "user": user_name(uid),
        "uid": uid,
        "gid": os.getgid(),
        "ncpus": ncpus,
        "walltime": walltime,
        "mem": p["mem"],
        "checkpoint": checkpoint,
        "hold": bool(p["hold"]),
        "script": sc.text,
        "args": list(args),
        "workdir": str(workdir),
        "stdout": str(stdout),
        "stderr": str(stderr),
        "env": dict(os.environ),
        "submit_time": time.time(),
        "submit_dir": str(submit_dir),
    }
    request = spool.submit(spec)
    if p["as_json"]:
        shown = {k: spec[k] for k in ("id", "name", "user", "ncpus", "walltime", "mem", "checkpoint", "hold",
                                      "workdir", "stdout", "stderr", "submit_time")}
        click.echo(json.dumps({**shown, "spool": str(spool.root)}))
    else:
        click.echo(job_id)
    if spool.daemon_info() is None:
        if cfg.autostart:
            spawn_daemon(spool, s.config_file)
        else:
            warn(PROG, f"note: no daemon runs on {spool.root}; the job waits until one starts (gschedd start)")
    if p["wait"]:
        return wait_for(spool, job_id, request)
    return ExitCode.OK


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
