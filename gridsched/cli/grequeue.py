"""grequeue: send jobs back to the queue (as Slurm scontrol requeue, PBS qrerun).

A running job is stopped as a preemption stops it (one submitted with
--checkpoint signal saves its state and resumes from it; any other restarts
from the start) and waits again; a finished job is queued again as a new run of
the same id.  Each is checked here as the daemon checks it, then one request
goes to the daemon.
"""

from __future__ import annotations

import os

import click

from gridsched.cli.common import Command, ExitCode, fail, setup, spool_options, warn
from gridsched.cli.jobctl import complete_job_ids
from gridsched.protocol import view
from gridsched.protocol.text import shown
from gridsched.submission.checks import requeue_refused

PROG = "grequeue"


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]}, short_help="requeue jobs")
@click.argument("job_ids", nargs=-1, required=True, metavar="ID...", shell_complete=complete_job_ids)
@spool_options
def cli(job_ids: tuple[str, ...], spool_dir: str | None, config_file: str | None) -> int:
    """Send the running or finished jobs ID... back to the queue. A running job submitted with
    --checkpoint signal is asked to checkpoint and resumes from it; any other is killed and starts again
    from the beginning. A finished job (COMPLETED, FAILED, CANCELLED, TIMEOUT,
    OUT_OF_MEMORY) runs again under the same
    id. A pending job is refused. Each new start counts as a restart (gstat -f, gacct)."""
    from gridsched.cli import select
    from gridsched.protocol.admin import is_admin

    sel = select.parse(PROG, job_ids, (), (), ())
    s = setup(PROG, spool_dir, config_file)
    uid = os.getuid()
    admin = is_admin(uid, s.spool.root)
    jobs: list[int] = []
    errors: list[str] = []
    done: list[str] = []
    try:
        for ref in sel.refs:
            try:
                jid = view.resolve(s.spool, ref.canonical)
            except LookupError as e:
                errors.append(shown(str(e)))
                continue
            rows = view.load_jobs(s.spool, [jid])
            why = requeue_refused(rows[0] if rows else None, uid, admin)
            if why:
                errors.append(f"job {ref.canonical}: {why}")
            elif jid not in jobs:
                jobs.append(jid)
                done.append(ref.canonical)
        if jobs:
            try:
                s.spool.request("requeue", jobs=jobs)
            except OSError as e:
                raise view.QueueError(
                    f"cannot write the requeue request to {s.spool.root}: {e.strerror or e}"
                ) from None
    except view.QueueError as e:
        fail(PROG, shown(e))
    for line in errors:
        click.echo(f"{PROG}: error: {shown(line)}", err=True)
    for name in done:
        click.echo(f"job {name}: requeueing")
    if done and s.spool.daemon_info() is None:
        warn(PROG, f"note: no daemon runs on {shown(s.spool.root)}; the request is served when one starts")
    return ExitCode.ERROR if errors else ExitCode.OK


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
