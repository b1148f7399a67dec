"""A yielding job asks for its cores back (gresume)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Resume) -> None:
    d.trees.resume(rcv, req.job)
