"""Returning drained cores to service (an admin's request)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.core import cpuset
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Undrain) -> None:
    d.set_drained(d.drained - req.cores, d.drain_reason, f"cores {cpuset.format(req.cores)} resumed")
