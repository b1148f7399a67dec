"""What gdel, ghold and grls share: parse job ids, check each, send one request."""

from __future__ import annotations

import os

import click

from .. import view
from ..text import shown
from .common import ExitCode, fail, setup, warn


def parse_ids(prog: str, job_ids: tuple[str, ...]) -> list[str]:
    """The ids (``ID`` or ``ARRAYID_INDEX``), each once, in order; a bad one is a usage error."""
    from ..arrays import ArrayError, parse_ref

    ids: list[str] = []
    for raw in job_ids:
        try:
            jid, index = parse_ref(raw)
        except ArrayError:
            fail(
                prog,
                f"'{shown(raw)}': not a job id (a positive whole number, or ARRAYID_INDEX for an array task)",
                ExitCode.USAGE,
            )
        text = str(jid) if index is None else f"{jid}_{index}"
        if text not in ids:
            ids.append(text)
    return ids


def act(
    prog: str, kind: str, verb: str, job_ids: tuple[str, ...], spool_dir: str | None, config_file: str | None
) -> int:
    """Check every id, print one error line per refused job, send ``kind`` for the others.

    ``ID`` of an array acts on all its tasks, ``ARRAYID_INDEX`` on one.  A state db that
    cannot be read, or a request that cannot be written (a full or read-only spool), is one
    error line and exit status 1.
    """
    refs = parse_ids(prog, job_ids)
    s = setup(prog, spool_dir, config_file)
    ids: list[int] = []
    named: dict[int, str] = {}  # job id -> as the user named it
    missing: list[str] = []
    try:
        for ref in refs:
            try:
                jid = view.resolve(s.spool, ref)
            except LookupError as e:
                missing.append(str(e))
                continue
            if jid not in ids:
                ids.append(jid)
                named[jid] = ref
        good, bad = view.control(s.spool, kind, ids, os.getuid()) if ids else ([], [])
    except view.QueueError as e:
        fail(prog, shown(e))
    for why in missing:
        click.echo(f"{prog}: error: {shown(why)}", err=True)
    for jid, why in bad:
        click.echo(f"{prog}: error: job {named.get(jid, jid)}: {shown(why)}", err=True)
    for jid in good:
        click.echo(f"job {named.get(jid, jid)}: {verb}")
    if good and s.spool.daemon_info() is None:
        warn(prog, f"note: no daemon runs on {shown(s.spool.root)}; the request is served when one starts")
    return ExitCode.ERROR if bad or missing else ExitCode.OK


def complete_job_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of job ids: the jobs not yet finished on the spool in force."""
    try:
        s = setup("gridsched", ctx.params.get("spool_dir"), ctx.params.get("config_file"))
        jobs = view.load_jobs(s.spool)
    except (SystemExit, view.QueueError, OSError):
        return []
    return [
        str(j["id"]) for j in jobs if j["state"] not in view.TERMINAL_STATES and str(j["id"]).startswith(incomplete)
    ]
