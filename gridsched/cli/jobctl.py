"""What gdel, ghold and grls share: parse job ids, check each, send one request."""

from __future__ import annotations

import os
from typing import Any

import click

from gridsched.cli.common import ExitCode, fail, setup, warn
from gridsched.protocol import view
from gridsched.protocol.jobs import TERMINAL, WAITING, JobState
from gridsched.protocol.text import shown


def act(
    prog: str,
    kind: str,
    verb: str,
    job_ids: tuple[str, ...],
    spool_dir: str | None,
    config_file: str | None,
    users: tuple[str, ...] = (),
    names: tuple[str, ...] = (),
    states: tuple[str, ...] = (),
) -> int:
    """Check every job named, print one error line per refused job, send ``kind`` for the others.

    ``ID`` of an array acts on all its tasks, ``ARRAYID_INDEX`` on one, ``ARRAYID_[LIST]`` on those
    listed; ``-u``, ``-n`` and ``-s`` keep the jobs that match all of them (:mod:`.select`).  No id and
    no filter, or a selection that matches no job, is one error line.  A state db that cannot be
    read, or a request that cannot be written (a full or read-only spool), is one error line and
    exit status 1.
    """
    from gridsched.cli import select

    sel = select.parse(prog, job_ids, users, names, states)
    if not sel.refs and not sel.filtered:
        fail(prog, "name the jobs: give job ids, or a filter (-u USER, -n NAME, -s STATE)", ExitCode.USAGE)
    s = setup(prog, spool_dir, config_file)
    ids: list[int] = []
    named: dict[int, str] = {}  # job id -> as the user named it
    missing: list[str] = []
    single: set[int] = set()  # ids of one job each, also an array's first task (which has the array's id)
    unmade: dict[int, str] = {}  # array tasks not made yet, by index: array id -> range text
    unmade_names: list[str] = []
    try:
        if not sel.filtered:  # tasks named by index that are still in their array's record
            refs = []
            for ref in sel.refs:
                left = ref.indices
                if ref.indices is not None:
                    text, why = view.unmade_tasks(s.spool, ref.jid, ref.indices, kind, os.getuid())
                    if why:
                        missing.append(f"job {ref.text}: {why}")
                        continue
                    if text:
                        unmade[ref.jid] = f"{unmade[ref.jid]},{text}" if ref.jid in unmade else text
                        unmade_names.append(ref.text if len(ref.indices) > 1 else ref.canonical)
                        left = ref.indices - _indices(text)
                        if not left:
                            continue
                refs.append(ref if left is ref.indices else ref._replace(indices=left))
            sel = sel._replace(refs=tuple(refs))
        if not sel.filtered and all(r.indices is None or len(r.indices) == 1 for r in sel.refs):
            for ref in sel.refs:
                try:
                    jid = view.resolve(s.spool, ref.canonical)
                except LookupError as e:
                    missing.append(str(e))
                    continue
                if jid not in ids:
                    ids.append(jid)
                    named[jid] = ref.canonical
                if ref.indices is not None:
                    single.add(jid)
        else:
            jobs = view.load_jobs(s.spool)
            if not sel.states:
                jobs = [j for j in jobs if j["state"] not in TERMINAL]
            for job, name in select.pick(sel, jobs):
                ids.append(job["id"])
                single.add(job["id"])
                named[job["id"]] = name
            applies = {"cancel": WAITING, "hold": {JobState.PENDING}, "release": {JobState.HELD}}[kind]
            for row in view.unmade_rows(s.spool):  # the tasks of arrays not made yet that match
                if row["state"] in applies and sel.matches(row) and not view.CHECKS[kind](row, os.getuid()):
                    if sel.refs and not any(r.jid == row["id"] for r in sel.refs):
                        continue
                    aid = int(row["id"])
                    unmade[aid] = f"{unmade[aid]},{row['unmade']}" if aid in unmade else row["unmade"]
                    unmade_names.append(f"{aid}_[{row['unmade']}]")
            if not ids and not unmade:
                fail(prog, f"no job matches {shown(sel.describe())}")
        good, bad = view.control(s.spool, kind, ids, os.getuid(), single, unmade) if ids or unmade else ([], [])
    except view.QueueError as e:
        fail(prog, shown(e))
    for why in missing:
        click.echo(f"{prog}: error: {shown(why)}", err=True)
    for jid, why in bad:
        click.echo(f"{prog}: error: job {named.get(jid, jid)}: {shown(why)}", err=True)
    for jid in good:
        click.echo(f"job {named.get(jid, jid)}: {verb}")
    for name in unmade_names:
        click.echo(f"job {name}: {verb}")
    if (good or unmade) and s.spool.daemon_info() is None:
        warn(prog, f"note: no daemon runs on {shown(s.spool.root)}; the request is served when one starts")
    return ExitCode.ERROR if bad or missing else ExitCode.OK


def selection_options(f: Any) -> Any:
    """``-u USER``, ``-n NAME``, ``-s STATE`` (each may repeat or list values with commas)."""
    f = click.option(
        "-s",
        "--state",
        "states",
        multiple=True,
        metavar="STATE",
        help="Only jobs in STATE (PENDING, HELD, RUNNING, ... as gstat shows them, or PD, R, ...).",
    )(f)
    f = click.option("-n", "--name", "names", multiple=True, metavar="NAME", help="Only jobs named NAME.")(f)
    return click.option("-u", "--user", "users", multiple=True, metavar="USER", help="Only jobs of USER.")(f)


def complete_job_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of job ids: the jobs not yet finished on the spool in force."""
    try:
        s = setup("gridsched", ctx.params.get("spool_dir"), ctx.params.get("config_file"))
        jobs = view.load_jobs(s.spool)
    except (SystemExit, view.QueueError, OSError):
        return []
    return [str(j["id"]) for j in jobs if j["state"] not in TERMINAL and str(j["id"]).startswith(incomplete)]


def _indices(text: str) -> frozenset[int]:
    from gridsched.protocol.arrays import Indices

    return frozenset(Indices.from_text(text))
