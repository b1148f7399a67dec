"""What each part of the daemon sees of it: the narrow contexts, built from the daemon when its work is done.

Carrying out a plan (:mod:`.apply`), finding the jobs again (:mod:`.recover`),
a turn's slice of big work (:mod:`.slices`), the tuner, the request handlers,
the work on arrays, splittable jobs and reservations, and deciding a job's
outcome each take a context of exactly what they use (the job table, the
configuration and machine in force, the state db, ...) and return what
changed; the loop sets its own state from that.  Only this module and
:mod:`.actions` (the handlers' actions) read the daemon for them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gridsched.daemon import apply, arrays, handlers, outcome, reservations, slices, split, tuner

if TYPE_CHECKING:
    from gridsched.daemon import recover
    from gridsched.daemon.loop import Daemon


def for_apply(d: Daemon) -> apply.Ctx:
    """What carrying out a plan sees of the daemon (:class:`gridsched.daemon.apply.Ctx`)."""
    return apply.Ctx(
        table=d.table,
        cfg=d.cfg,
        machine=d.machine,
        db=d.db,
        spool=d.spool,
        ex=d.ex,
        book=d.book,
        trees=d.trees,
        drained=d.drained,
        head=d.head,
        forecast_said=d.forecast_said,
        launches=d.pending_launches,
        end=d.end,
        terminate=d.terminate,
        where=d.where,
        resv_ctx=lambda: for_resv(d),
        split_ctx=lambda: for_split(d),
        rests=d.rests,
        arrays_ended=d.arrays_ended,
    )


def for_recover(d: Daemon) -> recover.Ctx:
    """What finding the jobs again sees of the daemon (:class:`gridsched.daemon.recover.Ctx`)."""
    from gridsched.daemon import recover

    return recover.Ctx(
        table=d.table,
        db=d.db,
        spool=d.spool,
        cfg=d.cfg,
        devices=d.machine.devices,
        ex=d.ex,
        senders=d.senders,
        outcome=for_outcome(d),
        watch=d.watch,
        read_exit=d.read_exit,
    )


def for_slices(d: Daemon) -> slices.Ctx:
    """What a turn's slice of big work sees of the daemon (:class:`gridsched.daemon.slices.Ctx`)."""
    return slices.Ctx(d.table, d.db, d.sweeps, d.busy, d.settling, d.rests, lambda: for_arrays(d))


def for_tuner(d: Daemon) -> tuner.Ctx:
    """What the tuner sees of the daemon (:class:`gridsched.daemon.tuner.Ctx`)."""
    return tuner.Ctx(d.file_cfg, d.cfg, d.machine.ncores, str(d.spool.db), d.table, d.db)


def for_handlers(d: Daemon) -> handlers.Context:
    """What a request handler sees of the daemon, now."""
    return handlers.Context(
        table=d.table,
        cfg=d.cfg,
        machine=d.machine,
        db=d.db,
        now=time.time(),
        rests=d.rests,
        drained=d.drained,
        drain_reason=d.drain_reason,
        id_high=d.id_high,
        act=d.actions,
    )


def for_outcome(d: Daemon) -> outcome.Ctx:
    """What deciding a job's outcome sees of the daemon (:class:`gridsched.daemon.outcome.Ctx`)."""
    return outcome.Ctx(d.table, d.unwatch, d.end, lambda rec: d.mail.requeued(d.cfg, rec))


def for_arrays(d: Daemon) -> arrays.Ctx:
    """What the work on arrays sees of the daemon (:class:`gridsched.daemon.arrays.Ctx`)."""
    return arrays.Ctx(d.table, d.db, d.spool, d.rests, d.machine.ncores, d.take_in, d.new_ids, d.unclaim)


def for_split(d: Daemon) -> split.Ctx:
    """What the work on splittable jobs sees of the daemon (:class:`gridsched.daemon.split.Ctx`)."""
    return split.Ctx(
        d.table,
        d.db,
        d.spool,
        d.machine.devices,
        d.take_in,
        lambda rec, dec, now: apply.start(for_apply(d), rec, dec, now),
        d.end,
        d.new_ids,
    )


def for_resv(d: Daemon) -> reservations.Ctx:
    """What the reservations' work sees of the daemon (:class:`gridsched.daemon.reservations.Ctx`)."""
    return reservations.Ctx(
        d.book,
        d.table,
        d.db,
        d.cfg,
        d.machine,
        lambda rec, state, now, why: d.end(rec, state, now, reason=why),
        d.terminate,
    )
