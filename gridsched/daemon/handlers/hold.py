"""Holding pending jobs: they stay in the table, and the core keeps them waiting with the hold's reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon import transitions
from gridsched.daemon.handlers.context import Changed, Context
from gridsched.daemon.handlers.owned import owned_rests, owned_targets
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState

if TYPE_CHECKING:
    from gridsched.daemon.table import Rec


BY_OWNER = "held by its owner (grls releases it)"
BY_ADMIN = "held by an admin (grls releases it)"


def handle(ctx: Context, req: rq.Hold, rcv: rq.Received) -> Changed:
    """Hold the pending jobs named (a slice per turn when they are many); the tasks of an array not made yet
    are held in its record."""
    for rest, which in owned_rests(ctx.rests, rcv, req.arrays, req.tasks):
        ctx.act.hold_rest(rest, which, BY_OWNER if rcv.sender.uid == rest.uid else BY_ADMIN)

    def act(rec: Rec) -> Changed:
        if rec.state is JobState.PENDING and rec.shepherd is None:
            # the core reports the reason (core.eligible)
            transitions.hold(ctx.table, rec, BY_OWNER if rcv.sender.uid == rec.uid else BY_ADMIN)
            return Changed.QUEUE
        return Changed.NOTHING

    recs = owned_targets(ctx.table.jobs, rcv, req.jobs, req.arrays, tasks=req.tasks)
    ctx.act.sweep(rcv.name, f"hold of {len(recs)} jobs", recs, act)
    return Changed.NOTHING
