"""Tuning the "auto" settings now (an admin's request: the parser refuses it to others)."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.Tune, rcv: rq.Received) -> Changed:
    if not ctx.act.tune():
        raise rq.Refused("tune: no setting of this daemon is auto (scheduler.p, threshold, predictor, backfill_order)")
    return Changed.NOTHING
