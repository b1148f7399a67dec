"""Holding pending jobs: they stay in the table but are not offered to the scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import requests as rq
from ...jobs import JobState
from .owned import owned_targets

if TYPE_CHECKING:
    from ..loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Hold) -> None:
    for rec in owned_targets(d, rcv, req.jobs, req.arrays):
        if rec.state is JobState.PENDING and rec.shepherd is None:
            d.table.dequeue(rec)
            rec.state = JobState.HELD
            d.table.save(rec)
            d.dirty = True
