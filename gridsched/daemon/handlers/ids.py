"""The new ids requests bring: each used once, never far beyond those in use."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def taken_again(d: Daemon, rcv: rq.Received, nid: int, what: str) -> bool:
    """Take the new id ``nid`` for ``rcv``.

    True if it is this very request read again (taken in before a crash that
    came before its file was removed: nothing to do); :class:`Refused` if the
    id is someone else's or lies far beyond the ids in use.
    """
    if nid in d.table.jobs or d.db.id_used(nid):
        rec = d.db.id_record(nid)
        if rec is not None and rec["digest"] == rcv.digest and rec["refused"] is None:
            return True
        raise rq.Refused(f"{what} id {nid} is taken")
    if nid > d.id_high + rq.ID_WINDOW:
        raise rq.Refused(f"{what} id {nid} lies beyond the ids in use (the highest is {d.id_high})")
    d.id_high = max(d.id_high, nid)
    d.table.begin()
    d.db.put_id(nid, rcv.sender.uid, rcv.digest, time.time())
    return False
