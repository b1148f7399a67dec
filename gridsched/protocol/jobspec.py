"""A job's spec as a typed value (:class:`JobSpec`), with the values inside it (a splittable job's
:class:`Split`, the warning :class:`JobSignal`, mail events and recipients, :class:`UserEnv`) and their
parsers, which gsub and the daemon's boundary share; :meth:`JobSpec.to_spec` is the one encoder of a job,
:meth:`JobSpec.from_spec` reads it back.

Part of the trust boundary (:mod:`gridsched.protocol.requests`, which re-exports these names).
Standard library only: gsub imports it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from gridsched.protocol.fields import safe
from gridsched.protocol.jobs import PRIVATE_KEYS, Checkpoint, Hint
from gridsched.protocol.text import shown

if TYPE_CHECKING:  # loaded (with the machine map under it) only for a request that asks for devices
    from typing import TypeAlias

    from gridsched.core.devices import DeviceAsk
    from gridsched.protocol.specview import SplitTask

    # Short names: JobSpec's annotations are compiled at every start of a command that loads it (NamedTuple).
    TaskArgs: TypeAlias = tuple[tuple[str, ...], ...]  # each sub-task's own arguments, by index
    PieceArgs: TypeAlias = tuple[tuple[int, tuple[str, ...]], ...]  # a piece's sub-tasks' indices and arguments


class SubTask(NamedTuple):
    """One sub-task of a split file: its cores, its walltime (seconds) and its own arguments."""

    ncpus: int
    time: int
    args: tuple[str, ...] = ()


class Split(NamedTuple):
    """A splittable job: ``n`` sub-tasks of ``ncpus`` cores and ``task_time`` seconds, or ``tasks``, one each
    (``ncpus`` and ``task_time`` are then the largest); a failed or timed-out sub-task is run again up to
    ``retries`` times."""

    n: int
    ncpus: int
    task_time: int
    tasks: tuple[SubTask, ...] = ()
    retries: int = 0
    devices: tuple[DeviceAsk, ...] = ()  # each sub-task's own devices (gsub --split N --gpus-per-task G)
    # taken in by the daemon: the sub-tasks not yet run or taken out (their arguments are then the spec's
    # split_args, the owner's, and ``tasks`` keep their sizes alone); None: as submitted
    left: tuple[int, ...] | None = None

    def to_spec(self) -> dict[str, Any]:
        """The ``split`` of a job's spec."""
        sp: dict[str, Any] = {"n": self.n, "ncpus": self.ncpus, "task_time": self.task_time}
        if self.left is not None:
            sp["left"] = list(self.left)
        if self.retries:
            sp["retries"] = self.retries
        if self.tasks:
            kept = self.left is not None  # the daemon's copy: sizes only
            sp["tasks"] = [[t.ncpus, t.time] if kept else [t.ncpus, t.time, list(t.args)] for t in self.tasks]
        if self.devices:
            from gridsched.protocol.device_asks import asks_to_spec

            sp["devices"] = asks_to_spec(self.devices)
        return sp

    @classmethod
    def from_spec(cls, sp: Mapping[str, Any]) -> Split:
        """The inverse of :meth:`to_spec` (a spec written by this release or the previous one)."""
        tasks = tuple(SubTask(int(t[0]), int(t[1]), tuple(t[2]) if len(t) > 2 else ()) for t in sp.get("tasks") or ())
        devices: tuple[DeviceAsk, ...] = ()
        if sp.get("devices"):
            from gridsched.protocol.device_asks import asks_from_spec

            devices = asks_from_spec(sp["devices"])
        left = sp.get("left")
        return cls(
            int(sp["n"]),
            int(sp["ncpus"]),
            int(sp["task_time"]),
            tasks,
            int(sp.get("retries") or 0),
            devices,
            None if left is None else tuple(left),
        )


class JobSignal(NamedTuple):
    """A signal sent to a running job ``secs`` seconds before its walltime ends (sbatch ``--signal``):
    to its batch shell alone (``shell_only``, sbatch's ``B:``) or to all its processes."""

    num: int
    secs: int
    shell_only: bool

    def text(self) -> str:
        """The canonical form, as :func:`parse_signal` reads it back: ``[B:]NAME@SECONDS``."""
        return f"{'B:' if self.shell_only else ''}{signal_name(self.num)}@{self.secs}"


MAX_SIGNAL_SECS = 65535  # sbatch's limit on --signal's @SECONDS
SIGNAL_FORMS = "use [B:]SIG[@SECONDS]: a signal name (USR1, SIGUSR1) or number, SECONDS from 0 to 65535, default 60"


def signal_name(num: int) -> str:
    """The name of signal ``num`` without SIG (USR1), or its number when it has none."""
    import signal as _signal

    try:
        return _signal.Signals(num).name.removeprefix("SIG")
    except ValueError:
        return str(num)


def parse_signal(value: str, walltime: int | None = None) -> JobSignal:
    """sbatch's ``--signal`` value ``[B:]SIG[@SECONDS]``, checked against ``walltime`` (seconds) when given.

    :class:`ValueError` with one line naming the value and what is accepted.  gsub
    and the daemon's boundary both read it with this function, so they accept the
    same values and refuse the others with the same words.
    """
    import signal as _signal

    v = value.strip()
    body = v[2:] if v[:2].upper() == "B:" else v
    sig_s, at, secs_s = body.partition("@")
    sig_s = sig_s.strip()
    if sig_s.isdigit():
        num = int(sig_s)
        if num not in _signal.valid_signals() or num == 0:
            raise ValueError(f"'{shown(value)}': unknown signal {sig_s} ({SIGNAL_FORMS})")
    else:
        name = "SIG" + sig_s.upper().removeprefix("SIG")
        member = _signal.Signals.__members__.get(name)
        if member is None:
            raise ValueError(f"'{shown(value)}': unknown signal {shown(sig_s)!r} ({SIGNAL_FORMS})")
        num = int(member)
    secs = 60
    if at:
        if not secs_s.strip().isdigit() or not secs_s.strip().isascii():
            raise ValueError(f"'{shown(value)}': {shown(secs_s)!r} is not a number of seconds ({SIGNAL_FORMS})")
        secs = int(secs_s.strip())
        if secs > MAX_SIGNAL_SECS:
            raise ValueError(f"'{shown(value)}': {secs} seconds is more than {MAX_SIGNAL_SECS} ({SIGNAL_FORMS})")
    if walltime is not None and secs > walltime:
        raise ValueError(f"'{shown(value)}': {secs} seconds before the end is longer than the walltime ({walltime}s)")
    return JobSignal(num, secs, v[:2].upper() == "B:")


# Mail events, as sbatch --mail-type names them.  ALL is BEGIN, END, FAIL, INVALID_DEPEND, REQUEUE, STAGE_OUT.
MAIL_EVENTS = (
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "INVALID_DEPEND",
    "STAGE_OUT",
    "TIME_LIMIT",
    "TIME_LIMIT_90",
    "TIME_LIMIT_80",
    "TIME_LIMIT_50",
    "ARRAY_TASKS",
)
MAIL_ALL = ("BEGIN", "END", "FAIL", "INVALID_DEPEND", "REQUEUE", "STAGE_OUT")
MAX_MAIL_USERS = 16
# A mail address or local user name a sendmail is given as an argument: no leading '-' (an option), no
# whitespace, control characters, quotes, backslashes, commas or angle brackets.
_MAIL_ADDRESS = re.compile(
    r"[A-Za-z0-9_.+=%~][A-Za-z0-9_.+=%~-]{0,127}(@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63}){0,8})?\Z"
)
USER_ENV_DEFAULT = 8  # seconds: sbatch's --get-user-env default timeout
USER_ENV_MAX = 600


class UserEnv(NamedTuple):
    """sbatch --get-user-env[=TIMEOUT][S|L]: the owner's login shell (``L``, the default) or plain shell
    (``S``) is asked for its environment, given ``timeout`` seconds."""

    timeout: int = USER_ENV_DEFAULT
    login: bool = True

    def text(self) -> str:
        return f"{self.timeout}{'L' if self.login else 'S'}"


def parse_mail_type(value: str) -> tuple[str, ...]:
    """sbatch --mail-type: comma-separated event names (and ALL, NONE), in any case; their canonical set."""
    out: set[str] = set()
    for item in value.split(","):
        name = item.strip().upper()
        if name == "NONE":
            out.clear()
        elif name == "ALL":
            out.update(MAIL_ALL)
        elif name in MAIL_EVENTS:
            out.add(name)
        else:
            raise ValueError(
                f"'{shown(value)}': unknown mail event {shown(item.strip())!r} "
                f"(known: {', '.join(MAIL_EVENTS)}, ALL, NONE)"
            )
    return tuple(sorted(out))


def parse_mail_user(value: str) -> tuple[str, ...]:
    """Mail recipients, comma-separated: at most :data:`MAX_MAIL_USERS`, each an address or a user name."""
    out = [a.strip() for a in value.split(",")]
    if len(out) > MAX_MAIL_USERS:
        raise ValueError(f"more than {MAX_MAIL_USERS} mail recipients")
    for a in out:
        if not _MAIL_ADDRESS.match(a):
            raise ValueError(
                f"{safe(a, 80)!r} is not a mail address this machine sends to (letters, digits and . _ + = % - "
                "before an optional @domain; no leading '-', spaces, quotes or control characters)"
            )
    return tuple(dict.fromkeys(out))


_USER_ENV = re.compile(r"(\d{0,6})([SLsl]?)\Z")


def parse_user_env(value: str) -> UserEnv:
    """sbatch --get-user-env's value: ``[TIMEOUT][S|L]`` (empty: 8 seconds, login shell)."""
    m = _USER_ENV.match(value.strip())
    if not m:
        raise ValueError(f"'{shown(value)}': use [TIMEOUT][S|L], TIMEOUT seconds (default {USER_ENV_DEFAULT})")
    secs = int(m.group(1)) if m.group(1) else USER_ENV_DEFAULT
    if not 1 <= secs <= USER_ENV_MAX:
        raise ValueError(f"'{shown(value)}': the timeout must be from 1 to {USER_ENV_MAX} seconds")
    return UserEnv(secs, m.group(2).upper() != "S")


class JobSpec(NamedTuple):
    """A checked job submission (the keys of :data:`gridsched.protocol.jobs.SPEC_KEYS` and the optional ones)."""

    id: int
    name: str
    user: str
    uid: int
    gid: int
    ncpus: int
    walltime: int
    mem: int | None
    checkpoint: Checkpoint
    hold: bool
    depend: str
    script: str
    args: tuple[str, ...]
    workdir: str
    stdout: str
    stderr: str
    env: tuple[tuple[str, str], ...]
    submit_time: float
    submit_dir: str
    umask: int = 0o022
    parent: int | None = None
    recoverable: bool = False
    resources: tuple[tuple[str, int], ...] = ()
    reservation: int | None = None
    wait_resv: bool = False
    array: str | None = None
    split: Split | None = None
    place: str | None = None
    threads_per_core: int = 0
    exclusive_board: bool = False
    begin: float | None = None  # not before this time (seconds since the epoch)
    shell: str | None = None  # what runs a script without #! on line 1 (None: /bin/sh)
    open_mode: str | None = None  # "append": output files are appended to, never truncated
    devices: tuple[DeviceAsk, ...] = ()  # GPUs and other devices (gsub --gpus, --gres)
    ntasks: int | None = None  # tasks the job asked for (Slurm -n), when it did
    cpus_per_task: int | None = None  # cores per task it asked for (Slurm -c), when it did
    signal: JobSignal | None = None  # sent before the walltime ends (sbatch --signal)
    estimate: int | None = None  # seconds the scheduler plans with, at most the walltime (PBS soft_walltime)
    nice: int = 0  # gsub --nice: subtracted from the priority; negative only from an admin
    priority: int | None = None  # gsub --priority: the job's priority, set by an admin (None: computed)
    env_set: tuple[tuple[str, str], ...] = ()  # variables set over env (gsub --export VAR=VALUE)
    exclusive: bool = False  # runs alone: ncpus is the whole machine (gsub --exclusive)
    mail_type: tuple[str, ...] = ()  # mail events (sbatch --mail-type), canonical names, sorted
    mail_user: tuple[str, ...] = ()  # mail recipients (sbatch --mail-user); none: the job's owner
    get_user_env: UserEnv | None = None  # start from the owner's login environment (sbatch --get-user-env)
    interactive: bool = False  # a grun job: its streams go to the grun that waits for it; never rerun
    dialect: str | None = None  # whose directives the script has: "slurm", "pbs", "sge" (None: none or #GS)
    mem_per_cpu: int | None = None  # bytes per core, when the job asked so (--mem-per-cpu); mem is the total
    gpus_per_task: int | None = None  # GPUs per task, when the job asked so (--gpus-per-task)
    account: str | None = None  # the account named (gsub --account, #SBATCH -A): SLURM_JOB_ACCOUNT; not charged
    ntasks_per_node: int | None = None  # tasks per node, as given (--ntasks-per-node): SLURM_NTASKS_PER_NODE
    hint: Hint | None = None  # sbatch --hint: SLURM_HINT (all but multithread: threads_per_core 1)
    gpu_options: tuple[str, ...] = ()  # which of jobs.GPU_OPTIONS gave its GPUs: SLURM_GPUS, SLURM_GPUS_PER_NODE
    pe: str | None = None  # the Grid Engine parallel environment named (#$ -pe NAME N): PE, PE_HOSTFILE
    name_per_task: bool = False  # an array whose tasks are named NAME-INDEX in their environment (Torque -t)
    mem_per_gpu: int | None = None  # bytes per GPU, when the job asked so (--mem-per-gpu); mem is the total
    # set by the daemon (never by a request): an array's task, a piece of a splittable job
    array_id: int | None = None  # the array a task belongs to (the id of its first task)
    array_index: int | None = None  # the task's index in its array
    array_max: int | None = None  # most tasks of the array running at once (the %MAX of its range)
    array_range: str | None = None  # the array's range, from which its variables are computed at each start
    split_of: int | None = None  # a piece: the splittable job its sub-tasks were taken from
    split_chains: tuple[tuple[int, ...], ...] = ()  # a piece's sub-task indices, one tuple per chain
    split_widths: tuple[int, ...] = ()  # the cores of each of a piece's chains
    split_task: SplitTask | None = None  # a piece's sub-tasks, as gridsched.job.subtasks reads them
    # each sub-task's own arguments (private), of a splittable job taken in: one tuple per sub-task, by index
    split_args: TaskArgs | None = None
    # of a piece: its sub-tasks' indices, each with its arguments (the spec's split_args, then index -> list)
    piece_args: PieceArgs | None = None

    @classmethod
    def from_spec(cls, data: Mapping[str, Any]) -> JobSpec:
        """The job of a spec the daemon keeps (the inverse of :meth:`to_spec`): the job table's public part,
        with or without the private part (absent, its fields are empty).

        Only what the boundary (:func:`gridsched.protocol.requests.parse`) or the daemon wrote is read here, so
        nothing is checked again; a key a spec of this release or the previous one lacks takes its default.
        """
        g = data.get
        sig = g("signal")
        warn: JobSignal | None = None
        if sig:
            try:
                warn = parse_signal(str(sig))
            except ValueError:
                warn = None
        uenv = g("get_user_env")
        devices: tuple[DeviceAsk, ...] = ()
        if g("devices"):
            from gridsched.protocol.device_asks import asks_from_spec

            devices = asks_from_spec(data["devices"])
        placed = g("place") is not None or g("threads_per_core") or g("exclusive_board")
        reservation = g("reservation")
        return cls(
            id=int(data["id"]),
            name=str(g("name") or ""),
            user=str(g("user") or ""),
            uid=int(g("uid", -1)),
            gid=int(g("gid", -1)),
            ncpus=int(data["ncpus"]),
            walltime=int(data["walltime"]),
            mem=g("mem"),
            checkpoint=Checkpoint(g("checkpoint") or "none"),
            hold=bool(g("hold")),
            depend=str(g("depend") or ""),
            script=str(g("script") or ""),
            args=tuple(g("args") or ()),
            workdir=str(g("workdir") or ""),
            stdout=str(g("stdout") or ""),
            stderr=str(g("stderr") or ""),
            env=tuple((g("env") or {}).items()),
            submit_time=float(g("submit_time") or 0.0),
            submit_dir=str(g("submit_dir") or g("workdir") or ""),
            umask=int(g("umask", 0o022)),
            parent=g("parent"),
            recoverable=g("recoverable") is True,
            resources=tuple(sorted((g("resources") or {}).items())),
            reservation=reservation,
            wait_resv=bool(g("wait_resv")) if reservation is not None else False,
            array=g("array"),
            split=Split.from_spec(data["split"]) if g("split") else None,
            place=(g("place") or "pack") if placed else None,
            threads_per_core=int(g("threads_per_core") or 0),
            exclusive_board=bool(g("exclusive_board")),
            begin=None if g("begin") is None else float(data["begin"]),
            shell=g("shell"),
            open_mode=g("open_mode"),
            devices=devices,
            ntasks=g("ntasks"),
            cpus_per_task=g("cpus_per_task"),
            signal=warn,
            estimate=g("estimate"),
            nice=int(g("nice") or 0),
            priority=g("priority"),
            env_set=tuple((g("env_set") or {}).items()),
            exclusive=g("exclusive") is True,
            mail_type=tuple(x for x in str(g("mail_type") or "").split(",") if x),
            mail_user=tuple(g("mail_user") or ()),
            get_user_env=parse_user_env(str(uenv)) if uenv else None,
            interactive=g("interactive") is True,
            dialect=g("dialect"),
            mem_per_cpu=g("mem_per_cpu"),
            gpus_per_task=g("gpus_per_task"),
            account=g("account"),
            ntasks_per_node=g("ntasks_per_node"),
            hint=Hint(data["hint"]) if g("hint") else None,
            gpu_options=tuple(g("gpu_options") or ()),
            pe=g("pe"),
            name_per_task=g("name_per_task") is True,
            mem_per_gpu=g("mem_per_gpu"),
            array_id=g("array_id"),
            array_index=g("array_index"),
            array_max=g("array_max"),
            array_range=g("array_range"),
            split_of=g("split_of"),
            split_chains=tuple(tuple(c) for c in g("split_chains") or ()),
            split_widths=tuple(g("split_widths") or ()),
            split_task=g("split_task"),
            split_args=_task_args(g("split_args")),
            piece_args=_piece_args(g("split_args")),
        )

    @property
    def placed(self) -> bool:
        """It has a mapping requirement (``place``, taken as ``pack`` when unset, ``threads_per_core`` or
        ``exclusive_board``)."""
        return self.place is not None or bool(self.threads_per_core) or self.exclusive_board

    def public(self) -> JobSpec:
        """The job without its private part (what the job table shows of it; the daemon's records keep this)."""
        return self._replace(
            script="",
            args=(),
            workdir="",
            stdout="",
            stderr="",
            env=(),
            submit_dir="",
            env_set=(),
            split_args=None,
            piece_args=None,
        )

    def stored(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The job's spec as the daemon stores it: the public part (the job table's ``spec``) and the private
        part (the job's own file), without the script (a file of its own)."""
        spec = self.to_spec()
        del spec["script"]
        return spec, {k: spec.pop(k) for k in PRIVATE_KEYS if k in spec}

    def to_spec(self) -> dict[str, Any]:
        """The job's spec as the daemon keeps it (and as a submit request carries it): every required key, the
        optional ones only when set.  The one encoder of a job; :meth:`from_spec` reads it back."""
        spec: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "user": self.user,
            "uid": self.uid,
            "gid": self.gid,
            "ncpus": self.ncpus,
            "walltime": self.walltime,
            "mem": self.mem,
            "checkpoint": self.checkpoint,
            "hold": self.hold,
            "depend": self.depend,
            "script": self.script,
            "args": list(self.args),
            "workdir": self.workdir,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "env": dict(self.env),
            "submit_time": self.submit_time,
            "submit_dir": self.submit_dir,
            "umask": self.umask,
        }
        if self.parent is not None:
            spec["parent"] = self.parent
        if self.recoverable:
            spec["recoverable"] = True
        if self.resources:
            spec["resources"] = dict(self.resources)
        if self.reservation is not None:
            spec.update(reservation=self.reservation, wait_resv=self.wait_resv)
        if self.array is not None:
            spec["array"] = self.array
        if self.begin is not None:
            spec["begin"] = self.begin
        if self.shell is not None:
            spec["shell"] = self.shell
        if self.open_mode is not None:
            spec["open_mode"] = self.open_mode
        if self.signal is not None:
            spec["signal"] = self.signal.text()
        if self.estimate is not None:
            spec["estimate"] = self.estimate
        if self.ntasks is not None:
            spec["ntasks"] = self.ntasks
        if self.cpus_per_task is not None:
            spec["cpus_per_task"] = self.cpus_per_task
        if self.nice:
            spec["nice"] = self.nice
        if self.priority is not None:
            spec["priority"] = self.priority
        if self.env_set:
            spec["env_set"] = dict(self.env_set)
        if self.exclusive:
            spec["exclusive"] = True
        if self.mail_type:
            spec["mail_type"] = ",".join(self.mail_type)
        if self.mail_user:
            spec["mail_user"] = list(self.mail_user)
        if self.get_user_env is not None:
            spec["get_user_env"] = self.get_user_env.text()
        if self.interactive:
            spec["interactive"] = True
        if self.dialect is not None:
            spec["dialect"] = self.dialect
        if self.mem_per_cpu is not None:
            spec["mem_per_cpu"] = self.mem_per_cpu
        if self.gpus_per_task is not None:
            spec["gpus_per_task"] = self.gpus_per_task
        if self.account is not None:
            spec["account"] = self.account
        if self.ntasks_per_node is not None:
            spec["ntasks_per_node"] = self.ntasks_per_node
        if self.hint is not None:
            spec["hint"] = self.hint.value
        if self.gpu_options:
            spec["gpu_options"] = list(self.gpu_options)
        if self.pe is not None:
            spec["pe"] = self.pe
        if self.name_per_task:
            spec["name_per_task"] = True
        if self.mem_per_gpu is not None:
            spec["mem_per_gpu"] = self.mem_per_gpu
        if self.split is not None:
            spec["split"] = self.split.to_spec()
        if self.place is not None or self.threads_per_core or self.exclusive_board:
            spec.update(
                place=self.place or "pack", threads_per_core=self.threads_per_core, exclusive_board=self.exclusive_board
            )
        if self.devices:
            from gridsched.protocol.device_asks import asks_to_spec

            spec["devices"] = asks_to_spec(self.devices)
        if self.array_id is not None:
            spec.update(array_id=self.array_id, array_index=self.array_index)
        if self.array_max is not None:
            spec["array_max"] = self.array_max
        if self.array_range is not None:
            spec["array_range"] = self.array_range
        if self.split_of is not None:
            spec["split_of"] = self.split_of
        if self.split_chains:
            spec["split_chains"] = [list(c) for c in self.split_chains]
        if self.split_widths:
            spec["split_widths"] = list(self.split_widths)
        if self.split_task is not None:
            spec["split_task"] = self.split_task
        if self.split_args is not None:
            spec["split_args"] = [list(a) for a in self.split_args]
        if self.piece_args is not None:
            spec["split_args"] = {str(i): list(a) for i, a in self.piece_args}
        return spec


# A spec's ``split_args`` is a splittable job's list (JobSpec.split_args) or a piece's object of index -> list
# (JobSpec.piece_args).


def _task_args(raw: object) -> TaskArgs | None:
    return tuple(tuple(a) for a in raw) if isinstance(raw, list) else None


def _piece_args(raw: object) -> PieceArgs | None:
    return tuple((int(i), tuple(a)) for i, a in raw.items()) if isinstance(raw, dict) else None
