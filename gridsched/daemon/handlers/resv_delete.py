"""Deleting a reservation (its owner or root)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon import reservations
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.ResvDelete) -> None:
    reservations.delete(d, req.id, rcv.sender.uid, req.release)
