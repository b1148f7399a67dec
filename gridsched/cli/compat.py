"""Slurm and PBS directives: reading ``#SBATCH`` / ``#PBS`` lines, writing ``#SBATCH`` lines.

A script without ``#GS`` directives may carry ``#SBATCH`` or ``#PBS`` ones;
they are found by the same header rule as ``#GS`` (:func:`scan`) and
translated into gsub options (:func:`translate`).  What has no meaning on one
machine is not dropped silently: it becomes a warning that names the line.
The tables :data:`SLURM` and :data:`PBS` drive the translation and the
section "SLURM AND PBS DIRECTIVES" of gsub(1).

:func:`emit_slurm` goes the other way: a script with ``#SBATCH`` lines
equivalent to the gsub options.

Standard library only: gsub imports this on every submission.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..core.units import format_duration


class CompatError(Exception):
    """A directive whose value cannot be translated; the message names the line."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One directive: its flags, what it sets (``key``), and what gsub does with it."""

    flags: tuple[str, ...]
    key: str  # what it sets; "ignore" for directives that have no meaning here
    meaning: str
    gs: str  # the gridsched equivalent, for the manual
    value: bool = True  # takes a value
    why: str = ""  # for "ignore": why, in the warning


SLURM: tuple[Rule, ...] = (
    Rule(("-J", "--job-name"), "name", "job name", "-N NAME"),
    Rule(("-n", "--ntasks"), "ntasks", "number of tasks", "-n NTASKS*CPUS_PER_TASK"),
    Rule(("--ntasks-per-node",), "ntasks", "tasks on the node", "-n NTASKS*CPUS_PER_TASK"),
    Rule(("-c", "--cpus-per-task"), "cpus", "cores per task", "-n NTASKS*CPUS_PER_TASK"),
    Rule(("-N", "--nodes"), "nodes", "number of nodes", "(1 is accepted; more is warned of: one machine)"),
    Rule(("-t", "--time"), "time", "time limit (a bare number is minutes)", "-t"),
    Rule(("-o", "--output"), "output", "standard output file (%j, %x, %A, %a)", "-o"),
    Rule(("-e", "--error"), "error", "standard error file (%j, %x, %A, %a)", "-e"),
    Rule(("--mem",), "mem", "memory of the job (a bare number is MiB)", "--mem"),
    Rule(("-a", "--array"), "array", "job array (RANGE[%MAX])", "--array"),
    Rule(("-d", "--dependency"), "depend", "dependencies", "-d SPEC"),
    Rule(("-L", "--licenses"), "licenses", "licences", "(not supported yet: warned)"),
    Rule(("-D", "--chdir"), "chdir", "working directory", "-D DIR"),
    Rule(("-H", "--hold"), "hold", "submit held", "--hold", value=False),
    Rule(("-W", "--wait"), "wait", "wait for the job to end", "--wait", value=False),
    Rule(("--requeue",), "requeue", "may be requeued", "--checkpoint requeue", value=False),
    Rule(("--no-requeue",), "norequeue", "never requeued", "--checkpoint none", value=False),
    Rule(("--export",), "export", "environment passed (ALL)", "(always ALL; other values warned)"),
    Rule(("-p", "--partition"), "ignore", "partition", "(warned)", why="no partitions on one machine"),
    Rule(("-A", "--account"), "ignore", "account", "(warned)", why="no accounts"),
    Rule(("-q", "--qos"), "ignore", "quality of service", "(warned)", why="no QOS"),
    Rule(("--mail-type",), "ignore", "mail events", "(warned)", why="gridsched sends no mail"),
    Rule(("--mail-user",), "ignore", "mail address", "(warned)", why="gridsched sends no mail"),
    Rule(
        ("--exclusive",),
        "ignore",
        "whole node",
        "(warned)",
        value=False,
        why="a job gets exactly its own cores; ask for them with -c",
    ),
    Rule(("--mem-per-cpu",), "ignore", "memory per core", "(warned)", why="use --mem for the whole job"),
    Rule(("-C", "--constraint"), "ignore", "node features", "(warned)", why="no node features on one machine"),
    Rule(("--gres",), "ignore", "generic resources", "(warned)", why="no generic resources"),
    Rule(("-G", "--gpus"), "ignore", "GPUs", "(warned)", why="no generic resources"),
    Rule(("-w", "--nodelist"), "ignore", "nodes to use", "(warned)", why="one machine"),
    Rule(("-b", "--begin"), "ignore", "deferred start", "(warned)", why="deferred starts are not supported"),
    Rule(
        ("--signal",),
        "ignore",
        "signal before the time limit",
        "(warned)",
        why="use --checkpoint signal and jobs.checkpoint_signal",
    ),
)

PBS: tuple[Rule, ...] = (
    Rule(("-N",), "name", "job name", "-N NAME"),
    Rule(("-l",), "resources", "resources, comma-separated (below)", "see -l"),
    Rule(("-o",), "output", "standard output file (a host: prefix is dropped)", "-o"),
    Rule(("-e",), "error", "standard error file (a host: prefix is dropped)", "-e"),
    Rule(("-J",), "array", "job array (X-Y[:Z][%MAX])", "--array"),
    Rule(("-W",), "attr", "attribute: depend=SPEC (job ids may carry a .server suffix)", "-d SPEC"),
    Rule(("-d",), "chdir", "working directory", "-D DIR"),
    Rule(("-h",), "hold", "submit held", "--hold", value=False),
    Rule(("-V",), "export", "export the environment", "(always done)", value=False),
    Rule(("-q",), "ignore", "queue", "(warned)", why="one queue on one machine"),
    Rule(("-A",), "ignore", "account", "(warned)", why="no accounts"),
    Rule(("-m",), "ignore", "mail events", "(warned)", why="gridsched sends no mail"),
    Rule(("-M",), "ignore", "mail address", "(warned)", why="gridsched sends no mail"),
    Rule(("-j",), "ignore", "join output and error", "(warned)", why="give -o and -e instead"),
    Rule(("-v",), "ignore", "variables to export", "(warned)", why="the job gets the whole submitting environment"),
    Rule(("-r",), "ignore", "rerunnable", "(warned)", why="use --checkpoint requeue"),
    Rule(("-S",), "ignore", "shell", "(warned)", why="the script's #! line chooses the interpreter"),
    Rule(("-k",), "ignore", "keep output", "(warned)", why="output goes to its files directly"),
    Rule(("-p",), "ignore", "priority", "(warned)", why="priorities are not supported"),
    Rule(("-P",), "ignore", "project", "(warned)", why="no projects"),
)

# Resources of PBS -l NAME=VALUE; any other NAME is a licence (warned).
PBS_RESOURCES: tuple[Rule, ...] = (
    Rule(("walltime",), "time", "time limit, HH:MM:SS or seconds", "-t"),
    Rule(("ncpus",), "ncpus", "cores", "-n"),
    Rule(("nodes",), "nodes", "nodes=N:ppn=M: N*M cores", "-n N*M (N > 1 warned: one machine)"),
    Rule(("select",), "select", "select=N:ncpus=M[:mem=SIZE]: N*M cores", "-n N*M, --mem"),
    Rule(("mem",), "mem", "memory (b, kb, mb, gb, tb; bare: bytes)", "--mem"),
    Rule(("place", "host", "vnode", "arch"), "ignore", "placement", "(warned)", why="one machine"),
)

PREFIXES = {"#SBATCH": SLURM, "#PBS": PBS}
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
    "depend": "-d",
    "chdir": "-D",
    "checkpoint": "--checkpoint",
    "array": "--array",
}
GS_SWITCH = {"hold": "--hold", "wait": "--wait"}


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
    """gsub option tokens per directive line, and the warnings to print."""

    settings: list[tuple[int, list[str]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def params(self) -> dict[str, Any]:
        """The options set, by key (the last line wins), for comparisons."""
        out: dict[str, Any] = {}
        for _, toks in self.settings:
            out[toks[0]] = toks[1] if len(toks) > 1 else True
        return out


def _lookup(rules: tuple[Rule, ...]) -> dict[str, Rule]:
    return {f: r for r in rules for f in r.flags}


_SLURM, _PBS, _PBS_RES = _lookup(SLURM), _lookup(PBS), _lookup(PBS_RESOURCES)
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


def _split(prefix: str, text: str, where: str, rules: dict[str, Rule]) -> list[tuple[str, Rule | None, str | None]]:
    """``(flag, rule, value)`` of each option on one directive line."""
    try:
        toks = shlex.split(text, comments=True)
    except ValueError as e:
        raise CompatError(f"{where}: {str(e).lower()}") from None
    out: list[tuple[str, Rule | None, str | None]] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            raise CompatError(f"{where}: {prefix} {tok!r}: not an option")
        flag, eq, val = tok.partition("=") if tok.startswith("--") else (tok[:2], "", tok[2:])
        rule = rules.get(flag)
        if rule is None:
            out.append((tok, None, None))
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
        out.append((flag, rule, val))
    return out


def _shown(prefix: str, flag: str, value: str | None) -> str:
    if value is None:
        return f"{prefix} {flag}"
    return f"{prefix} {flag}={value}" if flag.startswith("--") else f"{prefix} {flag} {value}"


def _count(where: str, what: str, value: str) -> int:
    v = value.strip()
    if not v.isdigit() or int(v) < 1:
        raise CompatError(f"{where}: {what} '{value}': not a whole number of at least 1")
    return int(v)


def _slurm_time(value: str) -> str | None:
    v = value.strip()
    if v.upper() in ("UNLIMITED", "INFINITE"):
        return None
    return f"{v}m" if v.isdigit() else v  # a bare number is minutes in Slurm, seconds in gsub


def _pbs_size(where: str, value: str) -> str:
    m = _PBS_SIZE.match(value.strip().lower())
    if not m:
        raise CompatError(f"{where}: mem '{value}': not a PBS size (such as 4gb, 512mb)")
    n = int(m.group(1)) * _PBS_MULT[m.group(2) or "b"]
    return f"{n >> 20}M" if n % (1 << 20) == 0 else f"{math.ceil(n / 1024)}K"


def _pbs_path(value: str) -> str:
    host, colon, path = value.partition(":")
    return path if colon and "/" not in host else value


def _pbs_depend(value: str) -> str:
    """PBS ids such as 123.server lose their server suffix."""
    parts = []
    for cond in value.split(","):
        kind, *ids = cond.split(":")
        parts.append(":".join([kind, *(i.split(".", 1)[0] for i in ids)]))
    return ",".join(parts)


class _Reader:
    def __init__(self, label: str) -> None:
        self.label = label
        self.out = Translation()
        self.ntasks: tuple[int, int] | None = None  # (value, line)
        self.cpus: tuple[int, int] | None = None

    def warn(self, lineno: int, shown: str, why: str) -> None:
        self.out.warnings.append(f"{self.label}:{lineno}: {shown} ignored: {why}")

    def set(self, lineno: int, key: str, value: str | None = None) -> None:
        if key in GS_SWITCH:
            self.out.settings.append((lineno, [GS_SWITCH[key]]))
        else:
            self.out.settings.append((lineno, [GS_FLAG[key], str(value)]))

    def common(self, lineno: int, where: str, shown: str, rule: Rule, value: str | None) -> bool:
        """Keys both dialects treat alike; False if ``rule.key`` is not one of them."""
        key = rule.key
        if key in ("name", "chdir", "hold", "wait"):
            self.set(lineno, key, value)
        elif key == "array":
            if not _ARRAY.match(str(value).strip()):
                raise CompatError(f"{where}: {shown}: not an array range (such as 1-10, 1,3,5, 0-15:4%2)")
            self.set(lineno, "array", str(value).strip())
        elif key == "ignore":
            self.warn(lineno, shown, rule.why)
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
            if key == "ntasks":
                self.ntasks = (_count(where, flag, v), lineno)
            elif key == "cpus":
                self.cpus = (_count(where, flag, v), lineno)
            elif key == "nodes":
                lo = v.split("-", 1)[0]
                if _count(where, flag, lo) > 1:
                    self.warn(lineno, shown, "one machine: the job runs on this one")
            elif key == "time":
                t = _slurm_time(v)
                if t is None:
                    self.warn(lineno, shown, "no unlimited walltime: jobs.default_walltime applies")
                else:
                    self.set(lineno, "time", t)
            elif key in ("output", "error", "mem", "depend"):
                self.set(lineno, key, v)
            elif key == "licenses":
                self.warn(lineno, shown, "licences are not supported yet")
            elif key == "requeue":
                self.set(lineno, "checkpoint", "requeue")
            elif key == "norequeue":
                self.set(lineno, "checkpoint", "none")
            elif key == "export" and v.strip().upper() != "ALL":
                self.warn(lineno, shown, "the job always gets the whole submitting environment (ALL)")

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
            if key in ("output", "error"):
                self.set(lineno, key, _pbs_path(v))
            elif key == "attr":
                name, eq, val = v.partition("=")
                if name.strip() == "depend" and eq:
                    self.set(lineno, "depend", _pbs_depend(val))
                else:
                    self.warn(lineno, shown, f"attribute {name.strip()!r} is not supported")
            elif key == "resources":
                for item in v.split(","):
                    if item.strip():
                        self.pbs_resource(lineno, where, item.strip())

    def pbs_resource(self, lineno: int, where: str, item: str) -> None:
        name, eq, value = item.partition("=")
        shown = f"#PBS -l {item}"
        rule = _PBS_RES.get(name.strip())
        if rule is None or not eq:
            self.warn(lineno, shown, f"resource {name.strip()!r}: licences and custom resources are not supported yet")
            return
        if rule.key == "ignore":
            self.warn(lineno, shown, rule.why)
        elif rule.key == "time":
            self.set(lineno, "time", value)
        elif rule.key == "mem":
            self.set(lineno, "mem", _pbs_size(where, value))
        elif rule.key == "ncpus":
            self.set(lineno, "ncpus", str(_count(where, "ncpus", value)))
        elif rule.key in ("nodes", "select"):
            chunks_s, *attrs = value.split(":")
            chunks = _count(where, name, chunks_s) if chunks_s else 1
            per = 1
            for a in attrs:
                k, _, x = a.partition("=")
                if k in ("ppn", "ncpus"):
                    per = _count(where, k, x)
                elif k == "mem":
                    self.set(lineno, "mem", _pbs_size(where, x))
                else:
                    self.warn(lineno, shown, f"{k!r} in {name}: not supported")
            if rule.key == "nodes" and chunks > 1:
                self.out.warnings.append(
                    f"{self.label}:{lineno}: {shown}: {chunks} nodes become {chunks * per} cores of this one machine"
                )
            self.set(lineno, "ncpus", str(chunks * per))

    def finish(self) -> Translation:
        if self.ntasks or self.cpus:
            n, ln1 = self.ntasks or (1, 0)
            c, ln2 = self.cpus or (1, 0)
            self.set(max(ln1, ln2), "ncpus", str(n * c))
            if self.ntasks:  # the job's tasks, for the Slurm environment and srun
                self.set(ln1, "ntasks", str(n))
            if self.cpus:
                self.set(ln2, "cpus_per_task", str(c))
        self.out.settings.sort(key=lambda s: s[0])
        return self.out


def translate(text: str, label: str) -> Translation:
    """gsub options from the ``#SBATCH`` and ``#PBS`` lines at the top of ``text``.

    Raises :class:`CompatError` for a value that cannot be translated.
    ``label`` names the script in messages.
    """
    r = _Reader(label)
    for lineno, line in scan(text, "#SBATCH"):
        r.slurm(lineno, line)
    for lineno, line in scan(text, "#PBS"):
        r.pbs(lineno, line)
    return r.finish()


def has_foreign(text: str) -> bool:
    return bool(scan(text, "#SBATCH") or scan(text, "#PBS"))


# -- writing #SBATCH ------------------------------------------------------------


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
        out.append(f"#SBATCH --mem={_slurm_mem(params['mem'])}")
    for key, flag in (
        ("output", "--output"),
        ("error", "--error"),
        ("chdir", "--chdir"),
        ("depend", "--dependency"),
        ("array", "--array"),
    ):
        if params.get(key):
            out.append(f"#SBATCH {flag}={q(params[key])}")
    if params.get("hold"):
        out.append("#SBATCH --hold")
    if params.get("wait"):
        out.append("#SBATCH --wait")
    ck = params.get("checkpoint")
    if ck == "requeue":
        out.append("#SBATCH --requeue")
    elif ck == "none":
        out.append("#SBATCH --no-requeue")
    elif ck is not None:
        out.append(f"# gridsched: dropped --checkpoint {ck} (no Slurm equivalent)")
    return out


def emit_slurm(text: str, params: dict[str, Any]) -> str:
    """``text`` with its header ``#GS`` and ``#SBATCH`` lines replaced by ``#SBATCH`` lines for ``params``."""
    lines = text.splitlines()
    drop = {n for n, _ in scan(text, "#GS")} | {n for n, _ in scan(text, "#SBATCH")}
    head = lines[0] if lines and lines[0].startswith("#!") else "#!/bin/sh"
    body = [ln for n, ln in enumerate(lines, start=1) if n not in drop and not (n == 1 and ln.startswith("#!"))]
    return "\n".join([head, *sbatch_lines(params), *body]) + "\n"


# -- the manual ------------------------------------------------------------------


def manual_rows() -> list[tuple[str, str, str]]:
    """``(directive, meaning, gridsched option)`` for every directive read."""
    rows = [("#SBATCH " + ", ".join(r.flags), r.meaning, r.gs) for r in SLURM]
    rows += [("#PBS " + ", ".join(r.flags), r.meaning, r.gs) for r in PBS]
    rows += [("#PBS -l " + ", ".join(f"{f}=" for f in r.flags), r.meaning, r.gs) for r in PBS_RESOURCES]
    rows.append(("#PBS -l NAME=K", "any other resource (licences)", "(not supported yet: warned)"))
    return rows
