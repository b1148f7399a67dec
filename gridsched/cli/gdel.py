"""gdel: cancel jobs.

Each id is checked against the state db and the submits not yet taken in;
the valid ones go to the daemon in one cancel request.
"""

from __future__ import annotations

import click

from gridsched.cli.common import Command, spool_options
from gridsched.cli.jobctl import act, complete_job_ids, selection_options
from gridsched.protocol.view import check_cancel

PROG = "gdel"


check = check_cancel


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]}, short_help="cancel jobs")
@click.argument("job_ids", nargs=-1, metavar="[ID...]", shell_complete=complete_job_ids)
@selection_options
@spool_options
def cli(
    job_ids: tuple[str, ...],
    users: tuple[str, ...],
    names: tuple[str, ...],
    states: tuple[str, ...],
    spool_dir: str | None,
    config_file: str | None,
) -> int:
    """Cancel the jobs ID... (or those -u, -n, -s select: see SELECTING JOBS):
    pending and held jobs leave the queue, running ones are stopped (SIGTERM,
    then SIGKILL after jobs.kill_grace)."""
    return act(PROG, "cancel", "cancelling", job_ids, spool_dir, config_file, users, names, states)


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
