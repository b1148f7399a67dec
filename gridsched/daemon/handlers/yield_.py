"""A running job lends its cores to its children (gyield, gwait --yield)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Yield) -> None:
    d.trees.yield_cores(rcv, req.job, req.until)
