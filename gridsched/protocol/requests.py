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
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from gridsched.core.choices import ADMIN_MAX, NICE_MAX, NICE_MIN
from gridsched.protocol.fields import (
    ID_WINDOW,
    MAX_ARG,
    MAX_ARGS,
    MAX_BYTES,
    MAX_COMPONENT,
    MAX_COUNT,
    MAX_DEVICES,
    MAX_ENV,
    MAX_ENV_SET,
    MAX_ENV_SET_BYTES,
    MAX_ID,
    MAX_NAME,
    MAX_PATH,
    MAX_REQUEST,
    MAX_RETRIES,
    MAX_SCRIPT,
    MAX_SECONDS,
    MAX_TASK_ARGS,
    MAX_TEXT,
    MAX_TIME,
    MAX_UID,
    PLACES,
    Fields,
    Refused,
    Sender,
    device_asks,
    identity,
    path,
    placement,
    resource_counts,
    safe,
    text,
)
from gridsched.protocol.jobs import (
    CHECKPOINT_MODES,
    PRIVATE_KEYS,
    RERUN_MODES,
    Checkpoint,
)
from gridsched.protocol.jobspec import (
    MAIL_ALL,
    MAIL_EVENTS,
    MAX_MAIL_USERS,
    MAX_SIGNAL_SECS,
    SIGNAL_FORMS,
    USER_ENV_DEFAULT,
    USER_ENV_MAX,
    JobSignal,
    JobSpec,
    Split,
    SubTask,
    UserEnv,
    parse_mail_type,
    parse_mail_user,
    parse_signal,
    parse_user_env,
    signal_name,
)
from gridsched.protocol.parse_job import (
    ACCOUNT_MAX,
    depend_field,
    env_set_problem,
    estimate_problem,
    job_spec,
    shell_problem,
)
from gridsched.protocol.text import shown

# Every name of the boundary, importable from here: the request kinds and their parser (this module), and
# what lives in the modules split out of it by what each is (gridsched.protocol.fields: the limits and the
# field checks; gridsched.protocol.jobspec: a job's spec; gridsched.protocol.parse_job: a submission's checks).
__all__ = [
    "ADMIN_KINDS",
    "ADMIN_MAX",
    "Alter",
    "CHECKPOINT_MODES",
    "Cancel",
    "Changes",
    "Checkpoint",
    "Drain",
    "Fields",
    "Hold",
    "ID_WINDOW",
    "JobSignal",
    "JobSpec",
    "KINDS",
    "MAIL_ALL",
    "MAIL_EVENTS",
    "MAX_ARG",
    "MAX_ARGS",
    "MAX_BYTES",
    "MAX_COMPONENT",
    "MAX_COUNT",
    "MAX_DEVICES",
    "MAX_ENV",
    "MAX_ENV_SET",
    "MAX_ENV_SET_BYTES",
    "MAX_ID",
    "MAX_MAIL_USERS",
    "MAX_NAME",
    "MAX_PATH",
    "MAX_REQUEST",
    "MAX_RETRIES",
    "MAX_SCRIPT",
    "MAX_SECONDS",
    "MAX_SIGNAL_SECS",
    "MAX_TASK_ARGS",
    "MAX_TEXT",
    "MAX_TIME",
    "MAX_UID",
    "NICE_MAX",
    "NICE_MIN",
    "PLACES",
    "PRIVATE_KEYS",
    "RERUN_MODES",
    "Received",
    "Refused",
    "Release",
    "Reload",
    "Request",
    "Requeue",
    "Resume",
    "ResvCreate",
    "ResvAlter",
    "ResvDelete",
    "ResvSpec",
    "SIGNAL_FORMS",
    "SUBMIT_PREFIX",
    "Sender",
    "Split",
    "SubTask",
    "Submit",
    "Tune",
    "USER_ENV_DEFAULT",
    "USER_ENV_MAX",
    "Undrain",
    "UserEnv",
    "Yield",
    "check_outgoing",
    "device_asks",
    "encode",
    "env_set_problem",
    "estimate_problem",
    "id_name",
    "id_of_name",
    "identity",
    "job_spec",
    "loads",
    "parse",
    "parse_mail_type",
    "parse_mail_user",
    "parse_signal",
    "parse_user_env",
    "path",
    "placement",
    "resource_counts",
    "safe",
    "shell_problem",
    "shown",
    "signal_name",
    "text",
]

if TYPE_CHECKING:  # loaded (with the machine map under it) only for a request that asks for devices
    from gridsched.core.devices import DeviceAsk
    from gridsched.protocol.arrays import Indices

SUBMIT_PREFIX = "submit-"
_ID_NAME = re.compile(r"submit-([0-9]{10,16})\.json\Z")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}\$?\Z")


class Submit(NamedTuple):
    job: JobSpec


class Cancel(NamedTuple):
    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()
    tasks: tuple[tuple[int, Indices], ...] = ()  # array tasks not made yet, named by index


class Hold(NamedTuple):
    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()
    tasks: tuple[tuple[int, Indices], ...] = ()  # array tasks not made yet, named by index


class Release(NamedTuple):
    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()
    tasks: tuple[tuple[int, Indices], ...] = ()  # array tasks not made yet, named by index


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
    # A flexible reservation's place in the queue among the jobs, as a job's (gresv create --nice, --priority;
    # only an admin raises one above others)
    nice: int = 0
    priority: int | None = None

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
            from gridsched.protocol.device_asks import asks_to_spec

            out["devices"] = asks_to_spec(self.devices)
        if self.nice:
            out["nice"] = self.nice
        if self.priority is not None:
            out["priority"] = self.priority
        return out


class ResvCreate(NamedTuple):
    resv: ResvSpec


class ResvDelete(NamedTuple):
    id: int
    release: bool = False


class ResvAlter(NamedTuple):
    """A waiting flexible reservation's place among the jobs changed (gresv update): its nice, its priority (set;
    ``unset_priority``: back to none), each only where given; a negative nice or a priority only from an admin."""

    id: int
    nice: int | None = None
    priority: int | None = None
    unset_priority: bool = False


class Changes(NamedTuple):
    """What an alter request changes in a job's spec: the fields given, each checked as a submission's
    (:func:`job_spec`).  A field is one line here and one in :func:`_changes`."""

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
    account: str | None = None  # the account it names (SLURM_JOB_ACCOUNT), as scontrol update Account=
    # cores per task (galter -c, as scontrol update's): without ncpus, the job's cores become its tasks times it
    cpus_per_task: int | None = None

    def names(self) -> list[str]:
        """The names of the fields given, sorted."""
        return sorted(k for k, v in self._asdict().items() if v is not None)

    def given(self) -> dict[str, Any]:
        """The fields given, as the job's spec keeps them."""
        out: dict[str, Any] = {k: v for k, v in self._asdict().items() if v is not None}
        if self.devices is not None:
            from gridsched.protocol.device_asks import asks_to_spec

            out["devices"] = asks_to_spec(self.devices)
        return out


def altered(old: JobSpec, ch: Changes) -> JobSpec:
    """Job ``old`` with the fields ``ch`` gives (the daemon's change, and the one galter and the Python API check
    before they send it).  A change of its mapping requirement makes the job placed (``pack`` unless it names
    another); a change of its cores drops the tasks it asked for when they no longer make them."""
    job = old._replace(**{k: v for k, v in ch._asdict().items() if v is not None})  # Changes' fields are JobSpec's
    if ch.place is not None or ch.threads_per_core is not None or ch.exclusive_board is not None:
        job = job._replace(place=ch.place or old.place or "pack")
    if ch.cpus_per_task is not None and ch.ncpus is None:
        job = job._replace(ncpus=(job.ntasks or 1) * ch.cpus_per_task)
    if ch.ncpus is not None and (job.ntasks or 1) * (job.cpus_per_task or 1) != job.ncpus:
        job = job._replace(ntasks=None, cpus_per_task=None)  # tasks that no longer make its cores give way
    return job


class Alter(NamedTuple):
    """Change the spec of pending jobs, or the walltime of running ones (galter)."""

    jobs: tuple[int, ...]
    arrays: tuple[int, ...]
    changes: Changes
    tasks: tuple[tuple[int, Indices], ...] = ()


class Requeue(NamedTuple):
    """Send running or finished jobs back to the queue (grequeue)."""

    jobs: tuple[int, ...]
    arrays: tuple[int, ...] = ()
    tasks: tuple[tuple[int, Indices], ...] = ()


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
    | ResvAlter
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
    fields = Fields(data, kind)
    fields.seen.add("type")
    return _PARSERS[kind](fields, new_id or 0, sender)


def _submit(f: Fields, new_id: int, sender: Sender) -> Submit:
    job = f.raw("job", required=True)
    if not isinstance(job, dict):
        raise Refused("submit: field 'job' must be an object")
    f.done()
    return Submit(job_spec(Fields(job, "job"), new_id, sender))


def _jobs_request(cls: Any) -> Any:
    def parse_it(f: Fields, new_id: int, sender: Sender) -> Any:
        out = cls(f.ids("jobs"), f.ids("arrays"), f.tasks("tasks"))
        f.done()
        return out

    return parse_it


def _reload(f: Fields, new_id: int, sender: Sender) -> Reload:
    f.done()
    return Reload()


def _tune(f: Fields, new_id: int, sender: Sender) -> Tune:
    f.done()
    return Tune()


def _cores(f: Fields) -> frozenset[int]:
    from gridsched.core import cpuset

    raw = f.text("cores", MAX_TEXT)
    try:
        cores = cpuset.parse(raw)
    except cpuset.CpuListError as e:
        raise f.bad("cores", safe(str(e))) from None
    if any(c >= MAX_COUNT for c in cores):
        raise f.bad("cores", f"names a core above {MAX_COUNT - 1}")
    return frozenset(cores)


def _drain(f: Fields, new_id: int, sender: Sender) -> Drain:
    out = Drain(_cores(f), f.text("reason", 1024, required=False, default=""))
    f.done()
    return out


def _undrain(f: Fields, new_id: int, sender: Sender) -> Undrain:
    out = Undrain(_cores(f))
    f.done()
    return out


def _yield(f: Fields, new_id: int, sender: Sender) -> Yield:
    job = f.integer("job", 1, MAX_ID)
    until = f.ids("until") if f.data.get("until") is not None else None
    f.seen.add("until")
    f.done()
    return Yield(job, until)


def _resume(f: Fields, new_id: int, sender: Sender) -> Resume:
    out = Resume(f.integer("job", 1, MAX_ID))
    f.done()
    return out


def _resv_create(f: Fields, new_id: int, sender: Sender) -> ResvCreate:
    raw = f.raw("resv", required=True)
    if not isinstance(raw, dict):
        raise Refused("resv_create: field 'resv' must be an object")
    f.done()
    g = Fields(raw, "reservation")
    rid = g.integer("id", 1, MAX_ID)
    if rid != new_id:
        raise Refused(f"reservation: field 'id' is {rid} but the request is named for id {new_id}")
    uid, user = identity(g, sender)
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
    place, tpc = placement(g)
    resv = ResvSpec(
        id=rid,
        name=name,
        user=user,
        uid=uid,
        ncpus=g.integer("ncpus", 1, MAX_COUNT),
        duration=g.integer("duration", 1, MAX_SECONDS),
        start=g.number("start", 0, MAX_TIME, required=False),
        resources=resource_counts(g),
        users=tuple(users),
        kill=g.flag("kill", required=False) if "kill" in raw else True,
        create_time=g.number("create_time", 0, MAX_TIME, required=False) or 0.0,
        place=place,
        threads_per_core=tpc,
        exclusive_board=g.flag("exclusive_board", required=False),
        devices=device_asks(g),
        nice=g.integer("nice", NICE_MIN, NICE_MAX, required=False, default=0),
        priority=g.integer("priority", 0, ADMIN_MAX, required=False),
    )
    g.done()
    if not sender.admin and resv.priority is not None:
        raise Refused("reservation: only an admin may set a reservation's priority (--priority)")
    if not sender.admin and resv.nice < 0:
        raise Refused(f"reservation: nice {resv.nice}: only an admin may give a negative nice value")
    return ResvCreate(resv)


def _resv_delete(f: Fields, new_id: int, sender: Sender) -> ResvDelete:
    out = ResvDelete(f.integer("id", 1, MAX_ID), f.flag("release", required=False))
    f.done()
    return out


def _resv_alter(f: Fields, new_id: int, sender: Sender) -> ResvAlter:
    out = ResvAlter(
        f.integer("id", 1, MAX_ID),
        f.integer("nice", NICE_MIN, NICE_MAX, required=False),
        f.integer("priority", 0, ADMIN_MAX, required=False),
        f.flag("unset_priority", required=False),
    )
    f.done()
    if out.nice is None and out.priority is None and not out.unset_priority:
        raise Refused("resv_alter: nothing to change (nice, priority or unset_priority)")
    if out.priority is not None and out.unset_priority:
        raise Refused("resv_alter: priority and unset_priority together")
    if not sender.admin and (out.priority is not None or out.unset_priority):
        raise Refused("reservation: only an admin may set a reservation's priority (--priority)")
    if not sender.admin and out.nice is not None and out.nice < 0:
        raise Refused(f"reservation: nice {out.nice}: only an admin may give a negative nice value")
    return out


def _changes(f: Fields) -> Changes:
    """The fields of an alter request's ``changes``, checked as :func:`job_spec` checks a submission's."""
    name = f.text("name", MAX_NAME, required=False)
    if name is not None and (not name.strip() or "/" in name):
        raise f.bad("name", "must be non-empty, without '/'")
    checkpoint = f.text("checkpoint", 16, required=False)
    if checkpoint is not None and checkpoint not in CHECKPOINT_MODES:
        raise f.bad("checkpoint", f"must be one of {', '.join(CHECKPOINT_MODES)}")
    dep_text = f.text("depend", MAX_TEXT, required=False)
    if dep_text is not None:
        dep_text = depend_field(f, dep_text)
    place, tpc = placement(f)
    devs = device_asks(f) if f.data.get("devices") is not None else None
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
        account=_account(f),
        cpus_per_task=f.integer("cpus_per_task", 1, MAX_COUNT, required=False),
    )
    f.done()
    if out == Changes():
        raise Refused("alter: nothing to change")
    return out


def _account(f: Fields) -> str | None:
    account = f.text("account", ACCOUNT_MAX, required=False)
    if account is None:
        return None
    if not account.strip():
        raise f.bad("account", "must not be empty")
    return str(account)


def _alter(f: Fields, new_id: int, sender: Sender) -> Alter:
    jobs, arrays, tasks = f.ids("jobs"), f.ids("arrays"), f.tasks("tasks")
    raw = f.raw("changes", required=True)
    if not isinstance(raw, dict):
        raise f.bad("changes", "must be an object")
    f.done()
    if not jobs and not arrays and not tasks:
        raise Refused("alter: no job named")
    changes = _changes(Fields(raw, "alter: changes"))
    if not sender.admin:  # as a submission (_check_priority): only an admin raises a job above others
        if changes.priority is not None:
            raise Refused("alter: only an admin may set a job's priority (--priority)")
        if changes.nice is not None and changes.nice < 0:
            raise Refused(f"alter: nice {changes.nice}: only an admin may give a negative nice value")
    return Alter(jobs, arrays, changes, tasks)


def _requeue(f: Fields, new_id: int, sender: Sender) -> Requeue:
    out = Requeue(f.ids("jobs"), f.ids("arrays"), f.tasks("tasks"))
    f.done()
    if not out.jobs and not out.arrays and not out.tasks:
        raise Refused("requeue: no job named")
    return out


_PARSERS: dict[str, Callable[[Fields, int, Sender], Request]] = {
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
    "resv_alter": _resv_alter,
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
