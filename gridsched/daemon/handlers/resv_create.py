"""Creating a reservation: checked against the policy (only admins and the users of ``reservations.users``, within
their caps) and the machine, then waiting (flexible or fixed) or refused."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Changed, Context
from gridsched.daemon.handlers.ids import taken_again
from gridsched.protocol import requests as rq


def handle(ctx: Context, req: rq.ResvCreate, rcv: rq.Received) -> Changed:
    if taken_again(ctx, rcv, req.resv.id, "reservation"):
        return Changed.NOTHING
    return Changed.when(ctx.act.create_resv(req.resv, rcv.digest, rcv.sender.admin))
