"""A yielding job asks for its cores back (gresume)."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.Resume, rcv: rq.Received) -> Changed:
    return Changed.when(ctx.act.resume(rcv, req.job))
