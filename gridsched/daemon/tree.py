"""Parent-child job trees in the daemon: parents, yielding and resuming, subtree endings.

A job whose spec has ``parent`` is a child of that job (gsub sets it inside a
job).  The daemon keeps, per yielding parent, the cores it lends and whether
it is resuming, in the meta key ``yielded`` of the state db, which
gwait, gresume and gstat read::

    {"ID": {"cores": "0-1", "resuming": false, "until": [IDS] | null, "since": T}}

* ``yield`` request ``{"type": "yield", "job": ID, "until": [IDS]}`` (from the
  job's owner): the running job lends its cores (``until``: resume it
  implicitly once all of those jobs have ended).  Yielding again cancels a
  resume that has not completed.
* ``resume`` request ``{"type": "resume", "job": ID}``: the job stops lending
  at once (no new task starts on its cores); it *is* resumed, and its entry
  leaves ``yielded``, when no job runs above it on its cores any more
  (:func:`gridsched.core.tree.clear`).  So a parent is never resumed onto
  cores a task still uses.
* The snapshot gets ``parents`` (live child -> live parent) and ``lent``
  (the yielding parents, resuming or not); :mod:`gridsched.core.tree`
  decides.  A pending job whose ancestor is being stopped (cancelled, out of
  time) is not offered to the core: it is about to be cancelled.
* A job that ends FAILED, CANCELLED or TIMEOUT has its live subtree
  cancelled (pending jobs at once, running ones signalled as by gdel), unless
  it was submitted with ``recoverable``: then its pending descendants are held
  (reason ``parent ID ended STATE: subtree held``) and its running ones go
  on; ``gresume-tree ID`` releases the held ones.
* A submission naming a parent is refused (FAILED, with the reason) when the
  parent is unknown, another user's, or ended other than COMPLETED, or when
  it asks for more cores than the root of its tree has.  A child of a parent
  that completed before the child was taken in is an ordinary job.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import cpuset
from ..core.tree import ancestors, clear
from ..core.types import Lent, Snapshot
from ..jobs import JobState
from ..requests import MAX_ID

if TYPE_CHECKING:
    from .. import requests as rq
    from .loop import Daemon
    from .table import Rec

log = logging.getLogger("gschedd")

META_KEY = "yielded"
ENDED_BADLY = (JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT)


@dataclass(slots=True)
class Yield:
    cores: tuple[int, ...]
    resuming: bool = False
    until: tuple[int, ...] | None = None
    since: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "cores": cpuset.format(self.cores),
            "resuming": self.resuming,
            "until": None if self.until is None else list(self.until),
            "since": self.since,
        }


def _job_id(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_ID else None


class Trees:
    """The daemon's job trees (one per daemon, ``Daemon.trees``)."""

    def __init__(self, d: Daemon) -> None:
        self.d = d
        self.parent: dict[int, int | None] = {}  # job -> parent from its spec (cache)
        self.yielded: dict[int, Yield] = {}

    # -- state -----------------------------------------------------------------
    def load(self) -> None:
        """Take the yielding parents back from the state db after a restart."""
        try:
            raw = json.loads(self.d.db.meta().get(META_KEY) or "{}")
            for k, v in raw.items():
                until = v.get("until")
                self.yielded[int(k)] = Yield(
                    tuple(sorted(cpuset.parse(v.get("cores", "")))),
                    bool(v.get("resuming")),
                    None if until is None else tuple(int(i) for i in until),
                    float(v.get("since", 0.0)),
                )
        except (ValueError, TypeError, AttributeError, cpuset.CpuListError):
            log.warning("meta %s unreadable: no job is yielding", META_KEY)
            self.yielded = {}
        for jid in list(self.yielded):
            rec = self.d.table.jobs.get(jid)
            if rec is None or rec.state not in (JobState.RUNNING, JobState.STOPPING):
                del self.yielded[jid]
        self._save()

    def _save(self) -> None:
        self.d.table.begin()
        self.d.db.set_meta(META_KEY, json.dumps({str(k): v.as_json() for k, v in sorted(self.yielded.items())}))
        self.d.table.forecast_dirty = True

    def parent_of(self, jid: int) -> int | None:
        if jid not in self.parent:
            row = self.d.db.conn.execute(
                "SELECT json_extract(spec, '$.parent') FROM jobs WHERE id = ?", (jid,)
            ).fetchone()
            if row is None:
                return None
            self.parent[jid] = _job_id(row[0])
        return self.parent[jid]

    def parents(self) -> dict[int, int]:
        """Live child -> live parent."""
        jobs = self.d.table.jobs
        missing = [j for j in jobs if j not in self.parent]
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            rows = self.d.db.conn.execute(
                f"SELECT id, json_extract(spec, '$.parent') FROM jobs WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
            for jid, p in rows:
                self.parent[jid] = _job_id(p)
        out = {}
        for j in jobs:
            p = self.parent.get(j)
            if p is not None and p in jobs:
                out[j] = p
        return out

    def annotate(self, snap: Snapshot) -> Snapshot:
        """``snap`` with the trees and the cores lent now."""
        from dataclasses import replace

        parents = self.parents()
        if not parents and not self.yielded:
            return snap
        lent = tuple(Lent(p, frozenset(y.cores), y.resuming) for p, y in sorted(self.yielded.items()))
        jobs = self.d.table.jobs
        ending = {j for j, r in jobs.items() if r.stop in ("cancel", "timeout")}
        pending = snap.pending
        if ending:  # a job whose ancestor is being stopped does not start: it is about to be cancelled
            pending = tuple(w for w in pending if not ending.intersection(ancestors(parents, w.id)))
        return replace(snap, parents=parents, lent=lent, pending=pending)

    # -- requests ----------------------------------------------------------------
    def _target(self, rcv: rq.Received, jid: int) -> Rec | None:
        from .handlers.owned import kind, owned

        rec = owned(self.d, rcv, jid)
        if rec is None:
            return None
        if rec.state not in (JobState.RUNNING, JobState.STOPPING) or rec.start is None:
            log.info("%s of job %d refused: it is %s", kind(rcv.request), jid, rec.state.value)
            return None
        return rec

    def yield_cores(self, rcv: rq.Received, jid: int, until: tuple[int, ...] | None) -> None:
        rec = self._target(rcv, jid)
        if rec is None:
            return
        self.yielded[rec.id] = Yield(tuple(rec.cores), False, until, time.time())
        self._save()
        self.d.dirty = True
        log.info(
            "job %d yields cores %s%s",
            rec.id,
            cpuset.format(rec.cores),
            f" until jobs {','.join(map(str, until))} end" if until else "",
        )

    def resume(self, rcv: rq.Received, jid: int) -> None:
        rec = self._target(rcv, jid)
        if rec is None:
            return
        y = self.yielded.get(rec.id)
        if y is not None and not y.resuming:
            y.resuming = True
            self._save()
            self.d.dirty = True
            log.info("job %d asks for its cores back", rec.id)

    # -- each pass -----------------------------------------------------------------
    def settle(self) -> None:
        """Implicit resumes (the awaited jobs ended) and completed resumes (the parent's cores are clear)."""
        if not self.yielded:
            return
        jobs = self.d.table.jobs
        changed = False
        for jid, y in list(self.yielded.items()):
            rec = jobs.get(jid)
            if rec is None or rec.state not in (JobState.RUNNING, JobState.STOPPING):
                del self.yielded[jid]
                changed = True
                continue
            if not y.resuming and y.until is not None and not any(i in jobs for i in y.until):
                y.resuming = True
                changed = True
                log.info("job %d: the jobs it waits for have ended; it asks for its cores back", jid)
            if y.resuming:
                running = [
                    r.running()
                    for r in jobs.values()
                    if r.start is not None and r.state in (JobState.RUNNING, JobState.STOPPING)
                ]
                if clear(running, self.parents(), jid):
                    del self.yielded[jid]
                    changed = True
                    log.info("job %d resumed on its cores %s", jid, cpuset.format(y.cores))
        if changed:
            self._save()
            self.d.dirty = True

    # -- submissions and endings -------------------------------------------------------------
    def _row(self, jid: int) -> dict[str, Any] | None:
        rec = self.d.table.jobs.get(jid)
        if rec is not None:
            return {"uid": rec.uid, "state": rec.state.value, "ncpus": rec.ncpus}
        row = self.d.db.conn.execute("SELECT uid, state, ncpus FROM jobs WHERE id = ?", (jid,)).fetchone()
        return None if row is None else {"uid": row[0], "state": row[1], "ncpus": row[2]}

    def check_submit(self, job: dict[str, Any]) -> str | None:
        """Why a submission's ``parent`` cannot be accepted, or None (see the module docstring)."""
        if "parent" not in job or job["parent"] is None:
            return None
        pid = _job_id(job["parent"])
        if pid is None:
            return f"parent {job['parent']!r}: not a job id"
        row = self._row(pid)
        if row is None:
            return f"parent {pid}: no such job"
        if row["uid"] != job["uid"]:
            return f"parent {pid}: another user's job"
        if row["state"] in (JobState.FAILED.value, JobState.CANCELLED.value, JobState.TIMEOUT.value):
            return f"parent {pid} ended {row['state']}"
        top, seen = pid, {pid}
        while (p := self.parent_of(top)) is not None and p not in seen and self._row(p) is not None:
            top = p
            seen.add(p)
        root = self._row(top) or row
        if job["ncpus"] > root["ncpus"]:
            return f"asks for {job['ncpus']} cores, its tree (root job {top}) has {root['ncpus']}"
        self.parent[job["id"]] = pid
        return None

    def ended(self, rec: Rec, state: JobState, now: float) -> None:
        """``rec`` has ended in ``state``: forget its yield; cancel (or hold) its live subtree if it did not
        complete."""
        changed = self.yielded.pop(rec.id, None) is not None
        if changed:
            self._save()
        if state not in ENDED_BADLY:
            self.parent.pop(rec.id, None)
            return
        graph = {**self.parents(), **self._edges(rec.id)}
        below = sorted(j for j in self.d.table.jobs if rec.id in ancestors(graph, j))
        self.parent.pop(rec.id, None)
        if not below:
            return
        spec = (self.d.db.job(rec.id) or {}).get("spec") or {}
        why = f"parent {rec.id} ended {state.value}"
        if spec.get("recoverable"):
            for jid in below:
                child = self.d.table.jobs.get(jid)
                if child is not None and child.state is JobState.PENDING and child.shepherd is None:
                    self.d.table.dequeue(child)
                    child.state = JobState.HELD
                    child.reason = why + ": subtree held (gresume-tree)"
                    self.d.table.save(child, reason=child.reason)
            log.info("job %d %s: its subtree (%d jobs) is kept, pending ones held", rec.id, state.value, len(below))
        else:
            log.info("job %d %s: cancelling its subtree (%d jobs)", rec.id, state.value, len(below))
            for jid in below:
                child = self.d.table.jobs.get(jid)
                if child is not None:
                    self.d.cancel(child, now, why)
        self.d.dirty = True

    def _edges(self, jid: int) -> dict[int, int]:
        """The parent links of the live children of ``jid`` (which has just left the live jobs)."""
        return {j: jid for j in self.d.table.jobs if self.parent.get(j) == jid}
