"""The requests the commands hand the daemon, as typed values: the one trust boundary.

A request is one JSON object in a file of the spool's ``incoming/``.  The
daemon reads it (:mod:`gridsched.daemon.intake`), learns who wrote it from the
kernel (the file's owner), and calls :func:`parse` here; the commands call the
same :func:`parse` on the bytes they are about to write, so what a command
accepts the daemon accepts, refused with the same one line
(:class:`Refused`).  Past :func:`parse` nothing trusts a number, string, id
or path the user wrote: every field of every kind is checked for type, range
and length, unknown fields are refused, the user and uid come from the
sender, and the request is one of the immutable named tuples below (one per kind;
handlers match on them).

Job and reservation ids are not taken from what a request claims: a request
that brings a new id (a job submission or a reservation) is published as
``submit-NNNNNNNNNN.json`` (:func:`id_name`) with an exclusive link, so the
id belongs to whoever created that name first, and its id is the one in its
name; the daemon also refuses an id that is taken or far beyond the ids it
has seen (:data:`ID_WINDOW`), so ids cannot be used up.

Standard library only (plus the pure core's parsers): gsub imports it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from gridsched.core import cpuset, depend
from gridsched.core.params import ADMIN_MAX, NICE_MAX, NICE_MIN
from gridsched.protocol.jobs import CHECKPOINT_MODES, PRIVATE_KEYS, RERUN_MODES, Checkpoint
from gridsched.protocol.text import shown

if TYPE_CHECKING:  # loaded (with the machine map under it) only for a request that asks for devices
    from gridsched.core.devices import DeviceAsk

MAX_REQUEST = 8 << 20  # bytes of one request file
MAX_ID = (1 << 53) - 1  # a job or reservation id (exact in JSON numbers and in SQLite)
ID_WINDOW = 1_000_000  # a new id may lie at most this far beyond the highest id in use
MAX_COUNT = 1 << 20  # cores, sub-tasks, ids in one list
MAX_SECONDS = 100 * 366 * 86400  # a walltime, duration or task time
MAX_TIME = 1 << 34  # seconds since the epoch (the year 2514)
MAX_BYTES = 1 << 62  # memory
MAX_SCRIPT = 1 << 20  # bytes of a job script
MAX_ARGS = 4096
MAX_ARG = 128 << 10  # bytes of one argument or environment value (the kernel's MAX_ARG_STRLEN)
MAX_ENV = 16384  # variables
MAX_ENV_SET = 1024  # variables a submission sets (gsub --export VAR=VALUE)
MAX_ENV_SET_BYTES = 1 << 20  # bytes of their names and values together
MAX_PATH = 4095  # bytes of a path (PATH_MAX less the NUL)
MAX_COMPONENT = 255  # bytes of one path component (NAME_MAX)
MAX_NAME = 255  # bytes of a job or reservation name
MAX_TEXT = 4096  # bytes of other free text (dependency spec, array range, reason, ...)
MAX_UID = (1 << 32) - 2
MAX_TASK_ARGS = 256  # arguments of one sub-task of a split file
MAX_RETRIES = 100  # runs again of a failed sub-task
PLACES = ("pack", "spread", "board")
SUBMIT_PREFIX = "submit-"
_ID_NAME = re.compile(r"submit-([0-9]{10,16})\.json\Z")
_RESOURCE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}\$?\Z")


class Refused(ValueError):
    """A request that cannot be taken; the message is one line, safe to print and log."""


class Sender(NamedTuple):
    """Who wrote a request, as the kernel says (never as the request says)."""

    uid: int
    user: str
    groups: frozenset[int]  # the groups the user may run a job with
    admin: bool  # root or the spool's owner (gridsched.protocol.admin)


# -- the requests --------------------------------------------------------------------


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
            from gridsched.host.devices import asks_to_spec

            sp["devices"] = asks_to_spec(self.devices)
        return sp

    @classmethod
    def from_spec(cls, sp: Mapping[str, Any]) -> Split:
        """The inverse of :meth:`to_spec` (a spec written by this release or the previous one)."""
        tasks = tuple(SubTask(int(t[0]), int(t[1]), tuple(t[2]) if len(t) > 2 else ()) for t in sp.get("tasks") or ())
        devices: tuple[DeviceAsk, ...] = ()
        if sp.get("devices"):
            from gridsched.host.devices import asks_from_spec

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
    # set by the daemon (never by a request): an array's task, a piece of a splittable job
    array_id: int | None = None  # the array a task belongs to (the id of its first task)
    array_index: int | None = None  # the task's index in its array
    array_max: int | None = None  # most tasks of the array running at once (the %MAX of its range)
    array_range: str | None = None  # the array's range, from which its variables are computed at each start
    split_of: int | None = None  # a piece: the splittable job its sub-tasks were taken from
    split_chains: tuple[tuple[int, ...], ...] = ()  # a piece's sub-task indices, one tuple per chain
    split_widths: tuple[int, ...] = ()  # the cores of each of a piece's chains
    split_task: Mapping[str, Any] | None = None  # a piece's sub-tasks, as gridsched.job.subtasks reads them
    split_args: Any = None  # each sub-task's own arguments (private): a list, or a piece's index -> list

    @classmethod
    def from_spec(cls, data: Mapping[str, Any]) -> JobSpec:
        """The job of a spec the daemon keeps (the inverse of :meth:`to_spec`): the job table's public part,
        with or without the private part (absent, its fields are empty).

        Only what the boundary (:func:`parse`) or the daemon wrote is read here, so nothing is checked again;
        a key a spec of this release or the previous one lacks takes its default.
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
            from gridsched.host.devices import asks_from_spec

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
            array_id=g("array_id"),
            array_index=g("array_index"),
            array_max=g("array_max"),
            array_range=g("array_range"),
            split_of=g("split_of"),
            split_chains=tuple(tuple(c) for c in g("split_chains") or ()),
            split_widths=tuple(g("split_widths") or ()),
            split_task=g("split_task"),
            split_args=g("split_args"),
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
        if self.split is not None:
            spec["split"] = self.split.to_spec()
        if self.place is not None or self.threads_per_core or self.exclusive_board:
            spec.update(
                place=self.place or "pack", threads_per_core=self.threads_per_core, exclusive_board=self.exclusive_board
            )
        if self.devices:
            from gridsched.host.devices import asks_to_spec

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
            spec["split_args"] = self.split_args
        return spec


class Submit(NamedTuple):
    job: JobSpec


class Cancel(NamedTuple):
    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()


class Hold(NamedTuple):
    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()


class Release(NamedTuple):
    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()


class Reload(NamedTuple):
    """Read the configuration again (an admin's request)."""


class Tune(NamedTuple):
    """Tune the settings that are "auto" now (an admin's request)."""


class Drain(NamedTuple):
    cores: frozenset[int]
    reason: str


class Undrain(NamedTuple):
    cores: frozenset[int]


class Yield(NamedTuple):
    """A running job lends its cores to its children (gyield, gwait --yield)."""

    job: int
    until: tuple[int, ...] | None = None


class Resume(NamedTuple):
    """A yielding job asks for its cores back (gresume)."""

    job: int


class ResvSpec(NamedTuple):
    id: int
    name: str
    user: str
    uid: int
    ncpus: int
    duration: int
    start: float | None
    resources: tuple[tuple[str, int], ...]
    users: tuple[str, ...]
    kill: bool
    create_time: float
    # The mapping requirement, as a job's (gresv create --place, --threads-per-core,
    # --exclusive-board); ``place`` None and the others unset: the fewest boards, any thread.
    place: str | None = None
    threads_per_core: int = 0
    exclusive_board: bool = False
    devices: tuple[DeviceAsk, ...] = ()  # GPUs the reservation holds (gresv create --gpus)

    @property
    def placed(self) -> bool:
        """Whether the reservation has a mapping requirement."""
        return self.place is not None or bool(self.threads_per_core) or self.exclusive_board

    def to_dict(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "name": self.name,
            "user": self.user,
            "uid": self.uid,
            "ncpus": self.ncpus,
            "duration": self.duration,
            "start": self.start,
            "resources": dict(self.resources),
            "users": list(self.users),
            "kill": self.kill,
            "create_time": self.create_time,
        }
        if self.placed:
            out.update(
                place=self.place or "pack", threads_per_core=self.threads_per_core, exclusive_board=self.exclusive_board
            )
        if self.devices:
            from gridsched.host.devices import asks_to_spec

            out["devices"] = asks_to_spec(self.devices)
        return out


class ResvCreate(NamedTuple):
    resv: ResvSpec


class ResvDelete(NamedTuple):
    id: int
    release: bool = False


class Changes(NamedTuple):
    """What an alter request changes in a job's spec: the fields given, each checked as a submission's
    (:func:`_job`).  A field is one line here and one in :func:`_changes`."""

    name: str | None = None
    ncpus: int | None = None
    walltime: int | None = None
    mem: int | None = None
    checkpoint: Checkpoint | None = None
    depend: str | None = None  # "" clears the dependencies
    reservation: int | None = None
    begin: float | None = None
    place: str | None = None
    threads_per_core: int | None = None
    exclusive_board: bool | None = None
    devices: tuple[DeviceAsk, ...] | None = None
    nice: int | None = None  # replaces the job's nice; negative only from an admin
    priority: int | None = None  # the job's priority, set by an admin (as gsub --priority)

    def given(self) -> dict[str, Any]:
        """The fields given, as the job's spec keeps them."""
        out: dict[str, Any] = {k: v for k, v in self._asdict().items() if v is not None}
        if self.devices is not None:
            from gridsched.host.devices import asks_to_spec

            out["devices"] = asks_to_spec(self.devices)
        return out


class Alter(NamedTuple):
    """Change the spec of pending jobs, or the walltime of running ones (galter)."""

    jobs: tuple[int, ...]
    arrays: tuple[int, ...]
    changes: Changes


class Requeue(NamedTuple):
    """Send running or finished jobs back to the queue (grequeue)."""

    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()


Request = (
    Submit
    | Cancel
    | Hold
    | Release
    | Reload
    | Tune
    | Drain
    | Undrain
    | Yield
    | Resume
    | ResvCreate
    | ResvDelete
    | Alter
    | Requeue
)
ADMIN_KINDS = ("reload", "tune", "drain", "undrain")


class Received(NamedTuple):
    """A parsed request with where it came from."""

    name: str  # the file's name in incoming/
    sender: Sender
    request: Request
    digest: str = ""  # of the file's bytes: tells a request read again from a new one


# -- names ----------------------------------------------------------------------------


def id_name(new_id: int) -> str:
    """The file name of a request that brings the new id ``new_id`` (a job or a reservation)."""
    return f"{SUBMIT_PREFIX}{new_id:010d}.json"


def id_of_name(name: str) -> int | None:
    """The id a request file's name brings, if it is the canonical name of a new id; else None."""
    m = _ID_NAME.match(name)
    if m is None:
        return None
    n = int(m.group(1))
    return n if 0 < n <= MAX_ID and id_name(n) == name else None


# -- parsing ----------------------------------------------------------------------------


def loads(raw: bytes) -> dict[str, Any]:
    """The JSON object of a request file; :class:`Refused` if it is not one."""
    if len(raw) > MAX_REQUEST:
        raise Refused(f"too large ({len(raw)} bytes; at most {MAX_REQUEST})")
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise Refused("not valid JSON (nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise Refused(f"not valid JSON ({safe(str(e), 200)})") from None
    if not isinstance(data, dict):
        raise Refused("not a request (not a JSON object)")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def parse(data: Mapping[str, Any], name: str, sender: Sender) -> Request:
    """The typed request of the JSON object ``data`` read from the file ``name`` written by ``sender``.

    :class:`Refused` with the reason if any field is missing, unknown, of the
    wrong type or out of range, or if the sender may not make it.
    """
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _PARSERS:
        raise Refused(f"unknown request type {safe(repr(kind), 60)}")
    new_id = id_of_name(name)
    if kind in ("submit", "resv_create"):
        if new_id is None:
            raise Refused(f"a {kind} request must be named {SUBMIT_PREFIX}ID.json with its new id (ten digits or more)")
    elif name.startswith(SUBMIT_PREFIX):
        raise Refused(f"a {kind} request cannot bring a new id")
    if kind in ADMIN_KINDS and not sender.admin:
        raise Refused(f"{kind}: only root or the spool's owner may ask for it")
    return _PARSERS[kind](_Fields(data, kind), new_id or 0, sender)


class _Fields:
    """The fields of one request object, each taken once and checked; :meth:`done` refuses what is left."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where
        self.seen = {"type"} if where in _PARSERS else set()

    def _take(self, key: str, required: bool) -> Any:
        self.seen.add(key)
        if key not in self.data:
            if required:
                raise Refused(f"{self.where}: missing field {key!r}")
            return None
        if self.data[key] is None and required:
            raise self.bad(key, "must not be null")
        return self.data[key]

    def bad(self, key: str, why: str) -> Refused:
        return Refused(f"{self.where}: field {key!r} {why}")

    def integer(self, key: str, lo: int, hi: int, required: bool = True, default: int | None = None) -> Any:
        v = self._take(key, required)
        if v is None:
            return default
        if not isinstance(v, int) or isinstance(v, bool):
            raise self.bad(key, "must be a whole number")
        if not lo <= v <= hi:
            raise self.bad(key, f"must lie between {lo} and {hi}")
        return v

    def number(self, key: str, lo: float, hi: float, required: bool = True) -> float | None:
        v = self._take(key, required)
        if v is None:
            return None
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise self.bad(key, "must be a number")
        if isinstance(v, int) and not -MAX_TIME <= v <= MAX_TIME:
            raise self.bad(key, f"must lie between {lo:g} and {hi:g}")
        f = float(v)
        if not math.isfinite(f) or not lo <= f <= hi:
            raise self.bad(key, f"must lie between {lo:g} and {hi:g}")
        return f

    def flag(self, key: str, required: bool = True) -> bool:
        v = self._take(key, required)
        if v is None:
            return False
        if not isinstance(v, bool):
            raise self.bad(key, "must be true or false")
        return v

    def text(
        self, key: str, limit: int, required: bool = True, control: bool = False, default: str | None = None
    ) -> Any:
        v = self._take(key, required)
        if v is None:
            return default
        return text(v, f"{self.where}: field {key!r}", limit, control)

    def path(self, key: str, required: bool = True) -> Any:
        v = self._take(key, required)
        if v is None:
            return None
        return path(v, f"{self.where}: field {key!r}")

    def ids(self, key: str, required: bool = False) -> tuple[int, ...]:
        v = self._take(key, required)
        if v is None:
            return ()
        if not isinstance(v, list) or len(v) > MAX_COUNT:
            raise self.bad(key, f"must be a list of at most {MAX_COUNT} job ids")
        for i in v:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 < i <= MAX_ID:
                raise self.bad(key, "must hold job ids (whole numbers from 1)")
        return tuple(dict.fromkeys(v))

    def raw(self, key: str, required: bool = False) -> Any:
        return self._take(key, required)

    def done(self) -> None:
        extra = sorted(k for k in self.data if k not in self.seen)
        if extra:
            shown = ", ".join(safe(repr(k), 40) for k in extra[:5])
            raise Refused(f"{self.where}: unknown field{'s' if len(extra) > 1 else ''} {shown}")


def _encodable(s: str, what: str) -> bytes:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(f"{what}: not valid UTF-8 text") from None


def text(v: Any, what: str, limit: int, control: bool = False) -> str:
    """A string of at most ``limit`` UTF-8 bytes, without NUL (nor other control characters unless ``control``)."""
    if not isinstance(v, str):
        raise Refused(f"{what} must be a string")
    b = _encodable(v, what)
    if len(b) > limit:
        raise Refused(f"{what} is longer than {limit} bytes")
    if "\0" in v:
        raise Refused(f"{what} holds a NUL character")
    if not control and any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise Refused(f"{what} holds control characters")
    return v


def path(v: Any, what: str) -> str:
    """An absolute path without NUL, of at most PATH_MAX bytes and NAME_MAX bytes per component."""
    p = text(v, what, MAX_PATH, control=True)
    if not p.startswith("/"):
        raise Refused(f"{what} must be an absolute path")
    for part in p.split("/"):
        if len(part.encode("utf-8")) > MAX_COMPONENT:
            raise Refused(f"{what} has a component longer than {MAX_COMPONENT} bytes")
    return p


def safe(s: str, limit: int = 200) -> str:
    """``s`` fit for one line of a log or a message: escaped as the commands show it
    (:func:`gridsched.protocol.text.shown`), cut to ``limit`` characters."""
    out = shown(s)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _identity(f: _Fields, sender: Sender) -> tuple[int, str]:
    """The uid and user name a request acts for: the sender's own; root may act for anyone."""
    uid = f.integer("uid", 0, MAX_UID)
    f.raw("user")  # never trusted: the name comes from the password database
    if sender.uid != 0 and uid != sender.uid:
        raise Refused(f"{f.where}: claims uid {uid} but was written by uid {sender.uid}")
    if uid == sender.uid:
        return uid, sender.user
    import pwd

    try:
        return uid, pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid, str(uid)


def _job(f: _Fields, new_id: int, sender: Sender) -> JobSpec:
    jid = f.integer("id", 1, MAX_ID)
    if jid != new_id:
        raise Refused(f"job: field 'id' is {jid} but the request is named for id {new_id}")
    uid, user = _identity(f, sender)
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
    try:
        deps = depend.parse(dep_text)
    except depend.DependError as e:
        raise f.bad("depend", safe(str(e))) from None
    if any(i > MAX_ID for i in depend.job_ids(deps)):
        raise f.bad("depend", f"names a job id above {MAX_ID}")
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
        g = _Fields(sp, "job: split")
        split = Split(
            g.integer("n", 1, MAX_COUNT),
            g.integer("ncpus", 1, MAX_COUNT),
            g.integer("task_time", 1, MAX_SECONDS),
            _sub_tasks(g),
            g.integer("retries", 0, MAX_RETRIES, required=False, default=0),
            _devices(g) if g.data.get("devices") is not None else (),
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
    place, tpc = _placement(f)
    res = _resources(f)
    devs = _devices(f)
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
        depend=depend.normalize(deps),
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


def _shell(f: _Fields) -> str | None:
    """The shell of a script without ``#!``, checked for its form only (absolute, no NUL, bounded): whether
    it exists or may be run is for the job's process to find out as the job's owner, so that the daemon,
    which may enter any directory, never tells anyone what is in one they may not enter."""
    p = f.path("shell", required=False)
    return None if p is None else str(p)


def _open_mode(f: _Fields) -> str | None:
    v = f.text("open_mode", 16, required=False)
    if v is not None and v not in ("append", "truncate"):
        raise f.bad("open_mode", "must be append or truncate")
    return None if v in (None, "truncate") else str(v)


def _mail_type_field(f: _Fields) -> tuple[str, ...]:
    v = f.text("mail_type", 512, required=False)
    if v is None:
        return ()
    try:
        return parse_mail_type(v)
    except ValueError as e:
        raise f.bad("mail_type", str(e)) from None


def _mail_user_field(f: _Fields) -> tuple[str, ...]:
    v = f.raw("mail_user")
    if v is None:
        return ()
    if not isinstance(v, list) or not v or len(v) > MAX_MAIL_USERS:
        raise f.bad("mail_user", f"must be a list of 1 to {MAX_MAIL_USERS} addresses")
    try:
        return parse_mail_user(",".join(text(a, "job: a mail address", 256) for a in v))
    except ValueError as e:
        raise f.bad("mail_user", str(e)) from None


def _user_env_field(f: _Fields) -> UserEnv | None:
    v = f.text("get_user_env", 16, required=False)
    if v is None:
        return None
    try:
        return parse_user_env(v)
    except ValueError as e:
        raise f.bad("get_user_env", str(e)) from None


def _signal_field(f: _Fields, walltime: int) -> JobSignal | None:
    v = f.text("signal", 64, required=False)
    if v is None:
        return None
    try:
        return parse_signal(v, walltime)
    except ValueError as e:
        raise f.bad("signal", str(e)) from None


def _estimate_field(f: _Fields, walltime: int) -> int | None:
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


def _env_set(f: _Fields) -> tuple[tuple[str, str], ...]:
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


def _sub_tasks(g: _Fields) -> tuple[SubTask, ...]:
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


def _placement(f: _Fields) -> tuple[str | None, int]:
    """``place`` and ``threads_per_core`` of a job or a reservation (``exclusive_board`` is a flag)."""
    place = f.text("place", 16, required=False)
    if place is not None and place not in PLACES:
        raise f.bad("place", f"must be one of {', '.join(PLACES)}")
    return place, f.integer("threads_per_core", 0, 2, required=False, default=0)


def _replace(spec: JobSpec, **kw: Any) -> JobSpec:
    return spec._replace(**kw)


_DEVICE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
_DEVICE_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z")
MAX_DEVICES = 4096


def _devices(f: _Fields) -> tuple[DeviceAsk, ...]:
    """A job's ``devices``: ``[{type, count, model, bind, exclusive[, per_task, tasks]}, ...]``, with the
    words gsub uses (``--gpus 0: at least 1 device is needed``)."""
    raw = f.raw("devices")
    if raw is None:
        return ()
    from gridsched.core.devices import BINDS, DeviceAsk

    if not isinstance(raw, list) or not 0 < len(raw) <= 8:
        raise f.bad("devices", "must be a list of 1 to 8 device requests")
    out: list[DeviceAsk] = []
    for k, item in enumerate(raw):
        if not isinstance(item, dict):
            raise Refused(f"{f.where}: device request {k} must be an object")
        g = _Fields(item, f"{f.where}: device request {k}")
        dtype = g.text("type", 32)
        if not _DEVICE_TYPE.match(dtype):
            raise Refused(f"{g.where}: {safe(repr(dtype), 40)} is not a device type (such as gpu)")
        model = g.text("model", 64, required=False, default="")
        if model and not _DEVICE_MODEL.match(model):
            raise Refused(f"{g.where}: {safe(repr(model), 70)} is not a model name")
        count = g.raw("count", required=True)
        if not isinstance(count, int) or isinstance(count, bool) or count > MAX_DEVICES:
            raise g.bad("count", f"must be a whole number up to {MAX_DEVICES}")
        bind = g.text("bind", 16, required=False, default="closest")
        if bind not in BINDS:
            raise Refused(f"{g.where}: --gpu-bind {safe(bind, 20)}: must be one of {', '.join(BINDS)}")
        ask = DeviceAsk(dtype, count, model, bind, g.flag("exclusive", required=False))
        per_task = g.raw("per_task")
        if per_task is not None:
            tasks = g.raw("tasks")
            if not isinstance(per_task, int) or isinstance(per_task, bool) or not 1 <= per_task <= MAX_DEVICES:
                raise Refused(f"{g.where}: --gpus-per-task {safe(str(per_task), 20)}: at least 1 device is needed")
            if not isinstance(tasks, int) or isinstance(tasks, bool) or not 1 <= tasks <= MAX_COUNT:
                raise Refused(f"--gpus-per-task {per_task}: needs a task count (--ntasks)")
            if per_task * tasks != count:
                raise Refused(f"{g.where}: count must be per_task times tasks")
        if count < 1:
            from gridsched.host.devices import label

            raise Refused(f"{label(ask)}: at least 1 device is needed")
        if any(a.type == dtype for a in out):
            raise Refused(f"{g.where}: {dtype} is asked for twice")
        g.done()
        out.append(ask)
    return tuple(out)


def _resources(f: _Fields) -> tuple[tuple[str, int], ...]:
    raw = f.raw("resources")
    if raw is None:
        return ()
    if not isinstance(raw, dict) or len(raw) > 64:
        raise f.bad("resources", "must map at most 64 resource names to counts")
    out = []
    for k, v in raw.items():
        if not _RESOURCE.match(k):
            raise Refused(f"{f.where}: resource name {safe(repr(k), 70)} is not a name")
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_COUNT:
            raise Refused(f"{f.where}: resource '{k}' needs a count from 1 to {MAX_COUNT}")
        out.append((k, v))
    return tuple(sorted(out))


def _submit(f: _Fields, new_id: int, sender: Sender) -> Submit:
    job = f.raw("job", required=True)
    if not isinstance(job, dict):
        raise Refused("submit: field 'job' must be an object")
    f.done()
    return Submit(_job(_Fields(job, "job"), new_id, sender))


def _jobs_request(cls: Any) -> Any:
    def parse_it(f: _Fields, new_id: int, sender: Sender) -> Any:
        out = cls(f.ids("jobs"), f.ids("arrays"))
        f.done()
        return out

    return parse_it


def _reload(f: _Fields, new_id: int, sender: Sender) -> Reload:
    f.done()
    return Reload()


def _tune(f: _Fields, new_id: int, sender: Sender) -> Tune:
    f.done()
    return Tune()


def _cores(f: _Fields) -> frozenset[int]:
    raw = f.text("cores", MAX_TEXT)
    try:
        cores = cpuset.parse(raw)
    except cpuset.CpuListError as e:
        raise f.bad("cores", safe(str(e))) from None
    if any(c >= MAX_COUNT for c in cores):
        raise f.bad("cores", f"names a core above {MAX_COUNT - 1}")
    return frozenset(cores)


def _drain(f: _Fields, new_id: int, sender: Sender) -> Drain:
    out = Drain(_cores(f), f.text("reason", 1024, required=False, default=""))
    f.done()
    return out


def _undrain(f: _Fields, new_id: int, sender: Sender) -> Undrain:
    out = Undrain(_cores(f))
    f.done()
    return out


def _yield(f: _Fields, new_id: int, sender: Sender) -> Yield:
    job = f.integer("job", 1, MAX_ID)
    until = f.ids("until") if f.data.get("until") is not None else None
    f.seen.add("until")
    f.done()
    return Yield(job, until)


def _resume(f: _Fields, new_id: int, sender: Sender) -> Resume:
    out = Resume(f.integer("job", 1, MAX_ID))
    f.done()
    return out


def _resv_create(f: _Fields, new_id: int, sender: Sender) -> ResvCreate:
    raw = f.raw("resv", required=True)
    if not isinstance(raw, dict):
        raise Refused("resv_create: field 'resv' must be an object")
    f.done()
    g = _Fields(raw, "reservation")
    rid = g.integer("id", 1, MAX_ID)
    if rid != new_id:
        raise Refused(f"reservation: field 'id' is {rid} but the request is named for id {new_id}")
    uid, user = _identity(g, sender)
    name = g.text("name", MAX_NAME, required=False, default=f"R{rid}")
    if not name.strip():
        raise g.bad("name", "must not be empty")
    users_raw = g.raw("users")
    if users_raw is None:
        users_raw = []
    if not isinstance(users_raw, list) or len(users_raw) > 1024:
        raise g.bad("users", "must be a list of at most 1024 user names")
    users = []
    for u in users_raw:
        if not isinstance(u, str) or not _USER.match(u):
            raise g.bad("users", f"holds {safe(repr(u), 60)}, which is not a user name")
        users.append(u)
    place, tpc = _placement(g)
    resv = ResvSpec(
        id=rid,
        name=name,
        user=user,
        uid=uid,
        ncpus=g.integer("ncpus", 1, MAX_COUNT),
        duration=g.integer("duration", 1, MAX_SECONDS),
        start=g.number("start", 0, MAX_TIME, required=False),
        resources=_resources(g),
        users=tuple(users),
        kill=g.flag("kill", required=False) if "kill" in raw else True,
        create_time=g.number("create_time", 0, MAX_TIME, required=False) or 0.0,
        place=place,
        threads_per_core=tpc,
        exclusive_board=g.flag("exclusive_board", required=False),
        devices=_devices(g),
    )
    g.done()
    return ResvCreate(resv)


def _resv_delete(f: _Fields, new_id: int, sender: Sender) -> ResvDelete:
    out = ResvDelete(f.integer("id", 1, MAX_ID), f.flag("release", required=False))
    f.done()
    return out


def _changes(f: _Fields) -> Changes:
    """The fields of an alter request's ``changes``, checked as :func:`_job` checks a submission's."""
    name = f.text("name", MAX_NAME, required=False)
    if name is not None and (not name.strip() or "/" in name):
        raise f.bad("name", "must be non-empty, without '/'")
    checkpoint = f.text("checkpoint", 16, required=False)
    if checkpoint is not None and checkpoint not in CHECKPOINT_MODES:
        raise f.bad("checkpoint", f"must be one of {', '.join(CHECKPOINT_MODES)}")
    dep_text = f.text("depend", MAX_TEXT, required=False)
    if dep_text is not None:
        try:
            deps = depend.parse(dep_text)
        except depend.DependError as e:
            raise f.bad("depend", safe(str(e))) from None
        if any(i > MAX_ID for i in depend.job_ids(deps)):
            raise f.bad("depend", f"names a job id above {MAX_ID}")
        dep_text = depend.normalize(deps)
    place, tpc = _placement(f)
    devs = _devices(f) if f.data.get("devices") is not None else None
    out = Changes(
        name=name,
        ncpus=f.integer("ncpus", 1, MAX_COUNT, required=False),
        walltime=f.integer("walltime", 1, MAX_SECONDS, required=False),
        mem=f.integer("mem", 1, MAX_BYTES, required=False),
        checkpoint=None if checkpoint is None else Checkpoint(checkpoint),
        depend=dep_text,
        reservation=f.integer("reservation", 1, MAX_ID, required=False),
        begin=f.number("begin", 0, MAX_TIME, required=False),
        place=place,
        threads_per_core=tpc if "threads_per_core" in f.data else None,
        exclusive_board=f.flag("exclusive_board", required=False) if "exclusive_board" in f.data else None,
        devices=devs,
        nice=f.integer("nice", NICE_MIN, NICE_MAX, required=False),
        priority=f.integer("priority", 0, ADMIN_MAX, required=False),
    )
    f.done()
    if out == Changes():
        raise Refused("alter: nothing to change")
    return out


def _alter(f: _Fields, new_id: int, sender: Sender) -> Alter:
    jobs, arrays = f.ids("jobs"), f.ids("arrays")
    raw = f.raw("changes", required=True)
    if not isinstance(raw, dict):
        raise f.bad("changes", "must be an object")
    f.done()
    if not jobs and not arrays:
        raise Refused("alter: no job named")
    changes = _changes(_Fields(raw, "alter: changes"))
    if not sender.admin:  # as a submission (_check_priority): only an admin raises a job above others
        if changes.priority is not None:
            raise Refused("alter: only an admin may set a job's priority (--priority)")
        if changes.nice is not None and changes.nice < 0:
            raise Refused(f"alter: nice {changes.nice}: only an admin may give a negative nice value")
    return Alter(jobs, arrays, changes)


def _requeue(f: _Fields, new_id: int, sender: Sender) -> Requeue:
    out = Requeue(f.ids("jobs"), f.ids("arrays"))
    f.done()
    if not out.jobs and not out.arrays:
        raise Refused("requeue: no job named")
    return out


_PARSERS: dict[str, Callable[[_Fields, int, Sender], Request]] = {
    "submit": _submit,
    "cancel": _jobs_request(Cancel),
    "hold": _jobs_request(Hold),
    "release": _jobs_request(Release),
    "reload": _reload,
    "tune": _tune,
    "drain": _drain,
    "undrain": _undrain,
    "yield": _yield,
    "resume": _resume,
    "resv_create": _resv_create,
    "resv_delete": _resv_delete,
    "alter": _alter,
    "requeue": _requeue,
}
KINDS = tuple(_PARSERS)


def encode(payload: Mapping[str, Any]) -> bytes:
    """The bytes of a request file (what the commands write, and check with :func:`check_outgoing`)."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8", "surrogatepass")


def check_outgoing(raw: bytes, name: str, sender: Sender) -> Request:
    """What the daemon will make of the request file ``raw`` named ``name``: the command's own check."""
    return parse(loads(raw), name, sender)
