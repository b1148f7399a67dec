"""Releasing held jobs back to the queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon import transitions
from gridsched.daemon.handlers.context import Changed, Context
from gridsched.daemon.handlers.owned import owned_rests, owned_targets
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState

if TYPE_CHECKING:
    from gridsched.daemon.table import Rec


def handle(ctx: Context, req: rq.Release, rcv: rq.Received) -> Changed:
    """Release the held jobs named (a slice per turn when they are many); the tasks of an array not made yet
    are released in its record."""
    released = False  # tasks of an array not made yet: what a scheduling pass sees changed
    for rest, which in owned_rests(ctx.rests, rcv, req.arrays, req.tasks):
        released = ctx.act.release_rest(rest, which) or released

    def act(rec: Rec) -> Changed:
        if rec.state is JobState.HELD:
            transitions.release(ctx.table, rec)
            return Changed.QUEUE
        return Changed.NOTHING

    recs = owned_targets(ctx.table.jobs, rcv, req.jobs, req.arrays, tasks=req.tasks)
    ctx.act.sweep(rcv.name, f"release of {len(recs)} jobs", recs, act)
    return Changed.when(released)
