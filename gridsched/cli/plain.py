"""What the commands share that needs no click: exit codes, one-line errors, the spool and configuration in
force (:func:`setup`), and running a command without click (:func:`run`).

The commonest calls of the commands (``gstat`` alone) take a way that loads no click at all; these are
the pieces they need.  :mod:`gridsched.cli.common` holds the rest and imports these from here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, TypeVar

if TYPE_CHECKING:
    from gridsched.protocol.config import Config, PlainSettings, Settings
    from gridsched.protocol.spool import Spool


class ExitCode(IntEnum):
    """Exit status of the commands (documented in their man pages)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_RUNNING = 3
    INTERRUPTED = 130


# What each exit status means, as the man pages print it.
EXIT_DOC = {
    ExitCode.OK: "Success.",
    ExitCode.ERROR: (
        "The request was refused or failed: a script that cannot be read, a request larger than the "
        "machine, an unknown job, a job in the wrong state, a bad configuration file."
    ),
    ExitCode.USAGE: "Bad command line or directive: an unknown option, a missing or invalid value.",
    ExitCode.NOT_RUNNING: "No daemon runs on the spool (gschedd status and gschedd stop; as LSB init scripts).",
    ExitCode.INTERRUPTED: "Interrupted (SIGINT).",
}


def one_line(msg: str) -> str:
    """``msg`` on one line, without a closing full stop."""
    text = " ".join(str(msg).split())
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text


def echo(text: str, err: bool = False) -> None:
    """Print ``text`` and a newline on standard output (``err``: standard error): through click.echo once a
    command runs through click (whose streams its test runner swaps), else on the streams themselves, as
    click.echo writes a plain string."""
    if "click" in sys.modules:
        import click

        click.echo(text, err=err)
        return
    stream = sys.stderr if err else sys.stdout
    if stream is not None:
        stream.write(text + "\n")
        stream.flush()


def fail(prog: str, msg: str, code: int = ExitCode.ERROR) -> NoReturn:
    """Print ``PROG: error: MSG`` (one line) on standard error and exit with ``code``."""
    echo(f"{prog}: error: {one_line(msg)}", err=True)
    raise SystemExit(int(code))


def warn(prog: str, msg: str) -> None:
    echo(f"{prog}: {one_line(msg)}", err=True)


def run(prog: str, command: Callable[[], Any]) -> NoReturn:
    """Run ``command`` as a command's whole process, without click (the commonest calls take this way):
    its return value is the exit status, and an interruption or a reader that went away end it as
    :class:`gridsched.cli.common.Command` ends a command run through click."""
    try:
        rv = command()
    except KeyboardInterrupt:
        echo(f"{prog}: interrupted", err=True)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # the reader went away (gstat | head): not an error of ours
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(ExitCode.OK) from None
    raise SystemExit(int(rv) if isinstance(rv, int) else ExitCode.OK)


class Setup(NamedTuple):  # a named tuple: a dataclass costs every command a compile at start-up
    spool: Spool
    cfg: Config
    config_file: str | None  # the --config option as given, passed on to a daemon we start


class PlainSetup:
    """What :func:`plain_setup` gives: :class:`Setup`'s, with the configuration as
    :class:`gridsched.protocol.config.PlainSettings`."""

    __slots__ = ("spool", "cfg", "config_file")

    def __init__(self, spool: Spool, cfg: PlainSettings, config_file: str | None) -> None:
        self.spool, self.cfg, self.config_file = spool, cfg, config_file


def setup(prog: str, spool_dir: str | None, config_file: str | None) -> Setup:
    """The spool and the configuration in force.

    Spool: ``--spool``, else ``$GRIDSCHED_SPOOL``, else the config's
    ``daemon.spool``, else :func:`gridsched.protocol.spool.default_root`.  Config:
    ``--config``, else the lookup of :func:`gridsched.protocol.config.find` (which
    includes the spool's own ``gridsched.toml``).
    """
    from gridsched.protocol.config import load

    spool, cfg = _in_force(prog, spool_dir, config_file, load)
    return Setup(spool, cfg, config_file)


def plain_setup(prog: str, spool_dir: str | None, config_file: str | None) -> PlainSetup:
    """What :func:`setup` gives, the configuration read as :class:`gridsched.protocol.config.PlainSettings`
    (checked alike, refused alike; without loading :mod:`dataclasses`)."""
    from gridsched.protocol.config import load_settings

    spool, cfg = _in_force(prog, spool_dir, config_file, load_settings)
    return PlainSetup(spool, cfg, config_file)


C = TypeVar("C", bound="Settings")


def _in_force(
    prog: str, spool_dir: str | None, config_file: str | None, load: Callable[[str | None, str | None], C]
) -> tuple[Spool, C]:
    """The spool and the configuration in force (see :func:`setup`), read with ``load``."""
    # imported here: a command's --help and its usage errors need neither the configuration nor the spool
    from pathlib import Path

    from gridsched.protocol.config import ConfigError
    from gridsched.protocol.spool import Spool, default_root

    root = spool_dir or os.environ.get("GRIDSCHED_SPOOL") or None
    try:
        if root:
            cfg = load(config_file, root)
        else:
            cfg = load(config_file, None)
            root = os.path.expanduser(cfg.spool) if cfg.spool else str(default_root())
            if not config_file and not os.environ.get("GRIDSCHED_CONFIG"):
                if (Path(root) / "gridsched.toml").is_file():
                    cfg = load(None, root)
    except ConfigError as e:
        fail(prog, f"config {e}")
    return Spool(root), cfg
