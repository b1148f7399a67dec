"""A running job lends its cores to its children (gyield, gwait --yield)."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.Yield, rcv: rq.Received) -> Changed:
    return Changed.when(ctx.act.yield_cores(rcv, req.job, req.until))
