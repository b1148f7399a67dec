"""gsub's command line: its click command, whose options make the submission of
:func:`gridsched.cli.gsub.submission`.

Apart from :mod:`gridsched.cli.gsub`, so that the commonest command lines (:mod:`.gsub_quick`) are read
without loading click; this command reads every other one, the directives of a script and --help.
"""

from __future__ import annotations

from typing import Any

import click

from gridsched.cli.gsub import PROG, submission
from gridsched.cli.gsub_options import gsub_options
from gridsched.cli.gsub_types import GsubCommand


@click.command(
    PROG,
    cls=GsubCommand,
    context_settings={"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]},
    short_help="submit a job script",
)
@gsub_options
def cli(**_: Any) -> int:
    """Submit a job script to the queue and print its job id.

    The script is SCRIPT, the command given with --wrap, or standard input
    (no SCRIPT, or SCRIPT is -).  ARGS are passed to the script.  Options may
    also be given in #GS lines at the top of the script; options on the
    command line win.  A script without #GS lines may carry #SBATCH or #PBS
    ones instead (see SLURM AND PBS DIRECTIVES).
    """
    return submission(click.get_current_context())
