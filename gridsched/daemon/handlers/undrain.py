"""Returning drained cores to service (an admin's request)."""

from __future__ import annotations

from gridsched.core import cpuset
from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.Undrain, rcv: rq.Received) -> Changed:
    ctx.act.set_drained(ctx.drained - req.cores, ctx.drain_reason, f"cores {cpuset.format(req.cores)} resumed")
    return Changed.QUEUE
