"""Creating a reservation: checked against the policy (only admins and the users of ``reservations.users``, within
their caps) and the machine, then waiting (flexible or fixed) or refused."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon import reservations
from gridsched.daemon.handlers.ids import taken_again
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.ResvCreate) -> None:
    if taken_again(d, rcv, req.resv.id, "reservation"):
        return
    reservations.create(d, req.resv, rcv.digest, rcv.sender.admin)
