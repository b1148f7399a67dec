"""Reloading the configuration (an admin's request: the parser refuses it to others)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Reload) -> None:
    d.reload_requested = True
