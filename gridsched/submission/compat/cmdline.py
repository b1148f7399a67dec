"""qsub's options on gsub's command line: :func:`qsub_args` finds the words only a qsub (PBS's or Grid Engine's)
takes and rewrites them, before click reads the command line, into gsub's options by the rules of the ``#PBS``
and ``#$`` lines (:mod:`.reader`), so that ``gsub -cwd -pe smp 4 -l h_rt=1:00:00 -terse job.sh`` means what
``qsub`` makes of it.

The rule (docs/compat.md, "qsub's options on the command line"): a command line is qsub's when one of its
options before the script is a word gsub does not know and a qsub does (``-cwd``, ``-pe``, ``-V``, ``-W``,
...), an ``-l`` names a qsub resource (``walltime=``, ``select=``, ``h_rt=``, ...) or ``-j`` is ``y`` or ``n``.
Then each single-dash option is qsub's (``-t`` an array, ``-N`` the name, ``-h`` a hold) but for the gsub
options no qsub has (``-n``, ``-c``, ``-D``, ...); ``--`` options stay gsub's.  Grid Engine's words make it
Grid Engine's qsub, PBS's words PBS's, words of both PBS's; a command line with words of each is refused.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable

from gridsched.submission.compat.rules import PBS, PBS_RESOURCES, SGE, SGE_RESOURCES, CompatError, Rule

LABEL = "command line"


def _arity(rules: tuple[Rule, ...]) -> dict[str, int]:
    return {f: (2 if r.key == "pe" else 1 if r.value else 0) for r in rules for f in r.flags}


# Torque's -n (a node alone) is left out: on gsub's command line -n is the job's cores.
_SGE, _PBS = _arity(SGE), {f: n for f, n in _arity(PBS).items() if f != "-n"}
_SGE_RES = {f for r in SGE_RESOURCES for f in r.flags}
_PBS_RES = {f for r in PBS_RESOURCES for f in r.flags}


def _resource_dialect(value: str) -> str | None:
    """Whose ``-l`` this is: "sge" or "pbs" when it names a resource of that qsub, else None (gsub's -l)."""
    names = {item.partition("=")[0].strip() for item in value.split(",")}
    return "sge" if names & _SGE_RES else "pbs" if names & _PBS_RES else None


def qsub_args(args: list[str], gsub_arity: Callable[[str], int | None]) -> tuple[list[str], list[str], str | None]:
    """``args`` (gsub's command line) with qsub's options made gsub's, the warnings to print, and what separates
    the job id from an array task's index in default file names when qsub's -t or -J gave an array (else None;
    :attr:`.reader.Translation.task_sep`); ``args`` itself when it is not a qsub command line.  ``gsub_arity``:
    how many values gsub's option takes (None: not an option of gsub).  Raises :class:`CompatError` with the
    line to print."""
    words, end, dialects = _options_part(args, gsub_arity)
    if not dialects:
        return args, [], None
    if len(dialects) > 1:
        sge = next(w for w, d in dialects if d == "sge")
        pbs = next(w for w, d in dialects if d == "pbs")
        raise CompatError(
            f"{LABEL}: {sge} is Grid Engine's qsub and {pbs} PBS's: give the options of one of them "
            "(or gsub's own long options)"
        )
    dialect = dialects[0][1]
    table = _SGE if dialect == "sge" else _PBS
    qsub: list[str] = []
    own: list[str] = []
    binary = False
    i = 0
    while i < len(words):
        w = words[i]
        n = table.get(w)
        if w == "-l" and i + 1 < len(words) and _resource_dialect(words[i + 1]) is None:
            n = None  # no qsub resource named: gsub's own -l (floating resources, such as matlab=1)
        if w == "-b" and dialect == "sge" and i + 1 < len(words) and words[i + 1].lower() in ("y", "yes"):
            binary = True  # Grid Engine's -b y: the command is a program, not a script
            i += 2
            continue
        if n is None:  # gsub's own option, with its value
            if not w.startswith("--") and gsub_arity(w) is None:
                what = "Grid Engine's" if dialect == "sge" else "PBS's"
                raise CompatError(f"{LABEL}: {w}: not an option of {what} qsub that gsub knows, nor of gsub")
            k = 0 if w.startswith("--") and "=" in w else gsub_arity(w) or 0
            own += words[i : i + 1 + k]
            i += 1 + k
            continue
        qsub += words[i : i + 1 + n]
        i += 1 + n
    translated, warnings, sep = _translated(qsub, dialect)
    rest = args[end:]
    if binary:  # the command and its arguments run as --wrap runs them; the job is named after the command
        if not rest or rest[0] == "--":
            raise CompatError(f"{LABEL}: -b y needs a command to run")
        rest = ["--wrap", shlex.join(rest)]
        translated = ["-N", os.path.basename(args[end]), *translated]
    return [*translated, *own, *rest], warnings, sep


def _translated(words: list[str], dialect: str) -> tuple[list[str], list[str], str | None]:
    """gsub's options for qsub's ``words``, the warnings of what they ask that means nothing here, and the
    array's separator in file names (None: no array, or gsub's own)."""
    from gridsched.submission.compat.reader import translate_words

    try:
        found = translate_words(words, dialect, LABEL)
    except CompatError as e:
        raise CompatError(_plain(str(e))) from None
    out: list[str] = []
    for lineno, tokens in found.settings:
        if lineno == 0:
            continue  # Grid Engine's home directory without -cwd: the script's directives decide it here
        out += tokens
    if dialect == "sge" and "-cwd" in words and "-wd" not in words:  # over a #$ script's home directory
        out += ["-D", os.getcwd()]
    return out, [_plain(w) for w in found.warnings], None if found.task_sep == "_" else found.task_sep


def _plain(message: str) -> str:
    """A message of the directive reader, for the command line: no line number, no ``#$`` or ``#PBS``."""
    return message.replace(f"{LABEL}:1: ", f"{LABEL}: ").replace("#$ ", "").replace("#PBS ", "")


def _options_part(
    args: list[str], gsub_arity: Callable[[str], int | None]
) -> tuple[list[str], int, list[tuple[str, str]]]:
    """The options before the script, where the script starts, and each word that makes it a qsub command
    line with whose qsub it is (("-cwd", "sge"), ...)."""
    dialects: dict[str, str] = {}
    i = 0
    while i < len(args):
        w = args[i]
        if w == "--" or not w.startswith("-") or w == "-":
            break
        if w.startswith("--"):
            n = 0 if "=" in w else gsub_arity(w) or 0
        else:
            mine = gsub_arity(w)
            theirs = [d for d, t in (("sge", _SGE), ("pbs", _PBS)) if w in t]
            value = args[i + 1] if i + 1 < len(args) else ""
            if mine is None and theirs:
                n = (_SGE if "sge" in theirs else _PBS)[w]
                if len(theirs) == 1:
                    dialects.setdefault(theirs[0], w)
                else:
                    dialects.setdefault("either", w)
            else:
                n = mine or 0
                if w == "-l" and _resource_dialect(value):
                    dialects.setdefault(str(_resource_dialect(value)), f"-l {value}")
                elif w == "-j" and value.lower() in ("y", "yes", "no"):
                    dialects.setdefault("sge", f"-j {value}")
        i += 1 + n
    end = min(i, len(args))
    found = [(w, d) for d, w in dialects.items() if d != "either"]
    if not found and "either" in dialects:
        found = [(dialects["either"], "pbs")]
    return args[:end], end, found
