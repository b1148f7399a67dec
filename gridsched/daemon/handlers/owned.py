"""The live jobs a request names that its sender may act on (their owner, or root)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gridsched.daemon import arrays, split
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon
    from gridsched.daemon.table import Rec

log = logging.getLogger("gschedd")


def kind(req: object) -> str:
    return type(req).__name__.lower()


def owned(d: Daemon, rcv: rq.Received, jid: int) -> Rec | None:
    rec = d.table.jobs.get(jid)
    what = kind(rcv.request)
    if rec is None:
        log.info("%s: job %d is not live", what, jid)
        return None
    if rcv.sender.uid not in (0, rec.uid):
        log.warning("%s of job %d by uid %d refused: owned by uid %d", what, jid, rcv.sender.uid, rec.uid)
        return None
    return rec


def owned_targets(
    d: Daemon, rcv: rq.Received, jobs: tuple[int, ...], whole: tuple[int, ...], pieces: bool = False
) -> list[Rec]:
    """The live jobs ``jobs`` and the live tasks of the arrays ``whole`` (with ``pieces``: and the running
    pieces of splittable jobs among them) that the sender owns."""
    ids = list(jobs) + arrays.members(d, list(whole))
    if pieces:
        ids += split.pieces_of(d, ids)
    out = []
    for jid in dict.fromkeys(ids):
        rec = owned(d, rcv, jid)
        if rec is not None:
            out.append(rec)
    return out
