"""The daemon's work its request handlers may ask for (:class:`gridsched.daemon.handlers.Actions`).

The handlers see the daemon only through this: each action is carried out on
the daemon, with its books (the intakes, the sweeps, the request files kept
in ``incoming/``, the highest id in use) kept here, out of the handlers' sight.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gridsched.daemon import arrays, contexts, reservations, slices, split
from gridsched.daemon.handlers.submit import count_queued

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon
    from gridsched.daemon.table import Rec
    from gridsched.protocol import requests as rq
    from gridsched.protocol.arrays import Indices
    from gridsched.protocol.jobs import JobState


class DaemonActions:
    """:class:`gridsched.daemon.handlers.Actions` carried out on a daemon."""

    def __init__(self, d: Daemon) -> None:
        self._d = d

    def cancel(self, rec: Rec, why: str) -> None:
        self._d.cancel(rec, time.time(), why)

    def terminate(self, rec: Rec, now: float, sig: int, grace: float) -> None:
        self._d.terminate(rec, now, sig, grace)

    def take_in(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        self._d.take_in(job, job.user, state, reason)

    def take_in_array(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        arrays.take_in(contexts.for_arrays(self._d), job, job.user, state, reason)

    def resume_array(self, job: rq.JobSpec) -> None:
        arrays.resume(contexts.for_arrays(self._d), job, job.user)

    def take_in_split(self, job: rq.JobSpec, state: JobState, reason: str) -> None:
        split.take_in(contexts.for_split(self._d), job, state, reason)

    def hold_rest(self, rest: arrays.Rest, which: Indices | None, reason: str) -> bool:
        return arrays.hold(contexts.for_arrays(self._d), rest, which, reason)

    def release_rest(self, rest: arrays.Rest, which: Indices | None) -> bool:
        return arrays.release(contexts.for_arrays(self._d), rest, which)

    def cancel_rest(self, rest: arrays.Rest, which: Indices | None, now: float) -> int:
        return arrays.cancel(contexts.for_arrays(self._d), rest, which, now)

    def make_tasks(self, rest: arrays.Rest, which: Indices) -> list[Rec]:
        return arrays.make_now(contexts.for_arrays(self._d), rest, which)

    def alter_rest(self, rest: arrays.Rest, job: rq.JobSpec) -> None:
        arrays.alter(contexts.for_arrays(self._d), rest, job)

    def sweep(self, name: str, what: str, recs: list[Rec], act: Callable[[Rec], object]) -> None:
        d = self._d
        slices.sweep(d.table, d.sweeps, d.busy, name, what, recs, act)

    def set_drained(self, cores: frozenset[int], reason: str, what: str) -> None:
        self._d.set_drained(cores, reason, what)

    def reload(self) -> None:
        self._d.reload_requested = True

    def tune(self) -> bool:
        d = self._d
        if not d.tuner.tunes(d.file_cfg):
            return False
        d.tuner.requested = True
        return True

    def use_id(self, nid: int) -> None:
        self._d.id_high = max(self._d.id_high, nid)

    def queued_by_user(self) -> dict[str, int]:
        d = self._d
        if d.queued_by_user is None:
            d.queued_by_user = count_queued(d.table.jobs.values(), d.rests.values())
        return d.queued_by_user

    def create_resv(self, spec: rq.ResvSpec, digest: str, admin: bool) -> bool:
        return reservations.create(contexts.for_resv(self._d), spec, digest, admin)

    def delete_resv(self, rid: int, uid: int, release: bool) -> bool:
        return reservations.delete(contexts.for_resv(self._d), rid, uid, release)

    def alter_resv(self, req: rq.ResvAlter, uid: int) -> bool:
        return reservations.alter(contexts.for_resv(self._d), req, uid)

    def resv_refusal(self, job: rq.JobSpec) -> str | None:
        return reservations.check_submit(contexts.for_resv(self._d), job)

    def parent_refusal(self, job: rq.JobSpec) -> str | None:
        return self._d.trees.check_submit(job)

    def yield_cores(self, rcv: rq.Received, jid: int, until: tuple[int, ...] | None) -> bool:
        return self._d.trees.yield_cores(rcv, jid, until)

    def resume(self, rcv: rq.Received, jid: int) -> bool:
        return self._d.trees.resume(rcv, jid)
