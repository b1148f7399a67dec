"""Draining cores (an admin's request): they take no new job; jobs running on them finish."""

from __future__ import annotations

from gridsched.core import cpuset
from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.Drain, rcv: rq.Received) -> Changed:
    ctx.act.set_drained(
        ctx.drained | (req.cores & ctx.all_cores),
        req.reason or ctx.drain_reason or "drained",
        f"cores {cpuset.format(req.cores)} drained",
    )
    return Changed.QUEUE
