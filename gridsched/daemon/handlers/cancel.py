"""Cancelling jobs: pending ones end at once, running ones are signalled and end when they have exited."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ... import requests as rq
from .owned import owned_targets

if TYPE_CHECKING:
    from ..loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Cancel) -> None:
    now = time.time()
    for rec in owned_targets(d, rcv, req.jobs, req.arrays, pieces=True):
        d.cancel(rec, now, "cancelled before it started")
