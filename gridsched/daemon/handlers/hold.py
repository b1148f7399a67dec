"""Holding pending jobs: they stay in the table, and the core keeps them waiting with the hold's reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import requests as rq
from ...jobs import JobState
from .owned import owned_targets

if TYPE_CHECKING:
    from ..loop import Daemon


BY_OWNER = "held by its owner (grls releases it)"
BY_ADMIN = "held by an admin (grls releases it)"


def handle(d: Daemon, rcv: rq.Received, req: rq.Hold) -> None:
    for rec in owned_targets(d, rcv, req.jobs, req.arrays):
        if rec.state is JobState.PENDING and rec.shepherd is None:
            d.table.dequeue(rec)
            rec.state = JobState.HELD
            rec.reason = BY_OWNER if rcv.sender.uid == rec.uid else BY_ADMIN  # the core reports it (core.eligible)
            d.table.save(rec, reason=rec.reason)
            d.dirty = True
