"""Changing jobs (galter): the spec of pending and held jobs, the walltime of running ones.

The change is written to the job's row and spec in the state db (a restart
keeps it) and the job's record is read again from them; the next scheduling
pass decides what it means.  A running job's walltime deadline moves by the
change: its owner may shorten it, only an admin may lengthen it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from gridsched.core import depend
from gridsched.daemon.handlers.context import Changed, Context, RefusedInPart
from gridsched.daemon.handlers.owned import owned_rests, owned_targets
from gridsched.daemon.table import Rec
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState, change_refused
from gridsched.protocol.specview import SpecView
from gridsched.submission.submit import never_runs

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow

log = logging.getLogger("gschedd")


def handle(ctx: Context, req: rq.Alter, rcv: rq.Received) -> Changed:
    changes = req.changes
    refused = []
    changed = Changed.NOTHING
    for rest, which in owned_rests(ctx.rests, rcv, req.arrays, req.tasks):
        if which is not None:  # tasks named on their own are made, then changed as jobs (below)
            try:
                ctx.act.make_tasks(rest, which)
            except rq.Refused as e:
                refused.append(f"array {rest.aid}: {e}")
            continue
        try:
            job = _pending_spec(ctx, None, rest.job.public(), changes)
        except rq.Refused as e:
            log.info("alter of array %d refused: %s", rest.aid, e)
            refused.append(f"array {rest.aid}: {e}")
            continue
        ctx.act.alter_rest(rest, job)
        changed = Changed.QUEUE
    targets = owned_targets(ctx.table.jobs, rcv, req.jobs, req.arrays, tasks=req.tasks)
    if req.arrays:  # an array's running tasks keep their values; its pending ones change
        whole = set(req.arrays)
        targets = [r for r in targets if r.array_id not in whole or r.state in (JobState.PENDING, JobState.HELD)]
    for rec in targets:
        try:
            changed = alter(ctx, rcv.sender, rec, changes) or changed
        except rq.Refused as e:
            log.info("alter of job %d refused: %s", rec.id, e)
            refused.append(f"job {rec.id}: {e}")
    if refused:
        raise RefusedInPart("; ".join(refused), changed)
    return changed


def alter(ctx: Context, sender: rq.Sender, rec: Rec, changes: rq.Changes) -> Changed:
    """Change job ``rec`` as ``changes`` say; :class:`Refused` with the reason, nothing changed."""
    row = ctx.db.job(rec.id)
    if row is None:
        raise rq.Refused("no such job")
    if rec.state in (JobState.PENDING, JobState.HELD) and rec.shepherd is None:
        job = _pending_spec(ctx, rec, row["spec"].job(), changes)
        new = job.stored()[0]
        ctx.table.begin()
        ctx.db.update(rec.id, spec=new, name=job.name, ncpus=job.ncpus, walltime=job.walltime)
        fresh_row: JobRow = {**row, "name": job.name, "ncpus": job.ncpus, "walltime": job.walltime}
        fresh_row["spec"] = SpecView(new)
        fresh = Rec.from_row(fresh_row, ctx.table.devices, job, ctx.table.memory)
        for f in dataclasses.fields(Rec):
            if f.name not in ("state", "reason"):
                setattr(rec, f.name, getattr(fresh, f.name))
    elif rec.state is JobState.RUNNING and rec.stop is None:
        wall = changes.walltime
        if wall is None or changes.names() != ["walltime"]:
            raise rq.Refused(f"is {rec.state.value}: only its walltime can change")
        if wall > rec.walltime and not sender.admin:
            raise rq.Refused(f"is RUNNING: only an admin may lengthen its walltime ({rec.walltime}s to {wall}s)")
        if wall > rec.walltime and wall > ctx.cfg.max_walltime:
            raise rq.Refused("walltime longer than the maximum")
        if rec.deadline is not None:
            rec.deadline += wall - rec.walltime
        rec.walltime = wall
        rec._waiting = None
        rec.spec = rec.job._replace(walltime=wall)
        ctx.table.save(rec, walltime=wall, spec=rec.job.stored()[0])
    else:
        raise rq.Refused(f"is {rec.state.value}: only pending, held or running jobs can be changed")
    ctx.table.forecast_dirty = True
    log.info("job %d changed: %s", rec.id, ", ".join(changes.names()))
    return Changed.QUEUE


def _pending_spec(ctx: Context, rec: Rec | None, old: rq.JobSpec, changes: rq.Changes) -> rq.JobSpec:
    """The job of pending job ``rec`` (None: the tasks of an array not made yet; ``old``: its public part)
    after ``changes``, checked as a submission's."""
    job = rq.altered(old, changes)
    sp = job.split
    if sp is not None and (sp.ncpus > job.ncpus or sp.task_time > job.walltime):
        raise rq.Refused("a sub-task would be larger than the job")
    bad = change_refused(old, job) or never_runs(ctx.machine, ctx.cfg.max_walltime, job, ctx.cfg.memory_reserved)
    if bad is None and changes.reservation is not None:
        bad = ctx.act.resv_refusal(job)
    if bad:
        raise rq.Refused(bad)
    if changes.depend is not None:
        deps = depend.parse(job.depend)
        me = rec.id if rec is not None else job.id
        others = {j: r.deps for j, r in ctx.table.jobs.items() if j != me}
        chain = depend.cycle(me, deps, others)
        if chain is not None:
            raise rq.Refused(f"depend: a cycle ({' -> '.join(map(str, [me, *chain]))})")
    return job
