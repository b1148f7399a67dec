"""Changing jobs (galter): the spec of pending and held jobs, the walltime of running ones.

The change is written to the job's row and spec in the state db (a restart
keeps it) and the job's record is read again from them; the next scheduling
pass decides what it means.  A running job's walltime deadline moves by the
change: its owner may shorten it, only an admin may lengthen it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, cast

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

# Row columns that repeat a spec field (the rest of a change lives in the spec alone).
COLUMNS = ("name", "ncpus", "walltime")
PLACEMENT = ("place", "threads_per_core", "exclusive_board")


def handle(ctx: Context, req: rq.Alter, rcv: rq.Received) -> Changed:
    changes = req.changes.given()
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
            job = _pending_spec(ctx, None, rest.job.stored()[0], changes)
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


def alter(ctx: Context, sender: rq.Sender, rec: Rec, changes: dict[str, Any]) -> Changed:
    """Change job ``rec`` as ``changes`` (spec keys) say; :class:`Refused` with the reason, nothing changed."""
    row = ctx.db.job(rec.id)
    if row is None:
        raise rq.Refused("no such job")
    spec = dict(row["spec"])
    if rec.state in (JobState.PENDING, JobState.HELD) and rec.shepherd is None:
        job = _pending_spec(ctx, rec, spec, changes)
        new = job.stored()[0]
        fields = {k: new[k] for k in COLUMNS}
        ctx.table.begin()
        ctx.db.update(rec.id, spec=new, **fields)
        fresh_row = cast("JobRow", {**row, **fields, "spec": SpecView(new)})
        fresh = Rec.from_row(fresh_row, ctx.table.devices, job, ctx.table.memory)
        for f in dataclasses.fields(Rec):
            if f.name not in ("state", "reason"):
                setattr(rec, f.name, getattr(fresh, f.name))
    elif rec.state is JobState.RUNNING and rec.stop is None:
        if set(changes) != {"walltime"}:
            raise rq.Refused(f"is {rec.state.value}: only its walltime can change")
        wall = changes["walltime"]
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
    log.info("job %d changed: %s", rec.id, ", ".join(sorted(changes)))
    return Changed.QUEUE


def _pending_spec(ctx: Context, rec: Rec | None, spec: dict[str, Any], changes: dict[str, Any]) -> rq.JobSpec:
    """The spec of pending job ``rec`` (None: the tasks of an array not made yet) after ``changes``, checked as
    a submission's."""
    new = {**spec, **changes}
    if any(k in changes for k in PLACEMENT):
        new.setdefault("place", "pack")
        new.setdefault("threads_per_core", 0)
        new.setdefault("exclusive_board", False)
    if "ncpus" in changes:
        n, c = new.get("ntasks"), new.get("cpus_per_task")
        if (n or 1) * (c or 1) != new["ncpus"]:  # tasks that no longer make its cores give way to them
            new.pop("ntasks", None)
            new.pop("cpus_per_task", None)
    sp = new.get("split")
    if sp is not None and (sp["ncpus"] > new["ncpus"] or sp["task_time"] > new["walltime"]):
        raise rq.Refused("a sub-task would be larger than the job")
    job = rq.JobSpec.from_spec(new)
    bad = change_refused(rq.JobSpec.from_spec(spec), job) or never_runs(
        ctx.machine, ctx.cfg.max_walltime, job, ctx.cfg.memory_reserved
    )
    if bad is None and "reservation" in changes:
        bad = ctx.act.resv_refusal(job)
    if bad:
        raise rq.Refused(bad)
    if "depend" in changes:
        deps = depend.parse(new["depend"])
        me = rec.id if rec is not None else job.id
        others = {j: r.deps for j, r in ctx.table.jobs.items() if j != me}
        chain = depend.cycle(me, deps, others)
        if chain is not None:
            raise rq.Refused(f"depend: a cycle ({' -> '.join(map(str, [me, *chain]))})")
    return job
