"""A job script's directives, read without click: gsub's reading of them, and the job options they set for the
Python API (:mod:`gridsched.api.client`).

:func:`read` gives a script's directives as option words: its ``#GS`` lines, or in a script without any its
``#SBATCH``, ``#PBS`` or ``#$`` lines translated (:mod:`.compat`).  gsub reads those words with its click
options (:func:`gridsched.cli.gsub.apply_directives`).  :func:`job_values` reads them as click reads gsub's
options (:data:`OPTIONS`, checked against gsub's command by a test) and checks each value as gsub's option
type does, with the same functions, refusing what gsub refuses in its words; it gives the values of the
options the API takes from a script.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, NamedTuple

from gridsched.submission.errors import USAGE, SubmitError

if TYPE_CHECKING:
    from gridsched.submission.submit import Script

PREFIX = "#GS"
# gsub's options: each name -> (its parameter, whether it takes a value); the order of gsub's options.
_TABLE = (
    ("name", "-N -J --name --job-name", True),
    ("ncpus", "-n --ncpus", True),
    ("ntasks", "--ntasks", True),
    ("ntasks_per_node", "--ntasks-per-node", True),
    ("cpus_per_task", "-c --cpus-per-task", True),
    ("walltime", "-t --walltime --time", True),
    ("mem", "--mem", True),
    ("mem_per_cpu", "--mem-per-cpu", True),
    ("mem_per_gpu", "--mem-per-gpu", True),
    ("output", "-o --output", True),
    ("error", "-e --error", True),
    ("join", "-j --join", True),
    ("open_mode", "--open-mode", True),
    ("nice", "--nice", True),
    ("priority", "--priority", True),
    ("exclusive", "--exclusive", False),
    ("export", "--export", True),
    ("get_user_env", "--get-user-env", True),
    ("mail_type", "--mail-type", True),
    ("mail_user", "--mail-user", True),
    ("chdir", "-D --chdir", True),
    ("hold", "--hold", False),
    ("begin", "--begin", True),
    ("estimate", "--estimate", True),
    ("signal", "--signal", True),
    ("shell", "--shell", True),
    ("depend", "-d --depend --dependency", True),
    ("hold_jid", "--hold-jid", True),
    ("array", "-a --array", True),
    ("split", "--split", True),
    ("task_time", "--task-time", True),
    ("split_file", "--split-file", True),
    ("split_retries", "--split-retries", True),
    ("wait", "--wait", False),
    ("checkpoint", "--checkpoint", True),
    ("resource", "-l --resource", True),
    ("reservation", "--reservation", True),
    ("wait_resv", "--wait-resv", False),
    ("place", "--place", True),
    ("threads_per_core", "--threads-per-core", True),
    ("hint", "--hint", True),
    ("exclusive_board", "--exclusive-board", False),
    ("gpus", "--gpus", True),
    ("gpus_per_node", "--gpus-per-node", True),
    ("gpus_per_task", "--gpus-per-task", True),
    ("gres", "--gres", True),
    ("gpu_bind", "--gpu-bind", True),
    ("exclusive_gpu", "--exclusive-gpu", False),
    ("parent", "--parent", True),
    ("no_parent", "--no-parent", False),
    ("recoverable", "--recoverable --suspend-subtree-on-failure", False),
    ("wrap", "--wrap", True),
    ("as_json", "--json", False),
    ("parsable", "--parsable", False),
    ("partition", "-p --partition", True),
    ("account", "-A --account", True),
    ("qos", "-q --qos", True),
    ("pe", "--pe", True),
    ("emit", "--emit", True),
    ("spool_dir", "--spool", True),
    ("config_file", "--config", True),
)
OPTIONS: dict[str, tuple[str, bool]] = {o: (name, takes) for name, opts, takes in _TABLE for o in opts.split()}
MULTIPLE = frozenset({"resource", "gres"})  # options that may be given more than once, each value kept
# What a directive may not set: it chooses what the script is or where it goes (gsub's NOT_IN_DIRECTIVES).
NOT_IN_DIRECTIVES = {
    "wrap": "--wrap",
    "emit": "--emit",
    "spool_dir": "--spool",
    "config_file": "--config",
}
CHECKPOINT_CHOICES = ("none", "signal", "suspend", "requeue", "criu")


class Directives(NamedTuple):
    """A script's directives: ``(where, option words)`` for each line (``where`` names the script, the line
    and, for a translated line, the directive as written), whose they are (``dialect``: "slurm", "pbs",
    "sge"; None for ``#GS`` lines or none), what separates a job id from an array task's index in default
    file names (``task_sep``: :attr:`.compat.Translation.task_sep`), and the lines of another scheduler
    that are ignored (``warnings``)."""

    lines: list[tuple[str, list[str]]]
    dialect: str | None
    task_sep: str
    warnings: list[str]


def read(script: Script) -> Directives:
    """The directives at the top of ``script`` (as Slurm scans for ``#SBATCH``: after the shebang, blank
    lines and comments, up to the first other line); :class:`SubmitError` (a usage error) for a line that
    cannot be split into words or a directive of another scheduler that cannot be translated."""
    from gridsched.submission import compat

    gs = compat.scan(script.text, PREFIX)
    if gs or not compat.has_foreign(script.text):
        out = []
        for lineno, text in gs:
            where = f"{script.label}:{lineno}"
            try:
                out.append((where, shlex.split(text, comments=True)))
            except ValueError as e:
                raise SubmitError(f"{where}: {str(e).lower()}", USAGE) from None
        return Directives(out, None, "_", [])
    try:
        tr = compat.translate(script.text, script.label)
    except compat.CompatError as e:
        raise SubmitError(str(e), USAGE) from None
    lines = [(f"{script.label}:{lineno}: {tr.lines.get(lineno, '')}", toks) for lineno, toks in tr.settings]
    return Directives(lines, tr.dialect, tr.task_sep, list(tr.warnings))


def _refused(where: str, what: str) -> SubmitError:
    return SubmitError(f"{where}: {what}", USAGE)


def _unknown(where: str, option: str, long: bool) -> SubmitError:
    """An option gsub does not have, as gsub says it (with the close long names of one given long)."""
    msg = f"unknown option {option}"
    if long:
        import difflib

        near = difflib.get_close_matches(option, [o for o in OPTIONS if o.startswith("--")])
        if near:
            msg += f" (did you mean {' or '.join(near)}?)"
    return _refused(where, msg)


def _words(where: str, words: list[str]) -> tuple[dict[str, Any], str | None]:
    """The options among ``words``, read as click reads gsub's options: each parameter -> the text of its
    value (a later one wins; a tuple of them for :data:`MULTIPLE` ones), True for a flag, in the order they
    are given; and the first word that is not an option, if any (an argument: refused)."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--" or not word.startswith("-") or word == "-":
            if word != "--":
                return out, word
            return out, words[i] if i < len(words) else None
        option, eq, attached = word.partition("=")
        if option in OPTIONS and (option.startswith("--") or not eq):
            value: str | None = attached if eq else None
        elif word.startswith("--"):
            raise _unknown(where, option, True)
        else:  # a short option, its value attached or not (-n2)
            option, value = word[:2], word[2:] or None
            if option not in OPTIONS:
                raise _unknown(where, option, False)
        name, takes = OPTIONS[option]
        if option == "--get-user-env" and value is None:
            value = ""  # bare: its default, never the next word (gsub's command reads it so)
        if not takes:
            if value is not None:
                raise _refused(where, f"option '{option}' does not take a value")
        elif value is None:
            if i >= len(words):
                raise _refused(where, f"option '{option}' requires an argument")
            value = words[i]
            i += 1
        if name in MULTIPLE:
            out[name] = (*out.get(name, ()), value)
        else:
            out[name] = True if value is None else value
    return out, None


def _bad(name: str, msg: str) -> SubmitError:
    """A bad value, as gsub words it: the parameter, then what is wrong."""
    name = name.replace("_", "-")
    msg = " ".join(msg.split())
    if not msg.startswith("'") and len(msg) > 1 and msg[0].isupper() and msg[1].islower():
        msg = msg[0].lower() + msg[1:]
    return SubmitError(f"{name} {msg}" if msg.startswith("'") else f"{name}: {msg}", USAGE)


def _count(name: str, text: str) -> int:
    """A whole number of at least 1 (gsub's COUNT)."""
    try:
        n = int(text.strip())
    except ValueError:
        raise _bad(name, f"'{text}': not a whole number") from None
    if n < 1:
        raise _bad(name, f"'{text}': must be at least 1")
    return n


def _whole(name: str, text: str, lo: int, hi: int) -> int:
    """A whole number from ``lo`` to ``hi`` (gsub's --nice, --priority)."""
    try:
        n = int(text.strip())
    except ValueError:
        raise _bad(name, f"must be a whole number, not '{text}'") from None
    if not lo <= n <= hi:
        raise _bad(name, f"{n} is not between {lo} and {hi}")
    return n


def _integer(name: str, text: str, bounds: tuple[int, int] | None = None) -> int:
    """An integer, in ``bounds`` (inclusive) if given (as click's INT and IntRange say it)."""
    try:
        n = int(text)
    except ValueError:
        raise _bad(name, f"{text!r} is not a valid {'integer' if bounds is None else 'integer range'}") from None
    if bounds is not None and not bounds[0] <= n <= bounds[1]:
        raise _bad(name, f"{n} is not in the range {bounds[0]}<=x<={bounds[1]}")
    return n


def _choice(name: str, text: str) -> str:
    """One of gsub's choices (:data:`CHOICES`: lower or upper case), or of --gpu-bind's (exactly)."""
    if name == "gpu_bind":
        from gridsched.submission.devopts import BIND_CHOICES

        if text not in BIND_CHOICES:
            raise _bad(name, f"{text!r} is not one of {', '.join(map(repr, BIND_CHOICES))}")
        return text
    v = text.strip().lower()
    if v not in CHOICES[name]:
        raise _bad(name, f"'{text}': must be one of {', '.join(CHOICES[name])}")
    return v


def _export(text: str) -> Any:
    from gridsched.protocol.requests import env_set_problem
    from gridsched.submission.compat import parse_export

    ex = parse_export(text)
    for k, _ in ex.values:
        why = env_set_problem(k)
        if why:
            raise ValueError(why)
    return ex


def _begin(text: str) -> str:
    import time

    from gridsched.submission.compat import parse_begin

    parse_begin(text, time.time())
    return text.strip()


def _by_function(name: str, text: str) -> Any:
    """The value of an option whose check is a function of the submission or protocol packages; ValueError
    (UnitError is one) with its words for a bad one."""
    from gridsched.core.units import parse_duration, parse_size
    from gridsched.protocol import requests as rq
    from gridsched.submission.compat import sbatch_time

    if name in ("walltime", "estimate"):
        return sbatch_time(text)
    if name == "task_time":
        return parse_duration(text)
    if name in ("mem", "mem_per_cpu", "mem_per_gpu"):
        return 0 if name == "mem" and text.strip() == "0" else parse_size(text)
    if name == "export":
        return _export(text)
    if name == "get_user_env":
        return rq.parse_user_env(text)
    if name == "mail_type":
        return rq.parse_mail_type(text)
    if name == "mail_user":
        return rq.parse_mail_user(text)
    if name == "begin":
        return _begin(text)
    if name == "signal":
        return rq.parse_signal(text).text()
    from gridsched.core import depend

    try:
        return depend.normalize(depend.parse(text))
    except depend.DependError as e:
        raise ValueError(str(e)) from None


def _value(name: str, text: str) -> Any:
    """The value of gsub's option ``name`` as its option type makes it of ``text``; :class:`SubmitError` with
    its words for a bad one.  An option whose value is text is taken as it is."""
    from gridsched.core.params import ADMIN_MAX, NICE_MAX, NICE_MIN

    if name in ("ncpus", "ntasks", "ntasks_per_node", "cpus_per_task", "split", "parent"):
        return _count(name, text)
    if name in CHOICES or name == "gpu_bind":
        return _choice(name, text)
    if name in ("nice", "priority"):
        return _whole(name, text, *((NICE_MIN, NICE_MAX) if name == "nice" else (0, ADMIN_MAX)))
    if name in INTEGERS:
        return _integer(name, text, INTEGERS[name])
    if name in CHECKED:
        try:
            return _by_function(name, text)
        except ValueError as e:
            raise _bad(name, str(e)) from None
    return text


CHOICES = {
    "join": ("oe", "eo", "n"),
    "open_mode": ("append", "truncate"),
    "checkpoint": CHECKPOINT_CHOICES,
    "place": ("pack", "spread", "board"),
    "emit": ("slurm", "pbs"),
    "hint": ("nomultithread", "multithread", "compute_bound", "memory_bound"),  # protocol.jobs.Hint's values
}
INTEGERS: dict[str, tuple[int, int] | None] = {
    "threads_per_core": (1, 2),
    "split_retries": (0, 100),
    "gpus_per_task": None,
}
# The options whose values a function checks (_by_function).
CHECKED = frozenset(
    ("walltime", "estimate", "task_time", "mem", "mem_per_cpu", "mem_per_gpu", "export", "get_user_env", "mail_type")
    + ("mail_user", "begin", "signal", "depend")
)


# The job options the Python API takes from a script's directives.
TAKEN = frozenset(
    ("name", "ncpus", "walltime", "mem", "mem_per_cpu", "output", "error", "chdir", "hold", "checkpoint")
    + ("depend", "shell")
)


def _converted(name: str, value: Any) -> Any:
    """``value`` of :func:`_words` as gsub's option type makes it: each text of a repeated option, a flag
    (True) as it is."""
    if isinstance(value, tuple):
        return tuple(_value(name, v) for v in value)
    return _value(name, value) if isinstance(value, str) else value


def job_values(directives: Directives) -> dict[str, Any]:
    """The values the directives give the job options the Python API takes from a script (:data:`TAKEN`), a
    later line winning.  Every option is read and its value checked as gsub's command does it;
    :class:`SubmitError` with gsub's words, after the line (``where``), for an option gsub does not have,
    one without its value or with a bad one, an argument, or an option a directive may not give."""
    out: dict[str, Any] = {}
    for where, words in directives.lines:
        line, argument = _words(where, words)
        try:
            values = {name: _converted(name, v) for name, v in line.items()}
        except SubmitError as e:
            raise _refused(where, str(e)) from None
        if argument is not None:
            raise _refused(where, f"an argument ({argument!r}): directives take options only")
        for name in NOT_IN_DIRECTIVES:
            if name in line:
                raise _refused(where, f"{NOT_IN_DIRECTIVES[name]} cannot be given in a directive")
        out.update((name, v) for name, v in values.items() if name in TAKEN)
    return out
