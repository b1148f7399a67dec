"""What gdel, ghold and grls share: parse job ids, check each, send one request."""

from __future__ import annotations

import os

import click

from .. import queue
from .common import ExitCode, fail, setup, warn


def parse_ids(prog: str, job_ids: tuple[str, ...]) -> list[int]:
    """The ids as numbers, each once, in order; a bad one is a usage error."""
    ids: list[int] = []
    for raw in job_ids:
        try:
            jid = int(raw)
        except ValueError:
            jid = -1
        if jid <= 0:
            fail(prog, f"'{raw}': not a job id (a positive whole number)", ExitCode.USAGE)
        if jid not in ids:
            ids.append(jid)
    return ids


def act(prog: str, kind: str, verb: str, job_ids: tuple[str, ...], spool_dir: str | None,
        config_file: str | None) -> int:
    """Check every id, print one error line per refused job, send ``kind`` for the others."""
    ids = parse_ids(prog, job_ids)
    s = setup(prog, spool_dir, config_file)
    try:
        good, bad = queue.control(s.spool, kind, ids, os.getuid())
    except queue.QueueError as e:
        fail(prog, str(e))
    for jid, why in bad:
        click.echo(f"{prog}: error: job {jid}: {why}", err=True)
    for jid in good:
        click.echo(f"job {jid}: {verb}")
    if good and s.spool.daemon_info() is None:
        warn(prog, f"note: no daemon runs on {s.spool.root}; the request is served when one starts")
    return ExitCode.ERROR if bad else ExitCode.OK


def complete_job_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of job ids: the jobs not yet finished on the spool in force."""
    try:
        s = setup("gridsched", ctx.params.get("spool_dir"), ctx.params.get("config_file"))
        jobs = queue.load_jobs(s.spool)
    except (SystemExit, queue.QueueError, OSError):
        return []
    return [str(j["id"]) for j in jobs
            if j["state"] not in queue.TERMINAL_STATES and str(j["id"]).startswith(incomplete)]
