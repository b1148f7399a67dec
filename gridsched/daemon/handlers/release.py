"""Releasing held jobs back to the queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon import arrays, slices, transitions
from gridsched.daemon.handlers.owned import owned_targets
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon
    from gridsched.daemon.table import Rec


def handle(d: Daemon, rcv: rq.Received, req: rq.Release) -> None:
    """Release the held jobs named (a slice per turn when they are many); an array still being taken in has its
    tasks still to come made pending."""
    for aid in req.arrays:
        it = d.intakes.get(aid)
        if it is not None and rcv.sender.uid in (0, it.uid) and it.state is JobState.HELD:
            it.state, it.reason = JobState.PENDING, ""
            arrays.save(d, it)

    def act(rec: Rec) -> None:
        if rec.state is JobState.HELD:
            transitions.release(d.table, rec)
            d.dirty = True

    recs = owned_targets(d, rcv, req.jobs, req.arrays)
    slices.sweep(d, rcv.name, f"release of {len(recs)} jobs", recs, act)
