"""gstat's command line: its click command, whose options run :func:`gridsched.cli.gstat.show`.

Apart from :mod:`gridsched.cli.gstat`, so that ``gstat`` alone (the default view) loads no click: it calls
:func:`~gridsched.cli.gstat.show` with the defaults of these options.
"""

from __future__ import annotations

from typing import Any

import click

from gridsched.cli.common import Command, spool_options
from gridsched.cli.gstat import PROG, show


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]}, short_help="show the queue")
@click.option("-a", "--all", "show_all", is_flag=True, help="Include finished jobs.")
@click.option("-u", "--user", metavar="USER", help="Only the jobs of USER (USER,USER...: of any of them).")
@click.option("-n", "--name", "names", multiple=True, metavar="NAME", help="Only the jobs named NAME.")
@click.option(
    "-s",
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only the jobs in STATE (PENDING, HELD, RUNNING, ... or Slurm's PD, R, ...; a finished state "
    "shows finished jobs without --all).",
)
@click.option(
    "-j",
    "--jobs",
    "job_refs",
    multiple=True,
    metavar="IDS",
    help="Only these jobs (ID, ARRAYID_INDEX, ARRAYID_[LIST]).",
)
@click.option(
    "-o",
    "--format",
    "fmt",
    metavar="FORMAT",
    help="Print the fields FORMAT names, as squeue --format (%i %j %u %T %t %M %l %C %D %R %S %e %V ...; gstat(1)).",
)
@click.option("-S", "--sort", "sort_keys", metavar="KEYS", help="Sort by field letters, as squeue --sort (-t,i).")
@click.option(
    "--start",
    "start_view",
    is_flag=True,
    help="Pending and held jobs with their predicted start, as squeue --start; a splittable job's sub-tasks on "
    "a row per planned start (ID sub-tasks RANGE).",
)
@click.option(
    "-f", "--full", "full_id", metavar="ID", help="Show every field of job ID (ARRAYID_INDEX: an array task)."
)
@click.option("-t", "--tasks", "tasks", is_flag=True, help="One row per array task instead of one per array.")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON (schema in gstat(1)).")
@click.option(
    "-r",
    "--reservations",
    "resv_view",
    is_flag=True,
    help="Show the reservations instead of the jobs (as gresv list), with the predicted activation "
    "time of waiting ones; all of them with --all.",
)
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1),
    is_flag=False,
    flag_value=2.0,
    default=None,
    metavar="[SECONDS]",
    help="Refresh the view every SECONDS (default 2) until Ctrl-C; on a terminal "
    "in place, elsewhere as one snapshot after another.",
)
@click.option("--count", type=click.IntRange(min=1), metavar="N", help="With --watch: stop after N views.")
@click.option(
    "--gantt",
    is_flag=True,
    help="Draw running jobs and the predicted starts of pending ones on a time axis (text chart) instead of the table.",
)
@click.option(
    "--hours",
    type=click.FloatRange(min=0.1, max=168),
    default=4.0,
    show_default=True,
    help="With --gantt: how many hours ahead the chart shows.",
)
@click.option(
    "--tree",
    "tree_view",
    is_flag=True,
    help="Show the jobs as parent-child trees (children under their parent, yielding parents marked).",
)
@click.option(
    "--priority",
    "prio_view",
    is_flag=True,
    help="Show each pending job's priority and its weighted factors (age, job size, fair share, nice), "
    "highest first, as sprio (with --json: the factors from 0 to 1 and the weights).",
)
@spool_options
def cli(**params: Any) -> int:
    """Show the jobs in the queue: pending, held, running and suspended ones,
    with finished ones too with --all.

    For a running job TIME is the time it has run; for a pending job, the time
    until its predicted start when the daemon predicted one; for a held job,
    the time it has run.  REASON says why a pending or held job waits with
    squeue's code (Resources, Priority, Dependency, BeginTime, JobHeldUser, ...:
    see WHY A JOB WAITS; the whole reason: gstat -f ID).
    """
    return show(**params)
