"""Changing a waiting flexible reservation's place among the jobs (its owner or root; raising it, an admin)."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.ResvAlter, rcv: rq.Received) -> Changed:
    return Changed.when(ctx.act.alter_resv(req, rcv.sender.uid))
