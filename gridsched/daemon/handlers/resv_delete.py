"""Deleting a reservation (its owner or root)."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.ResvDelete, rcv: rq.Received) -> Changed:
    return Changed.when(ctx.act.delete_resv(req.id, rcv.sender.uid, req.release))
