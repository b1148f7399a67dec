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
    from gridsched.daemon.arrays import Rest
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.arrays import Indices
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
    """The daemon's work a handler may ask for; each action keeps the daemon's books.  A cancel, a job taken in
    or an ended job asks for a scheduling pass itself; an action that returns whether it changed what a
    scheduling pass sees (``release_rest``, ``delete_resv``) leaves that to the handler's :class:`Changed`."""

    def cancel(self, rec: Rec, why: str) -> None:
        """Cancel a job now: a waiting one ends with ``why``, a running one is signalled."""

    def terminate(self, rec: Rec, now: float, sig: int, grace: float) -> None:
        """Signal a running job, then kill it once ``grace`` seconds have passed."""

    def take_in(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        """Write a checked job's files and row and queue it."""

    def take_in_array(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        """Take in a checked array submission whole: its first task, and a record of the others."""

    def resume_array(self, job: rq.JobSpec) -> None:
        """Go on with the array of a request read again after a restart that an earlier release was taking in."""

    def take_in_split(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        """Take in a checked splittable job."""

    def hold_rest(self, rest: Rest, which: Indices | None, reason: str) -> bool:
        """Hold the pending tasks ``which`` (None: all) of an array not made yet; whether any was."""

    def release_rest(self, rest: Rest, which: Indices | None) -> bool:
        """Release the held tasks ``which`` (None: all) of an array not made yet; whether any was."""

    def cancel_rest(self, rest: Rest, which: Indices | None, now: float) -> int:
        """Cancel the tasks ``which`` (None: all) of an array not made yet at ``now``; how many were."""

    def make_tasks(self, rest: Rest, which: Indices) -> list[Rec]:
        """Make the tasks ``which`` of an array now (to act on them as jobs)."""

    def alter_rest(self, rest: Rest, job: rq.JobSpec) -> None:
        """The tasks of an array not made yet take the altered spec ``job``."""

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

    def delete_resv(self, rid: int, uid: int, release: bool) -> bool:
        """Delete reservation ``rid`` for ``uid`` (its owner or root); whether what a scheduling pass sees
        changed."""

    def alter_resv(self, req: rq.ResvAlter, uid: int) -> bool:
        """Change a waiting flexible reservation's nice or priority for ``uid`` (its owner or root); whether what
        a scheduling pass sees changed."""

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
    rests: Mapping[int, Rest]  # the arrays with tasks not made yet, by array id
    drained: frozenset[int]
    drain_reason: str
    id_high: int  # the highest id in use
    act: Actions

    @property
    def all_cores(self) -> frozenset[int]:
        return frozenset(range(self.machine.ncores))
