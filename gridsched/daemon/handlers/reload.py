"""Reloading the configuration (an admin's request: the parser refuses it to others)."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.Reload, rcv: rq.Received) -> Changed:
    ctx.act.reload()  # the reload itself asks for a scheduling pass
    return Changed.NOTHING
