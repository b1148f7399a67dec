"""The new ids requests bring: each used once, never far beyond those in use."""

from __future__ import annotations

from gridsched.daemon.handlers.context import Context
from gridsched.protocol import requests as rq


def taken_again(ctx: Context, rcv: rq.Received, nid: int, what: str) -> bool:
    """Take the new id ``nid`` for ``rcv``.

    True if it is this very request read again (taken in before a crash that
    came before its file was removed: nothing to do); :class:`Refused` if the
    id is someone else's or lies far beyond the ids in use, or with the reason
    it was refused for if it is this very request refused before.
    """
    if nid in ctx.table.jobs or ctx.db.id_used(nid):
        rec = ctx.db.id_record(nid)
        if rec is not None and rec["digest"] == rcv.digest:
            if rec["refused"] is None:
                return True
            raise rq.Refused(rec["refused"])  # refused before a crash came before its file was moved: as then
        raise rq.Refused(f"{what} id {nid} is taken")
    if nid > ctx.id_high + rq.ID_WINDOW:
        raise rq.Refused(f"{what} id {nid} lies beyond the ids in use (the highest is {ctx.id_high})")
    ctx.act.use_id(nid)
    ctx.table.begin()
    ctx.db.put_id(nid, rcv.sender.uid, rcv.digest, ctx.now)
    return False
