"""gsub's parameter types: the values its options and ``#GS`` directives take, checked as they are read.

Each checks the form of its value only; what depends on the queue, the machine or the configuration is
checked at submission (:mod:`gridsched.submission.submit`).  Imports stay small: gsub runs often.
"""

from __future__ import annotations

from typing import Any

import click

from gridsched.cli.common import SIZE, Command
from gridsched.core.units import UnitError
from gridsched.submission import compat  # its names are loaded as they are used: see its module


class DependType(click.ParamType):
    """A dependency spec, checked for form here and against the queue at submission."""

    name = "SPEC"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        from gridsched.core import depend  # with the core's job records: only when -d is given

        try:
            return depend.normalize(depend.parse(str(value)))
        except depend.DependError as e:
            self.fail(str(e), param, ctx)


class WholeType(click.ParamType):
    """A whole number from ``lo`` to ``hi`` (--nice, --priority)."""

    name = "N"

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        try:
            n = int(str(value).strip())
        except ValueError:
            self.fail(f"must be a whole number, not '{value}'", param, ctx)
        if not self.lo <= n <= self.hi:
            self.fail(f"{n} is not between {self.lo} and {self.hi}", param, ctx)
        return n


class WalltimeType(click.ParamType):
    """A walltime as sbatch reads it: a bare number is minutes (see :func:`.compat.sbatch_time`)."""

    name = "DURATION"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return compat.sbatch_time(str(value))
        except UnitError as e:
            self.fail(str(e), param, ctx)


class MemType(click.ParamType):
    """A memory size (see :data:`.common.SIZE`), or 0: the whole machine."""

    name = "SIZE"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int) or str(value).strip() == "0":
            return int(value)
        return int(SIZE.convert(value, param, ctx))


class BeginType(click.ParamType):
    """A begin time as sbatch reads it; kept as written, read at submission."""

    name = "TIME"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        import time

        try:
            compat.parse_begin(str(value), time.time())
        except ValueError as e:
            self.fail(str(e), param, ctx)
        return str(value).strip()


class SignalType(click.ParamType):
    """sbatch's ``--signal`` value, ``[B:]SIG[@SECONDS]`` (:func:`gridsched.protocol.requests.parse_signal`); checked
    against the walltime once that is known."""

    name = "[B:]SIG[@SECONDS]"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        from gridsched.protocol.requests import parse_signal

        try:
            return parse_signal(str(value)).text()
        except ValueError as e:
            self.fail(str(e), param, ctx)


class MailTypeType(click.ParamType):
    """sbatch's ``--mail-type`` (:func:`gridsched.protocol.requests.parse_mail_type`): the events, NONE for none."""

    name = "EVENT[,EVENT...]"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        from gridsched.protocol.requests import parse_mail_type

        try:
            return parse_mail_type(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


class MailUserType(click.ParamType):
    """``--mail-user``: addresses or user names (:func:`gridsched.protocol.requests.parse_mail_user`)."""

    name = "ADDRESS[,ADDRESS...]"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        from gridsched.protocol.requests import parse_mail_user

        try:
            return parse_mail_user(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


class UserEnvType(click.ParamType):
    """sbatch's ``--get-user-env`` value, ``[TIMEOUT][S|L]`` (:func:`gridsched.protocol.requests.parse_user_env`)."""

    name = "[TIMEOUT][S|L]"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from gridsched.protocol.requests import UserEnv, parse_user_env

        if isinstance(value, UserEnv):
            return value
        try:
            return parse_user_env(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


# click's ``obj`` of the context that reads a script's #GS lines: qsub's words are not read there
DIRECTIVES = "directives"
# click's ``meta`` key of the separator of an array given by qsub's -t or -J on the command line
TASK_SEP = "gsub.task_sep"


class GsubCommand(Command):  # type: ignore[misc]
    """gsub's command: a bare ``--get-user-env`` among the options is ``--get-user-env=`` (its default), so
    that it never takes the script's name as its value."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes: set[str] = set()
        longer: dict[str, str] = {}  # a short option's long name
        for prm in self.params:
            if not isinstance(prm, click.Option):
                continue
            if not prm.is_flag and not prm.count:
                takes.update(prm.opts)
            long = next((o for o in prm.opts if o.startswith("--")), None)
            if long is not None:
                longer.update((o, long) for o in prm.opts if not o.startswith("--"))
        out = list(args) if ctx.obj == DIRECTIVES else self._qsub_args(ctx, list(args), takes)
        i = 0
        while i < len(out):
            tok = out[i]
            if tok == "--" or not tok.startswith("-") or tok == "-":
                break  # the script: what follows is its arguments
            if tok == "--get-user-env":
                out[i] = "--get-user-env="
            elif tok in takes:
                if tok in longer and i + 1 < len(out):
                    out[i] = longer[tok]  # see below; with no value, click's message names the option as typed
                i += 1
            elif tok in longer:
                # click tries every option as a long one first, and a short one fails that try with an error
                # that looks for close matches among all the long names: given by its long name, it is found
                # at once (click's messages name an option by all its names, whichever was typed)
                out[i] = longer[tok]
            i += 1
        return list(super().parse_args(ctx, out))

    def _qsub_args(self, ctx: click.Context, args: list[str], takes: set[str]) -> list[str]:
        """``args`` with qsub's options made gsub's (:func:`.compat.cmdline.qsub_args`), its warnings printed."""
        opts = {o for prm in self.params if isinstance(prm, click.Option) for o in prm.opts + prm.secondary_opts}
        opts.update(ctx.help_option_names)
        if not any(a.startswith("-") and not a.startswith("--") and a not in opts for a in args) and not {
            "-l",
            "-j",
        } & set(args):
            return args  # no word gsub does not know: gsub's own command line
        from gridsched.cli.plain import warn
        from gridsched.submission.compat.cmdline import qsub_args
        from gridsched.submission.compat.rules import CompatError

        try:
            out, warnings, sep = qsub_args(args, lambda w: (1 if w in takes else 0) if w in opts else None)
        except CompatError as e:
            raise click.UsageError(str(e)) from None
        if sep is not None:  # qsub's array: its tasks' default file names as that qsub writes them
            ctx.meta[TASK_SEP] = sep
        for w in warnings:
            warn("gsub", f"warning: {w}")
        return out


class ExportType(click.ParamType):
    """sbatch's ``--export`` value (:func:`.compat.parse_export`); a variable the daemon sets for the job
    cannot be given a value."""

    name = "ALL|NONE|[ALL,]VAR[=VALUE],..."

    def convert(self, value: Any, param: Any, ctx: Any) -> compat.Export:
        if isinstance(value, compat.Export):
            return value
        from gridsched.protocol.requests import env_set_problem

        try:
            ex = compat.parse_export(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)
        for k, _ in ex.values:
            why = env_set_problem(k)
            if why:
                self.fail(why, param, ctx)
        return ex
