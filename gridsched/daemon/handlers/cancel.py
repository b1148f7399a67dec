"""Cancelling jobs: pending ones end at once, running ones are signalled and end when they have exited.

Many jobs (a large array) are cancelled a slice per turn (:mod:`..slices`); those still to be cancelled
are offered to no scheduling pass meanwhile.  The tasks of an array not made yet are cancelled in its
record: they are never made."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.daemon.handlers.owned import owned_rests, owned_targets
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.table import Rec

WHY = "cancelled before it started"


def handle(ctx: Context, req: rq.Cancel, rcv: rq.Received) -> Changed:
    for rest, which in owned_rests(ctx.rests, rcv, req.arrays, req.tasks):
        ctx.act.cancel_rest(rest, which, ctx.now)
    recs = owned_targets(ctx.table.jobs, rcv, req.jobs, req.arrays, pieces=True, tasks=req.tasks)
    for rec in recs:
        rec.withdrawn = True

    def act(rec: Rec) -> None:
        ctx.act.cancel(rec, WHY)  # the cancel asks for a scheduling pass

    ctx.act.sweep(rcv.name, f"cancel of {len(recs)} jobs", recs, act)
    return Changed.NOTHING
