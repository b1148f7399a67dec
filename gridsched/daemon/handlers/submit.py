"""A job submission: checked against the machine and the queue, then taken in (or recorded as refused)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gridsched.daemon import split
from gridsched.daemon.handlers.context import Changed, Context
from gridsched.daemon.handlers.hold import BY_OWNER
from gridsched.daemon.handlers.ids import taken_again
from gridsched.protocol import limits
from gridsched.protocol import requests as rq
from gridsched.protocol.arrays import parse as parse_array
from gridsched.protocol.jobs import JobState
from gridsched.submission.submit import never_runs

if TYPE_CHECKING:
    from gridsched.daemon.arrays import Rest
    from gridsched.daemon.table import Rec


def handle(ctx: Context, req: rq.Submit, rcv: rq.Received) -> Changed:
    """Take the job in (queued, or recorded as failed when it could never run); taking it in asks for a
    scheduling pass."""
    job = req.job
    if taken_again(ctx, rcv, job.id, "job"):
        if job.array is not None:  # read again after a restart: an array an earlier release took in partly
            ctx.act.resume_array(job)
        return Changed.NOTHING
    if job.array is not None or job.split is not None:
        why = split.check(job, ctx.cfg.max_array_size)
        if why:
            raise rq.Refused(why)
    refuse_over_limits(ctx, job)
    state, reason = (JobState.HELD, BY_OWNER) if job.hold else (JobState.PENDING, "")
    bad = never_runs(ctx.machine, ctx.cfg.max_walltime, job, ctx.cfg.memory_reserved)
    if bad is None:
        bad = ctx.act.resv_refusal(job)
    if bad is None:
        bad = ctx.act.parent_refusal(job)
    if bad:
        state, reason = JobState.FAILED, bad
    if job.array is not None:
        ctx.act.take_in_array(job, state, reason)
    elif job.split is not None:
        ctx.act.take_in_split(job, state, reason)
    else:
        ctx.act.take_in(job, state, reason)
    return Changed.NOTHING


def count_queued(jobs: Iterable[Rec], rests: Iterable[Rest]) -> dict[str, int]:
    """Each user's jobs queued, held or running (not the pieces of split jobs), with the tasks of arrays not
    made yet."""
    counts: dict[str, int] = {}
    for r in jobs:
        if r.split_of is None:
            counts[r.user] = counts.get(r.user, 0) + 1
    for rest in rests:  # the tasks of arrays not made yet count already
        counts[rest.user] = counts.get(rest.user, 0) + len(rest.pending) + len(rest.held)
    return counts


def refuse_over_limits(ctx: Context, job: rq.JobSpec) -> None:
    """Refuse (``Refused``, one line) a submission over a per-user limit of ``[limits]``:
    an array of too many tasks, a job of more cores than a user may run at once, or more queued jobs than a
    user may have (each array task counts, as in Slurm)."""
    cfg = ctx.cfg
    tasks = len(parse_array(job.array, cfg.max_array_size).indices) if job.array is not None else 1
    why = limits.array_refusal(tasks, cfg) or limits.cores_refusal(job.ncpus, cfg)
    if why is None and cfg.max_submit_jobs_per_user:
        counts = ctx.act.queued_by_user()  # counted once a turn (count_queued)
        why = limits.queued_refusal(job.user, counts.get(job.user, 0), tasks, cfg)
        if why is None:
            counts[job.user] = counts.get(job.user, 0) + tasks  # taken in below (or recorded as failed)
    if why:
        raise rq.Refused(why)
