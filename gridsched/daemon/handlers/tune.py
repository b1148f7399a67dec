"""Tuning the "auto" settings now (an admin's request: the parser refuses it to others)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Tune) -> None:
    if not d.tuner.tunes(d.cfg):
        raise rq.Refused("tune: no setting of this daemon is auto (scheduler.p, threshold, predictor, backfill_order)")
    d.tuner.requested = True
