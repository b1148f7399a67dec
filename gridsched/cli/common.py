"""Plumbing shared by the commands: spool and config selection, errors, exit codes.

Every command prints an error as exactly one line, ``PROG: error: MESSAGE``, on
standard error, including the errors click itself finds (unknown option, bad
value), and exits with one of the :class:`ExitCode` values.

This module is on the path of every command run through click: it imports only
click and the standard library (and the small gridsched modules the commands need
anyway).  What needs no click (exit codes, errors, :func:`setup`) is
:mod:`gridsched.cli.plain`'s, importable from here too; the configuration and the
spool modules are loaded by :func:`setup`, so that ``--help`` and a usage error
need neither.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from gridsched.cli.plain import (  # noqa: F401 - importable from here, as before
    EXIT_DOC,
    ExitCode,
    Setup,
    echo,
    fail,
    one_line,
    run,
    setup,
    warn,
)
from gridsched.core.units import UnitError, parse_duration, parse_size


def _lower_first(msg: str) -> str:
    if len(msg) > 1 and msg[0].isupper() and msg[1].islower():
        return msg[0].lower() + msg[1:]
    return msg


def usage_message(e: click.UsageError) -> str:
    """One readable line for an error click found in a command line."""
    if isinstance(e, click.NoSuchOption):
        msg = f"unknown option {e.option_name}"
        if e.possibilities:
            msg += f" (did you mean {' or '.join(e.possibilities)}?)"
        return msg
    if isinstance(e, click.MissingParameter):
        return one_line(_lower_first(e.format_message()))
    if isinstance(e, click.BadParameter) and e.param is not None and e.param.name:
        name = e.param.name.replace("_", "-")
        msg = one_line(e.message)
        return f"{name} {msg}" if msg.startswith("'") else f"{name}: {_lower_first(msg)}"
    return one_line(_lower_first(e.format_message()))


class _OneLineErrors:
    """Mixin for click commands: errors as one line, exit codes from :class:`ExitCode`."""

    name: str | None

    def main(self, args: Any = None, prog_name: str | None = None, **extra: Any) -> NoReturn:
        prog = prog_name or self.name or "gridsched"
        extra.pop("standalone_mode", None)
        try:
            rv = super().main(args=args, prog_name=prog, standalone_mode=False, **extra)  # type: ignore[misc]
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.ctx.get_help(), err=True)  # a group called without a command: its help
            raise SystemExit(ExitCode.USAGE) from None
        except click.UsageError as e:
            fail(prog, usage_message(e), ExitCode.USAGE)
        except click.ClickException as e:
            fail(prog, e.format_message(), e.exit_code)
        except click.Abort:
            click.echo(f"{prog}: interrupted", err=True)
            raise SystemExit(ExitCode.INTERRUPTED) from None
        except BrokenPipeError:
            # the reader went away (gstat | head): not an error of ours
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(ExitCode.OK) from None
        raise SystemExit(int(rv) if isinstance(rv, int) else ExitCode.OK)


class Command(_OneLineErrors, click.Command):  # type: ignore[misc]  # main() never returns: it exits
    pass


class Group(_OneLineErrors, click.Group):  # type: ignore[misc]  # main() never returns: it exits
    pass


# -- value types: every error message starts with the quoted value -------------


class DurationType(click.ParamType):
    name = "DURATION"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration(str(value))
        except UnitError as e:
            self.fail(str(e), param, ctx)


class SizeType(click.ParamType):
    name = "SIZE"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except UnitError as e:
            self.fail(str(e), param, ctx)


class CountType(click.ParamType):
    """A whole number of at least 1."""

    name = "N"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        try:
            n = int(text)
        except ValueError:
            self.fail(f"'{value}': not a whole number", param, ctx)
        if n < 1:
            self.fail(f"'{value}': must be at least 1", param, ctx)
        return n


class ChoiceType(click.ParamType):
    name = "CHOICE"

    def __init__(self, choices: tuple[str, ...], metavar: str) -> None:
        self.choices = choices
        self.name = metavar

    def get_metavar(self, param: Any, ctx: Any = None) -> str:
        return "[" + "|".join(self.choices) + "]"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        v = str(value).strip().lower()
        if v not in self.choices:
            self.fail(f"'{value}': must be one of {', '.join(self.choices)}", param, ctx)
        return v


DURATION = DurationType()
SIZE = SizeType()
COUNT = CountType()
PLACES = ("pack", "spread", "board")


def place_options(what: str) -> Callable[[F], F]:
    """--place, --threads-per-core and --exclusive-board, for ``what`` ("job" for gsub, "reservation"
    for gresv create): one definition, so both take and check them alike."""
    opts = [
        click.option(
            "--place",
            type=ChoiceType(PLACES, "HOW"),
            help=f"How the {what}'s cores lie on the machine's boards (sockets or NUMA nodes): pack (fewest "
            "boards, the default), spread (round-robin over boards), board (all on one board).",
        ),
        click.option(
            "--threads-per-core",
            type=click.IntRange(1, 2),
            metavar="T",
            help="Use at most T hardware threads of each physical core (1: SMT siblings stay idle).",
        ),
        click.option(
            "--exclusive-board",
            is_flag=True,
            help=f"Take whole boards: nothing but the {what} runs on its boards.",
        ),
    ]

    def deco(f: F) -> F:
        for opt in reversed(opts):
            f = opt(f)
        return f

    return deco


# -- spool and config ----------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])


def spool_options(f: F) -> F:
    """The ``--spool`` and ``--config`` options every command takes."""
    f = click.option(
        "--config",
        "config_file",
        metavar="FILE",
        help="Configuration file (default: $GRIDSCHED_CONFIG, SPOOL/gridsched.toml, "
        "/etc/gridsched/gridsched.toml, the packaged defaults).",
    )(f)
    f = click.option(
        "--spool",
        "spool_dir",
        metavar="DIR",
        help="Spool directory (default: $GRIDSCHED_SPOOL, the config's daemon.spool, ~/.local/state/gridsched).",
    )(f)
    return f
