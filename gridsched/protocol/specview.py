"""A job's spec as the commands read it from a job row (:class:`SpecView`): typed fields over the JSON the
state db keeps, decoded when a field is read.

The state db's readers (:mod:`gridsched.protocol.state`) and the view (:mod:`gridsched.protocol.view`) give
each row's ``spec`` as one.  A row read with only some keys of its spec (gstat's brief rows, gacct's) has
only those, and the other fields read as absent; the whole job, as the daemon holds it, is :meth:`SpecView.job`
(:class:`gridsched.protocol.jobspec.JobSpec`, the one decoder).

Standard library only, and no class made at run time but this one: gstat loads it at its start.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TYPE_CHECKING, Any, TypedDict

from gridsched.protocol.jobs import Checkpoint

if TYPE_CHECKING:
    from gridsched.core.devices import DeviceAsk
    from gridsched.protocol.jobspec import JobSpec

    class SplitRecord(TypedDict, total=False):
        """A splittable job's ``split`` as its spec keeps it (:meth:`gridsched.protocol.jobspec.Split.to_spec`):
        ``n`` sub-tasks of ``ncpus`` cores and ``task_time`` seconds, or ``tasks`` (``[ncpus, time]`` or
        ``[ncpus, time, args]`` each); ``left``, once the daemon has taken it in: the sub-tasks not yet run."""

        n: int
        ncpus: int
        task_time: int
        tasks: list[list[Any]]
        retries: int
        devices: list[dict[str, object]]
        left: list[int]

    class SplitTask(TypedDict, total=False):
        """A piece's ``split_task`` (:mod:`gridsched.daemon.split`, read by :mod:`gridsched.job.subtasks`): the
        ``n``, ``ncpus``, ``task_time`` and ``retries`` of the splittable job it was taken from, and for a job of
        sub-tasks of their own sizes, those of its sub-tasks (``tasks``: index as text -> ``[ncpus, time]``)."""

        n: int
        ncpus: int
        task_time: int
        retries: int
        tasks: dict[str, list[int]]


_MODES = {m.value: m for m in Checkpoint}


class SpecView(Mapping[str, Any]):
    """A job's spec as a row carries it: its JSON object (``raw``, a dict: wrapped, not copied, so that a long
    queue costs no copy of each spec; written back and compared as it), read as a mapping, and the fields the
    commands show, typed.  A field absent from the spec reads as its default.  It is read, never changed (rows
    without any key of their spec share :data:`EMPTY`): a changed spec is a new SpecView of a new dict."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any] | None = None) -> None:
        self.raw: dict[str, Any] = {} if raw is None else raw

    # the mapping: the spec's JSON object's, at the speed of a dict (not Mapping's methods in Python)
    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __contains__(self, key: object) -> bool:
        return key in self.raw

    def __eq__(self, other: object) -> bool:
        return self.raw == (other.raw if isinstance(other, SpecView) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpecView({self.raw!r})"

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def keys(self) -> KeysView[str]:
        return self.raw.keys()

    def items(self) -> ItemsView[str, Any]:
        return self.raw.items()

    def values(self) -> ValuesView[Any]:
        return self.raw.values()

    @property
    def name(self) -> str:
        return str(self.raw.get("name") or "")

    @property
    def gid(self) -> int:
        """The job's group id (-1: not recorded)."""
        return self.raw.get("gid", -1)  # type: ignore[no-any-return]

    @property
    def mem(self) -> int | None:
        """Bytes of memory asked for (None: no request)."""
        return self.raw.get("mem") or None

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint mode (None: absent from the row, or not one of the modes)."""
        mode = self.raw.get("checkpoint")
        return _MODES.get(mode) if isinstance(mode, str) else None

    @property
    def checkpoint_text(self) -> str:
        """The checkpoint mode as the spec has it ("" if absent): a submission not yet taken in is shown as its
        sender wrote it (the daemon checks it when it takes it in)."""
        return self.raw.get("checkpoint", "")  # type: ignore[no-any-return]

    @property
    def hold(self) -> bool:
        return bool(self.raw.get("hold"))

    @property
    def depend(self) -> str:
        return str(self.raw.get("depend") or "")

    @property
    def args(self) -> tuple[str, ...]:
        return tuple(self.raw.get("args") or ())

    @property
    def workdir(self) -> str | None:
        return self.raw.get("workdir")

    @property
    def submit_dir(self) -> str | None:
        return self.raw.get("submit_dir")

    @property
    def stdout(self) -> str | None:
        return self.raw.get("stdout")

    @property
    def stderr(self) -> str | None:
        return self.raw.get("stderr")

    @property
    def parent(self) -> int | None:
        return self.raw.get("parent")

    @property
    def recoverable(self) -> bool:
        return bool(self.raw.get("recoverable"))

    @property
    def resources(self) -> dict[str, int]:
        """Floating resources asked for, by name."""
        return dict(self.raw.get("resources") or {})

    @property
    def reservation(self) -> int | None:
        return self.raw.get("reservation")

    @property
    def begin(self) -> float | None:
        """Not before this time (seconds since the epoch)."""
        return self.raw.get("begin")

    @property
    def nice(self) -> int:
        return self.raw.get("nice") or 0

    @property
    def priority(self) -> int | None:
        """The priority an admin set (None: computed)."""
        return self.raw.get("priority")

    @property
    def interactive(self) -> bool:
        return self.raw.get("interactive") is True

    @property
    def array(self) -> str | None:
        """An array's range, as submitted (a submission not yet taken in)."""
        return self.raw.get("array")

    @property
    def array_id(self) -> int | None:
        return self.raw.get("array_id")

    @property
    def array_index(self) -> int | None:
        return self.raw.get("array_index")

    @property
    def array_max(self) -> int | None:
        return self.raw.get("array_max")

    @property
    def split(self) -> SplitRecord | None:
        """A splittable job's ``split`` (None: not one)."""
        return self.raw.get("split")

    @property
    def split_of(self) -> int | None:
        """A piece's splittable job (None: not a piece)."""
        return self.raw.get("split_of")

    @property
    def split_chains(self) -> list[list[int]]:
        """A piece's sub-task indices, one list per chain."""
        return self.raw.get("split_chains") or []

    def device_asks(self) -> tuple[DeviceAsk, ...]:
        """The devices the job asked for (the device model is loaded only for a job that asked for some)."""
        raw = self.raw.get("devices")
        if not raw:
            return ()
        from gridsched.protocol.device_asks import asks_from_spec

        return asks_from_spec(raw)

    def device_counts(self) -> dict[str, int]:
        """How many devices of each type the job asked for (without the device model)."""
        out: dict[str, int] = {}
        for a in self.raw.get("devices") or ():
            if isinstance(a, dict) and isinstance(a.get("type"), str) and isinstance(a.get("count"), int):
                out[a["type"]] = out.get(a["type"], 0) + a["count"]
        return out

    def job(self) -> JobSpec:
        """The whole job (:meth:`gridsched.protocol.jobspec.JobSpec.from_spec`: a spec the daemon wrote)."""
        from gridsched.protocol.jobspec import JobSpec

        return JobSpec.from_spec(self.raw)


def spec_of(data: object) -> SpecView:
    """The :class:`SpecView` of a spec decoded from JSON, wrapped (empty for anything but an object)."""
    return SpecView(data) if isinstance(data, dict) else EMPTY


EMPTY = SpecView()  # the spec of a row read without any of its keys (shared: a SpecView is read, never changed)
