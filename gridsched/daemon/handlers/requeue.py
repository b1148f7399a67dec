"""Sending jobs back to the queue (grequeue).

A running job is stopped as a preemption stops it: one that checkpoints on a
signal is asked to and restarts from its checkpoint, any other is killed and
restarts from the start.  A finished job is queued again as a new run of the
same id.  Either way it goes back to PENDING and its next start counts as a
restart.  A pending job is refused, and so is a grun job (its rerun could
not reconnect to the grun waiting for it; Slurm requeues only batch jobs
either).  Only the job's owner or an admin may.
"""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING

from gridsched.daemon import arrays, procs, transitions
from gridsched.daemon.handlers.context import Changed, Context, RefusedInPart
from gridsched.daemon.table import Rec
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import GRUN_NOT_REQUEUED, TERMINAL, Checkpoint, JobState, Stop

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow

log = logging.getLogger("gschedd")

FINISHED = TERMINAL  # OUT_OF_MEMORY too: Slurm's scontrol requeue takes any finished batch job


def handle(ctx: Context, req: rq.Requeue, rcv: rq.Received) -> Changed:
    refused = []
    changed = Changed.NOTHING
    named = dict(req.tasks)  # tasks not made yet have not run: only those made are requeued
    tasks = [r.id for r in ctx.table.jobs.values() if r.array_id in named and r.array_index in named[r.array_id]]
    for jid in dict.fromkeys([*req.jobs, *arrays.members(ctx.table.jobs, list(req.arrays)), *tasks]):
        try:
            changed = requeue(ctx, rcv.sender, jid) or changed
        except rq.Refused as e:
            log.info("requeue of job %d refused: %s", jid, e)
            refused.append(f"job {jid}: {e}")
    if refused:
        raise RefusedInPart("; ".join(refused), changed)
    return changed


def requeue(ctx: Context, sender: rq.Sender, jid: int) -> Changed:
    """Requeue job ``jid`` for ``sender``; :class:`Refused` with the reason, nothing changed."""
    rec = ctx.table.jobs.get(jid)
    row = ctx.db.job(jid) if rec is None else None
    if rec is None and row is None:
        raise rq.Refused("no such job")
    uid = rec.uid if rec is not None else row["uid"]  # type: ignore[index]
    if sender.uid != uid and not sender.admin:
        raise rq.Refused("owned by another user")
    if rec.interactive if rec is not None else row["spec"].interactive:  # type: ignore[index]
        raise rq.Refused(GRUN_NOT_REQUEUED)
    if rec is None:
        assert row is not None
        return _run_again(ctx, row)
    if rec.split is not None or rec.split_of is not None:
        raise rq.Refused("a splittable job and its pieces cannot be requeued")
    if rec.state is not JobState.RUNNING or rec.stop is not None or rec.shepherd is None:
        raise rq.Refused(f"is {rec.state.value}: only running or finished jobs can be requeued")
    transitions.stopping(rec, Stop.REQUEUE)
    if rec.checkpoint is Checkpoint.SIGNAL:
        sig = procs.SIGNALS.get(ctx.cfg.checkpoint_signal, signal.SIGUSR1)
        ctx.act.terminate(rec, ctx.now, sig, ctx.cfg.checkpoint_grace)
        log.info("job %d asked to checkpoint (SIG%s) to be requeued", rec.id, ctx.cfg.checkpoint_signal)
    else:
        ctx.act.terminate(rec, ctx.now, signal.SIGTERM, ctx.cfg.kill_grace)
        log.info("job %d stopped to be requeued from the start", rec.id)
    ctx.table.save(rec)
    return Changed.QUEUE


def _run_again(ctx: Context, row: JobRow) -> Changed:
    state = JobState(row["state"])
    if state not in FINISHED:
        raise rq.Refused(f"is {state.value}: only running or finished jobs can be requeued")
    job = row["spec"].job()
    if job.split is not None or job.split_of is not None or job.array is not None:
        raise rq.Refused("a splittable job, its pieces and an array's submission cannot be requeued")
    if not row["segments"]:
        raise rq.Refused(f"is {state.value} without having run: submit it again instead")
    rec = Rec.from_row(row, ctx.table.devices, job, ctx.table.memory)
    transitions.run_again(rec)
    rec.reason = ""
    rec.stop = None
    rec.deadline = None
    rec.kill_at = None
    rec.shepherd = None
    rec.start = None
    rec.cores = ()
    ctx.table.jobs[rec.id] = rec
    ctx.table.enqueue(rec)
    ctx.table.save(rec, end_time=None, exit_code=None, exit_signal=None, reason="")
    log.info("job %d queued again (was %s)", rec.id, state.value)
    return Changed.QUEUE
