"""Slurm, PBS and SGE directives: reading ``#SBATCH`` / ``#PBS`` / ``#$`` lines, writing ``#SBATCH`` / ``#PBS``.

A script without ``#GS`` directives may carry ``#SBATCH``, ``#PBS`` or
``#$`` (Grid Engine) ones; they are found by the same header rule as ``#GS``
(:func:`scan`) and translated into gsub options (:func:`translate`), read as
each system reads them: a bare Slurm time is minutes, a bare PBS walltime
seconds, SGE memory is per slot.  What has no meaning on one machine is not
dropped silently: it becomes a warning that names the line.  The tables
:data:`SLURM`, :data:`PBS`, :data:`PBS_RESOURCES`, :data:`SGE` and
:data:`SGE_RESOURCES` drive the translation and the section "SLURM AND PBS
DIRECTIVES" of gsub(1).

The translation also says which system's script it is (``dialect``): that
chooses what the job runs under when the script has no ``#!`` on its first
line (:func:`gridsched.submission.submit.choose_shell`) and, for Slurm, the default output
file ``slurm-%j.out`` with standard error joined to it.

:func:`emit_slurm` and :func:`emit_pbs` go the other way: a script with
``#SBATCH`` or ``#PBS`` lines equivalent to the gsub options.

Standard library only: gsub imports this on every submission.
"""

from __future__ import annotations

import math
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from gridsched.core.units import UnitError, format_duration, parse_duration, parse_size


class CompatError(Exception):
    """A directive whose value cannot be translated; the message names the line."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One directive: its flags, what it sets (``key``), and what gsub does with it."""

    flags: tuple[str, ...]
    key: str  # what it sets; "ignore" for directives that have no meaning here, "quiet" for harmless ones
    meaning: str
    gs: str  # the gridsched equivalent, for the manual
    value: bool = True  # takes a value
    why: str = ""  # for "ignore": why, in the warning
    optional: bool = False  # the value is optional: only --flag=VALUE gives one


_MAIL_GS = "--mail-type (sent where [mail] sendmail is configured)"

SLURM: tuple[Rule, ...] = (
    Rule(("-J", "--job-name"), "name", "job name", "-N NAME"),
    Rule(("-n", "--ntasks"), "ntasks", "number of tasks", "-n NTASKS*CPUS_PER_TASK"),
    Rule(
        ("--ntasks-per-node", "--tasks-per-node"),
        "per_node",
        "tasks on each node",
        "-n NODES*TASKS_PER_NODE*CPUS_PER_TASK",
    ),
    Rule(("-c", "--cpus-per-task"), "cpus", "cores per task", "-n NTASKS*CPUS_PER_TASK"),
    Rule(("-N", "--nodes"), "nodes", "number of nodes", "(more than 1: warned, and the cores of all nodes asked here)"),
    Rule(
        ("-t", "--time"),
        "time",
        "time limit (a bare number is minutes; seconds rounded up to a minute; UNLIMITED is warned)",
        "-t",
    ),
    Rule(("--time-min",), "ignore", "minimum time limit", "(warned)", why="-t is the one time limit"),
    Rule(("-o", "--output"), "output", "standard output file (default slurm-%j.out)", "-o"),
    Rule(("-e", "--error"), "error", "standard error file (default: joined to the output)", "-e"),
    Rule(("--open-mode",), "open_mode", "output files: append or truncate", "--open-mode"),
    Rule(("--mem",), "mem", "memory of the job (a bare number is MiB; 0 is the whole machine)", "--mem"),
    Rule(("--mem-per-cpu",), "mem_per_cpu", "memory per core (times the cores)", "--mem-per-cpu"),
    Rule(("-a", "--array"), "array", "job array (RANGE[%MAX])", "--array"),
    Rule(("-d", "--dependency"), "depend", "dependencies", "-d SPEC"),
    Rule(("-L", "--licenses"), "licenses", "licences", "(not supported yet: warned)"),
    Rule(("-D", "--chdir"), "chdir", "working directory", "-D DIR"),
    Rule(("-H", "--hold"), "hold", "submit held", "--hold", value=False),
    Rule(("-W", "--wait"), "wait", "wait for the job to end", "--wait", value=False),
    Rule(("-b", "--begin"), "begin", "start no earlier than (now+1hour, 16:00, 2030-01-20T12:34)", "--begin"),
    Rule(("--requeue",), "requeue", "may be requeued", "--checkpoint requeue", value=False),
    Rule(("--no-requeue",), "norequeue", "never requeued", "--checkpoint none", value=False),
    Rule(
        ("--export",),
        "export",
        "environment passed: ALL, NONE, or [ALL,]VAR[=VALUE],...",
        "--export",
    ),
    Rule(
        ("--get-user-env",),
        "get_user_env",
        "start from the user's login environment ([TIMEOUT][S|L]; the submitting variables win)",
        "--get-user-env",
        optional=True,
    ),
    Rule(("-v", "--verbose"), "quiet", "sbatch's own messages", "(no effect)", value=False),
    Rule(("-V", "--version"), "quiet", "sbatch's version", "(no effect)", value=False),
    Rule(("-p", "--partition"), "ignore", "partition", "(warned)", why="no partitions on one machine"),
    Rule(("-A", "--account"), "ignore", "account", "(warned)", why="no accounts"),
    Rule(("-q", "--qos"), "ignore", "quality of service", "(warned)", why="no QOS"),
    Rule(("--nice",), "nice", "lower the job's priority by N (100 when no =N is given)", "--nice", optional=True),
    Rule(("--mail-type",), "mail_type", "mail events (BEGIN, END, FAIL, REQUEUE, TIME_LIMIT..., ALL, NONE)", _MAIL_GS),
    Rule(("--mail-user",), "mail_user", "mail recipients (default: the submitting user)", "--mail-user"),
    Rule(
        ("--exclusive",),
        "exclusive",
        "the whole node (=user and =mcs are warned)",
        "--exclusive: all the machine's cores",
        optional=True,
    ),
    Rule(
        ("--ntasks-per-core",),
        "ignore",
        "tasks on one core",
        "(warned)",
        why="the job's tasks share the job's cores as it starts them",
    ),
    Rule(("-C", "--constraint"), "ignore", "node features", "(warned)", why="no node features on one machine"),
    Rule(("--gres",), "gres", "generic resources (gpu:2, gpu:a100:1, fpga:1)", "--gres NAME[:MODEL]:N"),
    Rule(("-G", "--gpus"), "gpus", "GPUs of the job ([MODEL:]N)", "--gpus [MODEL:]N"),
    Rule(("--gpus-per-node",), "gpus", "GPUs on the node ([MODEL:]N)", "--gpus [MODEL:]N"),
    Rule(("--gpus-per-task",), "gpus_per_task", "GPUs per task", "--gpus NTASKS*N"),
    Rule(("--gpu-bind",), "gpu_bind", "GPU binding (closest, none; other forms warned)", "--gpu-bind"),
    Rule(("-w", "--nodelist"), "ignore", "nodes to use", "(warned)", why="one machine"),
    Rule(("--signal",), "signal", "signal before the time limit ([B:]SIG[@SECONDS])", "--signal"),
)

PBS: tuple[Rule, ...] = (
    Rule(("-N",), "name", "job name", "-N NAME"),
    Rule(("-l",), "resources", "resources, comma-separated (below)", "see -l"),
    Rule(("-o",), "output", "standard output file or directory (a host: prefix is dropped; ^array_index^)", "-o"),
    Rule(("-e",), "error", "standard error file or directory (a host: prefix is dropped; ^array_index^)", "-e"),
    Rule(("-j",), "join", "join: oe (error into output), eo (output into error), n", "--join"),
    Rule(
        ("-k",),
        "quiet",
        "keep output on the execution host",
        "(accepted: output is always written straight into its final files)",
    ),
    Rule(("-J",), "array", "job array (X-Y[:Z][%MAX])", "--array"),
    Rule(("-t",), "array", "Torque job array (1-10, 1,3,5-7, with %MAX)", "--array"),
    Rule(("-W",), "attr", "attribute: depend=SPEC (job ids may carry a .server suffix)", "-d SPEC"),
    Rule(("-d",), "chdir", "working directory (Torque)", "-D DIR"),
    Rule(("-h",), "hold", "submit held", "--hold", value=False),
    Rule(("-S",), "shell", "shell of a script without #! on line 1", "--shell"),
    Rule(("-r",), "rerun", "rerunnable: y or n", "--checkpoint requeue (y) or none (n)"),
    Rule(("-V",), "export_all", "export the whole environment", "(the default)", value=False),
    Rule(("-v",), "export_vars", "variables to pass or set: VAR[=VALUE],...", "--export ALL,VAR[=VALUE],..."),
    Rule(("-n",), "exclusive", "node exclusive (Torque)", "--exclusive: all the machine's cores", value=False),
    Rule(("-q",), "ignore", "queue", "(warned)", why="one queue on one machine"),
    Rule(("-A",), "ignore", "account", "(warned)", why="no accounts"),
    Rule(("-m",), "pbs_mail", "mail events: a (aborted), b (began), e (ended), j (each subjob), or n", _MAIL_GS),
    Rule(("-M",), "mail_user", "mail recipients, comma-separated", "--mail-user"),
    Rule(
        ("-p",),
        "pbs_priority",
        "priority, -1024 to 1023, higher first: -p N with N <= 0 is --nice -N; a positive N is warned "
        "(only an admin raises a job: gsub --nice -N)",
        "--nice",
    ),
    Rule(("-P",), "ignore", "project", "(warned)", why="no projects"),
    Rule(("-a",), "begin", "start no earlier than [[[[CC]YY]MM]DD]hhmm[.SS]", "--begin"),
)

# Resources of PBS -l NAME=VALUE; any other NAME is a licence (warned).
PBS_RESOURCES: tuple[Rule, ...] = (
    Rule(("walltime",), "time", "time limit, seconds or [[HH:]MM:]SS", "-t"),
    Rule(("ncpus", "ppn"), "ncpus", "cores", "-n"),
    Rule(("nodes",), "nodes", "nodes=N:ppn=M: N*M cores", "-n N*M (N > 1 warned: one machine)"),
    Rule(
        ("select",),
        "select",
        "select=N:ncpus=M[:mem=SIZE][:ngpus=G]: N*M cores, N*G GPUs",
        "-n N*M, --mem, --gpus (N > 1 warned)",
    ),
    Rule(("ngpus",), "ngpus", "GPUs", "--gpus"),
    Rule(("mem",), "mem", "memory of the job (b, kb, mb, gb, tb; bare: bytes)", "--mem"),
    Rule(("pmem",), "pmem", "memory per process (times the cores)", "--mem-per-cpu"),
    Rule(("vmem",), "vmem", "virtual memory of the job", "--mem (when mem= is not given)"),
    Rule(("pvmem",), "pvmem", "virtual memory per process", "--mem-per-cpu (when pmem= is not given)"),
    Rule(
        ("place",),
        "place",
        "placement: excl and exclhost make the job exclusive (pack, free, shared: nothing to do on one machine; "
        "scatter, vscatter, group= warned)",
        "--exclusive",
    ),
    Rule(("host", "vnode", "arch"), "ignore", "placement", "(warned)", why="one machine"),
    Rule(("cput", "pcput"), "ignore", "CPU time", "(warned)", why="only walltime is enforced"),
    Rule(("soft_walltime",), "estimate", "the time the scheduler plans with (PBS Pro)", "--estimate"),
)

SGE: tuple[Rule, ...] = (
    Rule(("-N",), "name", "job name", "-N NAME"),
    Rule(("-pe",), "pe", "parallel environment NAME SLOTS: SLOTS cores", "-n SLOTS"),
    Rule(("-l",), "resources", "resources, comma-separated (below)", "see -l"),
    Rule(("-t",), "array", "job array (N-M[:STEP])", "--array"),
    Rule(("-tc",), "throttle", "tasks of the array at once", "--array RANGE%MAX"),
    Rule(("-o",), "output", "standard output file or directory ($JOB_ID, $TASK_ID, $JOB_NAME)", "-o"),
    Rule(("-e",), "error", "standard error file or directory", "-e"),
    Rule(("-j",), "join", "y: error joined to the output", "--join oe"),
    Rule(("-cwd",), "quiet", "run in the submit directory", "(always: the default)", value=False),
    Rule(("-wd",), "chdir", "working directory", "-D DIR"),
    Rule(("-V",), "export_all", "export the whole environment", "(the default)", value=False),
    Rule(("-v",), "export_vars", "variables to pass or set: VAR[=VALUE],...", "--export ALL,VAR[=VALUE],..."),
    Rule(("-S",), "shell", "shell of a script without #! on line 1", "--shell"),
    Rule(
        ("-hold_jid",),
        "hold_jid",
        "start after these jobs end: ids, or names (and patterns) of your earlier jobs",
        "-d afterany:ID; names: --hold-jid",
    ),
    Rule(("-h",), "hold", "submit held", "--hold", value=False),
    Rule(("-r",), "rerun", "rerunnable: y or n", "--checkpoint requeue (y) or none (n)"),
    Rule(("-b",), "binary", "y: the command is a binary", "(y refused: gsub takes a script)"),
    Rule(("-q",), "ignore", "queue", "(warned)", why="one queue on one machine"),
    Rule(("-P",), "ignore", "project", "(warned)", why="no projects"),
    Rule(("-A",), "ignore", "account", "(warned)", why="no accounts"),
    Rule(("-m",), "sge_mail", "mail events: b (began), e (ended), a (aborted, rescheduled), s (warned), n", _MAIL_GS),
    Rule(("-M",), "mail_user", "mail recipients, comma-separated (user[@host])", "--mail-user"),
    Rule(("-R",), "ignore", "resource reservation", "(warned)", why="backfilling always reserves for the head job"),
    Rule(("-notify",), "ignore", "warn before suspend or kill", "(warned)", why="use --checkpoint signal", value=False),
)

# Resources of SGE -l NAME=VALUE; any other NAME is warned.
SGE_RESOURCES: tuple[Rule, ...] = (
    Rule(("h_rt", "s_rt"), "time", "time limit, seconds or HH:MM:SS", "-t"),
    Rule(
        ("h_vmem", "s_vmem", "mem_free", "virtual_free", "h_rss", "mem_req"),
        "mem_per_slot",
        "memory per slot (times the slots)",
        "--mem-per-cpu",
    ),
    Rule(("gpu", "gpus"), "gpus", "GPUs: a count, or true (one) or false (none)", "--gpus N"),
)

DIALECTS = {"#SBATCH": "slurm", "#PBS": "pbs", "#$": "sge"}
PREFIXES = {"#SBATCH": SLURM, "#PBS": PBS, "#$": SGE}
# gsub options the translation produces, by key, and the option that carries them.
GS_FLAG = {
    "name": "-N",
    "ncpus": "-n",
    "ntasks": "--ntasks",
    "cpus_per_task": "--cpus-per-task",
    "time": "-t",
    "output": "-o",
    "error": "-e",
    "mem": "--mem",
    "mem_per_cpu": "--mem-per-cpu",
    "depend": "-d",
    "chdir": "-D",
    "checkpoint": "--checkpoint",
    "array": "--array",
    "join": "--join",
    "shell": "--shell",
    "begin": "--begin",
    "nice": "--nice",
    "open_mode": "--open-mode",
    "signal": "--signal",
    "estimate": "--estimate",
    "gpus": "--gpus",
    "gres": "--gres",
    "gpu_bind": "--gpu-bind",
    "export": "--export",
    "hold_jid": "--hold-jid",
    "mail_type": "--mail-type",
    "mail_user": "--mail-user",
}
GS_SWITCH = {"hold": "--hold", "wait": "--wait", "exclusive": "--exclusive"}


def scan(text: str, prefix: str) -> list[tuple[int, str]]:
    """``(line number, option text)`` of each ``prefix`` line at the top of ``text``.

    Scanning skips the shebang, blank lines and comments and stops at the
    first other line, as Slurm does for ``#SBATCH``.
    """
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if n == 1 and s.startswith("#!"):
            continue
        if s and not s.startswith("#"):
            break
        if s == prefix or s.startswith((prefix + " ", prefix + "\t")):
            out.append((n, s[len(prefix) :].strip()))
    return out


@dataclass(slots=True)
class Translation:
    """gsub option tokens per directive line, the warnings to print, and whose script it is."""

    settings: list[tuple[int, list[str]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dialect: str | None = None  # "slurm", "pbs", "sge"; None: no foreign directives
    # between the job id and an array task's index in the default file names: NAME.o12.3 for PBS Pro -J and
    # Grid Engine -t, NAME.o12-3 for Torque -t, NAME.o12_3 (gsub's own) otherwise
    task_sep: str = "_"
    lines: dict[int, str] = field(default_factory=dict)  # each directive line as written, for messages

    def params(self) -> dict[str, Any]:
        """The options set, by key (the last line wins), for comparisons."""
        out: dict[str, Any] = {}
        for _, toks in self.settings:
            out[toks[0]] = toks[1] if len(toks) > 1 else True
        return out


def _lookup(rules: tuple[Rule, ...]) -> dict[str, Rule]:
    return {f: r for r in rules for f in r.flags}


_SLURM, _PBS, _PBS_RES = _lookup(SLURM), _lookup(PBS), _lookup(PBS_RESOURCES)
_SGE, _SGE_RES = _lookup(SGE), _lookup(SGE_RESOURCES)
_ARRAY = re.compile(r"^\d+(-\d+(:\d+)?)?(,\d+(-\d+(:\d+)?)?)*(%\d+)?$")
_PBS_SIZE = re.compile(r"^(\d+)(b|kb|mb|gb|tb|pb|w|kw|mw|gw)?$")
_PBS_MULT = {
    "b": 1,
    "kb": 1 << 10,
    "mb": 1 << 20,
    "gb": 1 << 30,
    "tb": 1 << 40,
    "pb": 1 << 50,
    "w": 8,
    "kw": 8 << 10,
    "mw": 8 << 20,
    "gw": 8 << 30,
}


def _split(
    prefix: str, text: str, where: str, rules: dict[str, Rule], long_single_dash: bool = False
) -> list[tuple[str, Rule | None, str | None]]:
    """``(flag, rule, value)`` of each option on one directive line.

    An unknown option followed by a word that is not an option takes that
    word as its value (``-X 2-6``), so that it is warned of, not misread.
    ``long_single_dash``: options are words (SGE's ``-pe``, ``-cwd``), never a
    letter glued to its value.
    """
    try:
        toks = shlex.split(text, comments=True)
    except ValueError as e:
        raise CompatError(f"{where}: {prefix} {text}: {str(e).lower()}") from None
    out: list[tuple[str, Rule | None, str | None]] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            raise CompatError(f"{where}: {prefix} {tok!r}: not an option")
        if tok.startswith("--"):
            flag, eq, val = tok.partition("=")
        elif long_single_dash or tok in rules:
            flag, eq, val = tok, "", ""
        else:
            flag, eq, val = tok[:2], "", tok[2:]
        rule = rules.get(flag)
        if rule is None:
            if not eq and not val and i < len(toks) and not toks[i].startswith("-"):
                val = toks[i]
                i += 1
            out.append((tok if not val or eq else f"{tok} {val}", None, None))
            continue
        if rule.optional:
            out.append((flag, rule, val if eq else None))
            continue
        if not rule.value:
            if eq or val:
                raise CompatError(f"{where}: {prefix} {flag} takes no value")
            out.append((flag, rule, None))
            continue
        if not eq and not val:
            if i >= len(toks):
                raise CompatError(f"{where}: {prefix} {flag} needs a value")
            val = toks[i]
            i += 1
        if rule.key == "pe":  # SGE -pe NAME SLOTS: two words
            if i >= len(toks):
                raise CompatError(f"{where}: {prefix} {flag} needs a name and a slot count ({flag} smp 4)")
            val = f"{val} {toks[i]}"
            i += 1
        out.append((flag, rule, val))
    return out


def _shown(prefix: str, flag: str, value: str | None) -> str:
    if value is None:
        return f"{prefix} {flag}"
    return f"{prefix} {flag}={value}" if flag.startswith("--") else f"{prefix} {flag} {value}"


def _count(where: str, shown: str, value: str) -> int:
    v = value.strip()
    if not (v.isascii() and v.isdigit()) or int(v) < 1:
        raise CompatError(f"{where}: {shown}: '{value}' is not a whole number of at least 1")
    return int(v)


# -- environment export ----------------------------------------------------------------------

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class Export:
    """What of the submitting environment a job gets (sbatch --export): all of it or only ``names``, and
    ``values`` set over it."""

    all: bool
    names: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        """The --export value that gives this (values holding a comma or a quote are quoted)."""
        items = ["ALL"] if self.all else []
        items += list(self.names)
        for k, v in self.values:
            items.append(f"{k}={_quote_item(v)}")
        return ",".join(items) if items else "NONE"

    def merged(self, other: Export) -> Export:
        """This with ``other``'s names and values added (a later value of a name wins)."""
        values = dict(self.values)
        values.update(other.values)
        names = tuple(dict.fromkeys(n for n in (*self.names, *other.names) if n not in values))
        return Export(self.all or other.all, names, tuple(values.items()))


def _quote_item(v: str) -> str:
    if not any(c in v for c in ",'\""):
        return v
    return "'" + v + "'" if "'" not in v else '"' + v + '"'


def _items(text: str) -> list[str]:
    """``text`` split at commas outside quotes; a quoted part loses its quotes (``A='x,y'`` is ``A=x,y``)."""
    out: list[str] = []
    cur: list[str] = []
    quote = ""
    for c in text:
        if quote:
            if c == quote:
                quote = ""
            else:
                cur.append(c)
        elif c in "'\"":
            quote = c
        elif c == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if quote:
        raise ValueError("a quote is not closed")
    out.append("".join(cur))
    return out


def parse_export(text: str, listed: bool = False) -> Export:
    """An sbatch ``--export`` value: ``ALL`` (the default), ``NONE``, or ``[ALL,]VAR[=VALUE],...``; with
    ``listed`` a PBS or Grid Engine ``-v`` list, over the whole environment.  :class:`ValueError` with the
    reason if it is none of these (a name must be a shell identifier)."""
    v = text.strip()
    if not v:
        raise ValueError("empty: give ALL, NONE or VAR[=VALUE],...")
    if not listed and v.upper() == "NONE":
        return Export(False)
    everything = listed
    names: dict[str, None] = {}
    values: dict[str, str] = {}
    for item in _items(v):
        name, eq, value = item.partition("=")
        name = name.strip()
        if not listed and not eq and name.upper() == "ALL":
            everything = True
            continue
        if not listed and not eq and name.upper() == "NONE":
            raise ValueError("NONE cannot be combined with variables (give the variables alone)")
        if not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not a variable name (letters, digits and _, not starting with a digit)")
        if eq:
            values[name] = value
            names.pop(name, None)
        elif name not in values:
            names[name] = None
    return Export(everything, tuple(names), tuple(values.items()))


# -- values as each system reads them ------------------------------------------------------


def sbatch_time(text: str) -> int:
    """Seconds of a time as sbatch and ``gsub -t`` read it: a bare number is minutes.

    Also MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, and gsub's units
    (90s, 30m, 2h, 1d).  :class:`UnitError` if it is none of these.
    """
    v = text.strip()
    if v.isascii() and v.isdigit():
        return parse_duration(f"{v}m") if int(v) > 0 else parse_duration(v)
    return parse_duration(v)


def _int_in(where: str, shown: str, v: str, lo: int, hi: int) -> str:
    """``v`` as a whole number from ``lo`` to ``hi`` (its text), else a :class:`CompatError` naming the line."""
    t = v.strip()
    try:
        n = int(t)
    except ValueError:
        raise CompatError(f"{where}: {shown}: not a whole number") from None
    if not lo <= n <= hi:
        raise CompatError(f"{where}: {shown}: must lie between {lo} and {hi}")
    return str(n)


def pbs_time(text: str) -> int:
    """Seconds of a PBS or SGE time: a bare number is seconds, else [[HH:]MM:]SS (hours may pass 24)."""
    v = text.strip()
    if "." in v:  # PBS allows fractional seconds
        head, _, frac = v.rpartition(".")
        if frac.isascii() and frac.isdigit() and head:
            v = head
    return parse_duration(f"{v}s" if v.isascii() and v.isdigit() else v)


_UNIT_SECONDS = {
    "": 1,
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_BEGIN_REL = re.compile(r"^now\s*\+\s*(\d+)\s*([a-z]*)$")
_BEGIN_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_BEGIN_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:T(\d{1,2}):(\d{2})(?::(\d{2}))?)?$")
_BEGIN_WORDS = {"midnight": (0, 0), "noon": (12, 0), "fika": (15, 0), "teatime": (16, 0)}


def parse_begin(text: str, now: float) -> float:
    """The time (seconds since the epoch) of an sbatch ``--begin`` value, read at ``now``.

    ``now``, ``now+N[seconds|minutes|hours|days|weeks]``, ``HH:MM[:SS]`` (the
    next such time: today, or tomorrow if it has passed), ``YYYY-MM-DD[THH:MM[:SS]]``
    (local time), ``midnight``, ``noon``, ``teatime``, ``today``, ``tomorrow``.
    :class:`ValueError` with the reason for anything else.
    """
    v = text.strip().lower()
    if v == "now":
        return now
    m = _BEGIN_REL.match(v)
    if m:
        unit = m.group(2)
        if unit not in _UNIT_SECONDS:
            raise ValueError(f"'{text}': unknown unit {unit!r} (use seconds, minutes, hours, days or weeks)")
        return now + int(m.group(1)) * _UNIT_SECONDS[unit]
    lt = time.localtime(now)
    if v in ("today", "tomorrow"):
        day = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
        return day if v == "today" else time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, 0, 0, 0, 0, 0, -1))
    clock = _BEGIN_WORDS.get(v)
    m = _BEGIN_CLOCK.match(v)
    if clock is not None or m:
        h, mi, s = (clock[0], clock[1], 0) if clock else (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))  # type: ignore[union-attr]
        if h > 23 or mi > 59 or s > 59:
            raise ValueError(f"'{text}': not a time of day ({_BEGIN_FORMS})")
        t = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, h, mi, s, 0, 0, -1))
        if t <= now:
            t = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, h, mi, s, 0, 0, -1))
        return t
    m = _BEGIN_DATE.match(v.upper().replace("t", "T") if "t" in v else v)
    if m:
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
        h, mi, s = int(m.group(4) or 0), int(m.group(5) or 0), int(m.group(6) or 0)
        if not (1 <= mo <= 12 and 1 <= d <= _days_in(y, mo) and h <= 23 and mi <= 59 and s <= 59):
            raise ValueError(f"'{text}': not a date and time ({_BEGIN_FORMS})")
        return time.mktime((y, mo, d, h, mi, s, 0, 0, -1))
    raise ValueError(f"'{text}': not a begin time ({_BEGIN_FORMS})")


_BEGIN_FORMS = (
    "use now+N[seconds|minutes|hours|days|weeks], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], "
    "midnight, noon, teatime, today or tomorrow"
)
_PBS_A = re.compile(r"^(\d{4,12})(?:\.(\d{2}))?$")


def _days_in(year: int, month: int) -> int:
    import calendar

    return calendar.monthrange(year, month)[1]


def parse_pbs_begin(text: str, now: float) -> float:
    """The time (seconds since the epoch) of a ``qsub -a`` value, ``[[[[CC]YY]MM]DD]hhmm[.SS]``, read at ``now``.

    As qsub reads it: the fields left out are the next ones that give a time
    still ahead (``1600`` is today at 16:00 or, once that has passed, tomorrow;
    ``011600`` is the next 1st of a month at 16:00; ``YYMMDDhhmm`` is in this
    century).  :class:`ValueError` with the reason for anything else.
    """
    v = text.strip()
    m = _PBS_A.match(v)
    forms = "use [[[[CC]YY]MM]DD]hhmm[.SS], such as 1600, 251600 or 202612010800.30"
    if not m or len(m.group(1)) % 2 or len(m.group(1)) < 4:
        raise ValueError(f"'{text}': not a qsub -a time ({forms})")
    digits, sec = m.group(1), int(m.group(2) or 0)
    h, mi = int(digits[-4:-2]), int(digits[-2:])
    lt = time.localtime(now)
    year, month, day = lt.tm_year, lt.tm_mon, lt.tm_mday
    rest = digits[:-4]
    given = len(rest) // 2  # 0: hhmm, 1: DD, 2: MM, 3: YY, 4: CCYY
    if given >= 1:
        day = int(rest[-2:])
    if given >= 2:
        month = int(rest[-4:-2])
    if given == 3:
        year = lt.tm_year // 100 * 100 + int(rest[:2])
    elif given == 4:
        year = int(rest[:4])
    if h > 23 or mi > 59 or sec > 59 or not 1 <= month <= 12:
        raise ValueError(f"'{text}': not a date and time ({forms})")
    for _ in range(49):  # the next day, month or year whose date exists and is ahead
        if day <= _days_in(year, month):
            t = time.mktime((year, month, day, h, mi, sec, 0, 0, -1))
            if t > now or given >= 3:
                return t
        if given >= 3:
            break
        if given == 0:
            t = time.mktime((year, month, day + 1, h, mi, sec, 0, 0, -1))
            return t
        if given == 1:
            month, year = (1, year + 1) if month == 12 else (month + 1, year)
        else:
            year += 1
    raise ValueError(f"'{text}': not a date and time ({forms})")


def _size(where: str, shown: str, value: str) -> str:
    """A Slurm or SGE memory size, checked; as gsub reads it."""
    v = value.strip()
    if v == "0":
        return v
    try:
        parse_size(v)
    except UnitError as e:
        raise CompatError(f"{where}: {shown}: {e}") from None
    return v


def _pbs_size(where: str, shown: str, value: str) -> str:
    m = _PBS_SIZE.match(value.strip().lower())
    if not m:
        raise CompatError(f"{where}: {shown}: '{value}' is not a PBS size (such as 4gb, 512mb)")
    n = int(m.group(1)) * _PBS_MULT[m.group(2) or "b"]
    if n == 0:
        return "0"
    return f"{n >> 20}M" if n % (1 << 20) == 0 else f"{math.ceil(n / 1024)}K"


def _pbs_path(value: str) -> str:
    """A PBS output path without its host: prefix, as a gsub path: a % is itself, and PBS Pro's
    ^array_index^ is the subjob's index."""
    host, colon, path = value.partition(":")
    path = path if colon and "/" not in host else value
    return path.replace("%", "%%").replace("^array_index^", "%a")


_SGE_VARS = {"$JOB_ID": "%j", "$TASK_ID": "%a", "$JOB_NAME": "%x", "$USER": "%u", "$HOSTNAME": "%N"}


def _sge_path(value: str) -> str:
    """An SGE output path: its pseudo variables as gsub patterns (and % doubled)."""
    host, colon, path = value.partition(":")
    out = (path if colon and "/" not in host else value).replace("%", "%%")
    for var, pat in _SGE_VARS.items():
        out = out.replace("${" + var[1:] + "}", pat).replace(var, pat)
    return out


def _pbs_depend(value: str) -> str:
    """PBS ids such as 123.server lose their server suffix."""
    parts = []
    for cond in value.split(","):
        kind, *ids = cond.split(":")
        parts.append(":".join([kind, *(i.split(".", 1)[0] for i in ids)]))
    return ",".join(parts)


# -- the reader -------------------------------------------------------------------------------


class _Reader:
    def __init__(self, label: str) -> None:
        self.label = label
        self.out = Translation()
        self.ntasks: tuple[int, int] | None = None  # (value, line)
        self.per_node: tuple[int, int] | None = None
        self.cpus: tuple[int, int] | None = None
        self.nodes: tuple[int, int, str] | None = None  # (value, line, directive as written)
        self.chunks: tuple[int, int, str, str] | None = None  # PBS: (nodes, line, directive, one-node form)
        self.array: tuple[str, int] | None = None
        self.array_flag = ""  # the directive that gave the array, as "#PBS -J"
        self.throttle: tuple[int, int] | None = None
        self.mem_set = False
        self.pmem_set: list[tuple[int, str]] = []  # PBS pmem= lines: (line, directive as written)
        self.vmem: tuple[str, int] | None = None
        self.pvmem: tuple[str, int] | None = None
        self.gpus_per_task: tuple[str, int] | None = None  # (value, line)
        self.export: Export | None = None  # PBS and SGE -v: the variables named, over the whole environment
        self.export_line = 0
        self.export_all = False  # -V: the whole environment (the default here)

    def warn(self, lineno: int, shown: str, why: str) -> None:
        self.out.warnings.append(f"{self.label}:{lineno}: {shown} ignored: {why}")

    def note(self, lineno: int, text: str) -> None:
        self.out.warnings.append(f"{self.label}:{lineno}: {text}")

    def set(self, lineno: int, key: str, value: str | None = None) -> None:
        if key in GS_SWITCH:
            self.out.settings.append((lineno, [GS_SWITCH[key]]))
        else:
            self.out.settings.append((lineno, [GS_FLAG[key], str(value)]))

    def common(self, lineno: int, where: str, shown: str, rule: Rule, value: str | None) -> bool:
        """Keys every dialect treats alike; False if ``rule.key`` is not one of them."""
        key = rule.key
        if key in ("name", "chdir", "hold", "wait"):
            self.set(lineno, key, value)
        elif key == "array":
            v = str(value).strip()
            if not _ARRAY.match(v):
                raise CompatError(f"{where}: {shown}: not an array range (such as 1-10, 1,3,5, 0-15:4%2)")
            self.array = (v, lineno)
            self.array_flag = " ".join(shown.split()[:2]).split("=")[0]
        elif key == "ignore":
            self.warn(lineno, shown, rule.why)
        elif key == "quiet":
            pass
        elif key == "shell":
            self.set(lineno, "shell", str(value).strip())
        elif key == "rerun":
            v = str(value).strip().lower()
            if v not in ("y", "n", "yes", "no"):
                raise CompatError(f"{where}: {shown}: must be y or n")
            self.set(lineno, "checkpoint", "requeue" if v.startswith("y") else "none")
        elif key == "exclusive":
            if value is None:
                self.set(lineno, "exclusive")
            else:
                self.warn(lineno, shown, "only the whole machine (--exclusive without a value) is known")
        elif key == "mail_user":
            from gridsched.protocol.requests import parse_mail_user

            try:
                self.set(lineno, "mail_user", ",".join(parse_mail_user(str(value))))
            except ValueError as e:  # scripts carry placeholders such as <EMAIL>: the job goes, without it
                self.warn(lineno, shown, f"{e}")
        elif key == "export_all":
            self.export_all = True
        elif key == "export_vars":
            try:
                ex = parse_export(str(value), listed=True)
            except ValueError as e:
                raise CompatError(f"{where}: {shown}: {e}") from None
            self.export = ex if self.export is None else self.export.merged(ex)
            self.export_line = lineno
        else:
            return False
        return True

    def slurm(self, lineno: int, text: str) -> None:
        where = f"{self.label}:{lineno}"
        for flag, rule, value in _split("#SBATCH", text, where, _SLURM):
            shown = _shown("#SBATCH", flag, value)
            if rule is None:
                self.warn(lineno, f"#SBATCH {flag}", "not a directive gsub knows")
                continue
            if self.common(lineno, where, shown, rule, value):
                continue
            key, v = rule.key, str(value)
            if key == "export":
                try:
                    ex = parse_export(v)
                except ValueError as e:
                    raise CompatError(f"{where}: {shown}: {e}") from None
                if ex != Export(True):  # ALL is the default
                    self.set(lineno, "export", ex.text())
            elif key == "mail_type":
                self.mail_type(lineno, where, shown, v)
            elif key == "get_user_env":
                from gridsched.protocol.requests import parse_user_env

                try:
                    ue = parse_user_env("" if value is None else v)
                except ValueError as e:
                    raise CompatError(f"{where}: {shown}: {e}") from None
                self.out.settings.append((lineno, [f"--get-user-env={ue.text()}"]))
            elif key == "nice":
                self.set(lineno, "nice", "100" if value is None else _int_in(where, shown, v, -10000, 10000))
            elif key == "ntasks":
                self.ntasks = (_count(where, shown, v), lineno)
            elif key == "per_node":
                self.per_node = (_count(where, shown, v), lineno)
            elif key == "cpus":
                self.cpus = (_count(where, shown, v), lineno)
            elif key == "nodes":
                self.nodes = (_count(where, shown, v.split("-", 1)[0]), lineno, shown)
            elif key == "time":
                if v.strip().upper() in ("UNLIMITED", "INFINITE"):
                    self.warn(lineno, shown, "no unlimited walltime: jobs.default_walltime applies")
                    continue
                try:
                    secs = sbatch_time(v)
                except UnitError as e:
                    raise CompatError(f"{where}: {shown}: {e}") from None
                # Slurm keeps time limits in whole minutes: seconds are rounded up (0:0:30 is one minute)
                self.set(lineno, "time", f"{-(-secs // 60) * 60}s")
            elif key == "mem":
                self.set(lineno, "mem", _size(where, shown, v))
            elif key == "mem_per_cpu":
                self.set(lineno, "mem_per_cpu", _size(where, shown, v))
            elif key in ("output", "error", "depend"):
                self.set(lineno, key, v)
            elif key == "open_mode":
                if v.strip().lower() not in ("append", "truncate"):
                    raise CompatError(f"{where}: {shown}: must be append or truncate")
                self.set(lineno, "open_mode", v.strip().lower())
            elif key == "begin":
                try:
                    parse_begin(v, time.time())
                except ValueError as e:
                    raise CompatError(f"{where}: {shown}: {e}") from None
                self.set(lineno, "begin", v.strip())
            elif key == "signal":
                from gridsched.protocol.requests import parse_signal

                try:
                    self.set(lineno, "signal", parse_signal(v).text())
                except ValueError as e:
                    raise CompatError(f"{where}: {shown}: {e}") from None
            elif key == "gres":
                for item in v.split(","):
                    if item.strip():
                        self.set(lineno, "gres", item.strip())
            elif key == "gpus":
                self.set(lineno, "gpus", v.strip())
            elif key == "gpus_per_task":
                self.gpus_per_task = (v.strip(), lineno)
            elif key == "gpu_bind":
                bind = v.strip().split(":")[-1] if v.strip().startswith("verbose,") else v.strip()
                if bind in ("closest", "none", "strict"):
                    self.set(lineno, "gpu_bind", bind)
                else:
                    self.warn(lineno, shown, "only closest and none (and gridsched's strict) are known")
            elif key == "licenses":
                self.warn(lineno, shown, "licences are not supported yet")
            elif key == "requeue":
                self.set(lineno, "checkpoint", "requeue")
            elif key == "norequeue":
                self.set(lineno, "checkpoint", "none")

    def pbs(self, lineno: int, text: str) -> None:
        where = f"{self.label}:{lineno}"
        for flag, rule, value in _split("#PBS", text, where, _PBS):
            shown = _shown("#PBS", flag, value)
            if rule is None:
                self.warn(lineno, f"#PBS {flag}", "not a directive gsub knows")
                continue
            if self.common(lineno, where, shown, rule, value):
                continue
            key, v = rule.key, str(value)
            if key == "pbs_mail":
                self.letters_mail(lineno, where, shown, v, {"a": "FAIL", "b": "BEGIN", "e": "END", "j": "ARRAY_TASKS"})
            elif key == "pbs_priority":
                n = int(_int_in(where, shown, v, -1024, 1023))
                if n > 0:
                    self.warn(lineno, shown, "only an admin raises a job's priority (gsub --nice -N)")
                elif n < 0:
                    self.set(lineno, "nice", str(-n))
            elif key in ("output", "error"):
                self.set(lineno, key, _pbs_path(v))
            elif key == "join":
                j = v.strip().lower()
                if j not in ("oe", "eo", "n"):
                    raise CompatError(f"{where}: {shown}: must be oe, eo or n")
                self.set(lineno, "join", j)
            elif key == "attr":
                # attributes are comma-separated, but so are the conditions of depend=: it takes the rest
                rest = v
                while rest:
                    attr, _, after = rest.partition(",")
                    name, eq, _ = attr.partition("=")
                    if name.strip() == "depend" and eq:
                        self.set(lineno, "depend", _pbs_depend(rest.partition("=")[2]))
                        break
                    if attr.strip():
                        self.warn(lineno, f"#PBS -W {attr.strip()}", f"attribute {name.strip()!r} is not supported")
                    rest = after
            elif key == "resources":
                for item in v.split(","):
                    if item.strip():
                        self.pbs_resource(lineno, where, item.strip())
            elif key == "begin":
                try:
                    t = parse_pbs_begin(v, time.time())
                except ValueError as e:
                    raise CompatError(f"{where}: {shown}: {e}") from None
                self.set(lineno, "begin", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)))

    def mail_type(self, lineno: int, where: str, shown: str, value: str) -> None:
        from gridsched.protocol.requests import parse_mail_type

        try:
            events = parse_mail_type(value)
        except ValueError as e:
            raise CompatError(f"{where}: {shown}: {e}") from None
        self.set(lineno, "mail_type", ",".join(events) or "NONE")

    def letters_mail(self, lineno: int, where: str, shown: str, value: str, events: dict[str, str]) -> None:
        """PBS and Grid Engine -m: one letter per event (n: none), Grid Engine's also comma-separated."""
        letters = value.replace(",", "").strip()
        if letters == "n":
            self.set(lineno, "mail_type", "NONE")
            return
        bad = sorted({c for c in letters if c not in events and c != "s"})
        if not letters or bad or "n" in letters:
            raise CompatError(f"{where}: {shown}: use letters of {''.join(events)} (or n alone)")
        if "s" in letters:
            self.warn(lineno, shown, "s: no mail when a job is suspended")
        out = {e for c in letters if c in events for e in events[c].split(",")}
        if out:
            self.set(lineno, "mail_type", ",".join(sorted(out)))

    def pbs_resource(self, lineno: int, where: str, item: str) -> None:
        name, eq, value = item.partition("=")
        name = name.strip()
        shown = f"#PBS -l {item}"
        rule = _PBS_RES.get(name)
        if rule is None or not eq:
            self.warn(lineno, shown, f"resource {name!r}: licences and custom resources are not supported yet")
            return
        if rule.key == "ignore":
            self.warn(lineno, shown, rule.why)
        elif rule.key == "place":
            self.pbs_place(lineno, shown, value)
        elif rule.key == "time":
            try:
                self.set(lineno, "time", f"{pbs_time(value)}s")
            except UnitError as e:
                raise CompatError(f"{where}: {shown}: {e}") from None
        elif rule.key == "estimate":
            try:
                self.set(lineno, "estimate", f"{pbs_time(value)}s")
            except UnitError as e:
                raise CompatError(f"{where}: {shown}: {e}") from None
        elif rule.key == "mem":
            self.mem_set = True
            self.set(lineno, "mem", _pbs_size(where, shown, value))
        elif rule.key == "pmem":
            self.pmem_set.append((lineno, shown))
            self.set(lineno, "mem_per_cpu", _pbs_size(where, shown, value))
        elif rule.key == "vmem":
            self.vmem = (_pbs_size(where, shown, value), lineno)
        elif rule.key == "pvmem":
            self.pvmem = (_pbs_size(where, shown, value), lineno)
        elif rule.key == "ncpus":
            self.set(lineno, "ncpus", str(_count(where, shown, value)))
        elif rule.key == "ngpus":
            self.set(lineno, "gpus", str(_count(where, shown, value)))
        elif rule.key in ("nodes", "select"):
            self.pbs_chunks(lineno, where, shown, name, value)

    def pbs_place(self, lineno: int, shown: str, value: str) -> None:
        """place=[ARRANGEMENT][:SHARING][:group=RES]: excl and exclhost make the job exclusive."""
        other = []
        for part in (p.strip().lower() for p in value.split(":")):
            if part in ("excl", "exclhost"):
                self.set(lineno, "exclusive")
            elif part not in ("", "pack", "free", "shared"):
                other.append(part)
        if other:
            self.warn(lineno, shown, f"{', '.join(other)}: one machine, nothing to place apart")

    def pbs_chunks(self, lineno: int, where: str, shown: str, name: str, value: str) -> None:
        """nodes=N[:ppn=M][+...] and select=N:ncpus=M[:mem=S][+...]: the cores (and memory) of every chunk."""
        total = nodes = mem = gpus_total = 0
        for chunk in value.split("+"):
            count_s, *attrs = chunk.split(":")
            if count_s and not count_s.isdigit():  # nodes=host1:ppn=2 names a host: one node
                count_s = "1"
            count = _count(where, shown, count_s) if count_s else 1
            per = 1
            gpus = 0
            for a in attrs:
                k, _, x = a.partition("=")
                if k in ("ppn", "ncpus"):
                    per = _count(where, shown, x)
                elif k in ("ngpus", "gpus"):  # PBS Pro select ngpus=, Torque nodes gpus=
                    gpus = _count(where, shown, x)
                elif k == "mem":
                    mem += count * _bytes(_pbs_size(where, shown, x))
                elif k in ("mpiprocs", "ompthreads"):
                    pass  # how the job starts its processes on its cores
                else:
                    self.warn(lineno, shown, f"{k!r} in {name}: not supported")
            total += count * per
            nodes += count
            gpus_total += count * gpus
        if gpus_total:
            self.set(lineno, "gpus", str(gpus_total))
        if nodes > 1:
            self.chunks = (nodes, lineno, shown, f"{name}=1:{'ppn' if name == 'nodes' else 'ncpus'}={total}")
        if mem:
            self.mem_set = True
            self.set(lineno, "mem", f"{math.ceil(mem / 1024)}K" if mem % (1 << 20) else f"{mem >> 20}M")
        self.set(lineno, "ncpus", str(total))

    def sge(self, lineno: int, text: str) -> None:
        where = f"{self.label}:{lineno}"
        for flag, rule, value in _split("#$", text, where, _SGE, long_single_dash=True):
            shown = _shown("#$", flag, value)
            if rule is None:
                self.warn(lineno, f"#$ {flag}", "not a directive gsub knows")
                continue
            if self.common(lineno, where, shown, rule, value):
                continue
            key, v = rule.key, str(value)
            if key == "sge_mail":
                self.letters_mail(lineno, where, shown, v, {"b": "BEGIN", "e": "END", "a": "FAIL,REQUEUE"})
            elif key in ("output", "error"):
                self.set(lineno, key, _sge_path(v))
            elif key == "join":
                j = v.strip().lower()
                if j not in ("y", "yes", "n", "no"):
                    raise CompatError(f"{where}: {shown}: must be y or n")
                self.set(lineno, "join", "oe" if j.startswith("y") else "n")
            elif key == "throttle":
                self.throttle = (_count(where, shown, v), lineno)
            elif key == "hold_jid":
                ids = [i.strip() for i in v.split(",") if i.strip()]
                if not ids:
                    raise CompatError(f"{where}: {shown}: needs job ids or names")
                if all(i.isascii() and i.isdigit() for i in ids):
                    self.set(lineno, "depend", "afterany:" + ":".join(ids))
                else:  # names are looked up at submission, among the user's own jobs
                    self.set(lineno, "hold_jid", ",".join(ids))
            elif key == "binary":
                if v.strip().lower().startswith("y"):
                    raise CompatError(f"{where}: {shown}: gsub takes a script; use --wrap for a command")
            elif key == "pe":
                slots = v.split()[-1]
                lo, dash, hi = slots.partition("-")
                n = _count(where, shown, lo or hi)
                if dash:
                    self.note(lineno, f"{shown}: a slot range: {n} cores are asked (its smallest)")
                self.set(lineno, "ncpus", str(n))
            elif key == "resources":
                for item in v.split(","):
                    if item.strip():
                        self.sge_resource(lineno, where, item.strip())

    def sge_resource(self, lineno: int, where: str, item: str) -> None:
        name, eq, value = item.partition("=")
        name = name.strip()
        shown = f"#$ -l {item}"
        rule = _SGE_RES.get(name)
        if rule is None or not eq:
            self.warn(lineno, shown, f"resource {name!r} is not supported")
        elif rule.key == "gpus":
            v = value.strip().lower()
            if v in ("true", "yes", "y", "1"):
                self.set(lineno, "gpus", "1")
            elif v not in ("false", "no", "n", "0"):
                self.set(lineno, "gpus", str(_count(where, shown, v)))
        elif rule.key == "time":
            try:
                self.set(lineno, "time", f"{pbs_time(value)}s")
            except UnitError as e:
                raise CompatError(f"{where}: {shown}: {e}") from None
        else:
            self.set(lineno, "mem_per_cpu", _size(where, shown, value))

    def finish(self, dialect: str) -> Translation:
        if dialect == "slurm" and (self.ntasks or self.cpus or self.per_node or self.nodes):
            nodes, ln_nodes, shown_nodes = self.nodes or (1, 0, "")
            c, ln_c = self.cpus or (1, 0)
            if self.ntasks:
                tasks, ln_t = self.ntasks
            elif self.per_node:
                tasks, ln_t = self.per_node[0] * nodes, self.per_node[1]
            else:
                tasks, ln_t = nodes, ln_nodes
            if self.ntasks or self.cpus or self.per_node or nodes > 1:
                self.set(max(ln_t, ln_c, ln_nodes), "ncpus", str(tasks * c))
            if self.ntasks or self.per_node:  # the job's tasks, for the Slurm environment and srun
                self.set(ln_t, "ntasks", str(tasks))
            if self.cpus:
                self.set(ln_c, "cpus_per_task", str(c))
            if nodes > 1:
                self.note(
                    ln_nodes,
                    f"{shown_nodes}: this is one machine: the job runs here on {tasks * c} cores "
                    f"(the one-node equivalent: --nodes=1 --ntasks={tasks} --cpus-per-task={c})",
                )
        if self.gpus_per_task:  # --gpus-per-task: times the tasks
            v, ln = self.gpus_per_task
            model, _, per = v.rpartition(":")
            n_nodes = self.nodes[0] if self.nodes else 1
            tasks = self.ntasks[0] if self.ntasks else (self.per_node[0] * n_nodes if self.per_node else n_nodes)
            total = str(_count(f"{self.label}:{ln}", "--gpus-per-task", per) * tasks)
            self.set(ln, "gpus", f"{model}:{total}" if model else total)
        if self.chunks is not None:
            nodes, ln, shown, one = self.chunks
            self.note(
                ln,
                f"{shown}: {nodes} nodes: this is one machine: the job runs here on all their cores "
                f"(the one-node equivalent: -l {one})",
            )
        if self.mem_set and self.pmem_set:  # PBS takes both; the job's total is the limit here
            self.out.settings = [st for st in self.out.settings if st[1][0] != "--mem-per-cpu"]
            for ln, shown in self.pmem_set:
                self.warn(ln, shown, "mem= gives the memory of the whole job")
        if self.vmem is not None and not self.mem_set:
            self.set(self.vmem[1], "mem", self.vmem[0])
        if self.pvmem is not None and not self.pmem_set:
            self.set(self.pvmem[1], "mem_per_cpu", self.pvmem[0])
        if self.array is not None:
            text, ln = self.array
            if self.throttle is not None:
                text = text.split("%", 1)[0] + f"%{self.throttle[0]}"
            self.set(ln, "array", text)
            self.out.task_sep = {"#PBS -J": ".", "#PBS -t": "-", "#$ -t": "."}.get(self.array_flag, "_")
        if self.export is not None:  # PBS and SGE: the whole environment here, and the variables -v names
            self.set(self.export_line, "export", self.export.text())
        self.out.dialect = dialect
        self.out.settings.sort(key=lambda s: s[0])
        return self.out


def _bytes(size: str) -> int:
    """Bytes of a size :func:`_pbs_size` made."""
    return 0 if size == "0" else int(size[:-1]) << (20 if size[-1] == "M" else 10)


def translate(text: str, label: str) -> Translation:
    """gsub options from the ``#SBATCH``, ``#PBS`` or ``#$`` lines at the top of ``text``.

    One system's directives are read: those of the first directive line.  A
    script that mixes them gets a warning saying which system's lines are read.
    Raises :class:`CompatError` for a value that cannot be translated.
    ``label`` names the script in messages.
    """
    found = {prefix: scan(text, prefix) for prefix in PREFIXES}
    present = sorted((lines[0][0], prefix) for prefix, lines in found.items() if lines)
    r = _Reader(label)
    if not present:
        return r.out
    first_line, prefix = present[0]
    for _, other in present[1:]:
        r.note(
            found[other][0][0],
            f"the script mixes {prefix} and {other} lines: the {prefix} lines are read (the first directive, "
            f"line {first_line}); the {other} lines are ignored",
        )
    read = {"#SBATCH": r.slurm, "#PBS": r.pbs, "#$": r.sge}[prefix]
    for lineno, line in found[prefix]:
        r.out.lines[lineno] = f"{prefix} {line}"
        read(lineno, line)
    return r.finish(DIALECTS[prefix])


def has_foreign(text: str) -> bool:
    return any(scan(text, prefix) for prefix in PREFIXES)


# -- output file names --------------------------------------------------------------------------

PATTERNS = "AajJNnstux%"
_PATTERN = re.compile(r"%(\d*)(.?)")


def unknown_patterns(template: str) -> list[str]:
    """The ``%`` patterns of an output file name that sbatch does not know (they stay as written)."""
    return [m.group() for m in _PATTERN.finditer(template) if m.group(2) not in PATTERNS or not m.group(2)]


def slurm_output(array: bool) -> str:
    """sbatch's default output file name."""
    return "slurm-%A_%a.out" if array else "slurm-%j.out"


# -- writing #SBATCH and #PBS -----------------------------------------------------------------


def _slurm_mem(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    return f"{math.ceil(n / 1024)}K"


def sbatch_lines(params: dict[str, Any]) -> list[str]:
    """``#SBATCH`` lines (and comments for what Slurm lacks) for the gsub options in ``params``.

    ``params`` holds the options that were set, by gsub parameter name.
    """
    q = shlex.quote
    out: list[str] = []
    if params.get("name") is not None:
        out.append(f"#SBATCH --job-name={q(params['name'])}")
    ncpus, ntasks, per = params.get("ncpus"), params.get("ntasks"), params.get("cpus_per_task")
    if ntasks is not None or per is not None:  # the job's own tasks (-n, if given, is their product)
        ntasks = ntasks or (ncpus // per if ncpus else 1)
        out += [f"#SBATCH --ntasks={ntasks}", f"#SBATCH --cpus-per-task={per or (ncpus or ntasks) // ntasks}"]
    elif ncpus is not None:
        out += ["#SBATCH --ntasks=1", f"#SBATCH --cpus-per-task={ncpus}"]
    if params.get("walltime") is not None:
        out.append(f"#SBATCH --time={format_duration(params['walltime'])}")
    if params.get("mem") is not None:
        out.append(f"#SBATCH --mem={_slurm_mem(params['mem']) if params['mem'] else 0}")
    if params.get("mem_per_cpu") is not None:
        out.append(f"#SBATCH --mem-per-cpu={_slurm_mem(params['mem_per_cpu'])}")
    for key, flag in (
        ("output", "--output"),
        ("error", "--error"),
        ("chdir", "--chdir"),
        ("depend", "--dependency"),
        ("array", "--array"),
        ("begin", "--begin"),
        ("open_mode", "--open-mode"),
        ("signal", "--signal"),
    ):
        if params.get(key):
            out.append(f"#SBATCH {flag}={q(params[key])}")
    if params.get("estimate") is not None:
        out.append(f"# gridsched: dropped --estimate {format_duration(params['estimate'])} (--time-min differs)")
    if params.get("hold_jid"):
        out.append(f"# gridsched: dropped --hold-jid {q(params['hold_jid'])} (Slurm's dependencies name job ids)")
    if params.get("exclusive"):
        out.append("#SBATCH --exclusive")
    ex = params.get("export")
    if ex is not None:
        out.append(f"#SBATCH --export={q(ex.text())}")
    if params.get("mail_type") is not None:
        out.append(f"#SBATCH --mail-type={','.join(params['mail_type']) or 'NONE'}")
    if params.get("mail_user"):
        out.append(f"#SBATCH --mail-user={q(','.join(params['mail_user']))}")
    if params.get("get_user_env") is not None:
        out.append(f"#SBATCH --get-user-env={params['get_user_env'].text()}")
    if params.get("hold"):
        out.append("#SBATCH --hold")
    if params.get("wait"):
        out.append("#SBATCH --wait")
    out += _sbatch_devices(params)
    if params.get("nice"):
        out.append(f"#SBATCH --nice={params['nice']}")
    if params.get("priority") is not None:
        out.append(f"# gridsched: dropped --priority {params['priority']} (an operator's scontrol update in Slurm)")
    ck = params.get("checkpoint")
    if ck == "requeue":
        out.append("#SBATCH --requeue")
    elif ck == "none":
        out.append("#SBATCH --no-requeue")
    elif ck == "signal":
        sig, grace = params.get("_checkpoint_signal") or "USR1", params.get("_checkpoint_grace") or 30
        out.append(f"# gridsched: --checkpoint signal: SIG{sig} to the batch shell {grace} s before the time limit,")
        out.append("# and requeued when preempted (Slurm's PreemptMode=REQUEUE); exit 75 is not special to Slurm")
        out += [f"#SBATCH --signal=B:{sig}@{grace}", "#SBATCH --requeue"]
    elif ck is not None:
        out.append(f"# gridsched: dropped --checkpoint {ck} (no Slurm equivalent)")
    join = params.get("join")
    if join == "oe" and not params.get("error"):
        pass  # sbatch joins the error to the output when no --error is given
    elif join in ("oe", "eo"):
        out.append(f"# gridsched: dropped --join {join} (sbatch joins them when --error is not given)")
    return out


def _sbatch_devices(params: dict[str, Any]) -> list[str]:
    """``#SBATCH`` lines for gsub's device options (same names in Slurm, but --gpu-bind strict)."""
    q = shlex.quote
    out: list[str] = []
    if params.get("gpus"):
        out.append(f"#SBATCH --gpus={q(str(params['gpus']))}")
    if params.get("gpus_per_task") is not None:
        out.append(f"#SBATCH --gpus-per-task={params['gpus_per_task']}")
    if params.get("gres"):
        out.append(f"#SBATCH --gres={q(','.join(params['gres']))}")
    bind = params.get("gpu_bind")
    if bind == "strict":  # Slurm's way to require the cores beside the GPUs
        out.append("#SBATCH --gres-flags=enforce-binding")
    elif bind:
        out.append(f"#SBATCH --gpu-bind={bind}")
    if params.get("exclusive_gpu"):
        out.append("# gridsched: --exclusive-gpu: Slurm does not share a GPU unless the site configures sharding")
    return out


def _pbs_mem(n: int) -> str:
    if n % (1 << 30) == 0:
        return f"{n >> 30}gb"
    if n % (1 << 20) == 0:
        return f"{n >> 20}mb"
    return f"{math.ceil(n / 1024)}kb"


def pbs_lines(params: dict[str, Any]) -> list[str]:
    """``#PBS`` lines (PBS Pro; Torque reads them too but for -J) for the gsub options in ``params``."""
    q = shlex.quote
    out: list[str] = []
    if params.get("name") is not None:
        out.append(f"#PBS -N {q(params['name'])}")
    select = f"select=1:ncpus={params.get('ncpus') or 1}"
    mem = params.get("mem")
    if params.get("mem_per_cpu") is not None:
        mem = params["mem_per_cpu"] * (params.get("ncpus") or 1)
    if mem:
        select += f":mem={_pbs_mem(mem)}"
    ngpus = _gpu_count(params)
    if ngpus:
        select += f":ngpus={ngpus}"
    if params.get("ncpus") is not None or mem or ngpus:
        out.append(f"#PBS -l {select}")
    if params.get("exclusive"):
        out.append("#PBS -l place=excl")
    ex = params.get("export")
    if ex is not None:
        if ex.all:
            out.append("#PBS -V")
        else:
            out.append("# gridsched: --export without ALL: PBS passes only its PBS_O_ variables and those -v names")
        listed = Export(True, ex.names, ex.values).text().removeprefix("ALL").lstrip(",")
        if listed:
            out.append(f"#PBS -v {q(listed)}")
    if params.get("gpus") and ":" in str(params["gpus"]):
        out.append(f"# gridsched: the GPU model of --gpus {q(str(params['gpus']))} is a site resource in PBS")
    if params.get("gres") or params.get("gpu_bind") or params.get("exclusive_gpu"):
        out.append("# gridsched: dropped --gres/--gpu-bind/--exclusive-gpu (no PBS Pro equivalent)")
    if params.get("walltime") is not None:
        h, rest = divmod(int(params["walltime"]), 3600)
        out.append(f"#PBS -l walltime={h:02d}:{rest // 60:02d}:{rest % 60:02d}")
    for key, flag in (("output", "-o"), ("error", "-e")):
        if params.get(key):
            out.append(f"#PBS {flag} {q(params[key])}")
            if "%" in params[key]:
                out.append(f"# gridsched: PBS does not expand % patterns in {flag}")
    if params.get("join"):
        out.append(f"#PBS -j {params['join']}")
    if params.get("chdir"):
        out.append(f"#PBS -d {q(params['chdir'])}")
        out.append("# gridsched: -d is Torque's; PBS Pro starts in $HOME (cd to the directory in the script)")
    if params.get("depend"):
        out.append(f"#PBS -W depend={q(params['depend'])}")
    if params.get("array"):
        out.append(f"#PBS -J {q(params['array'])}")
    out += _pbs_mail(params)
    if params.get("hold"):
        out.append("#PBS -h")
    if params.get("wait"):
        out.append("#PBS -W block=true")
    if params.get("shell"):
        out.append(f"#PBS -S {q(params['shell'])}")
    ck = params.get("checkpoint")
    if ck == "requeue":
        out.append("#PBS -r y")
    elif ck == "none":
        out.append("#PBS -r n")
    elif ck is not None:
        out.append(f"# gridsched: dropped --checkpoint {ck} (no PBS equivalent)")
    for key in ("begin", "open_mode"):
        if params.get(key):
            out.append(f"# gridsched: dropped --{key.replace('_', '-')} {q(params[key])} (not translated to PBS)")
    if params.get("signal"):
        out.append(f"# gridsched: dropped --signal {q(params['signal'])} (PBS has no signal before the walltime)")
    if params.get("hold_jid"):
        out.append(f"# gridsched: dropped --hold-jid {q(params['hold_jid'])} (PBS dependencies name job ids)")
    if params.get("estimate") is not None:
        h, rest = divmod(int(params["estimate"]), 3600)
        out.append(f"#PBS -l soft_walltime={h:02d}:{rest // 60:02d}:{rest % 60:02d}")
    return out


_PBS_MAIL = {"FAIL": "a", "BEGIN": "b", "END": "e"}


def _pbs_mail(params: dict[str, Any]) -> list[str]:
    """``#PBS -m`` and ``-M`` for --mail-type and --mail-user (PBS has no requeue or time limit mail)."""
    out: list[str] = []
    events = params.get("mail_type")
    if events is not None:
        letters = "".join(c for e, c in _PBS_MAIL.items() if e in events)
        if letters and "ARRAY_TASKS" in events:
            letters += "j"
        out.append(f"#PBS -m {letters or 'n'}")
        other = [e for e in events if e not in _PBS_MAIL and e != "ARRAY_TASKS"]
        if other:
            out.append(f"# gridsched: dropped --mail-type {','.join(other)} (no PBS mail event)")
    if params.get("mail_user"):
        out.append(f"#PBS -M {shlex.quote(','.join(params['mail_user']))}")
    if params.get("get_user_env") is not None:
        out.append("# gridsched: dropped --get-user-env (PBS jobs start from the login environment without it)")
    return out


def _gpu_count(params: dict[str, Any]) -> int:
    """The GPUs --gpus or --gpus-per-task asks for (``H100:2`` is 2)."""
    if params.get("gpus"):
        try:
            return int(str(params["gpus"]).rsplit(":", 1)[-1])
        except ValueError:
            return 0
    if params.get("gpus_per_task") is not None:
        return int(params["gpus_per_task"]) * int(params.get("ntasks") or 1)
    return 0


def _emit(text: str, lines: list[str], shell: str | None) -> str:
    """``text`` with its header ``#GS`` and foreign directive lines replaced by ``lines``."""
    src = text.splitlines()
    drop = {n for p in ("#GS", *PREFIXES) for n, _ in scan(text, p)}
    head = src[0] if src and src[0].startswith("#!") else f"#!{shell or '/bin/sh'}"
    body = [ln for n, ln in enumerate(src, start=1) if n not in drop and not (n == 1 and ln.startswith("#!"))]
    return "\n".join([head, *lines, *body]) + "\n"


def emit_slurm(text: str, params: dict[str, Any]) -> str:
    """``text`` with its header directive lines replaced by ``#SBATCH`` lines for ``params``."""
    return _emit(text, sbatch_lines(params), params.get("shell"))


def emit_pbs(text: str, params: dict[str, Any]) -> str:
    """``text`` with its header directive lines replaced by ``#PBS`` lines for ``params``."""
    return _emit(text, pbs_lines(params), params.get("shell"))


# -- the manual ------------------------------------------------------------------


def manual_rows() -> list[tuple[str, str, str]]:
    """``(directive, meaning, gridsched option)`` for every directive read."""
    rows = [("#SBATCH " + ", ".join(r.flags), r.meaning, r.gs) for r in SLURM]
    rows += [("#PBS " + ", ".join(r.flags), r.meaning, r.gs) for r in PBS]
    rows += [("#PBS -l " + ", ".join(f"{f}=" for f in r.flags), r.meaning, r.gs) for r in PBS_RESOURCES]
    rows.append(("#PBS -l NAME=K", "any other resource (licences)", "(not supported yet: warned)"))
    rows += [("#$ " + ", ".join(r.flags), r.meaning, r.gs) for r in SGE]
    rows += [("#$ -l " + ", ".join(f"{f}=" for f in r.flags), r.meaning, r.gs) for r in SGE_RESOURCES]
    return rows
