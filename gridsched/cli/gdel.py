"""gdel: cancel jobs.

Each id is checked against the state db and the submits not yet taken in;
the valid ones go to the daemon in one cancel request.
"""

from __future__ import annotations

import os

import click

from .common import Command, ExitCode, fail, setup, spool_options, warn
from .gstat import TERMINAL_STATES, load_jobs

PROG = "gdel"


def check(job: dict | None, uid: int) -> str | None:
    """Why the job cannot be cancelled by ``uid``, or None if it can."""
    if job is None:
        return "no such job"
    if job["state"] in TERMINAL_STATES:
        return f"already {job['state']}"
    owner = job.get("uid")
    if uid != 0 and owner is not None and owner != uid:
        return f"owned by {job.get('user') or owner}"
    return None


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]},
               short_help="cancel jobs")
@click.argument("job_ids", nargs=-1, required=True, metavar="ID...")
@spool_options
def cli(job_ids: tuple[str, ...], spool_dir: str | None, config_file: str | None) -> int:
    """Cancel the jobs ID...: pending and held jobs leave the queue, running
    ones are stopped (SIGTERM, then SIGKILL after jobs.kill_grace)."""
    ids: list[int] = []
    for raw in job_ids:
        try:
            jid = int(raw)
        except ValueError:
            jid = -1
        if jid <= 0:
            fail(PROG, f"'{raw}': not a job id (a positive whole number)", ExitCode.USAGE)
        if jid not in ids:
            ids.append(jid)
    s = setup(PROG, spool_dir, config_file)
    known = {j["id"]: j for j in load_jobs(s.spool, ids)}
    uid = os.getuid()
    good: list[int] = []
    failed = False
    for jid in ids:
        why = check(known.get(jid), uid)
        if why:
            click.echo(f"{PROG}: error: job {jid}: {why}", err=True)
            failed = True
        else:
            good.append(jid)
    if good:
        s.spool.request("cancel", jobs=good)
        for jid in good:
            click.echo(f"job {jid}: cancelling")
        if s.spool.daemon_info() is None:
            warn(PROG, f"note: no daemon runs on {s.spool.root}; the cancel is served when one starts")
    return ExitCode.ERROR if failed else ExitCode.OK


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
