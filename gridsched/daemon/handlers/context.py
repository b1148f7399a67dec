"""What a request handler sees of the daemon: a narrow context, and what it hands back.

A handler receives the typed request, the envelope it came in (its sender as
the kernel says, its file name and digest) and a :class:`Context`: the job
table, the configuration and machine in force, the state db, the time the
request is served, a few read-only facts of the daemon, and :class:`Actions`,
the daemon's own work a handler may ask for (each keeps its own books).  It
returns :class:`Changed`: whether what a scheduling pass sees changed, so that
the loop plans again.  It never sees the daemon itself.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.core.topology import MachineMap
    from gridsched.daemon.arrays import Intake
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.config import Config
    from gridsched.protocol.jobs import JobState
    from gridsched.protocol.state import StateDB


class Changed(enum.Enum):
    """What serving a request changed, as the loop needs to know it."""

    NOTHING = "nothing"
    QUEUE = "queue"  # what a scheduling pass sees: the loop plans again

    def __bool__(self) -> bool:
        return self is Changed.QUEUE

    @staticmethod
    def when(changed: object) -> Changed:
        """:attr:`QUEUE` if ``changed`` is true, else :attr:`NOTHING`."""
        return Changed.QUEUE if changed else Changed.NOTHING


class RefusedInPart(rq.Refused):
    """A request refused for some of the jobs it names after the others were changed (``changed`` says how)."""

    def __init__(self, why: str, changed: Changed) -> None:
        super().__init__(why)
        self.changed = changed


class Actions(Protocol):
    """The daemon's work a handler may ask for; each action keeps the daemon's books (and asks for a scheduling
    pass itself where it changes the queue)."""

    def cancel(self, rec: Rec, why: str) -> None:
        """Cancel a job now: a waiting one ends with ``why``, a running one is signalled."""

    def terminate(self, rec: Rec, now: float, sig: int, grace: float) -> None:
        """Signal a running job, then kill it once ``grace`` seconds have passed."""

    def take_in(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        """Write a checked job's files and row and queue it."""

    def take_in_array(self, name: str, job: rq.JobSpec, state: JobState, reason: str) -> None:
        """Begin to take in a checked array submission (request file ``name``), a slice per turn."""

    def resume_array(self, name: str, job: rq.JobSpec) -> None:
        """Go on taking in the array of a request read again after a restart."""

    def take_in_split(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        """Take in a checked splittable job."""

    def save_intake(self, it: Intake) -> None:
        """Record a changed array intake."""

    def stop_intake(self, it: Intake, why: str) -> None:
        """End an array's intake before its last task: the tasks still to come are never made."""

    def sweep(self, name: str, what: str, recs: list[Rec], act: Callable[[Rec], object]) -> None:
        """Act on ``recs`` a slice per turn for the request ``name`` (``act`` true: the queue changed)."""

    def set_drained(self, cores: frozenset[int], reason: str, what: str) -> None:
        """Drain exactly ``cores`` (the others return to service)."""

    def reload(self) -> None:
        """Read the configuration again before the next turn."""

    def tune(self) -> bool:
        """Tune the "auto" settings now; False if no setting of this daemon is auto."""

    def use_id(self, nid: int) -> None:
        """The new id ``nid`` is in use from now on."""

    def queued_by_user(self) -> dict[str, int]:
        """Each user's jobs queued, held or running (counted once a turn; a submission adds to it)."""

    def create_resv(self, spec: rq.ResvSpec, digest: str, admin: bool) -> bool:
        """Take in a checked reservation; True if it waits (False: recorded as refused)."""

    def delete_resv(self, rid: int, uid: int, release: bool) -> None:
        """Delete reservation ``rid`` for ``uid`` (its owner or root)."""

    def resv_refusal(self, job: rq.JobSpec) -> str | None:
        """Why a job's floating resources or reservation are refused, or None."""

    def parent_refusal(self, job: rq.JobSpec) -> str | None:
        """Why a job's parent cannot be accepted, or None."""

    def yield_cores(self, rcv: rq.Received, jid: int, until: tuple[int, ...] | None) -> bool:
        """Job ``jid`` lends its cores; True if it does now."""

    def resume(self, rcv: rq.Received, jid: int) -> bool:
        """Job ``jid`` asks for its cores back; True if it does now."""


@dataclass(frozen=True)
class Context:
    """What a handler sees: built by the loop for each request it serves."""

    table: JobTable
    cfg: Config
    machine: MachineMap
    db: StateDB
    now: float  # when the request is served
    intakes: Mapping[int, Intake]  # the arrays still being taken in, by array id
    drained: frozenset[int]
    drain_reason: str
    id_high: int  # the highest id in use
    act: Actions

    @property
    def all_cores(self) -> frozenset[int]:
        return frozenset(range(self.machine.ncores))
