"""The live jobs a request names that its sender may act on (their owner, or root)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gridsched.daemon import arrays, split
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.arrays import Rest
    from gridsched.daemon.table import Rec
    from gridsched.protocol.arrays import Indices

log = logging.getLogger("gschedd")


def kind(req: object) -> str:
    return type(req).__name__.lower()


def owned(jobs: Mapping[int, Rec], rcv: rq.Received, jid: int) -> Rec | None:
    """Live job ``jid`` of ``jobs`` if the sender of ``rcv`` owns it (or is root); else None, logged."""
    rec = jobs.get(jid)
    what = kind(rcv.request)
    if rec is None:
        log.info("%s: job %d is not live", what, jid)
        return None
    if rcv.sender.uid not in (0, rec.uid):
        log.warning("%s of job %d by uid %d refused: owned by uid %d", what, jid, rcv.sender.uid, rec.uid)
        return None
    return rec


def owned_targets(
    jobs: Mapping[int, Rec],
    rcv: rq.Received,
    ids: tuple[int, ...],
    whole: tuple[int, ...],
    pieces: bool = False,
    tasks: tuple[tuple[int, Indices], ...] = (),
) -> list[Rec]:
    """The live jobs ``ids``, the live tasks of the arrays ``whole`` and the live tasks ``tasks`` names by index
    (with ``pieces``: and the running pieces of splittable jobs among them) of ``jobs`` that the sender owns."""
    want = list(ids) + arrays.members(jobs, list(whole))
    if tasks:
        named = dict(tasks)
        want += [r.id for r in jobs.values() if r.array_id in named and r.array_index in named[r.array_id]]
    if pieces:
        want += split.pieces_of(jobs, want)
    out = []
    for jid in dict.fromkeys(want):
        rec = owned(jobs, rcv, jid)
        if rec is not None:
            out.append(rec)
    return out


def owned_rests(
    rests: Mapping[int, Rest], rcv: rq.Received, whole: tuple[int, ...], tasks: tuple[tuple[int, Indices], ...]
) -> list[tuple[Rest, Indices | None]]:
    """The arrays with tasks not made yet that a request names, each with the indices it names (None: all), of
    those the sender owns (or root)."""
    out: list[tuple[Rest, Indices | None]] = []
    for aid, which in [*((a, None) for a in whole), *tasks]:
        rest = rests.get(aid)
        if rest is None:
            continue
        if rcv.sender.uid not in (0, rest.uid):
            log.warning(
                "%s of array %d by uid %d refused: owned by uid %d", kind(rcv.request), aid, rcv.sender.uid, rest.uid
            )
            continue
        out.append((rest, which))
    return out
