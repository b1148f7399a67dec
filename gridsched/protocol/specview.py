"""A job's spec as the commands read it from a job row (:class:`SpecView`): typed fields over the JSON the
state db keeps, decoded when a field is read.

The state db's readers (:mod:`gridsched.protocol.state`) and the view (:mod:`gridsched.protocol.view`) give
each row's ``spec`` as one.  A row read with only some keys of its spec (gstat's brief rows, gacct's) has
only those, and the other fields read as absent; the whole job, as the daemon holds it, is :meth:`SpecView.job`
(:class:`gridsched.protocol.jobspec.JobSpec`, the one decoder).

Standard library only, and no class made at run time but this one: gstat loads it at its start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
# The fields read as the spec has them, and what each reads as when the spec does not have it (or has null).
_ABSENT: dict[str, Any] = {
    "name": "",
    "gid": -1,
    "mem": None,
    "hold": False,
    "depend": "",
    "args": (),
    "workdir": None,
    "submit_dir": None,
    "stdout": None,
    "stderr": None,
    "parent": None,
    "recoverable": False,
    "resources": {},
    "reservation": None,
    "begin": None,
    "nice": 0,
    "priority": None,
    "interactive": False,
    "array": None,
    "array_id": None,
    "array_index": None,
    "array_max": None,
    "split": None,
    "split_of": None,
    "split_chains": (),
}


class SpecView(dict[str, Any]):
    """A job's spec as a row carries it: its JSON object (a dict, so that it is written back and compared as
    one), and the fields the commands show, typed (read from the object when asked for; a field the spec
    does not have reads as its default).  Written by the daemon (a submission not yet taken in: by its
    sender), a field is not checked again here."""

    __slots__ = ()

    name: str
    gid: int  # -1: not recorded
    mem: int | None  # bytes asked for
    hold: bool
    depend: str
    args: Sequence[str]
    workdir: str | None
    submit_dir: str | None
    stdout: str | None
    stderr: str | None
    parent: int | None
    recoverable: bool
    resources: Mapping[str, int]  # floating resources asked for, by name
    reservation: int | None
    begin: float | None  # not before this time (seconds since the epoch)
    nice: int
    priority: int | None  # set by an admin (None: computed)
    interactive: bool
    array: str | None  # an array's range as submitted (a submission not yet taken in)
    array_id: int | None
    array_index: int | None
    array_max: int | None
    split: SplitRecord | None  # a splittable job's split
    split_of: int | None  # a piece's splittable job
    split_chains: Sequence[Sequence[int]]  # a piece's sub-task indices, one sequence per chain

    if not TYPE_CHECKING:  # one lookup for all the fields above (a property each would cost gstat's start)

        def __getattr__(self, key):
            try:
                absent = _ABSENT[key]
            except KeyError:
                raise AttributeError(key) from None
            value = self.get(key)
            return absent if value is None else value

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint mode (None: absent from the row, or not one of the modes)."""
        mode = self.get("checkpoint")
        return _MODES.get(mode) if isinstance(mode, str) else None

    @property
    def checkpoint_text(self) -> str:
        """The checkpoint mode as the spec has it ("" if absent): a submission not yet taken in is shown as its
        sender wrote it (the daemon checks it when it takes it in)."""
        return self.get("checkpoint", "")  # type: ignore[no-any-return]

    def device_asks(self) -> tuple[DeviceAsk, ...]:
        """The devices the job asked for (the device model is loaded only for a job that asked for some)."""
        raw = self.get("devices")
        if not raw:
            return ()
        from gridsched.protocol.device_asks import asks_from_spec

        return asks_from_spec(raw)

    def device_counts(self) -> dict[str, int]:
        """How many devices of each type the job asked for (without the device model)."""
        out: dict[str, int] = {}
        for a in self.get("devices") or ():
            if isinstance(a, dict) and isinstance(a.get("type"), str) and isinstance(a.get("count"), int):
                out[a["type"]] = out.get(a["type"], 0) + a["count"]
        return out

    def job(self) -> JobSpec:
        """The whole job (:meth:`gridsched.protocol.jobspec.JobSpec.from_spec`: a spec the daemon wrote)."""
        from gridsched.protocol.jobspec import JobSpec

        return JobSpec.from_spec(self)


def spec_of(data: object) -> SpecView:
    """The :class:`SpecView` of a spec decoded from JSON (empty for anything but an object)."""
    return SpecView(data) if isinstance(data, dict) else SpecView()
