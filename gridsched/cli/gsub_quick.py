"""The commonest gsub command lines, read without click: ``gsub [OPTIONS] SCRIPT [ARGS]...`` and ``gsub
[OPTIONS] --wrap COMMAND`` with only the options of :data:`VALUES` and :data:`FLAGS`, each once, as separate
words (``-n 4``, ``--name=x``).

:func:`given_on` reads such a command line into the parameters click would make of it (:class:`Given`,
which :func:`gridsched.cli.gsub.submission` takes as it takes click's context), and returns None for any
other: an unknown or other option, a value that is not plainly good, ``--`` or ``--help``; click then reads
the command line (:mod:`.gsub_cli`) with its own messages.  A script's directives are read with click's
definitions of the options whichever way the command line was read.  Loading click and building gsub's
command of some sixty options is about half of what a submission costs.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

# The parameters of gsub's command (gsub_cli.cli) and their defaults, as click makes them of an empty command
# line (a test checks them against click's).
DEFAULTS: dict[str, Any] = {
    "script": None,
    "args": (),
    "name": None,
    "ncpus": None,
    "ntasks": None,
    "ntasks_per_node": None,
    "cpus_per_task": None,
    "walltime": None,
    "mem": None,
    "mem_per_cpu": None,
    "mem_per_gpu": None,
    "output": None,
    "error": None,
    "join": None,
    "open_mode": None,
    "nice": None,
    "priority": None,
    "exclusive": False,
    "export": None,
    "get_user_env": None,
    "mail_type": None,
    "mail_user": None,
    "chdir": None,
    "hold": False,
    "begin": None,
    "estimate": None,
    "signal": None,
    "shell": None,
    "depend": None,
    "hold_jid": None,
    "array": None,
    "split": None,
    "task_time": None,
    "split_file": None,
    "split_retries": None,
    "wait": False,
    "checkpoint": None,
    "resource": (),
    "reservation": None,
    "wait_resv": False,
    "place": None,
    "threads_per_core": None,
    "hint": None,
    "exclusive_board": False,
    "gpus": None,
    "gpus_per_node": None,
    "gpus_per_task": None,
    "gres": (),
    "gpu_bind": None,
    "exclusive_gpu": None,
    "parent": None,
    "no_parent": False,
    "recoverable": False,
    "wrap": None,
    "as_json": False,
    "parsable": False,
    "partition": None,
    "account": None,
    "pe": None,
    "qos": None,
    "emit": None,
    "spool_dir": None,
    "config_file": None,
}


def _text(value: str) -> Any:
    return value


def _count(value: str) -> Any:
    """-n: a whole number of at least 1 written as plain digits (else click reads it, and says what is wrong)."""
    return int(value) if value.isascii() and value.isdigit() and int(value) >= 1 else None


def _walltime(value: str) -> Any:
    """-t, read as gsub's parameter type reads it (:func:`gridsched.submission.compat.sbatch_time`)."""
    from gridsched.core.units import UnitError
    from gridsched.submission.compat import sbatch_time

    try:
        return sbatch_time(value)
    except UnitError:
        return None


# The options that take a value: each name -> (parameter, its value as click's type makes it, or None).
_NAME = ("name", _text)
_NCPUS = ("ncpus", _count)
_WALLTIME = ("walltime", _walltime)
_OUTPUT = ("output", _text)
_ERROR = ("error", _text)
_CHDIR = ("chdir", _text)
VALUES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "-N": _NAME,
    "-J": _NAME,
    "--name": _NAME,
    "--job-name": _NAME,
    "-n": _NCPUS,
    "--ncpus": _NCPUS,
    "-t": _WALLTIME,
    "--walltime": _WALLTIME,
    "--time": _WALLTIME,
    "-o": _OUTPUT,
    "--output": _OUTPUT,
    "-e": _ERROR,
    "--error": _ERROR,
    "-D": _CHDIR,
    "--chdir": _CHDIR,
    "--wrap": ("wrap", _text),
    "--spool": ("spool_dir", _text),
    "--config": ("config_file", _text),
}
FLAGS = {"--hold": "hold", "--json": "as_json"}


class Source(Enum):
    """Where a parameter's value came from, by the names of click's ``ParameterSource``."""

    COMMANDLINE = 1
    DEFAULT = 2


class Given:
    """A command line read without click: its ``params`` as click's context holds them, and where each came from."""

    def __init__(self, params: dict[str, Any], given: set[str]) -> None:
        self.params = params
        self.given = given

    def get_parameter_source(self, name: str) -> Source:
        return Source.COMMANDLINE if name in self.given else Source.DEFAULT

    @property
    def command(self) -> Any:
        """gsub's click command, loaded now: a script's directives are read with it."""
        from gridsched.cli.gsub_cli import cli

        return cli


def given_on(argv: list[str]) -> Given | None:
    """gsub's parameters from ``argv`` (the words after ``gsub``) if it is one of the command lines read
    without click; else None."""
    params = dict(DEFAULTS)
    given: set[str] = set()
    i = 0
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-") or word == "-":  # the script; what follows is its arguments
            params.update(script=word, args=tuple(argv[i + 1 :]))
            given.update(("script", "args") if i + 1 < len(argv) else ("script",))
            break
        option, eq, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        if option in FLAGS and not eq:
            name, value = FLAGS[option], True
        elif option in VALUES:
            if eq:
                text = attached
            elif i + 1 < len(argv):
                i += 1
                text = argv[i]
            else:
                return None
            if text.startswith("-"):
                return None  # click's way with a value that looks like an option
            name, read = VALUES[option]
            value = read(text)
            if value is None:
                return None
        else:
            return None
        if name in given:
            return None
        params[name] = value
        given.add(name)
        i += 1
    return Given(params, given)
