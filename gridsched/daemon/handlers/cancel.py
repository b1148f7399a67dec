"""Cancelling jobs: pending ones end at once, running ones are signalled and end when they have exited."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

from ... import requests as rq
from ...jobs import JobState
from .owned import owned_targets

if TYPE_CHECKING:
    from ..loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Cancel) -> None:
    now = time.time()
    for rec in owned_targets(d, rcv, req.jobs, req.arrays, pieces=True):
        if rec.state in (JobState.PENDING, JobState.HELD) and rec.shepherd is None:
            d.table.dequeue(rec)
            d.end(rec, JobState.CANCELLED, now, reason="cancelled before it started")
        elif rec.shepherd is not None:
            rec.stop = "cancel"
            if rec.state is JobState.SUSPENDED:
                d.ex.signal(rec.shepherd, rec.pgid, signal.SIGKILL)
                d.ex.signal(rec.shepherd, rec.pgid, signal.SIGCONT)
            else:
                d.terminate(rec, now, signal.SIGTERM, d.cfg.kill_grace)
            d.table.save(rec)
        d.dirty = True
