"""Slurm's, PBS's and Grid Engine's commands inside a job: ``sbatch``, ``scontrol``, ``squeue``, ``scancel``,
``qsub``, ``qstat`` and ``qdel``.

Each is a small program in the job's private ``bin/`` (made at each start,
see :mod:`gridsched.daemon.jobtmp`, first on the job's ``PATH``) that acts
on gridsched as the job's owner, on the job's spool (``GS_SPOOL``): scripts
written for those systems resubmit themselves (``sbatch --dependency=...
$0``), find their host (``scontrol show hostnames $SLURM_JOB_NODELIST``),
look at and cancel their jobs.  The submission commands translate their
options as gsub reads the same words in ``#SBATCH``, ``#PBS`` or ``#$``
lines (one table, :mod:`gridsched.submission.compat`) and submit with gsub,
which reads the script's own directives; the command line wins over them,
as it does under those systems.  What a command does not carry out is
refused in one line, with a non-zero exit.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gridsched.protocol.jobs import JobState

PROGS = ("sbatch", "scontrol", "squeue", "scancel", "qsub", "qstat", "qdel")
PARTITION = "batch"  # SLURM_JOB_PARTITION, PBS_QUEUE (gridsched.job.env.QUEUE)
# squeue's compact state codes (squeue(1), JOB STATE CODES)
SLURM_CODES = {
    "PENDING": "PD",
    "HELD": "PD",
    "RUNNING": "R",
    "STOPPING": "CG",
    "SUSPENDED": "S",
    "COMPLETED": "CD",
    "FAILED": "F",
    "CANCELLED": "CA",
    "TIMEOUT": "TO",
    "OUT_OF_MEMORY": "OOM",
}
SLURM_STATES = {"HELD": "PENDING", "STOPPING": "COMPLETING"}
# qstat's one-letter states: PBS (Q queued, H held, R running, S suspended, E exiting, F finished) and Grid
# Engine (qw, hqw, r, s, t)
PBS_CODES = {"PENDING": "Q", "HELD": "H", "RUNNING": "R", "STOPPING": "E", "SUSPENDED": "S"}
SGE_CODES = {"PENDING": "qw", "HELD": "hqw", "RUNNING": "r", "STOPPING": "t", "SUSPENDED": "s"}
SQUEUE_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"


class Refused(Exception):
    """What the command does not do, or bad input: its one line."""


def main() -> None:
    prog = os.path.basename(sys.argv[0])
    sys.exit(run(prog if prog in PROGS else "sbatch", sys.argv[1:]))


def run(prog: str, args: list[str]) -> int:
    """Run the in-job command ``prog``; its exit status."""
    if "GRIDSCHED_SPOOL" not in os.environ and os.environ.get("GS_SPOOL"):
        os.environ["GRIDSCHED_SPOOL"] = os.environ["GS_SPOOL"]
    from gridsched.api.client import GridschedError

    try:
        return COMMANDS[prog](args)
    except (Refused, GridschedError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1


# -- submitting ----------------------------------------------------------------------------------


def split_options(args: Sequence[str], prefix: str, own: Iterable[str] = ()) -> tuple[list[list[str]], list[str]]:
    """The options before the script (each with its value) by the ``prefix`` directive's rules, and the
    rest (the script and its arguments).  ``own``: flags the command takes itself (kept, with a value when
    the rule says so).  An option no rule knows is refused."""
    from gridsched.submission import compat

    rules = {f: r for r in compat.PREFIXES[prefix] for f in r.flags}
    own = set(own)
    opts: list[list[str]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        flag = a.split("=", 1)[0] if a.startswith("--") else a[:2]
        attached = "=" in a if a.startswith("--") else len(a) > 2
        r = rules.get(flag)
        if r is None and flag not in own:
            raise Refused(f"{flag}: not an option gridsched carries out (see gsub(1), SLURM AND PBS DIRECTIVES)")
        takes = r.value and not r.optional if r is not None else flag in VALUED_OWN
        if takes and not attached:
            if i + 1 >= len(args):
                raise Refused(f"{flag} needs a value")
            opts.append([a, args[i + 1]])
            i += 2
        else:
            opts.append([a])
            i += 1
    return opts, list(args[i:])


VALUED_OWN = {"--wrap"}  # sbatch's own options that take a value


def gsub_tokens(prog: str, prefix: str, opts: list[list[str]]) -> list[str]:
    """gsub's option tokens for ``opts`` read as ``prefix`` directives; their warnings printed."""
    from gridsched.submission import compat

    text = "#!/bin/sh\n" + "".join(f"{prefix} {shlex.join(o)}\n" for o in opts)
    try:
        tr = compat.translate(text, "command line")
    except compat.CompatError as e:
        raise Refused(str(e)) from None
    for w in tr.warnings:
        print(f"{prog}: warning: {w}", file=sys.stderr)
    return [tok for _, toks in tr.settings for tok in toks]


def gsub(args: list[str], stdin: str | None = None) -> tuple[int, str]:
    """Run gsub with ``args`` in this process (``stdin``: the script it reads on its standard input): its
    exit status and what it printed (its errors go to standard error)."""
    from gridsched.cli import gsub as gsub_cli

    out = io.StringIO()
    code: Any = 0
    feed = io.TextIOWrapper(io.BytesIO(stdin.encode())) if stdin is not None else sys.stdin
    with contextlib.redirect_stdout(out), _stdin(feed):
        try:
            gsub_cli.cli.main(args=args, prog_name=gsub_cli.PROG)
        except SystemExit as e:
            code = e.code
    return (code if isinstance(code, int) else 1), out.getvalue()


@contextlib.contextmanager
def _stdin(stream: Any) -> Any:
    saved, sys.stdin = sys.stdin, stream
    try:
        yield
    finally:
        sys.stdin = saved


def wrapped(command: str, opts: list[list[str]]) -> str:
    """The script ``sbatch --wrap`` makes of ``command``, with the options as ``#SBATCH`` lines: a Slurm
    script, so its job is named ``wrap`` (unless ``-J`` says otherwise), writes ``slurm-%j.out`` and
    sees Slurm's environment, as under sbatch."""
    lines = ["#!/bin/sh", "#SBATCH --job-name=wrap", *(f"#SBATCH {shlex.join(o)}" for o in opts)]
    return "\n".join([*lines, "# This script was created by sbatch --wrap.", "", command, ""])


def sbatch(args: list[str]) -> int:
    """``sbatch [OPTIONS] [SCRIPT [ARGS...]]`` (standard input without SCRIPT); ``--wrap CMD``, ``--parsable``."""
    opts, rest = split_options(args, "#SBATCH", ("--parsable", "--wrap"))
    own = [o for o in opts if o[0].split("=", 1)[0] in ("--parsable", "--wrap")]
    parsable = any(o[0] == "--parsable" for o in own)
    wrap = [o[1] if len(o) > 1 else o[0].split("=", 1)[1] for o in own if o[0].startswith("--wrap")]
    if wrap and rest:
        raise Refused("--wrap takes no script")
    if wrap:
        code, said = gsub([], stdin=wrapped(wrap[-1], [o for o in opts if o not in own]))
    else:
        code, said = gsub([*gsub_tokens("sbatch", "#SBATCH", [o for o in opts if o not in own]), *rest])
    if code:
        return code
    jid = said.split()[0] if said.split() else ""
    print(jid if parsable else f"Submitted batch job {jid}")
    return 0


def in_sge_job() -> bool:
    """Whether this job sees Grid Engine's names and not PBS's (a Grid Engine script's job)."""
    return "NSLOTS" in os.environ and "PBS_JOBID" not in os.environ


def script_dialect(rest: list[str]) -> str | None:
    """ "sge" for a script with ``#$`` lines and no ``#PBS`` ones, "pbs" for one with ``#PBS`` lines."""
    if not rest or rest[0] == "-" or not os.path.isfile(rest[0]):
        return None
    from gridsched.submission import compat

    try:
        with open(rest[0], encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    if compat.scan(text, "#PBS"):
        return "pbs"
    return "sge" if compat.scan(text, "#$") else None


def qsub(args: list[str]) -> int:
    """``qsub [OPTIONS] [SCRIPT [ARGS...]]``: PBS's options, Grid Engine's in a Grid Engine job or for a
    script with ``#$`` lines; prints the job id as PBS does (``ID.HOST``), or as Grid Engine's qsub."""
    dialect = "sge" if in_sge_job() else "pbs"
    prefix = {"sge": "#$", "pbs": "#PBS"}
    opts, rest = split_options(args, prefix[dialect], ("-terse",) if dialect == "sge" else ())
    other = script_dialect(rest)
    if other is not None and other != dialect:
        with contextlib.suppress(Refused):
            opts, rest = split_options(args, prefix[other], ("-terse",) if other == "sge" else ())
            dialect = other
    terse = ["-terse"] in opts
    tokens = gsub_tokens("qsub", prefix[dialect], [o for o in opts if o != ["-terse"]])
    code, said = gsub([*tokens, *rest])
    if code:
        return code
    jid = said.split()[0] if said.split() else ""
    if dialect == "pbs":
        print(f"{jid}.{_host()}")
    elif terse:
        print(jid)
    else:
        print(f'Your job {jid} ("{_name_of(jid)}") has been submitted')
    return 0


# -- looking -------------------------------------------------------------------------------------


def _client() -> Any:
    from gridsched.api.client import Client

    return Client()


def _host() -> str:
    import socket

    return socket.gethostname().split(".", 1)[0] or "localhost"


def _name_of(jid: str) -> str:
    try:
        return str(_client().status(int(jid)).name)
    except Exception:
        return ""


def job_id(text: str, prog: str) -> int:
    """A job id as the systems write it: ``12``, ``12.server`` (PBS), ``12_3`` is refused (array tasks are
    jobs of their own here)."""
    head = text.split(".", 1)[0]
    if not head.isdigit() or int(head) < 1:
        raise Refused(f"{text!r}: not a job id")
    return int(head)


def clock(seconds: float) -> str:
    """Slurm's elapsed time: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``."""
    s = max(0, int(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{s:02d}"
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def hms(seconds: float) -> str:
    """scontrol's times: ``HH:MM:SS``, ``D-HH:MM:SS``."""
    s = max(0, int(seconds))
    d, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{d}-{text}" if d else text


def _used(j: Any) -> float:
    if j.start_time is None:
        return 0.0
    return (j.end_time or time.time()) - j.start_time


def _reason(j: Any) -> str:
    if j.state == JobState.RUNNING:
        return _host()
    if j.state == JobState.HELD:
        return "(JobHeldUser)"
    return f"({j.reason or 'None'})"


SQUEUE_FIELDS: dict[str, Callable[[Any], str]] = {
    "i": lambda j: str(j.id),
    "A": lambda j: str(j.id),
    "P": lambda j: PARTITION,
    "j": lambda j: j.name,
    "u": lambda j: j.user,
    "t": lambda j: SLURM_CODES.get(j.state, j.state),
    "T": lambda j: SLURM_STATES.get(j.state, j.state),
    "M": lambda j: clock(_used(j)),
    "l": lambda j: clock(j.walltime),
    "D": lambda j: "1",
    "C": lambda j: str(j.ncpus),
    "R": _reason,
    "N": lambda j: _host() if j.state == JobState.RUNNING else "",
    "r": lambda j: _reason(j).strip("()") if j.state != JobState.RUNNING else "None",
}
SQUEUE_HEADS = {
    "i": "JOBID",
    "A": "JOBID",
    "P": "PARTITION",
    "j": "NAME",
    "u": "USER",
    "t": "ST",
    "T": "STATE",
    "M": "TIME",
    "l": "TIME_LIMIT",
    "D": "NODES",
    "C": "CPUS",
    "R": "NODELIST(REASON)",
    "N": "NODELIST",
    "r": "REASON",
}
_FIELD = re.compile(r"%(\.?)(\d*)([A-Za-z])")


def squeue_line(fmt: str, row: Callable[[str], str]) -> str:
    """``fmt`` (squeue ``-o``: ``%[.][WIDTH]LETTER`` fields, ``.`` right-justified) with ``row``'s values."""

    def one(m: re.Match[str]) -> str:
        if m.group(3) not in SQUEUE_FIELDS:
            raise Refused(f"-o: %{m.group(3)} is not a field known here (known: {''.join(SQUEUE_FIELDS)})")
        v = row(m.group(3))
        w = int(m.group(2) or 0)
        if w:
            v = v[:w].rjust(w) if m.group(1) else v[:w].ljust(w)
        return v

    return _FIELD.sub(one, fmt)


def squeue(args: list[str]) -> int:
    """``squeue [-u USER|--me] [-j IDS] [-t STATES] [-n NAMES] [-h] [-o FORMAT]``: the queue's jobs."""
    opts, rest = _pairs(args, ("-u", "--user", "-j", "--jobs", "-t", "--states", "-n", "--name", "-o", "--format"))
    if rest:
        raise Refused(f"{rest[0]}: unexpected argument")
    users = _list(opts, "-u", "--user")
    if "--me" in opts:
        users.append(_me())
    ids = {job_id(x, "squeue") for x in _list(opts, "-j", "--jobs")}
    states = {s.upper() for s in _list(opts, "-t", "--states")}
    names = set(_list(opts, "-n", "--name"))
    fmt = (opts.get("-o") or opts.get("--format") or [SQUEUE_FORMAT])[-1]
    show_all = "ALL" in states or bool(ids)
    out = []
    if "-h" not in opts and "--noheader" not in opts:
        out.append(squeue_line(fmt, lambda k: SQUEUE_HEADS[k]))
    for j in _client().jobs(all=show_all):
        st = {j.state, SLURM_STATES.get(j.state, j.state), SLURM_CODES.get(j.state, "")}
        if (users and j.user not in users) or (ids and j.id not in ids) or (names and j.name not in names):
            continue
        if states and "ALL" not in states and not st & states:
            continue
        out.append(squeue_line(fmt, functools.partial(_field, j)))
    print("\n".join(out))
    return 0


def _field(j: Any, key: str) -> str:
    return SQUEUE_FIELDS[key](j)


def _pairs(args: list[str], valued: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Options (``--opt=V``, ``--opt V``, ``-oV``, ``-o V``, flags) by name, and the other words."""
    opts: dict[str, list[str]] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        name, value = a, None
        if a.startswith("--") and "=" in a:
            name, value = a.split("=", 1)
        elif a.startswith("-") and not a.startswith("--") and len(a) > 2 and a[:2] in valued:
            name, value = a[:2], a[2:]
        if name in valued and value is None:
            if i + 1 >= len(args):
                raise Refused(f"{name} needs a value")
            value = args[i + 1]
            i += 1
        if name.startswith("-") and len(name) > 1:
            opts.setdefault(name, []).append(value if value is not None else "")
        else:
            rest.append(a)
        i += 1
    return opts, rest


def _list(opts: dict[str, list[str]], *names: str) -> list[str]:
    return [x for n in names for v in opts.get(n, []) for x in v.split(",") if x]


def _me() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def stamp(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "Unknown"


def show_job(j: Any) -> str:
    """``scontrol show job``'s key=value lines, for the fields gridsched knows."""
    import grp
    import pwd

    def name_of(fn: Callable[[int], Any], i: int) -> str:
        try:
            return f"{fn(i)[0]}({i})"
        except (KeyError, OverflowError):
            return f"{i}({i})"

    try:
        uid = pwd.getpwnam(j.user).pw_uid
        gid = pwd.getpwnam(j.user).pw_gid
    except KeyError:
        uid = gid = -1
    if j.exit_signal:
        exit_code = f"0:{j.exit_signal}"
    else:
        exit_code = f"{j.exit_code or 0}:0"
    state = SLURM_STATES.get(j.state, j.state)
    running = j.state in (JobState.RUNNING, JobState.STOPPING, JobState.SUSPENDED)
    lines = [
        f"JobId={j.id} JobName={j.name}",
        f"UserId={name_of(pwd.getpwuid, uid)} GroupId={name_of(grp.getgrgid, gid)}",
        f"JobState={state} Reason={'JobHeldUser' if j.state == JobState.HELD else j.reason or 'None'}",
        f"Requeue=1 Restarts={j.restarts} BatchFlag=1 ExitCode={exit_code}",
        f"RunTime={hms(_used(j))} TimeLimit={hms(j.walltime)}",
        f"SubmitTime={stamp(j.submit_time)} StartTime={stamp(j.start_time)} EndTime={stamp(j.end_time)}",
        f"Partition={PARTITION} NodeList={_host() if running else '(null)'}",
        f"NumNodes=1 NumCPUs={j.ncpus}",
        f"StdOut={j.stdout} StdErr={j.stderr}",
    ]
    return "\n   ".join(lines) + "\n"


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list (``node[1-3,07],gpu1``) as names, in order."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,]*)", text):
        head, ranges, tail = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            out.append(head + tail)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise Refused(f"{text!r}: not a host list")
            for n in range(int(lo), int(hi or lo) + 1):
                out.append(f"{head}{str(n).zfill(len(lo))}{tail}")
    return out


def scontrol(args: list[str]) -> int:
    """``scontrol show hostnames [LIST]``, ``show job [ID]``, ``hold|release|requeue ID...``."""
    words = [a for a in args if a not in ("-o", "--oneliner")]
    oneliner = len(words) != len(args)
    if words[:2] == ["show", "hostnames"] or words[:2] == ["show", "hostname"]:
        hosts = words[2] if len(words) > 2 else os.environ.get("SLURM_JOB_NODELIST", "")
        if not hosts:
            raise Refused("show hostnames: no host list given and SLURM_JOB_NODELIST is not set")
        print("\n".join(expand_hostlist(hosts)))
        return 0
    if words[:2] == ["show", "job"]:
        c = _client()
        jobs = [c.status(job_id(words[2], "scontrol"))] if len(words) > 2 else c.jobs()
        for j in jobs:
            text = show_job(j)
            print(text.replace("\n   ", " ").rstrip() if oneliner else text)
        return 0
    if words and words[0] in ("hold", "release", "requeue") and len(words) > 1:
        c = _client()
        act = {"hold": c.hold, "release": c.release, "requeue": c.requeue}[words[0]]
        for w in words[1:]:
            for x in w.split(","):
                act(job_id(x, "scontrol"))
        return 0
    raise Refused(
        f"{' '.join(words[:2]) or 'no command'}: not carried out inside a gridsched job "
        "(known: show hostnames [LIST], show job [ID], hold|release|requeue ID)"
    )


def cancel_ids(prog: str, args: list[str]) -> int:
    """Cancel the jobs ``args`` names; 1 if any could not be (each said in one line)."""
    if not args:
        raise Refused("no job id given")
    c = _client()
    from gridsched.api.client import GridschedError

    bad = 0
    for a in args:
        if a.startswith("-"):
            raise Refused(f"{a}: not an option carried out here (give job ids)")
        try:
            c.cancel(job_id(a, prog))
        except (Refused, GridschedError) as e:
            print(f"{prog}: error: {e}", file=sys.stderr)
            bad = 1
    return bad


def qstat(args: list[str]) -> int:
    """``qstat [-u USER] [ID...]``: PBS's table (Grid Engine's in a Grid Engine job)."""
    opts, rest = _pairs(args, ("-u",))
    users = _list(opts, "-u")
    ids = {job_id(x, "qstat") for x in rest}
    sge = in_sge_job()
    jobs = [j for j in _client().jobs(all=bool(ids)) if (not users or j.user in users) and (not ids or j.id in ids)]
    missing = ids - {j.id for j in jobs}
    for i in sorted(missing):
        print(f"qstat: Unknown Job Id {i}", file=sys.stderr)
    if not jobs:
        return 1 if missing else 0
    if sge:
        print(f"{'job-ID':<7} {'name':<10} {'user':<12} {'state':<5} {'submit/start at':<19} slots")
        print("-" * 62)
        for j in jobs:
            at = time.strftime("%m/%d/%Y %H:%M:%S", time.localtime(j.start_time or j.submit_time))
            code = SGE_CODES.get(j.state, "z")
            print(f"{j.id:<7} {j.name[:10]:<10} {j.user[:12]:<12} {code:<5} {at:<19} {j.ncpus}")
    else:
        h = _host()
        print(f"{'Job id':<17} {'Name':<16} {'User':<16} {'Time Use':>8} S Queue")
        print(f"{'-' * 17} {'-' * 16} {'-' * 16} {'-' * 8} - -----")
        for j in jobs:
            code = PBS_CODES.get(j.state, "F")
            print(
                f"{f'{j.id}.{h}'[:17]:<17} {j.name[:16]:<16} {j.user[:16]:<16} {clock(_used(j)):>8} {code} {PARTITION}"
            )
    return 1 if missing else 0


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "sbatch": sbatch,
    "scontrol": scontrol,
    "squeue": squeue,
    "scancel": lambda a: cancel_ids("scancel", a),
    "qsub": qsub,
    "qstat": qstat,
    "qdel": lambda a: cancel_ids("qdel", a),
}
