"""A job submission: checked against the machine and the queue, then taken in (or recorded as refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import requests as rq
from ...jobs import JobState
from ...submit import never_runs
from .. import arrays, reservations, split
from .hold import BY_OWNER
from .ids import taken_again

if TYPE_CHECKING:
    from ..loop import Daemon


def handle(d: Daemon, rcv: rq.Received, req: rq.Submit) -> None:
    job = req.job
    if taken_again(d, rcv, job.id, "job"):
        return
    spec = job.to_spec()
    if job.array is not None or job.split is not None:
        why = split.check(spec, d.cfg.max_array_size)
        if why:
            raise rq.Refused(why)
    state, reason = (JobState.HELD, BY_OWNER) if job.hold else (JobState.PENDING, "")
    bad = never_runs(d.machine, d.cfg.max_walltime, spec)
    if bad is None:
        bad = reservations.check_submit(d, spec, job.uid, job.user)
    if bad is None:
        bad = d.trees.check_submit(spec)
    if bad:
        state, reason = JobState.FAILED, bad
    if job.array is not None:
        arrays.take_in(d, spec, job.user, state, reason)
    elif job.split is not None:
        split.take_in(d, spec, job.user, state, reason)
    else:
        d.take_in(spec, job.user, state, reason)
