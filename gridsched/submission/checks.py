"""What the daemon would refuse of a request about a job, checked before the request is sent.

galter, grequeue and the Python API (:mod:`gridsched.api.client`) make these checks so that a
user hears a refusal at once, in the daemon's words; the daemon makes them again when it reads
the request (its handlers in :mod:`gridsched.daemon.handlers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gridsched.core import depend
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import TERMINAL, WAITING, JobState
from gridsched.submission.submit import never_runs

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow

# The states in which a job can be changed, and those of a finished job that grequeue takes.
LIVE = frozenset({JobState.PENDING, JobState.HELD, JobState.RUNNING})
FINISHED = TERMINAL


def _owner(job: JobRow | None, sender: rq.Sender) -> str | None:
    if job is None:
        return "no such job"
    if not sender.admin and job.get("uid") not in (None, sender.uid):
        return f"owned by {job.get('user') or job.get('uid')}"
    return None


def alter_array_refused(
    tasks: Sequence[JobRow],
    changes: rq.Changes,
    everyone: Mapping[int, JobRow],
    sender: rq.Sender,
    machine: Any,
    max_walltime: int,
) -> str | None:
    """Why the pending tasks of the array whose rows are ``tasks`` cannot take ``changes``, or None."""
    pending = [t for t in tasks if t["state"] in WAITING]
    why = _owner(tasks[0], sender) or (None if pending else "no task is pending")
    for t in pending:
        why = why or alter_refused(t, changes, everyone, sender, machine, max_walltime)
    return why


def alter_refused(
    job: JobRow | None,
    changes: rq.Changes,
    everyone: Mapping[int, JobRow],
    sender: rq.Sender,
    machine: Any,
    max_walltime: int,
) -> str | None:
    """Why ``job`` cannot take ``changes`` from ``sender`` (what the daemon refuses), or None."""
    why = _owner(job, sender)
    if why or job is None:
        return why
    state = job["state"]
    if state not in LIVE:
        return f"is {state}: only pending, held or running jobs can be changed"
    if state is JobState.RUNNING:
        wall = changes.walltime
        if wall is None or changes.names() != ["walltime"]:
            return "is RUNNING: only its walltime can change"
        if wall > job["walltime"] and not sender.admin:
            return f"is RUNNING: only an admin may lengthen its walltime ({job['walltime']}s to {wall}s)"
        return None
    base: dict[str, Any] = {**(job["spec"] or job)}
    base.setdefault("walltime", job["walltime"])
    base.setdefault("ncpus", job["ncpus"])
    from gridsched.protocol.jobs import change_refused

    old = rq.JobSpec.from_spec(base)
    new = rq.altered(old, changes)
    why = change_refused(old, new) or never_runs(machine, max_walltime, new)
    if why:
        return why
    if changes.depend is not None:
        deps = depend.parse(changes.depend)
        for dep in depend.job_ids(deps):
            other = everyone.get(dep)
            if other is None:
                return f"depend: job {dep}: no such job"
        live = {i: depend.parse(j["spec"].depend) for i, j in everyone.items()}
        live.pop(job["id"], None)
        chain = depend.cycle(job["id"], deps, live)
        if chain is not None:
            return f"depend: a cycle ({' -> '.join(map(str, [job['id'], *chain]))})"
    return None


def requeue_refused(job: JobRow | None, uid: int, admin: bool) -> str | None:
    """Why ``uid`` cannot requeue ``job`` (what the daemon refuses), or None."""
    if job is None:
        return "no such job"
    if uid != job.get("uid", uid) and not admin:
        return f"owned by {job.get('user') or job.get('uid')}"
    state = job["state"]
    spec = job["spec"]
    if spec.split is not None or spec.split_of is not None:
        return "a splittable job and its pieces cannot be requeued"
    if spec.interactive:
        from gridsched.protocol.jobs import GRUN_NOT_REQUEUED

        return GRUN_NOT_REQUEUED
    if state is JobState.RUNNING:
        return None
    if state in FINISHED:
        if not job.get("segments"):
            return f"is {state} without having run: submit it again instead"
        return None
    return f"is {state}: only running or finished jobs can be requeued"
