"""A job submission: checked against the machine and the queue, then taken in (or recorded as refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridsched.daemon import arrays, reservations, split
from gridsched.daemon.handlers.hold import BY_OWNER
from gridsched.daemon.handlers.ids import taken_again
from gridsched.protocol import limits
from gridsched.protocol import requests as rq
from gridsched.protocol.arrays import parse as parse_array
from gridsched.protocol.jobs import JobState
from gridsched.submission.submit import never_runs

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Submit) -> None:
    job = req.job
    if taken_again(d, rcv, job.id, "job"):
        if job.array is not None:  # read again after a restart: an array taken in partly goes on
            arrays.resume(d, rcv.name, job, job.user)
        return
    if job.array is not None or job.split is not None:
        why = split.check(job, d.cfg.max_array_size)
        if why:
            raise rq.Refused(why)
    refuse_over_limits(d, job)
    state, reason = (JobState.HELD, BY_OWNER) if job.hold else (JobState.PENDING, "")
    bad = never_runs(d.machine, d.cfg.max_walltime, job)
    if bad is None:
        bad = reservations.check_submit(d, job)
    if bad is None:
        bad = d.trees.check_submit(job)
    if bad:
        state, reason = JobState.FAILED, bad
    if job.array is not None:
        arrays.take_in(d, rcv.name, job, job.user, state, reason)
    elif job.split is not None:
        split.take_in(d, job, state, reason)
    else:
        d.take_in(job, job.user, state, reason)


def refuse_over_limits(d: Daemon, job: rq.JobSpec) -> None:
    """Refuse (``Refused``, one line) a submission over a per-user limit of ``[limits]``:
    an array of too many tasks, a job of more cores than a user may run at once, or more queued jobs than a
    user may have (each array task counts, as in Slurm)."""
    cfg = d.cfg
    tasks = len(parse_array(job.array, cfg.max_array_size).indices) if job.array is not None else 1
    why = limits.array_refusal(tasks, cfg) or limits.cores_refusal(job.ncpus, cfg)
    if why is None and cfg.max_submit_jobs_per_user:
        counts = d.queued_by_user
        if counts is None:  # once a turn: each user's jobs queued, held or running (not the pieces of split jobs)
            counts = d.queued_by_user = {}
            for r in d.table.jobs.values():
                if r.split_of is None:
                    counts[r.user] = counts.get(r.user, 0) + 1
            for it in d.intakes.values():  # the tasks of arrays still to be taken in count already
                counts[it.user] = counts.get(it.user, 0) + len(it.indices) - it.done
        why = limits.queued_refusal(job.user, counts.get(job.user, 0), tasks, cfg)
        if why is None:
            counts[job.user] = counts.get(job.user, 0) + tasks  # taken in below (or recorded as failed)
    if why:
        raise rq.Refused(why)
