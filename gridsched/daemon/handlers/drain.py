"""Draining cores (an admin's request): they take no new job; jobs running on them finish."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.core import cpuset
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Drain) -> None:
    d.set_drained(
        d.drained | (req.cores & d.all_cores),
        req.reason or d.drain_reason or "drained",
        f"cores {cpuset.format(req.cores)} drained",
    )
