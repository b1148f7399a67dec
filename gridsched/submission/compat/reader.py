"""Reading ``#SBATCH``, ``#PBS`` and ``#$`` lines: :func:`scan` finds them at the top of a script and
:func:`translate` turns them into gsub options, with warnings for what has no meaning here."""

from __future__ import annotations

import math
import os
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from gridsched.core.units import UnitError
from gridsched.protocol.jobs import Hint
from gridsched.submission.compat.header import has_foreign as has_foreign
from gridsched.submission.compat.header import scan
from gridsched.submission.compat.rules import (
    DIALECTS,
    GS_FLAG,
    GS_SWITCH,
    PBS,
    PBS_RESOURCES,
    PREFIXES,
    SGE,
    SGE_RESOURCES,
    SLURM,
    CompatError,
    Rule,
)
from gridsched.submission.compat.values import (
    Export,
    int_in,
    parse_begin,
    parse_export,
    parse_pbs_begin,
    pbs_depend,
    pbs_path,
    pbs_size,
    pbs_time,
    sbatch_time,
    sge_path,
    sge_time,
    size_text,
    whole_count,
)


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
HINTS = tuple(h.value for h in Hint)  # sbatch --hint
_ARRAY = re.compile(r"^\d+(-\d+(:\d+)?)?(,\d+(-\d+(:\d+)?)?)*(%\d+)?$")


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
        self.sge_cwd = False  # Grid Engine's -cwd: the submit directory (else the home directory)

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
            elif key == "account":  # Slurm keeps account names in lower case
                self.set(lineno, "account", v.strip().lower())
            elif key == "nice":
                self.set(lineno, "nice", "100" if value is None else int_in(where, shown, v, -10000, 10000))
            elif key == "ntasks":
                self.ntasks = (whole_count(where, shown, v), lineno)
            elif key == "per_node":
                self.per_node = (whole_count(where, shown, v), lineno)
            elif key == "cpus":
                self.cpus = (whole_count(where, shown, v), lineno)
            elif key == "nodes":
                self.nodes = (whole_count(where, shown, v.split("-", 1)[0]), lineno, shown)
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
                self.set(lineno, "mem", size_text(where, shown, v))
            elif key in ("mem_per_cpu", "mem_per_gpu"):
                self.set(lineno, key, size_text(where, shown, v))
            elif key in ("output", "error", "depend", "reservation"):
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
            elif key in ("gpus", "gpus_per_node"):
                self.set(lineno, key, v.strip())
            elif key == "hint":
                h = v.strip().lower()
                if h not in HINTS:
                    raise CompatError(f"{where}: {shown}: must be one of {', '.join(HINTS)}")
                self.set(lineno, "hint", h)
            elif key == "threads_per_core":
                self.set(lineno, "threads_per_core", str(whole_count(where, shown, v)))
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
                n = int(int_in(where, shown, v, -1024, 1023))
                if n > 0:
                    self.warn(lineno, shown, "only an admin raises a job's priority (gsub --nice -N)")
                elif n < 0:
                    self.set(lineno, "nice", str(-n))
            elif key in ("output", "error"):
                self.set(lineno, key, pbs_path(v))
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
                        self.set(lineno, "depend", pbs_depend(rest.partition("=")[2]))
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
            self.set(lineno, "mem", pbs_size(where, shown, value))
        elif rule.key == "pmem":
            self.pmem_set.append((lineno, shown))
            self.set(lineno, "mem_per_cpu", pbs_size(where, shown, value))
        elif rule.key == "vmem":
            self.vmem = (pbs_size(where, shown, value), lineno)
        elif rule.key == "pvmem":
            self.pvmem = (pbs_size(where, shown, value), lineno)
        elif rule.key == "ncpus":
            self.set(lineno, "ncpus", str(whole_count(where, shown, value)))
        elif rule.key == "ngpus":
            self.set(lineno, "gpus", str(whole_count(where, shown, value)))
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
            count = whole_count(where, shown, count_s) if count_s else 1
            per = 1
            gpus = 0
            for a in attrs:
                k, _, x = a.partition("=")
                if k in ("ppn", "ncpus"):
                    per = whole_count(where, shown, x)
                elif k in ("ngpus", "gpus"):  # PBS Pro select ngpus=, Torque nodes gpus=
                    gpus = whole_count(where, shown, x)
                elif k == "mem":
                    mem += count * _bytes(pbs_size(where, shown, x))
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
            if key == "cwd":
                self.sge_cwd = True
            elif key == "sge_mail":
                self.letters_mail(lineno, where, shown, v, {"b": "BEGIN", "e": "END", "a": "FAIL,REQUEUE"})
            elif key in ("output", "error"):
                self.set(lineno, key, sge_path(v))
            elif key == "join":
                j = v.strip().lower()
                if j not in ("y", "yes", "n", "no"):
                    raise CompatError(f"{where}: {shown}: must be y or n")
                self.set(lineno, "join", "oe" if j.startswith("y") else "n")
            elif key == "throttle":
                self.throttle = (whole_count(where, shown, v), lineno)
            elif key == "hold_jid":
                ids = [i.strip() for i in v.split(",") if i.strip()]
                if not ids:
                    raise CompatError(f"{where}: {shown}: needs job ids or names")
                if all(i.isascii() and i.isdigit() for i in ids):
                    self.set(lineno, "depend", "afterany:" + ":".join(ids))
                else:  # names are looked up at submission, among the user's own jobs
                    self.set(lineno, "hold_jid", ",".join(ids))
            elif key in ("sync", "now"):
                y = v.strip().lower()
                if y not in ("y", "yes", "n", "no"):
                    raise CompatError(f"{where}: {shown}: must be y or n")
                if y.startswith("y") and key == "sync":
                    self.set(lineno, "wait")
                elif y.startswith("y"):
                    self.warn(lineno, shown, "the job waits in the queue until it can start")
            elif key == "binary":
                if v.strip().lower().startswith("y"):
                    raise CompatError(f"{where}: {shown}: gsub takes a script; use --wrap for a command")
            elif key == "pe":
                self.set(lineno, "pe", v.split()[0])
                slots = v.split()[-1]
                lo, dash, hi = slots.partition("-")
                n = whole_count(where, shown, lo or hi)
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
                self.set(lineno, "gpus", str(whole_count(where, shown, v)))
        elif rule.key == "time":
            try:
                self.set(lineno, "time", f"{sge_time(value)}s")
            except UnitError as e:
                raise CompatError(f"{where}: {shown}: {e}") from None
        else:
            self.set(lineno, "mem_per_cpu", size_text(where, shown, value))

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
            if self.per_node:  # as given: SLURM_NTASKS_PER_NODE
                self.set(self.per_node[1], "ntasks_per_node", str(self.per_node[0]))
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
            count = whole_count(f"{self.label}:{ln}", "--gpus-per-task", per)
            if not model and (self.ntasks or self.per_node):  # gsub's own: the same GPUs, and the job knows
                self.set(ln, "gpus_per_task", str(count))  # its count (SLURM_GPUS_PER_TASK)
            else:  # as --gres (not --gpus: the job sees no SLURM_GPUS, as under Slurm)
                total = str(count * tasks)
                self.set(ln, "gres", f"gpu:{model}:{total}" if model else f"gpu:{total}")
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
            if self.array_flag == "#PBS -t":  # Torque gives each subjob its own files: the -o and -e paths
                # with -INDEX after them (Torque src/server/job_func.c, job_clone), not one file for all
                for _, tokens in self.out.settings:
                    if tokens[0] in (GS_FLAG["output"], GS_FLAG["error"]):
                        tokens[1] += "-%a"
        if self.export is not None:  # PBS and SGE: the whole environment here, and the variables -v names
            self.set(self.export_line, "export", self.export.text())
        if dialect == "sge" and not self.sge_cwd and not any(s[1][0] == GS_FLAG["chdir"] for s in self.out.settings):
            # Grid Engine runs a job without -cwd or -wd in its owner's home directory, and writes its default
            # (and relative) output files there (qsub(1), -cwd; sge_shepherd changes to the home directory)
            import pwd

            self.out.settings.append((0, [GS_FLAG["chdir"], pwd.getpwuid(os.getuid()).pw_dir]))
        self.out.dialect = dialect
        self.out.settings.sort(key=lambda s: s[0])
        return self.out


def _bytes(size: str) -> int:
    """Bytes of a size :func:`pbs_size` made."""
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


def translate_words(words: list[str], dialect: str, label: str) -> Translation:
    """gsub options from qsub's options ``words`` (a command line's), read by the rules of ``#$`` lines
    (``dialect`` "sge") or ``#PBS`` lines ("pbs") as one directive line; :class:`CompatError` as
    :func:`translate`."""
    r = _Reader(label)
    text = shlex.join(words)
    r.out.lines[1] = text
    (r.sge if dialect == "sge" else r.pbs)(1, text)
    return r.finish(dialect)
