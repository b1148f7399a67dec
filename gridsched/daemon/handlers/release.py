"""Releasing held jobs back to the queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import requests as rq
from ...jobs import JobState
from .owned import owned_targets

if TYPE_CHECKING:
    from ..loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Release) -> None:
    for rec in owned_targets(d, rcv, req.jobs, req.arrays):
        if rec.state is JobState.HELD:
            rec.state = JobState.PENDING
            rec.reason = ""
            d.table.enqueue(rec)
            d.table.save(rec, reason="")
            d.dirty = True
