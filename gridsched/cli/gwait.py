"""gwait, gyield, gresume and gresume-tree: a job waits for its children and lends its cores meanwhile.

They run inside a job (``GS_JOBID`` and ``GS_SPOOL`` set by the daemon),
write ``yield`` and ``resume`` requests into the spool and learn the outcome
from the state db (:mod:`gridsched.protocol.tree`), polling with bounded pauses.
"""

from __future__ import annotations

import os

import click

from gridsched.cli.common import Command, ExitCode, fail, setup, spool_options
from gridsched.protocol import tree
from gridsched.protocol.jobs import TERMINAL, JobState
from gridsched.protocol.spool import Spool
from gridsched.protocol.view import QueueError, load_jobs

SETTINGS = {"help_option_names": ["-h", "--help"]}


def _here(prog: str) -> tuple[Spool, int]:
    try:
        return tree.current_job()
    except tree.TreeError as e:
        fail(prog, str(e))


def _resume(prog: str, spool: Spool, me: int) -> None:
    try:
        req = spool.request("resume", job=me)
        tree.wait_resumed(spool, me, req)
    except (OSError, tree.TreeError, QueueError) as e:
        fail(prog, f"cannot get the cores of job {me} back: {e}")


@click.command("gwait", cls=Command, context_settings=SETTINGS, short_help="wait for child jobs to end")
@click.argument("ids", nargs=-1, type=click.IntRange(min=1), metavar="[ID]...")
@click.option("--children", is_flag=True, help="Wait for every child of this job (the default without IDs).")
@click.option(
    "--yield",
    "yield_",
    is_flag=True,
    help="Lend this job's cores while waiting: other tasks (its descendants first, see yield_affinity "
    "in gridsched.toml(5)) may run on them; when the jobs have ended, gwait returns once the cores "
    "are this job's again.",
)
@click.option("-q", "--quiet", is_flag=True, help="Do not name the jobs that did not complete.")
def gwait_cli(ids: tuple[int, ...], children: bool, yield_: bool, quiet: bool) -> int:
    """Inside a job: block until the jobs IDS (or, with --children or no IDS, every child of this job
    submitted so far) have ended.  Exit status 0 if all of them COMPLETED, 1 otherwise.

    With --yield the job's cores are lent meanwhile (the job stays in memory, idle) and taken back
    after the jobs have ended: gwait returns only when no other task runs on them any more.
    """
    prog = "gwait"
    if ids and children:
        fail(prog, "IDS and --children exclude each other", ExitCode.USAGE)
    spool, me = _here(prog)
    try:
        want = sorted(set(ids)) if ids else tree.children(spool, me)
        known = {j["id"]: j for j in load_jobs(spool, want)}
        mine = known.get(me) or next(iter(load_jobs(spool, [me])), None)
    except (tree.TreeError, QueueError) as e:
        fail(prog, str(e))
    for jid in want:
        j = known.get(jid)
        if jid == me:
            fail(prog, f"job {jid}: a job cannot wait for itself")
        if j is None:
            fail(prog, f"job {jid}: no such job")
        if mine is not None and mine.get("uid") is not None and j.get("uid") != mine.get("uid"):
            fail(prog, f"job {jid}: owned by {j.get('user') or j.get('uid')}")
    if not want:
        return ExitCode.OK
    live = [j for j in want if known[j]["state"] not in TERMINAL]
    # nothing left to wait for: no yield (the daemon would refuse it)
    req = spool.request("yield", job=me, until=want) if yield_ and live else None
    try:
        final = tree.wait_ended(spool, want)
    except QueueError as e:
        fail(prog, str(e))
    assert final is not None
    if req is not None:
        try:
            tree.wait_resumed(spool, me, req)
        except tree.TreeError as e:
            fail(prog, str(e))
    bad = {j: s for j, s in final.items() if s != JobState.COMPLETED}
    if not quiet:
        for jid, state in sorted(bad.items()):
            click.echo(f"gwait: job {jid}: {state}", err=True)
    return ExitCode.ERROR if bad else ExitCode.OK


@click.command("gyield", cls=Command, context_settings=SETTINGS, short_help="lend this job's cores")
def gyield_cli() -> int:
    """Inside a job: lend the job's cores to other tasks (its descendants first) and return at once.

    The job keeps running; it should do little until gresume, which blocks until the cores are
    its own again.  gyield and gresume may be used several times in one job.  Only a job with a
    child that has not ended may yield (exit 1 otherwise); it lends its cores at most until its
    children have ended, and only the time its children run meanwhile is not charged to its
    walltime.
    """
    prog = "gyield"
    spool, me = _here(prog)
    try:
        live = tree.live_children(spool, me)
    except (tree.TreeError, QueueError) as e:
        fail(prog, str(e))
    if not live:
        fail(prog, f"job {me} cannot yield: it has no live child, so there is nothing to lend its cores to")
    spool.request("yield", job=me)
    return ExitCode.OK


@click.command("gresume", cls=Command, context_settings=SETTINGS, short_help="take this job's cores back")
def gresume_cli() -> int:
    """Inside a job: take back the cores gyield lent.  No new task starts on them; gresume returns
    when the tasks still running there have ended and the cores are the job's own again (at once
    if the job does not yield).
    """
    spool, me = _here("gresume")
    _resume("gresume", spool, me)
    return ExitCode.OK


@click.command("gresume-tree", cls=Command, context_settings=SETTINGS, short_help="release a held subtree")
@click.argument("job_id", type=click.IntRange(min=1), metavar="ID")
@spool_options
def gresume_tree_cli(job_id: int, spool_dir: str | None, config_file: str | None) -> int:
    """Release the subtree of job ID, held when ID (submitted with gsub --recoverable) failed, was
    cancelled or timed out: its held descendants become pending again.  Prints "job N: releasing"
    for each.  Works inside and outside a job.
    """
    prog = "gresume-tree"
    spool = setup(prog, spool_dir or os.environ.get("GS_SPOOL"), config_file).spool
    try:
        jobs = {j["id"]: j for j in load_jobs(spool)}
    except QueueError as e:
        fail(prog, str(e))
    top = jobs.get(job_id)
    if top is None:
        fail(prog, f"job {job_id}: no such job")
    uid = os.getuid()
    if uid != 0 and top.get("uid") not in (None, uid):
        fail(prog, f"job {job_id}: owned by {top.get('user') or top.get('uid')}")
    held = [j for j in tree.descendants(jobs, job_id) if jobs[j]["state"] == JobState.HELD]
    if not held:
        fail(prog, f"job {job_id}: no held job below it")
    spool.request("release", jobs=held)
    for jid in held:
        click.echo(f"job {jid}: releasing")
    return ExitCode.OK


def main() -> None:
    gwait_cli.main(prog_name="gwait")


def yield_main() -> None:
    gyield_cli.main(prog_name="gyield")


def resume_main() -> None:
    gresume_cli.main(prog_name="gresume")


def resume_tree_main() -> None:
    gresume_tree_cli.main(prog_name="gresume-tree")
