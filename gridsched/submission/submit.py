"""Building and checking a job submission: what gsub and the Python API share.

:func:`build_spec` turns a script and the submission options into the job
spec of :data:`gridsched.protocol.jobs.SPEC_KEYS` (taking a job id), refusing what can
never run with a :class:`SubmitError` whose message is one line.
:func:`wait_job` polls the state db until a job has ended (:mod:`gridsched.submission.waiting`); a
splittable job's sub-tasks are read in :mod:`gridsched.submission.splits`, the refusal is
:mod:`gridsched.submission.errors`'s (each name importable from here too).

Imports stay small (no click, rich, psutil or daemon code): gsub runs often.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridsched.core.feasible import infeasible, too_much_memory
from gridsched.core.units import format_duration
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import TERMINAL
from gridsched.protocol.spool import IdTaken, Spool
from gridsched.submission.errors import USAGE, ScriptError, SubmitError
from gridsched.submission.options import Options
from gridsched.submission.splits import (  # noqa: F401 - importable from here, as before
    MAX_SPLIT_FILE,
    MAX_SPLIT_LINE,
    check_split,
    check_split_file,
    read_split_file,
    waves_time,
)
from gridsched.submission.waiting import (  # noqa: F401 - importable from here, as before
    WAIT_FIRST,
    WAIT_MAX,
    WaitTimeout,
    job_exit_status,
    wait_array,
    wait_job,
)

if TYPE_CHECKING:
    from gridsched.protocol.arrays import ArraySpec
    from gridsched.protocol.config import Settings

MAX_SCRIPT = 1 << 20  # bytes; a job script, not a data file


class Script:
    """The job script's text, where it came from and its default job name."""

    def __init__(self, text: str, label: str, default_name: str) -> None:
        self.text = text
        self.label = label  # for messages: the path as given, or "stdin"
        self.default_name = default_name


LOGIN_PATH = "/usr/local/bin:/usr/bin:/bin"  # PATH of a job that gets none of the submitting environment


def login_env(uid: int) -> dict[str, str]:
    """What a login gives a user before any file of theirs is read: HOME, USER, LOGNAME, SHELL (from the
    password database) and a standard PATH; the base of a job submitted with --export=NONE."""
    import pwd

    env = {"PATH": LOGIN_PATH}
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return env
    env.update(HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name, SHELL=pw.pw_shell or "/bin/sh")
    return env


def exported(source: Mapping[str, str], opts: Options, uid: int) -> dict[str, str]:
    """What a job gets of its submitting environment ``source`` (sbatch --export): all of it, or a login's
    basics (:func:`login_env`) and the variables ``opts.export_names`` names."""
    if opts.export_all:
        return dict(source)
    env = login_env(uid)
    env.update({k: source[k] for k in opts.export_names if k in source})
    return env


def read_script(arg: str | None, wrap: str | None) -> Script:
    if wrap is not None:
        if not wrap.strip():
            raise ScriptError("--wrap: empty command")
        return Script(f"#!/bin/sh\n{wrap}\n", "--wrap", "wrap")
    if arg is None or arg == "-":
        if arg is None and sys.stdin.isatty():
            raise ScriptError("no script: give a script file, --wrap 'COMMAND', or the script on standard input")
        data = sys.stdin.buffer.read(MAX_SCRIPT + 1)
        return Script(decode(data, "stdin"), "stdin", "stdin")
    path = Path(arg)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCRIPT + 1)
    except FileNotFoundError:
        raise ScriptError(f"{arg}: no such file") from None
    except IsADirectoryError:
        raise ScriptError(f"{arg}: is a directory, not a script") from None
    except PermissionError:
        raise ScriptError(f"{arg}: permission denied") from None
    except OSError as e:
        raise ScriptError(f"{arg}: {e.strerror}") from None
    return Script(decode(data, arg), arg, path.name)


def decode(data: bytes, label: str) -> str:
    """The text of a script, or :class:`ScriptError` if it is not one."""
    if len(data) > MAX_SCRIPT:
        raise ScriptError(f"{label}: larger than {MAX_SCRIPT >> 20} MiB, not a job script")
    if b"\0" in data:
        raise ScriptError(f"{label}: binary file (NUL bytes), not a script")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScriptError(f"{label}: not UTF-8 text (a binary file?), not a script") from None
    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        raise ScriptError(f"{label}: empty script (nothing but blank lines and comments)")
    return text


_SUBST = re.compile(r"%(\d*)([AajJNnstux%])")


def host_name() -> str:
    # uname's node name is what gethostname() returns on Linux, without loading the socket module
    return os.uname().nodename.split(".", 1)[0]


def output_path(
    template: str | None,
    default: str,
    job_id: int,
    name: str,
    workdir: Path,
    submit_dir: Path,
    array: bool = False,
    user: str = "",
    no_index: str = "0",
) -> Path:
    """The absolute path of an output file.

    The patterns are sbatch's: ``%j`` (and ``%J``) is the job id, ``%x`` the
    job name, ``%u`` the user name, ``%N`` the host name, ``%n`` and ``%t``
    0 (the one node, the one task), ``%s`` ``batch``, ``%%`` a percent sign;
    ``%A`` is the id of the array (the job id of a job that is not an array)
    and ``%a`` its index (``no_index`` for a job that is not an array).  A number after
    the ``%`` pads with zeros (``%4a``).  Other ``%`` patterns stay as written
    (:func:`gridsched.submission.compat.unknown_patterns` finds them for a warning).
    A relative path is relative to the working directory; an existing
    directory receives the default file name.  No option: ``default`` in the
    submit directory.  For an array (``array``), ``%j``, ``%J``, ``%a`` and
    ``%%`` are left in the path (and a ``%`` of the other values doubled): the
    daemon fills them in for each task (:func:`gridsched.protocol.arrays.task_path`).
    """
    if template is None:
        return submit_dir / default
    vals = {
        "j": str(job_id),
        "J": str(job_id),
        "A": str(job_id),
        "a": no_index,
        "x": name,
        "u": user or user_name(os.getuid()),
        "N": host_name(),
        "n": "0",
        "s": "batch",
        "t": "0",
    }

    def sub(m: re.Match[str]) -> str:
        pad, c = m.group(1), m.group(2)
        if c == "%":
            return "%%" if array else "%"
        if array and c in "jJa":
            return f"%{pad}{'j' if c == 'J' else c}"
        v = vals[c]
        if pad and v.isdigit():
            v = v.zfill(min(int(pad), 64))
        return v.replace("%", "%%") if array else v

    text = _SUBST.sub(sub, template)
    p = Path(os.path.expanduser(text))
    if not p.is_absolute():
        p = workdir / p
    try:
        rq.path(str(p), f"path '{rq.safe(template, 80)}'")
        if p.is_dir():
            p = p / default
        rq.path(str(p), f"path '{rq.safe(template, 80)}'")
    except rq.Refused as e:
        raise SubmitError(str(e)) from None
    except OSError as e:
        raise SubmitError(f"path '{rq.safe(template, 80)}': {e.strerror}") from None
    return p


def check_output_dir(what: str, p: Path) -> None:
    d = p.parent
    try:
        is_dir = d.is_dir()
    except OSError as e:
        raise SubmitError(f"{what} '{rq.safe(str(p))}': {e.strerror}") from None
    if not is_dir:
        raise SubmitError(f"{what} '{p}': directory {d} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise SubmitError(f"{what} '{p}': directory {d} is not writable")


def machine_cores(spool: Spool, cfg: Settings) -> int:
    """Cores of the machine: as the running daemon recorded it, else as the config declares it."""
    from gridsched.protocol.state import recorded_machine

    n = recorded_machine(spool.db).get("ncores")
    if isinstance(n, int) and n > 0:
        return n
    if cfg.topology:
        from gridsched.host.topology import load_machine

        try:
            return load_machine(cfg).ncores
        except ValueError as e:
            raise SubmitError(str(e)) from None
    from gridsched.host.topology import declared

    return declared(cfg)[0]


def user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return os.environ.get("USER") or str(uid)


def host_memory() -> int | None:
    """Bytes of memory of this host (MemTotal of /proc/meminfo), or None if it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def machine_memory(machine: Any) -> int | None:
    """Bytes of memory of a machine map: its boards' when every board declares it, else the host's."""
    boards = getattr(machine, "boards", ())
    if boards and all(b.memory for b in boards):
        return int(sum(b.memory for b in boards))
    return host_memory()


def machine_memory_of(spool: Spool, cfg: Settings) -> int | None:
    """Memory of the machine: as the running daemon recorded it, else as the config and the host say."""
    from gridsched.protocol.state import recorded_machine

    n = recorded_machine(spool.db).get("memory")
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n
    if cfg.topology:
        from gridsched.host.topology import load_machine

        try:
            return machine_memory(load_machine(cfg))
        except ValueError:
            return host_memory()
    return host_memory()


def mem_refusal(mem: int, total: int | None, reserved: int) -> str | None:
    """Why a job of ``mem`` bytes can never get its memory on a machine of ``total`` bytes (None: unknown) of
    which ``reserved`` MiB are left to the system (``[machine] memory_reserved``): the pool the scheduling
    pass hands out, in the words of its reason (daemon/reasons.py), or None."""
    if not reserved:
        return too_much_memory(mem, total)
    from gridsched.core import memory as mempool
    from gridsched.core.units import format_size

    pool = mempool.pool(total, reserved, 0)
    if total and (pool is None or mem > pool.total << 20):
        out = format_size(pool.total << 20) if pool is not None else "none"
        return (
            f"asks for {format_size(mem)} of memory, the scheduler hands out {out} (the machine's "
            f"{format_size(total)} less machine.memory_reserved {format_size(reserved << 20)})"
        )
    return None


def check_shell(shell: str) -> str:
    """``shell`` if it is an absolute path to an executable file; :class:`SubmitError` otherwise."""
    why = rq.shell_problem(shell)
    if why:
        raise SubmitError(f"shell '{rq.safe(shell, 80)}': {why}", USAGE)
    return shell


SBATCH_NO_SHEBANG = (
    "This does not look like a batch script.  The first line must start with #! followed by the path to an interpreter."
)
NOLOGIN = ("nologin", "false", "true")


def login_shell(uid: int) -> tuple[str, str]:
    """The login shell of ``uid`` from the password database (as the daemon sees the user), and a warning
    if it cannot run a script (then /bin/sh)."""
    import pwd

    try:
        sh = pwd.getpwuid(uid).pw_shell or "/bin/sh"  # an empty field means /bin/sh
    except KeyError:
        return "/bin/sh", f"uid {uid} has no password entry: /bin/sh runs the script"
    if os.path.basename(sh) in NOLOGIN or rq.shell_problem(sh):
        return "/bin/sh", f"the login shell {sh} cannot run a script: /bin/sh runs it"
    return sh, ""


def _interpreter_name(line: str) -> str:
    """The program a ``#!`` line names (``bash`` for ``#!/usr/bin/env bash``)."""
    words = line[2:].split()
    if not words:
        return ""
    prog = os.path.basename(words[0])
    if prog == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return os.path.basename(rest[0]) if rest else prog
    return prog


def choose_shell(
    text: str, label: str, dialect: str | None, shell: str | None, uid: int
) -> tuple[str | None, list[str]]:
    """What runs the script, as the system whose directives it carries would run it, and warnings.

    A ``#!`` on line 1 wins (None: the kernel runs it).  Otherwise ``shell``
    (``#PBS -S``, ``#$ -S``, ``--shell``); otherwise a PBS or SGE script runs
    under the owner's login shell, a Slurm one is refused as sbatch refuses it
    (:class:`SubmitError`), and any other runs under /bin/sh (None).  A ``#!``
    line below line 1 is not read; a warning says so when the shell chosen is
    not the one it names.
    """
    lines = text.split("\n")
    warnings: list[str] = []
    if lines and lines[0].startswith("#!"):
        if shell is not None:
            warnings.append(f"{label}: shell {shell} ignored: the #! line on line 1 chooses the interpreter")
        return None, warnings
    if shell is not None:
        chosen: str | None = check_shell(shell)
        how = "the shell asked for"
    elif dialect in ("pbs", "sge"):
        chosen, why = login_shell(uid)
        if why:
            warnings.append(f"{label}: {why}")
        how = f"the login shell, as {'PBS' if dialect == 'pbs' else 'Grid Engine'} runs a script without #! on line 1"
    elif dialect == "slurm":
        raise SubmitError(f"{label}: {SBATCH_NO_SHEBANG} (sbatch refuses it too; or give --shell PATH)", USAGE)
    else:
        chosen, how = None, "gridsched's default for a script without #! on line 1"
    for n, line in enumerate(lines, start=1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#!") and n > 1:
            named = _interpreter_name(s)
            if named != os.path.basename(chosen or "/bin/sh"):
                warnings.append(
                    f"{label}:{n}: the #! line is not on line 1, so it is not read: the script runs with "
                    f"{chosen or '/bin/sh'} ({how}); move it to line 1 to run {named or 'it'}"
                )
        break
    return chosen, warnings


def check_depend(spool: Spool, spec_text: str, job_id: int, uid: int) -> str:
    """The normalized dependency spec, after checking every job it names.

    Each job must exist, belong to ``uid`` (root may name anyone's) and have
    an id lower than ``job_id``, so that dependencies can never form a cycle.
    """
    from gridsched.core import depend  # with the core's job records: only for a job with -d
    from gridsched.protocol.view import QueueError, load_jobs

    try:
        deps = depend.parse(spec_text)
    except depend.DependError as e:
        raise SubmitError(f"depend {e}", USAGE) from None
    ids = depend.job_ids(deps)
    try:
        known = {j["id"]: j for j in load_jobs(spool, ids)} if ids else {}
    except QueueError as e:
        raise SubmitError(str(e)) from None
    for jid in ids:
        job = known.get(jid)
        if job is None:
            raise SubmitError(f"depend: job {jid}: no such job")
        if jid >= job_id:
            raise SubmitError(f"depend: job {jid} is not an earlier job (this job is {job_id})")
        owner = job.get("uid")
        if uid != 0 and owner is not None and owner != uid:
            raise SubmitError(f"depend: job {jid}: owned by {job.get('user') or owner}")
    return depend.normalize(deps)


def hold_jid(spool: Spool, items: str, uid: int) -> tuple[list[int], list[str]]:
    """Grid Engine's ``-hold_jid``: the ids of ``uid``'s jobs, pending, held or running, that the
    comma-separated ``items`` name (a job id, a name, or a shell pattern of names such as ``prep*``), and the
    items that name none of them.  Only the user's own jobs are matched by name, as Grid Engine does."""
    from fnmatch import fnmatchcase

    from gridsched.protocol.view import QueueError, load_jobs

    try:
        jobs = [j for j in load_jobs(spool) if j.get("uid") == uid and j.get("state") not in TERMINAL]
    except QueueError as e:
        raise SubmitError(str(e)) from None
    ids: dict[int, None] = {}
    unmatched = []
    for item in (i.strip() for i in items.split(",")):
        if not item:
            continue
        if item.isascii() and item.isdigit():
            ids[int(item)] = None  # an id: checked as any dependency is
            continue
        found = [j["id"] for j in jobs if fnmatchcase(str(j.get("name", "")), item)]
        if not found:
            unmatched.append(item)
        ids.update(dict.fromkeys(found))
    return sorted(ids), unmatched


def split_spec(
    cfg: Settings, opts: Options, array: ArraySpec | None, ncpus: int, cores: int
) -> tuple[dict[str, Any] | None, int | None, int]:
    """The ``split`` spec key of a submission (None: not splittable), its walltime (None: the default) and its
    cores, from ``--split``, ``--task-time``, ``--split-file``, ``--split-retries`` and ``--gpus-per-task``;
    :class:`SubmitError` if they are refused."""
    split: dict[str, Any] | None = None
    walltime = opts.walltime
    if opts.split_file is not None:
        if opts.split is not None or opts.task_time is not None:
            raise SubmitError("--split-file excludes --split and --task-time (each line gives its own)", USAGE)
        if array is not None:
            raise SubmitError("--array and --split-file exclude each other", USAGE)
        if opts.ncpus is not None:
            raise SubmitError("--split-file excludes -n: each line gives its sub-task's cores", USAGE)
        tasks = read_split_file(opts.split_file, cores, cfg)
        split, walltime, ncpus = check_split_file(tasks, walltime, cores, cfg)
    elif opts.split is not None:
        if array is not None:
            raise SubmitError("--array and --split exclude each other", USAGE)
        if infeasible(ncpus, cores) is None:
            cap = opts.split_device_wave
            split, walltime = check_split(opts.split, opts.task_time, ncpus, walltime, cores, cfg, cap)
            ncpus *= min(opts.split, max(1, cores // ncpus), max(1, cap) if cap is not None else opts.split)
            if opts.split_devices:
                split["devices"] = opts.split_devices
    elif opts.task_time is not None:
        raise SubmitError("--task-time goes with --split", USAGE)
    if opts.split_devices and opts.split is None:
        raise SubmitError("--gpus-per-task goes with --split (or --ntasks), not --split-file", USAGE)
    if opts.split_retries is not None:
        if split is None:
            raise SubmitError("--split-retries goes with --split or --split-file", USAGE)
        if not 0 <= opts.split_retries <= rq.MAX_RETRIES:
            raise SubmitError(f"split retries {opts.split_retries}: must lie between 0 and {rq.MAX_RETRIES}", USAGE)
        if opts.split_retries:
            split["retries"] = opts.split_retries
    return split, walltime, ncpus


def build_spec(
    spool: Spool,
    cfg: Settings,
    script: Script,
    opts: Options,
    args: tuple[str, ...] | list[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    job_id: int | None = None,
) -> dict[str, Any]:
    """The job spec of a submission, with the id ``job_id`` (default: the next one, a candidate that
    :func:`submit` takes); :class:`SubmitError` if it is refused."""
    name = opts.name if opts.name is not None else script.default_name
    if not name.strip() or "/" in name or any(ord(c) < 32 for c in name):
        raise SubmitError(f"name {name!r}: must be non-empty, without '/' or control characters", USAGE)
    array = check_array(opts.array, cfg) if opts.array is not None else None
    ncpus = opts.ncpus if opts.ncpus is not None else cfg.default_ncpus
    cores = machine_cores(spool, cfg)
    split, walltime, ncpus = split_spec(cfg, opts, array, ncpus, cores)
    if walltime is None:
        walltime = cfg.default_walltime
    if walltime > cfg.max_walltime:
        raise SubmitError(
            f"walltime {format_duration(walltime)} is longer than the maximum "
            f"{format_duration(cfg.max_walltime)} (jobs.max_walltime)"
        )
    why = infeasible(ncpus, cores)
    if why:
        raise SubmitError(f"job can never run: it {why}")
    if opts.exclusive:  # as Slurm gives an exclusive job the whole node: every core, so nothing else runs
        if split is not None:
            raise SubmitError("--exclusive goes with a plain job or an array, not --split or --split-file", USAGE)
        ncpus = cores
    from gridsched.protocol.limits import array_refusal, cores_refusal  # [limits]: what the daemon would refuse

    why = (array_refusal(len(array.indices), cfg) if array is not None else None) or cores_refusal(ncpus, cfg)
    if why:
        raise SubmitError(why)
    mem = opts.mem or None  # 0: the whole machine, as Slurm's --mem=0
    if mem is not None:
        why = mem_refusal(mem, machine_memory_of(spool, cfg), cfg.memory_reserved)
        if why:
            raise SubmitError(f"job can never run: it {why}")
    checkpoint = opts.checkpoint or cfg.checkpoint
    if checkpoint == "criu":
        from gridsched.host.facts import criu_unavailable

        reason = criu_unavailable()
        if reason:
            raise SubmitError(
                f"checkpoint mode 'criu': transparent checkpointing is not available on this host "
                f"({reason}); use signal, suspend or requeue"
            )
    submit_dir = cwd or Path.cwd()
    workdir = submit_dir
    if opts.chdir is not None:
        workdir = (submit_dir / os.path.expanduser(opts.chdir)).resolve()
        if not workdir.is_dir():
            raise SubmitError(f"chdir '{opts.chdir}': no such directory")
    uid = os.getuid()
    if job_id is None:
        try:
            job_id = spool.next_id()
        except OSError as e:  # a full or read-only spool: nothing was submitted
            raise SubmitError(f"cannot submit to {spool.root}: {e.strerror or e}") from None
    dep = check_depend(spool, opts.depend, job_id, uid) if opts.depend else ""
    arr = opts.array is not None
    suffix = f"{job_id}{opts.task_sep}%a" if arr else str(job_id)
    esc = name.replace("%", "%%") if arr else name
    user = user_name(uid)
    out_t = opts.output if opts.output is not None else opts.default_output
    base = submit_dir if opts.paths_from_submit_dir else workdir
    default_dir = workdir if opts.defaults_in_workdir else submit_dir
    stdout = output_path(out_t, f"{esc}.o{suffix}", job_id, name, base, default_dir, arr, user, opts.no_index)
    stderr = output_path(opts.error, f"{esc}.e{suffix}", job_id, name, base, default_dir, arr, user, opts.no_index)
    if opts.join == "oe":
        stderr = stdout
    elif opts.join == "eo":
        stdout = stderr
    check_output_dir("output", stdout)
    check_output_dir("error", stderr)
    spec = {
        "id": job_id,
        "name": name,
        "user": user,
        "uid": uid,
        "gid": os.getgid(),
        "ncpus": ncpus,
        "walltime": walltime,
        "mem": mem,
        "checkpoint": checkpoint,
        "hold": bool(opts.hold),
        "depend": dep,
        "script": script.text,
        "args": list(args),
        "workdir": str(workdir),
        "stdout": str(stdout),
        "stderr": str(stderr),
        "env": exported(os.environ if env is None else env, opts, uid),
        "submit_time": time.time(),
        "submit_dir": str(submit_dir),
        "umask": current_umask(),
    }
    spec.update(tree_keys(spool, opts, ncpus, uid, env))
    if opts.shell is not None:
        spec["shell"] = check_shell(opts.shell)
    if opts.begin is not None:
        spec["begin"] = float(opts.begin)
    if opts.open_mode == "append":
        spec["open_mode"] = "append"
    if opts.env_set:
        for k, _ in opts.env_set:
            why = rq.env_set_problem(k)
            if why:
                raise SubmitError(f"--export {k}=...: {why}", USAGE)
        spec["env_set"] = dict(opts.env_set)
    if opts.exclusive:
        spec["exclusive"] = True
    if array is not None:
        spec["array"] = array.text
    if split is not None:
        spec["split"] = split
    return spec


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def sender(spool: Spool) -> rq.Sender:
    """The submitting user as the daemon will see them (the owner of the request file)."""
    from gridsched.protocol.admin import is_admin

    uid = os.getuid()
    return rq.Sender(uid, user_name(uid), frozenset({os.getgid(), *os.getgroups()}), is_admin(uid, spool.root))


MAX_TRIES = 20  # new ids tried before a submission gives up (each is lost only to a concurrent submitter)
MAX_STEP = 1 << 16  # the largest step past the next free id a retry takes (well inside the daemon's id window)


def retry_step(k: int) -> int:
    """How far past the next free id try ``k`` of a submission goes: 0 at first (ids stay consecutive), then a
    random step below 4, 8, 16, ... (at most :data:`MAX_STEP`), which a user taking the next ids cannot foresee."""
    if k == 0:
        return 0
    import secrets

    return secrets.randbelow(min(MAX_STEP, 2 << k))


def publish_new(spool: Spool, kind: str, build: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """Publish a request that brings a new id: ``build(id)`` makes its object (a job spec or a reservation),
    which is checked exactly as the daemon will check it; the object as published.

    The id is taken by publishing (:meth:`Spool.publish_new`); when a
    concurrent submitter took it first, another is tried: the next one
    after a random step that doubles with each try, so that nobody who
    watches the spool and takes the next ids first can keep a submission
    out (:func:`retry_step`).
    """
    who = sender(spool)
    for k in range(MAX_TRIES):
        try:
            nid = spool.next_id() + retry_step(k)
        except OSError as e:  # a full or read-only spool: nothing was submitted
            raise SubmitError(f"cannot submit to {spool.root}: {e.strerror or e}") from None
        obj = build(nid)
        payload = {"type": kind, ("job" if kind == "submit" else "resv"): obj}
        try:
            raw = rq.encode(payload)
            rq.check_outgoing(raw, rq.id_name(nid), who)
        except rq.Refused as e:
            raise SubmitError(str(e)) from None
        except ValueError as e:  # a value JSON cannot hold (NaN, infinity)
            raise SubmitError(f"cannot be written as a request: {e}") from None
        try:
            spool.publish_new(rq.id_name(nid), raw)
        except IdTaken:
            continue
        except OSError as e:  # the spool filled up or went read-only
            raise SubmitError(f"cannot submit to {spool.root}: {e.strerror or e}") from None
        return obj
    raise SubmitError(f"no new id could be taken after {MAX_TRIES} tries (many concurrent submissions?)")


def submit(
    spool: Spool,
    cfg: Settings,
    script: Script,
    opts: Options,
    args: tuple[str, ...] | list[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    extra: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Build, check and publish a job submission (with the spec keys ``extra(spec)`` gives); the spec as
    published."""

    def build(nid: int) -> dict[str, Any]:
        spec = build_spec(spool, cfg, script, opts, args, env, cwd, job_id=nid)
        if extra is not None:
            spec.update(extra(spec))
        return spec

    return publish_new(spool, "submit", build)


def tree_keys(spool: Spool, opts: Options, ncpus: int, uid: int, env: Mapping[str, str] | None) -> dict[str, Any]:
    """The spec keys ``parent`` and ``recoverable`` (``protocol.tree``); :class:`SubmitError` if refused."""
    from gridsched.protocol.tree import TreeError, submit_keys

    try:
        return submit_keys(spool, ncpus, uid, opts.parent, opts.no_parent, opts.recoverable, env)
    except TreeError as e:
        raise SubmitError(str(e), USAGE if "exclude" in str(e) else 1) from None


def check_array(text: str, cfg: Settings) -> ArraySpec:
    """The parsed ``--array`` range; :class:`SubmitError` (usage) if it cannot be used."""
    from gridsched.protocol.arrays import ArrayError, parse

    try:
        return parse(text, cfg.max_array_size)
    except ArrayError as e:
        raise SubmitError(f"array {e}", USAGE) from None


def never_runs(machine: Any, max_walltime: int, job: rq.JobSpec, reserved: int = 0) -> str | None:
    """Why ``job`` can never run on ``machine``, or None: the core's admission
    (:func:`gridsched.core.admission.never_runs`) asked of the typed job and the machine's memory, as the
    daemon asks it of a submission and galter before it asks for a change; and its memory against what the
    scheduler hands out, the machine's less the ``reserved`` MiB (:func:`mem_refusal`)."""
    from gridsched.core.admission import never_runs as admission
    from gridsched.core.placement import Request

    placement = (
        Request(job.ncpus, job.place or "pack", job.threads_per_core, job.exclusive_board) if job.placed else None
    )
    total = machine_memory(machine) if job.mem else None
    if job.mem and reserved:
        why = mem_refusal(job.mem, total, reserved)
        if why:
            return f"can never run: it {why}"
    return admission(
        machine,
        total,
        max_walltime,
        ncpus=job.ncpus,
        walltime=job.walltime,
        placement=placement,
        mem=job.mem,
        devices=(job.devices, job.split.devices if job.split is not None else ()),
    )
