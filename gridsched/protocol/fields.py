"""The checked fields of a request: the limits on each, the one-line refusal (:class:`Refused`), who sent
it (:class:`Sender`), the reader that takes each field once (:class:`Fields`) and the checks of the fields
several kinds share (who a request acts for, a mapping requirement, resources, devices).

Part of the trust boundary (:mod:`gridsched.protocol.requests`, which re-exports these names).
Standard library only (plus the pure core's parsers): gsub imports it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from gridsched.protocol.text import shown

if TYPE_CHECKING:  # loaded (with the machine map under it) only for a request that asks for devices
    from gridsched.core.devices import DeviceAsk
    from gridsched.protocol.arrays import Indices

MAX_REQUEST = 8 << 20  # bytes of one request file
MAX_ID = (1 << 53) - 1  # a job or reservation id (exact in JSON numbers and in SQLite)
ID_WINDOW = 1_000_000  # a new id may lie at most this far beyond the highest id in use
MAX_COUNT = 1 << 20  # cores, sub-tasks, ids in one list
MAX_RANGE = 1 << 16  # characters of a range of array indices in a request
MAX_LISTED = 100_000  # runs and indices of stepped runs that the array tasks of one request may name
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
_RESOURCE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}\Z")


class Refused(ValueError):
    """A request that cannot be taken; the message is one line, safe to print and log."""


class Sender(NamedTuple):
    """Who wrote a request, as the kernel says (never as the request says)."""

    uid: int
    user: str
    groups: frozenset[int]  # the groups the user may run a job with
    admin: bool  # root or the spool's owner (gridsched.protocol.admin)


class Fields:
    """The fields of one request object, each taken once and checked; :meth:`done` refuses what is left."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where
        self.seen: set[str] = set()

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

    def tasks(self, key: str) -> tuple[tuple[int, Indices], ...]:
        """Array tasks named by index: a list of ``[ARRAY_ID, "RANGE"]`` (``RANGE`` as gsub --array, without
        ``%``); the indices of one array named twice are joined."""
        from gridsched.protocol.arrays import ArrayError, parse

        v = self._take(key, False)
        if v is None:
            return ()
        if not isinstance(v, list) or len(v) > MAX_COUNT:
            raise self.bad(key, f"must be a list of at most {MAX_COUNT} [array id, range] pairs")
        out: dict[int, Indices] = {}
        listed = 0  # indices named by stepped runs: what acting on them costs grows with them
        for item in v:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], str)):
                raise self.bad(key, "must hold [array id, range] pairs")
            aid, text = item
            if not isinstance(aid, int) or isinstance(aid, bool) or not 0 < aid <= MAX_ID:
                raise self.bad(key, "must hold job ids (whole numbers from 1)")
            if len(text) > MAX_RANGE or "%" in text:
                raise self.bad(key, f"array {aid}: not a range of indices")
            if aid in out:
                raise self.bad(key, f"array {aid} is named twice")
            try:
                got = parse(text, MAX_ID, MAX_LISTED).indices
            except ArrayError as e:
                raise self.bad(key, f"array {aid}: {e}") from None
            listed += sum(len(r) for r in got.runs if r.step != 1 and len(r) > 1) + len(got.runs)
            if listed > MAX_LISTED:
                raise self.bad(key, f"names tasks too scattered (more than {MAX_LISTED} runs and stepped indices)")
            out[aid] = got
        return tuple(out.items())

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


def identity(f: Fields, sender: Sender) -> tuple[int, str]:
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


def placement(f: Fields) -> tuple[str | None, int]:
    """``place`` and ``threads_per_core`` of a job or a reservation (``exclusive_board`` is a flag)."""
    place = f.text("place", 16, required=False)
    if place is not None and place not in PLACES:
        raise f.bad("place", f"must be one of {', '.join(PLACES)}")
    return place, f.integer("threads_per_core", 0, 2, required=False, default=0)


_DEVICE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
_DEVICE_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z")
MAX_DEVICES = 4096


def device_asks(f: Fields) -> tuple[DeviceAsk, ...]:
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
        g = Fields(item, f"{f.where}: device request {k}")
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
            from gridsched.protocol.device_asks import label

            raise Refused(f"{label(ask)}: at least 1 device is needed")
        if any(a.type == dtype for a in out):
            raise Refused(f"{g.where}: {dtype} is asked for twice")
        g.done()
        out.append(ask)
    return tuple(out)


def resource_counts(f: Fields) -> tuple[tuple[str, int], ...]:
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
