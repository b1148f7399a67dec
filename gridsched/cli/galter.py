"""galter: change queued jobs, as PBS's qalter and Slurm's ``scontrol update JobId=...``.

It takes gsub's own options for what it changes (the same definitions, so they
read values as gsub does); a pending or held job may change any of them, a
running job only its walltime (shorter by its owner, longer by an admin).
Each job is checked here as the daemon checks it (the machine can hold it,
its dependencies close no cycle), and the daemon checks again.
"""

from __future__ import annotations

import os
from typing import Any

import click

from .. import view
from ..text import shown
from .common import Command, ExitCode, fail, setup, spool_options, warn

PROG = "galter"
# gsub's options galter takes, by parameter name (their definitions are gsub's)
OPTIONS = ("walltime", "ncpus", "mem", "name", "depend", "begin", "checkpoint", "reservation", "gpus")
LIVE = ("PENDING", "HELD", "RUNNING")


def _gsub_options(f: Any) -> Any:
    from . import gsub

    params = {p.name: p for p in gsub.cli.params}
    for name in reversed(OPTIONS):
        f.__click_params__ = [*getattr(f, "__click_params__", []), params[name]]
    return f


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]}, short_help="change jobs")
@click.argument("job_ids", nargs=-1, required=True, metavar="ID...")
@_gsub_options
@spool_options
def cli(job_ids: tuple[str, ...], spool_dir: str | None, config_file: str | None, **opts: Any) -> int:
    """Change the jobs ID... (ID, ARRAYID_INDEX, ARRAYID_[LIST]; an array's ID changes all its
    tasks): walltime, cores, memory, GPUs, name, dependencies, begin time, checkpoint mode,
    reservation, with gsub's options.  A running job may only have its walltime changed:
    shortened by its owner, lengthened by an admin (root or the spool's owner)."""
    import time

    from . import select

    given = {k: v for k, v in opts.items() if v is not None}
    if not given:
        fail(PROG, "nothing to change: give one of " + ", ".join(_flag(n) for n in OPTIONS), ExitCode.USAGE)
    sel = select.parse(PROG, job_ids, (), (), ())
    s = setup(PROG, spool_dir, config_file)
    changes = _changes(s, given, time.time())
    uid = os.getuid()
    try:
        jobs = {j["id"]: j for j in view.load_jobs(s.spool)}
    except view.QueueError as e:
        fail(PROG, shown(e))
    targets, missing = _targets(s.spool, sel.refs, jobs)
    from ..admin import is_admin

    admin = is_admin(uid, s.spool.root)
    good, bad = [], list(missing)
    for jid, label in targets:
        why = _check(s, jobs, jobs[jid], changes, uid, admin)
        if why:
            bad.append(f"job {label}: {why}")
        else:
            good.append((jid, label))
    for why in bad:
        click.echo(f"{PROG}: error: {shown(why)}", err=True)
    if good:
        try:
            s.spool.request("alter", jobs=[j for j, _ in good], **changes)
        except OSError as e:
            fail(PROG, shown(f"cannot write the alter request to {s.spool.root}: {e.strerror or e}"))
        what = ", ".join(sorted(k for k in changes))
        for _, label in good:
            click.echo(f"job {shown(label)}: changing {what}")
        if s.spool.daemon_info() is None:
            warn(PROG, f"note: no daemon runs on {shown(s.spool.root)}; the change is made when one starts")
    return ExitCode.ERROR if bad else ExitCode.OK


def _flag(name: str) -> str:
    from . import gsub

    return next(max(p.opts, key=len) for p in gsub.cli.params if p.name == name)


def _changes(s: Any, given: dict[str, Any], now: float) -> dict[str, Any]:
    """The request's fields for the options given, each checked as gsub checks it."""
    from . import compat

    out: dict[str, Any] = {}
    for key in ("walltime", "ncpus", "mem", "depend", "checkpoint"):
        if key in given:
            out[key] = given[key]
    if "walltime" in out and out["walltime"] > s.cfg.max_walltime:
        fail(PROG, f"walltime {given['walltime']}s is longer than the maximum (jobs.max_walltime)")
    if "mem" in out and not out["mem"]:
        fail(PROG, "--mem 0 (the whole machine) cannot be set by galter: give a size", ExitCode.USAGE)
    if "name" in given:
        name = given["name"]
        if not name.strip() or "/" in name or any(ord(c) < 32 for c in name):
            fail(PROG, f"name {name!r}: must be non-empty, without '/' or control characters", ExitCode.USAGE)
        out["name"] = name
    if "begin" in given:
        try:
            out["begin"] = compat.parse_begin(given["begin"], now)
        except ValueError as e:
            fail(PROG, f"--begin {e}", ExitCode.USAGE)
    if "reservation" in given:
        from ..reservations import ResvError, parse_id

        try:
            out["reservation"] = parse_id(given["reservation"])
        except ResvError as e:
            fail(PROG, str(e), ExitCode.USAGE)
    if "gpus" in given:
        from ..topology import in_force
        from .devopts import device_spec

        p = {"gpus": given["gpus"], "gpus_per_task": None, "gres": (), "gpu_bind": None, "exclusive_gpu": False}
        try:
            out["devices"] = device_spec(s.cfg, in_force(s.spool, s.cfg), p)
        except ValueError as e:
            fail(PROG, str(e))
    return out


def _targets(spool: Any, refs: Any, jobs: dict[int, dict[str, Any]]) -> tuple[list[tuple[int, str]], list[str]]:
    """The jobs named, as (id, label): every task of an array named by its id; and the names not found."""
    out: list[tuple[int, str]] = []
    missing: list[str] = []
    for ref in refs:
        tasks = view.array_rows(spool, ref.jid)
        if ref.indices is not None:
            tasks = [r for r in tasks if (r.get("spec") or {}).get("array_index") in ref.indices]
            if not tasks:
                missing.append(f"job {ref.canonical}: no such array task")
                continue
        if tasks:
            out += [(int(r["id"]), f"{ref.jid}_{(r.get('spec') or {}).get('array_index')}") for r in tasks]
        elif ref.jid in jobs:
            out.append((ref.jid, str(ref.jid)))
        else:
            missing.append(f"job {ref.jid}: no such job")
    return list(dict((t[0], t) for t in out).values()), missing


def _check(
    s: Any, jobs: dict[int, dict[str, Any]], job: dict[str, Any], changes: dict[str, Any], uid: int, admin: bool
) -> str | None:
    """Why ``job`` cannot take ``changes`` (the daemon's own checks, and who may), or None."""
    from ..submit import never_runs
    from ..topology import in_force

    if uid != 0 and job.get("uid") != uid:
        return f"owned by {job.get('user')}"
    state = job["state"]
    if state not in LIVE:
        return f"already {state}: only a queued or running job can be changed"
    spec = dict(job.get("spec") or {})
    if state == "RUNNING":
        if set(changes) != {"walltime"}:
            return "it is running: only its walltime (-t) may change"
        if changes["walltime"] > job["walltime"] and not admin:
            return "only an admin (root or the spool's owner) may lengthen the walltime of a running job"
        return None
    if spec.get("split") is not None or spec.get("split_of") is not None:
        return "a splittable job cannot be changed"
    new = {**spec, **changes}
    try:
        why = never_runs(new, in_force(s.spool, s.cfg), s.cfg.max_walltime)
    except ValueError as e:  # the machine's topology file cannot be read
        fail(PROG, str(e))
    if why:
        return why
    if "reservation" in changes:
        from ..reservations import ResvError, check_job
        from ..submit import user_name

        try:
            check_job(
                s.spool,
                s.cfg.floating,
                new["ncpus"],
                new["walltime"],
                (),
                str(changes["reservation"]),
                True,
                uid,
                user_name(uid),
                0.0,
            )
        except ResvError as e:
            return str(e)
    if "depend" in changes:
        from ..core import depend

        deps = depend.parse(changes["depend"])
        for other in depend.job_ids(deps):
            row = jobs.get(other)
            if row is None:
                return f"depend: job {other}: no such job"
            if uid != 0 and row.get("uid") != job.get("uid"):
                return f"depend: job {other}: owned by {row.get('user')}"
        deps_of = {}
        for j in jobs.values():
            if j["state"] in LIVE:
                try:
                    deps_of[j["id"]] = depend.parse((j.get("spec") or {}).get("depend") or "")
                except depend.DependError:
                    continue
        loop = depend.cycle(job["id"], deps, deps_of)
        if loop:
            return f"depend: a cycle: {' -> '.join(map(str, loop))}"
    return None


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
