"""Changing queued jobs (galter): a pending or held job's spec, a running job's walltime.

Every change is checked as a submission is (:func:`.submit.refusal`), and a new
dependency must not close a cycle; a job whose change is refused keeps what it
had, and the refusal is logged (galter has already told the user, in the same
words, before sending).  The next pass decides with the new values.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ... import requests as rq
from ...core import depend
from ...jobs import JobState
from .owned import owned_targets
from .submit import refusal

if TYPE_CHECKING:
    from ..loop import Daemon
    from ..table import Rec

log = logging.getLogger("gschedd")


def handle(d: Daemon, rcv: rq.Received, req: rq.Alter) -> None:
    changes = req.changes()
    for rec in owned_targets(d, rcv, req.jobs, req.arrays):
        why = _alter(d, rcv, rec, changes)
        if why:
            log.warning("alter of job %d by uid %d refused: %s", rec.id, rcv.sender.uid, why)
        else:
            log.info("job %d altered: %s", rec.id, ", ".join(sorted(changes)))
            d.dirty = True


def _alter(d: Daemon, rcv: rq.Received, rec: Rec, changes: dict[str, Any]) -> str | None:
    row = d.table.db.job(rec.id)
    if row is None:
        return "not in the table"
    spec = dict(row["spec"])
    if rec.state is JobState.RUNNING and rec.shepherd is not None:
        return _alter_running(d, rcv, rec, spec, changes)
    if rec.state not in (JobState.PENDING, JobState.HELD) or rec.shepherd is not None:
        return f"it is {rec.state.value}"
    if rec.split is not None or rec.split_of is not None:
        return "a splittable job cannot be changed"
    new = {**spec, **changes}
    why = refusal(d, new, rec.uid, rec.user)
    if why is None and "depend" in changes:
        why = _dependency_problem(d, rcv, rec, changes["depend"])
    if why:
        return why
    d.table.db.update(rec.id, spec=new, ncpus=new["ncpus"], walltime=new["walltime"], name=new["name"])
    fresh = d.table.db.job(rec.id)
    assert fresh is not None
    from ..table import Rec as RecType

    again = RecType.from_row(fresh, d.table.devices)
    again.state, again.reason = rec.state, rec.reason
    d.table.jobs[rec.id] = again
    d.table.forecast_dirty = True
    return None


def _alter_running(d: Daemon, rcv: rq.Received, rec: Rec, spec: dict[str, Any], changes: dict[str, Any]) -> str:
    if set(changes) != {"walltime"}:
        return "it is running: only its walltime may change"
    new = changes["walltime"]
    if new > rec.walltime and not rcv.sender.admin:
        return "only an admin may lengthen the walltime of a running job"
    if new > d.cfg.max_walltime:
        return "walltime longer than the maximum"
    rec.walltime = new
    if rec.start is not None:
        rec.deadline = rec.start + rec.remaining()
    spec["walltime"] = new
    d.table.db.update(rec.id, spec=spec, walltime=new)
    d.table.save(rec)
    return ""


def _dependency_problem(d: Daemon, rcv: rq.Received, rec: Rec, text: str) -> str | None:
    deps = depend.parse(text)
    for jid in depend.job_ids(deps):
        row = d.table.db.job(jid)
        if row is None:
            return f"depend: job {jid}: no such job"
        if rcv.sender.uid != 0 and row["uid"] != rec.uid:
            return f"depend: job {jid}: owned by {row['user']}"
    loop = depend.cycle(rec.id, deps, {r.id: r.deps for r in d.table.jobs.values()})
    return f"depend: a cycle: {' -> '.join(map(str, loop))}" if loop else None
