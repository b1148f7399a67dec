"""Cancelling jobs: pending ones end at once, running ones are signalled and end when they have exited.

Many jobs (a large array) are cancelled a slice per turn (:mod:`..slices`); those still to be cancelled
are offered to no scheduling pass meanwhile.  An array still being taken in stops being taken in: the
tasks still to come are never made."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gridsched.daemon import arrays, slices
from gridsched.daemon.handlers.owned import owned_targets
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon
    from gridsched.daemon.table import Rec

WHY = "cancelled before it started"


def handle(d: Daemon, rcv: rq.Received, req: rq.Cancel) -> None:
    for aid in req.arrays:
        it = d.intakes.get(aid)
        if it is not None and rcv.sender.uid in (0, it.uid):
            arrays.stop(d, it, "cancelled")
    recs = owned_targets(d, rcv, req.jobs, req.arrays, pieces=True)
    for rec in recs:
        rec.withdrawn = True

    def act(rec: Rec) -> None:
        d.cancel(rec, time.time(), WHY)

    slices.sweep(d, rcv.name, f"cancel of {len(recs)} jobs", recs, act)
