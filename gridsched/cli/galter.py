"""galter: change pending jobs, or the walltime of running ones (as PBS qalter, Slurm scontrol update).

The options are gsub's own (the same definitions): what they give replaces the
job's value.  Each job is checked here as the daemon checks it (owner, state,
a size the machine can never hold, a dependency cycle), then one request goes
to the daemon, which applies the change; the next scheduling pass decides
what it means.
"""

from __future__ import annotations

import os
import time
from typing import Any

import click

from gridsched.cli import gsub
from gridsched.cli.common import Command, ExitCode, fail, setup, spool_options, warn
from gridsched.cli.jobctl import complete_job_ids
from gridsched.protocol import requests as rq
from gridsched.protocol import view
from gridsched.protocol.arrays import MAKE_AT_ONCE, Indices
from gridsched.protocol.text import shown
from gridsched.submission.checks import alter_array_refused, alter_refused

PROG = "galter"
# gsub's parameters galter takes, and the spec keys they change.
ALTERABLE = (
    "name",
    "ncpus",
    "walltime",
    "mem",
    "checkpoint",
    "depend",
    "reservation",
    "begin",
    "place",
    "threads_per_core",
    "exclusive_board",
    "gpus",
    "gres",
    "gpu_bind",
    "exclusive_gpu",
    "nice",
    "priority",
    "mem_per_cpu",
    "account",
    "cpus_per_task",
    "partition",  # sbatch's, warned of as gsub warns of them
    "qos",
)
DEVICE_PARAMS = ("gpus", "gres", "gpu_bind", "exclusive_gpu")


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]}, short_help="change jobs")
@click.argument("job_ids", nargs=-1, required=True, metavar="ID...", shell_complete=complete_job_ids)
@spool_options
@click.pass_context
def cli(ctx: click.Context, job_ids: tuple[str, ...], spool_dir: str | None, config_file: str | None, **p: Any) -> int:
    """Change the jobs ID... with gsub's options: a pending or held job takes any of them; a running job
    only -t, which its owner may shorten and only an admin lengthen. ID of an array changes its pending
    tasks, ARRAYID_INDEX one task. --nice N replaces the job's nice value and --priority N sets its priority
    (as scontrol update Nice= and Priority=, qalter -p): only an admin gives a negative nice or a priority; the
    next scheduling pass orders the queue by the new value. A job that another user owns, that has ended,
    that the machine could never hold or whose dependencies would form a cycle is refused, and nothing is
    changed; so are -n for an --exclusive job (it takes every core) and --checkpoint signal or requeue for a
    grun job (it could not be rerun)."""
    from gridsched.cli import select

    given = {k: v for k, v in p.items() if ctx.get_parameter_source(k) == click.core.ParameterSource.COMMANDLINE}
    gsub.warn_ignored(PROG, given)
    if given and all(k in gsub.IGNORED for k in given):
        return ExitCode.OK  # only what means nothing on one machine: warned of, nothing to send
    given = {k: v for k, v in given.items() if k not in gsub.IGNORED}
    if not given:
        fail(PROG, "nothing to change: give one of gsub's options (-t, -n, -N, --mem, -d, ...)", ExitCode.USAGE)
    sel = select.parse(PROG, job_ids, (), (), ())
    s = setup(PROG, spool_dir, config_file)
    changes = _changes(s, given)
    uid = os.getuid()
    try:
        from gridsched.protocol.admin import is_admin

        sender = rq.Sender(uid, str(uid), frozenset(), is_admin(uid, s.spool.root))
        if not sender.admin and (given.get("priority") is not None or (given.get("nice") or 0) < 0):
            what = "--priority" if given.get("priority") is not None else f"--nice {given['nice']}"
            fail(PROG, f"{what}: only an admin may raise a job's priority", ExitCode.USAGE)
        req = rq.parse({"type": "alter", "jobs": [1], "changes": changes}, "alter.json", sender)
    except rq.Refused as e:
        fail(PROG, shown(e))
    assert isinstance(req, rq.Alter)
    typed = req.changes  # what the checks below apply, as the daemon will
    from gridsched.host.topology import in_force

    try:
        machine = in_force(s.spool, s.cfg)
    except ValueError as e:  # the machine's topology file cannot be read
        fail(PROG, str(e))
    jobs: list[int] = []
    arrays: list[int] = []
    unmade: dict[int, str] = {}  # array tasks not made yet, by index (made by the daemon, then changed)
    errors: list[str] = []
    done: list[str] = []
    try:
        everyone = {j["id"]: j for j in view.load_jobs(s.spool)}
        for ref in sel.refs:
            if ref.indices is not None:
                text, why = view.unmade_tasks(s.spool, ref.jid, ref.indices, "alter", uid)
                if why:
                    errors.append(f"job {ref.canonical}: {why}")
                    continue
                if text and len(_indices(text)) > MAKE_AT_ONCE:
                    errors.append(
                        f"job {ref.text}: more than {MAKE_AT_ONCE} tasks not started yet: change the whole array"
                    )
                    continue
                if text:
                    rows = view.unmade_rows(s.spool, [ref.jid])
                    why = alter_array_refused(rows, typed, everyone, sender, machine, s.cfg.max_walltime)
                    if why:
                        errors.append(f"job {ref.canonical}: {why}")
                        continue
                    unmade[ref.jid] = f"{unmade[ref.jid]},{text}" if ref.jid in unmade else text
                    done.append(ref.canonical)
                    continue
            whole = ref.indices is None and view.array_rows(s.spool, ref.jid)
            if whole:
                why = alter_array_refused(whole, typed, everyone, sender, machine, s.cfg.max_walltime)
                if why:
                    errors.append(f"job {ref.canonical}: {why}")
                else:
                    arrays.append(ref.jid)
                    done.append(ref.canonical)
                continue
            try:
                jid = view.resolve(s.spool, ref.canonical)
            except LookupError as e:
                errors.append(shown(str(e)))
                continue
            why = alter_refused(everyone.get(jid), typed, everyone, sender, machine, s.cfg.max_walltime)
            if why:
                errors.append(f"job {ref.canonical}: {why}")
            elif jid not in jobs:
                jobs.append(jid)
                done.append(ref.canonical)
        if jobs or arrays or unmade:
            try:
                extra = {"tasks": [[a, t] for a, t in unmade.items()]} if unmade else {}
                s.spool.request("alter", jobs=jobs, arrays=arrays, changes=changes, **extra)
            except OSError as e:
                raise view.QueueError(f"cannot write the alter request to {s.spool.root}: {e.strerror or e}") from None
    except view.QueueError as e:
        fail(PROG, shown(e))
    for line in errors:
        click.echo(f"{PROG}: error: {shown(line)}", err=True)
    for name in done:
        click.echo(f"job {name}: changing")
    if done and s.spool.daemon_info() is None:
        warn(PROG, f"note: no daemon runs on {shown(s.spool.root)}; the request is served when one starts")
    return ExitCode.ERROR if errors else ExitCode.OK


def _changes(s: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The request's ``changes`` for the options given (spec keys, checked as gsub checks them)."""
    keys = ("name", "ncpus", "walltime", "depend", "reservation", "nice", "priority", "cpus_per_task")
    out: dict[str, Any] = {k: given[k] for k in keys if k in given}
    if "account" in given:
        if not str(given["account"]).strip():
            fail(PROG, "-A: an account name must not be empty", ExitCode.USAGE)
        out["account"] = given["account"]
    if "name" in out and (not out["name"].strip() or "/" in out["name"]):
        fail(PROG, "-N: a job name must be non-empty, without '/'", ExitCode.USAGE)
    if "reservation" in out:
        try:
            out["reservation"] = int(str(out["reservation"]).lstrip("R"))
        except ValueError:
            fail(PROG, f"--reservation {shown(given['reservation'])}: not a reservation id", ExitCode.USAGE)
    if "mem_per_cpu" in given:  # one value for every job named: the cores are given with it
        if "mem" in given:
            fail(PROG, "--mem and --mem-per-cpu exclude each other", ExitCode.USAGE)
        if "ncpus" not in given:
            fail(PROG, "--mem-per-cpu needs -n here: the job's memory is SIZE times the cores given", ExitCode.USAGE)
        out["mem"] = given["mem_per_cpu"] * given["ncpus"]
    if "mem" in given:
        if not given["mem"]:
            fail(PROG, "--mem 0: give a size (the job's memory cannot be made unlimited here)", ExitCode.USAGE)
        out["mem"] = given["mem"]
    if "checkpoint" in given:
        if given["checkpoint"] == "criu":
            fail(PROG, "checkpoint mode 'criu': not driven yet", ExitCode.USAGE)
        out["checkpoint"] = given["checkpoint"]
    if "begin" in given:
        from gridsched.submission import compat

        out["begin"] = compat.parse_begin(str(given["begin"]), time.time())
    if any(k in given for k in ("place", "threads_per_core", "exclusive_board")):
        out["place"] = given.get("place") or "pack"
        out["threads_per_core"] = given.get("threads_per_core") or 0
        out["exclusive_board"] = bool(given.get("exclusive_board"))
    if any(k in given for k in DEVICE_PARAMS):
        from gridsched.host.topology import in_force
        from gridsched.submission.devopts import asked, device_spec

        if not asked(given):
            fail(PROG, "--gpu-bind and --exclusive-gpu need --gpus or --gres", ExitCode.USAGE)
        try:
            out["devices"] = device_spec(s.cfg, in_force(s.spool, s.cfg), given)
        except ValueError as e:
            fail(PROG, str(e))
    return out


def main() -> None:
    cli.main(prog_name=PROG)


cli.params[1:1] = [p for p in gsub.cli.params if p.name in ALTERABLE]

if __name__ == "__main__":
    main()


def _indices(text: str) -> Indices:
    return Indices.from_text(text)
