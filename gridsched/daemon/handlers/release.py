"""Releasing held jobs back to the queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon import transitions
from gridsched.daemon.handlers.context import Changed, Context
from gridsched.daemon.handlers.owned import owned_targets
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState

if TYPE_CHECKING:
    from gridsched.daemon.table import Rec


def handle(ctx: Context, req: rq.Release, rcv: rq.Received) -> Changed:
    """Release the held jobs named (a slice per turn when they are many); an array still being taken in has its
    tasks still to come made pending."""
    for aid in req.arrays:
        it = ctx.intakes.get(aid)
        if it is not None and rcv.sender.uid in (0, it.uid) and it.state is JobState.HELD:
            it.state, it.reason = JobState.PENDING, ""
            ctx.act.save_intake(it)

    def act(rec: Rec) -> Changed:
        if rec.state is JobState.HELD:
            transitions.release(ctx.table, rec)
            return Changed.QUEUE
        return Changed.NOTHING

    recs = owned_targets(ctx.table.jobs, rcv, req.jobs, req.arrays)
    ctx.act.sweep(rcv.name, f"release of {len(recs)} jobs", recs, act)
    return Changed.NOTHING
