"""grls: release held jobs.

Each id is checked against the state db and the submits not yet taken in;
the valid ones go to the daemon in one release request.
"""

from __future__ import annotations

import click

from gridsched.cli.common import Command, spool_options
from gridsched.cli.jobctl import act, complete_job_ids, selection_options

PROG = "grls"


@click.command(
    PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]}, short_help="release held jobs"
)
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
    """Release the held jobs ID... (or those -u, -n, -s select: see SELECTING
    JOBS): they wait in the queue again, in their place by job id, and start
    when the scheduler picks them."""
    return act(PROG, "release", "releasing", job_ids, spool_dir, config_file, users, names, states)


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
