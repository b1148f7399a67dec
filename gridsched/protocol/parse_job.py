"""The job of a submit request, checked field by field (:func:`job_spec`), and the checks gsub makes of
its own options in the same words (:func:`shell_problem`, :func:`estimate_problem`, :func:`env_set_problem`).

Part of the trust boundary (:mod:`gridsched.protocol.requests`, which re-exports these names).
Standard library only (plus the pure core's parsers): gsub imports it.
"""

from __future__ import annotations

import re
from typing import Any

from gridsched.core.choices import ADMIN_MAX, NICE_MAX, NICE_MIN
from gridsched.protocol.fields import (
    MAX_ARG,
    MAX_ARGS,
    MAX_BYTES,
    MAX_COUNT,
    MAX_ENV,
    MAX_ENV_SET,
    MAX_ENV_SET_BYTES,
    MAX_ID,
    MAX_NAME,
    MAX_RETRIES,
    MAX_SCRIPT,
    MAX_SECONDS,
    MAX_TASK_ARGS,
    MAX_TEXT,
    MAX_TIME,
    MAX_UID,
    Fields,
    Refused,
    Sender,
    device_asks,
    identity,
    placement,
    resource_counts,
    safe,
    text,
)
from gridsched.protocol.jobs import CHECKPOINT_MODES, DIALECTS, GPU_OPTIONS, RERUN_MODES, Checkpoint, Hint
from gridsched.protocol.jobspec import (
    MAX_MAIL_USERS,
    JobSignal,
    JobSpec,
    Split,
    SubTask,
    UserEnv,
    parse_mail_type,
    parse_mail_user,
    parse_signal,
    parse_user_env,
)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
ACCOUNT_MAX = 256  # bytes of an account name (SLURM_JOB_ACCOUNT)
PE_MAX = 256  # bytes of a parallel environment's name (PE)


def job_spec(f: Fields, new_id: int, sender: Sender) -> JobSpec:
    jid = f.integer("id", 1, MAX_ID)
    if jid != new_id:
        raise Refused(f"job: field 'id' is {jid} but the request is named for id {new_id}")
    uid, user = identity(f, sender)
    gid = f.integer("gid", -1, MAX_UID)
    if sender.uid != 0 and gid != -1 and gid not in sender.groups:
        raise Refused(f"job: claims gid {gid}, which {safe(user, 64)} (uid {uid}) is not a member of")
    name = f.text("name", MAX_NAME)
    if not name.strip() or "/" in name:
        raise f.bad("name", "must be non-empty, without '/'")
    ncpus = f.integer("ncpus", 1, MAX_COUNT)
    walltime = f.integer("walltime", 1, MAX_SECONDS)
    mem = f.integer("mem", 1, MAX_BYTES, required=False)
    checkpoint = f.text("checkpoint", 16)
    if checkpoint not in CHECKPOINT_MODES:
        raise f.bad("checkpoint", f"must be one of {', '.join(CHECKPOINT_MODES)}")
    hold = f.flag("hold")
    dep_text = f.text("depend", MAX_TEXT, required=False, default="")
    dep_norm = depend_field(f, dep_text)
    script = f.text("script", MAX_SCRIPT, control=True)
    args_raw = f.raw("args", required=True)
    if not isinstance(args_raw, list) or len(args_raw) > MAX_ARGS:
        raise f.bad("args", f"must be a list of at most {MAX_ARGS} strings")
    args = tuple(text(a, "job: an argument", MAX_ARG, control=True) for a in args_raw)
    env_raw = f.raw("env", required=True)
    if not isinstance(env_raw, dict) or len(env_raw) > MAX_ENV:
        raise f.bad("env", f"must map at most {MAX_ENV} names to strings")
    env = []
    for k, v in env_raw.items():
        k = text(k, "job: an environment variable's name", MAX_ARG, control=True)
        if not k or "=" in k:
            raise Refused(f"job: environment variable name {safe(repr(k), 60)} is empty or holds '='")
        env.append((k, text(v, f"job: environment variable {safe(k, 60)}", MAX_ARG, control=True)))
    array = f.text("array", MAX_TEXT, required=False)
    split = None
    sp = f.raw("split")
    if sp is not None:
        if not isinstance(sp, dict):
            raise f.bad("split", "must be an object")
        g = Fields(sp, "job: split")
        split = Split(
            g.integer("n", 1, MAX_COUNT),
            g.integer("ncpus", 1, MAX_COUNT),
            g.integer("task_time", 1, MAX_SECONDS),
            _sub_tasks(g),
            g.integer("retries", 0, MAX_RETRIES, required=False, default=0),
            device_asks(g) if g.data.get("devices") is not None else (),
        )
        g.done()
        if split.devices and split.tasks:
            raise Refused("job: --gpus-per-task goes with --split, not --split-file")
        if split.devices and f.data.get("devices") is not None:
            raise Refused("job: devices for each sub-task exclude devices for the whole job")
        if split.tasks and (
            split.n != len(split.tasks)
            or split.ncpus != max(t.ncpus for t in split.tasks)
            or split.task_time != max(t.time for t in split.tasks)
        ):
            raise f.bad("split", "does not match its sub-tasks (n, the most cores, the longest time)")
        if split.ncpus > ncpus or split.task_time > walltime:
            raise f.bad("split", "has a sub-task larger than the job")
        if array is not None:
            raise Refused("job: an array cannot be splittable too")
    place, tpc = placement(f)
    res = resource_counts(f)
    devs = device_asks(f)
    resv = f.integer("reservation", 1, MAX_ID, required=False)
    spec = JobSpec(
        id=jid,
        name=name,
        user=user,
        uid=uid,
        gid=gid,
        ncpus=ncpus,
        walltime=walltime,
        mem=mem,
        checkpoint=Checkpoint(checkpoint),
        hold=hold,
        depend=dep_norm,
        script=script,
        args=args,
        workdir=f.path("workdir"),
        stdout=f.path("stdout"),
        stderr=f.path("stderr"),
        env=tuple(env),
        submit_time=f.number("submit_time", 0, MAX_TIME) or 0.0,
        submit_dir=f.path("submit_dir", required=False) or "",
        umask=f.integer("umask", 0, 0o777, required=False, default=0o022),
        parent=f.integer("parent", 1, MAX_ID, required=False),
        recoverable=f.flag("recoverable", required=False),
        resources=res,
        reservation=resv,
        wait_resv=f.flag("wait_resv", required=False),
        array=array,
        split=split,
        place=place,
        threads_per_core=tpc,
        exclusive_board=f.flag("exclusive_board", required=False),
        begin=f.number("begin", 0, MAX_TIME, required=False),
        shell=_shell(f),
        open_mode=_open_mode(f),
        devices=devs,
        ntasks=f.integer("ntasks", 1, MAX_COUNT, required=False),
        cpus_per_task=f.integer("cpus_per_task", 1, MAX_COUNT, required=False),
        signal=_signal_field(f, walltime),
        estimate=_estimate_field(f, walltime),
        nice=f.integer("nice", NICE_MIN, NICE_MAX, required=False, default=0),
        priority=f.integer("priority", 0, ADMIN_MAX, required=False),
        env_set=_env_set(f),
        exclusive=f.flag("exclusive", required=False),
        mail_type=_mail_type_field(f),
        mail_user=_mail_user_field(f),
        get_user_env=_user_env_field(f),
        interactive=f.flag("interactive", required=False),
        dialect=_dialect(f),
        mem_per_cpu=f.integer("mem_per_cpu", 1, 1 << 60, required=False),
        gpus_per_task=f.integer("gpus_per_task", 1, MAX_COUNT, required=False),
        account=f.text("account", ACCOUNT_MAX, required=False) or None,
        ntasks_per_node=f.integer("ntasks_per_node", 1, MAX_COUNT, required=False),
        hint=_hint(f),
        gpu_options=_gpu_options(f, devs),
        pe=_pe(f),
        name_per_task=f.flag("name_per_task", required=False),
        mem_per_gpu=f.integer("mem_per_gpu", 1, 1 << 60, required=False),
    )
    _check_priority(spec, sender)
    _check_tasks(spec)
    if spec.interactive and spec.checkpoint in RERUN_MODES:
        raise f.bad("checkpoint", "a grun job cannot be rerun: must be none or suspend")
    if "\0" in spec.script:
        raise f.bad("script", "holds a NUL character")
    if not spec.submit_dir:
        spec = _replace(spec, submit_dir=spec.workdir)
    f.done()
    return spec


def depend_field(f: Fields, dep_text: str) -> str:
    """The dependency spec ``dep_text`` of field ``depend``, checked and normalized ("" for none); the
    dependency parser is loaded only for a job that has one."""
    if not dep_text.strip():
        return ""
    from gridsched.core import depend

    try:
        deps = depend.parse(dep_text)
    except depend.DependError as e:
        raise f.bad("depend", safe(str(e))) from None
    if any(i > MAX_ID for i in depend.job_ids(deps)):
        raise f.bad("depend", f"names a job id above {MAX_ID}")
    return depend.normalize(deps)


def _check_priority(spec: JobSpec, sender: Sender) -> None:
    """Only an admin raises a job above others: a negative nice or a set priority (as Slurm's sbatch)."""
    if sender.admin:
        return
    if spec.priority is not None:
        raise Refused("job: only an admin may set a job's priority (--priority)")
    if spec.nice < 0:
        raise Refused(f"job: nice {spec.nice}: only an admin may give a negative nice value")


def shell_problem(p: str) -> str | None:
    """Why ``p`` cannot run a job script (not an absolute path to an executable regular file), or None.

    For the commands, which run as the user: the daemon never looks at the file (:func:`_shell`)."""
    import os
    import stat

    if not p.startswith("/"):
        return "not an absolute path"
    try:
        st = os.stat(p)
    except OSError as e:
        return f"cannot be used ({e.strerror})"
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
        return "not an executable file"
    return None


def _shell(f: Fields) -> str | None:
    """The shell of a script without ``#!``, checked for its form only (absolute, no NUL, bounded): whether
    it exists or may be run is for the job's process to find out as the job's owner, so that the daemon,
    which may enter any directory, never tells anyone what is in one they may not enter."""
    p = f.path("shell", required=False)
    return None if p is None else str(p)


def _open_mode(f: Fields) -> str | None:
    v = f.text("open_mode", 16, required=False)
    if v is not None and v not in ("append", "truncate"):
        raise f.bad("open_mode", "must be append or truncate")
    return None if v in (None, "truncate") else str(v)


def _dialect(f: Fields) -> str | None:
    v = f.text("dialect", 16, required=False)
    if v is not None and v not in DIALECTS:
        raise f.bad("dialect", f"must be one of {', '.join(DIALECTS)}")
    return None if v is None else str(v)


def _hint(f: Fields) -> Hint | None:
    v = f.text("hint", 32, required=False)
    if v is None:
        return None
    try:
        return Hint(v)
    except ValueError:
        raise f.bad("hint", f"must be one of {', '.join(h.value for h in Hint)}") from None


def _gpu_options(f: Fields, devs: tuple[Any, ...]) -> tuple[str, ...]:
    """Which options gave the job's GPUs (``gpus``, ``gpus_per_node``): only for a job that asks for GPUs."""
    v = f.raw("gpu_options")
    if v is None:
        return ()
    if not isinstance(v, list) or not v or any(x not in GPU_OPTIONS for x in v) or len(set(v)) != len(v):
        raise f.bad("gpu_options", f"must be a list of distinct names of {', '.join(GPU_OPTIONS)}")
    if not any(a.type == "gpu" for a in devs):
        raise f.bad("gpu_options", "names options of GPUs the job does not ask for")
    return tuple(v)


def _pe(f: Fields) -> str | None:
    v = f.text("pe", PE_MAX, required=False)
    if v is not None and (not v or any(c.isspace() for c in v)):
        raise f.bad("pe", "must be a name without spaces")
    return None if v is None else str(v)


def _mail_type_field(f: Fields) -> tuple[str, ...]:
    v = f.text("mail_type", 512, required=False)
    if v is None:
        return ()
    try:
        return parse_mail_type(v)
    except ValueError as e:
        raise f.bad("mail_type", str(e)) from None


def _mail_user_field(f: Fields) -> tuple[str, ...]:
    v = f.raw("mail_user")
    if v is None:
        return ()
    if not isinstance(v, list) or not v or len(v) > MAX_MAIL_USERS:
        raise f.bad("mail_user", f"must be a list of 1 to {MAX_MAIL_USERS} addresses")
    try:
        return parse_mail_user(",".join(text(a, "job: a mail address", 256) for a in v))
    except ValueError as e:
        raise f.bad("mail_user", str(e)) from None


def _user_env_field(f: Fields) -> UserEnv | None:
    v = f.text("get_user_env", 16, required=False)
    if v is None:
        return None
    try:
        return parse_user_env(v)
    except ValueError as e:
        raise f.bad("get_user_env", str(e)) from None


def _signal_field(f: Fields, walltime: int) -> JobSignal | None:
    v = f.text("signal", 64, required=False)
    if v is None:
        return None
    try:
        return parse_signal(v, walltime)
    except ValueError as e:
        raise f.bad("signal", str(e)) from None


def _estimate_field(f: Fields, walltime: int) -> int | None:
    v = f.integer("estimate", 1, MAX_SECONDS, required=False)
    if v is not None and v > walltime:
        raise f.bad("estimate", estimate_problem(v, walltime))
    return v  # type: ignore[no-any-return]


def estimate_problem(estimate: int, walltime: int) -> str:
    """Why an estimate is refused: longer than the walltime (gsub and the daemon say it alike)."""
    return f"{estimate}s is longer than the walltime ({walltime}s): the walltime ends the job"


def env_set_problem(name: str) -> str | None:
    """Why a submission may not set the variable ``name`` (``gsub --export NAME=VALUE``), or None."""
    from gridsched.job.env import owned

    if not _ENV_NAME.match(name) or len(name) > MAX_NAME:
        return f"{safe(repr(name), 60)} is not a variable name (letters, digits and _, not starting with a digit)"
    if owned(name):
        return f"{name} is set by gridsched for every job (see docs/compat.md); it cannot be given a value"
    return None


def _env_set(f: Fields) -> tuple[tuple[str, str], ...]:
    """The variables a submission sets over its environment: names that are identifiers and not the daemon's,
    bounded in number and bytes."""
    raw = f.raw("env_set")
    if raw is None:
        return ()
    if not isinstance(raw, dict) or len(raw) > MAX_ENV_SET:
        raise f.bad("env_set", f"must map at most {MAX_ENV_SET} names to strings")
    out = []
    total = 0
    for k, v in raw.items():
        k = text(k, "job: a variable's name", MAX_NAME)
        why = env_set_problem(k)
        if why:
            raise Refused(f"job: env_set: {why}")
        v = text(v, f"job: variable {k}", MAX_ARG, control=True)
        total += len(k.encode()) + len(v.encode())
        out.append((k, v))
    if total > MAX_ENV_SET_BYTES:
        raise f.bad("env_set", f"holds more than {MAX_ENV_SET_BYTES} bytes")
    return tuple(out)


def _check_tasks(spec: JobSpec) -> None:
    """Tasks and cores per task, when given, divide the job's cores exactly (ntasks * cpus_per_task == ncpus);
    an exclusive job's need only fit in them."""
    n, c = spec.ntasks, spec.cpus_per_task
    if n is None and c is None:
        return
    if spec.split is not None:
        raise Refused("job: ntasks and cpus_per_task describe a plain job, not a splittable one")
    if spec.exclusive:
        if (n or 1) * (c or 1) > spec.ncpus:
            raise Refused(f"job: {n or 1} tasks of {c or 1} cores are more than its {spec.ncpus} cores")
        return
    if n is not None and c is not None and n * c != spec.ncpus:
        raise Refused(f"job: ntasks {n} times cpus_per_task {c} is not its {spec.ncpus} cores")
    if spec.ncpus % (n or c or 1):
        what = "ntasks" if n is not None else "cpus_per_task"
        raise Refused(f"job: {what} {n or c} does not divide its {spec.ncpus} cores")


def _sub_tasks(g: Fields) -> tuple[SubTask, ...]:
    """The ``tasks`` of a split spec: ``[ncpus, seconds, [args...]]`` each, checked."""
    raw = g.raw("tasks")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_COUNT:
        raise g.bad("tasks", f"must be a list of 1 to {MAX_COUNT} sub-tasks")
    out = []
    for k, item in enumerate(raw):
        where = f"{g.where}: sub-task {k}"
        if not isinstance(item, list) or len(item) != 3:
            raise Refused(f"{where} must be [cores, seconds, [arguments]]")
        c, t, args = item
        if not isinstance(c, int) or isinstance(c, bool) or not 1 <= c <= MAX_COUNT:
            raise Refused(f"{where}: cores must be a whole number from 1 to {MAX_COUNT}")
        if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= MAX_SECONDS:
            raise Refused(f"{where}: time must be a whole number of seconds from 1 to {MAX_SECONDS}")
        if not isinstance(args, list) or len(args) > MAX_TASK_ARGS:
            raise Refused(f"{where}: arguments must be a list of at most {MAX_TASK_ARGS} strings")
        got = tuple(text(a, f"{where}: an argument", MAX_TEXT, control=True) for a in args)
        if sum(len(a) for a in got) > MAX_TEXT:
            raise Refused(f"{where}: arguments longer than {MAX_TEXT} bytes in all")
        out.append(SubTask(c, t, got))
    return tuple(out)


def _replace(spec: JobSpec, **kw: Any) -> JobSpec:
    return spec._replace(**kw)
