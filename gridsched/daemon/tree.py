"""Parent-child job trees in the daemon: parents, yielding and resuming, subtree endings.

A job whose spec has ``parent`` is a child of that job (gsub sets it inside a
job).  The daemon keeps, per yielding parent, the cores it lends and whether
it is resuming, in the meta key ``yielded`` of the state db, which
gwait, gresume and gstat read::

    {"ID": {"cores": "0-1", "resuming": false, "until": [IDS] | null, "since": T}}

* ``yield`` request ``{"type": "yield", "job": ID, "until": [IDS]}`` (from the
  job's owner): the running job lends its cores until it is resumed, and at
  most while it has something to wait for: with ``until``, those of the jobs
  that are live; without, its live children (jobs whose parent it is:
  pending, held or running).  The core asks for the cores back once none is
  left (``Lent.awaiting``, a ``Reclaim``).  A job with nothing to wait for
  cannot yield: the request is refused (quarantined with its reason).
  Yielding again cancels a resume that has not completed.
* ``resume`` request ``{"type": "resume", "job": ID}``: the job stops lending
  at once (no new task starts on its cores); it *is* resumed, and its entry
  leaves ``yielded``, when the core says so (a ``Resume`` decision: no job
  runs above it on its cores any more, :func:`gridsched.core.tree.clear`).
  So a parent is never resumed onto cores a task still uses.  Likewise the
  core decides when a parent that yields until given jobs asks for its cores
  back (``Reclaim``).
* Walltime: the job's record keeps the spans during which it earned credit
  (``Rec.lent``): it yielded and at least one of its children ran
  (:meth:`Trees.account`, at every turn of the loop and when a job ends;
  :func:`gridsched.core.tree.credit_spans`).  Its deadline moves later by
  that time, never past ``max(its walltime, jobs.max_walltime)`` from its
  start (:func:`gridsched.core.tree.walltime_credit`), and so does its end in
  the snapshot.  A child held, pending or waiting for its begin time earns
  its parent nothing.
* The snapshot gets ``parents`` (live child -> live parent), ``lent``
  (the yielding parents, resuming or not, and the jobs they still await) and
  ``ended`` (the jobs with live children that ended since the last pass);
  :mod:`gridsched.core.tree` and :mod:`gridsched.core.endings` decide.  A
  pending job whose ancestor is being stopped (cancelled, out of time) is not
  offered to the core: it is about to be cancelled.
* A job that ends FAILED, CANCELLED or TIMEOUT has its live subtree
  cancelled by the next pass (``CancelSubtree``: pending jobs at once,
  running ones signalled as by gdel), unless it was submitted with
  ``recoverable``: then its pending descendants are held (``HoldSubtree``,
  reason ``parent ID ended STATE: subtree held``) and its running ones go
  on; ``gresume-tree ID`` releases the held ones.  The ended jobs wait for
  that pass in the meta key ``ended`` of the state db, so a restart in
  between loses none.
* A submission naming a parent is refused (FAILED, with the reason) when the
  parent is unknown, another user's, or ended other than COMPLETED, or when
  it asks for more cores than the root of its tree has.  A child of a parent
  that completed before the child was taken in is an ordinary job.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from gridsched.core import cpuset
from gridsched.core.tree import ancestors, credit_spans
from gridsched.core.types import CancelSubtree, Ended, HoldSubtree, Lent, Snapshot
from gridsched.daemon import transitions
from gridsched.protocol.jobs import JobState, Stop
from gridsched.protocol.requests import MAX_ID, JobSpec, Refused

if TYPE_CHECKING:
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol import requests as rq
    from gridsched.protocol.state import StateDB

log = logging.getLogger("gschedd")

META_KEY = "yielded"
ENDED_KEY = "ended"
ENDED_BADLY = (JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY)


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


class _Known(NamedTuple):
    """What a submission's parent check reads of a job: its owner, state and cores."""

    uid: int
    state: JobState
    ncpus: int


class Trees:
    """The daemon's job trees (one per daemon, ``Daemon.trees``)."""

    table: JobTable
    db: StateDB
    cancel: Callable[[Rec, float, str], None]  # cancel a job (when, why)

    def __init__(self) -> None:
        self.parent: dict[int, int | None] = {}  # job -> parent from its spec (cache)
        self.yielded: dict[int, Yield] = {}
        self.fallen: dict[int, tuple[str, bool]] = {}  # job that ended badly -> (state, recoverable)

    def open(self, table: JobTable, db: StateDB, cancel: Callable[[Rec, float, str], None]) -> None:
        """The daemon's job table and state db, once open, and how a job is cancelled."""
        self.table = table
        self.db = db
        self.cancel = cancel

    # -- state -----------------------------------------------------------------
    def load(self) -> None:
        """Take the yielding parents back from the state db after a restart."""
        try:
            raw = json.loads(self.db.meta().get(META_KEY) or "{}")
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
            rec = self.table.jobs.get(jid)
            if rec is None or rec.state not in (JobState.RUNNING, JobState.STOPPING):
                del self.yielded[jid]
        now = time.time()
        for rec in self.table.jobs.values():
            if rec.lent and rec.lent[-1][1] is None and rec.id not in self.yielded:
                self._earn(rec, False, now)  # a job that no longer yields earns nothing
        self._settle_downtime()
        self._save()

    def _settle_downtime(self) -> None:
        """After a restart: a yielding job none of whose children runs any more stopped earning when the last of
        them ended (while the daemon was down), not now."""
        jobs = self.table.jobs
        running = {p for c, p in self.parents().items() if jobs[c].state in (JobState.RUNNING, JobState.STOPPING)}
        for jid in self.yielded:
            rec = jobs.get(jid)
            if rec is None or not rec.lent or rec.lent[-1][1] is not None or jid in running:
                continue
            since = rec.lent[-1][0] or 0.0
            row = self.db.conn.execute(
                "SELECT MAX(end_time) FROM jobs WHERE json_extract(spec, '$.parent') = ? AND end_time >= ?",
                (jid, since),
            ).fetchone()
            last = row[0] if row is not None and isinstance(row[0], (int, float)) else since
            self._earn(rec, False, float(last))

    def load_ended(self) -> None:
        """Take back the jobs that ended before a restart whose subtrees no pass has dealt with (before the
        recovery, which may end more)."""
        try:
            raw = json.loads(self.db.meta().get(ENDED_KEY) or "{}")
            self.fallen = {int(k): (str(v["state"]), bool(v.get("recoverable"))) for k, v in raw.items()}
        except (ValueError, TypeError, AttributeError, KeyError):
            log.warning("meta %s unreadable: the subtrees of jobs that ended are left alone", ENDED_KEY)
            self.fallen = {}

    def _save_ended(self) -> None:
        self.table.begin()
        self.db.set_meta(
            ENDED_KEY,
            json.dumps({str(k): {"state": st, "recoverable": r} for k, (st, r) in sorted(self.fallen.items())}),
        )

    def _save(self) -> None:
        self.table.begin()
        self.db.set_meta(META_KEY, json.dumps({str(k): v.as_json() for k, v in sorted(self.yielded.items())}))
        self.table.forecast_dirty = True

    def parent_of(self, jid: int) -> int | None:
        if jid not in self.parent:
            row = self.db.conn.execute(
                "SELECT json_extract(spec, '$.parent') FROM jobs WHERE id = ?", (jid,)
            ).fetchone()
            if row is None:
                return None
            self.parent[jid] = _job_id(row[0])
        return self.parent[jid]

    def parents(self) -> dict[int, int]:
        """Live child -> live parent."""
        jobs = self.table.jobs
        missing = [j for j in jobs if j not in self.parent]
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            rows = self.db.conn.execute(
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
        if not parents and not self.yielded and not self.fallen:
            return snap
        jobs = self.table.jobs
        kids: dict[int, list[int]] = {}
        for c, p in parents.items():
            kids.setdefault(p, []).append(c)
        lent = tuple(
            Lent(p, frozenset(y.cores), y.resuming, self.awaited(p, y, jobs, kids))
            for p, y in sorted(self.yielded.items())
        )
        ended = tuple(Ended(j, st, tuple(sorted(self._edges(j))), r) for j, (st, r) in sorted(self.fallen.items()))
        ending = {j for j, r in jobs.items() if r.stop in (Stop.CANCEL, Stop.TIMEOUT, Stop.OVERRUN)}
        pending = snap.pending
        if ending:  # a job whose ancestor is being stopped does not start: it is about to be cancelled
            pending = tuple(w for w in pending if not ending.intersection(ancestors(parents, w.id)))
        return replace(snap, parents=parents, lent=lent, pending=pending, ended=ended)

    # -- requests ----------------------------------------------------------------
    def _target(self, rcv: rq.Received, jid: int) -> Rec | None:
        from gridsched.daemon.handlers.owned import kind, owned

        rec = owned(self.table.jobs, rcv, jid)
        if rec is None:
            return None
        if rec.state not in (JobState.RUNNING, JobState.STOPPING) or rec.start is None:
            log.info("%s of job %d refused: it is %s", kind(rcv.request), jid, rec.state.value)
            return None
        return rec

    @staticmethod
    def awaited(jid: int, y: Yield, jobs: Mapping[int, Rec], kids: Mapping[int, Iterable[int]]) -> tuple[int, ...]:
        """The live jobs ``jid`` yields until: those of its ``until``, or else its live children."""
        if y.until is not None:
            return tuple(i for i in y.until if i in jobs and i != jid)
        return tuple(sorted(kids.get(jid, ())))

    def _children(self, jid: int) -> list[int]:
        return [c for c, p in self.parents().items() if p == jid]

    def yield_cores(self, rcv: rq.Received, jid: int, until: tuple[int, ...] | None) -> bool:
        """Job ``jid`` lends its cores (to its children, or until the jobs ``until`` end); True if it does
        now (a scheduling pass is due)."""
        rec = self._target(rcv, jid)
        if rec is None:
            return False
        jobs = self.table.jobs
        y = Yield(tuple(rec.cores), False, until, time.time())
        if not self.awaited(rec.id, y, jobs, {rec.id: self._children(rec.id)}):
            what = "none of the jobs it would wait for is live" if until else "it has no live child"
            log.info("yield of job %d refused: %s", rec.id, what)
            raise Refused(f"job {rec.id} cannot yield: {what}, so there is nothing to lend its cores to")
        self.yielded[rec.id] = y
        self._save()
        log.info(
            "job %d yields cores %s%s",
            rec.id,
            cpuset.format(rec.cores),
            f" until jobs {','.join(map(str, until))} end" if until else "",
        )
        return True

    def resume(self, rcv: rq.Received, jid: int) -> bool:
        """Job ``jid`` asks for its cores back; True if it does now (a scheduling pass is due)."""
        rec = self._target(rcv, jid)
        if rec is None:
            return False
        y = self.yielded.get(rec.id)
        if y is None or y.resuming:
            return False
        y.resuming = True
        self._save()
        log.info("job %d asks for its cores back", rec.id)
        return True

    # -- the core's decisions -----------------------------------------------------------
    def reclaim(self, jid: int) -> bool:
        """The jobs ``jid`` yields until have ended: it asks for its cores back (a ``Reclaim``).  True: a
        scheduling pass is due."""
        y = self.yielded.get(jid)
        if y is None or y.resuming:
            log.error("plan reclaims the cores of job %d, which is not yielding", jid)
            return False
        y.resuming = True
        self._save()
        log.info("job %d: the jobs it waits for have ended; it asks for its cores back", jid)
        return True

    def resumed(self, jid: int, implicit: bool, now: float) -> bool:
        """``jid`` is resumed on its cores (a ``Resume``): it stops lending, and its walltime counts again.
        True: a scheduling pass is due."""
        y = self.yielded.pop(jid, None)
        if y is None:
            log.error("plan resumes job %d, which is not yielding", jid)
            return False
        if implicit:
            log.info("job %d: the jobs it waits for have ended; it asks for its cores back", jid)
        self._close(jid, now)
        self._save()
        log.info("job %d resumed on its cores %s", jid, cpuset.format(y.cores))
        return True

    def _close(self, jid: int, now: float) -> None:
        rec = self.table.jobs.get(jid)
        if rec is not None:
            self._earn(rec, False, now)

    def _earn(self, rec: Rec, earning: bool, now: float) -> None:
        spans = credit_spans(((s or 0.0, u) for s, u in rec.lent), earning, now)
        new = [[s, u] for s, u in spans]
        if new != rec.lent:
            rec.lent = new
            self.table.save(rec)

    def account(self, now: float, only: int | None = None) -> None:
        """Bring the credit of the yielding jobs (or of ``only``) up to ``now``: each earns while at least one of
        its children runs (:func:`gridsched.core.tree.credit_spans`)."""
        if not self.yielded or (only is not None and only not in self.yielded):
            return
        jobs = self.table.jobs
        busy = {
            p
            for r in jobs.values()
            if r.state in (JobState.RUNNING, JobState.STOPPING)
            and r.start is not None
            and r.start <= now
            and (p := self.parent_of(r.id)) is not None
        }
        for jid in self.yielded if only is None else (only,):
            rec = jobs.get(jid)
            if rec is not None:
                self._earn(rec, jid in busy, now)

    def cancel_subtree(self, dec: CancelSubtree, now: float) -> bool:
        """Cancel the subtree the core decided to cancel; True: a scheduling pass is due."""
        log.info("job %d %s: cancelling its subtree (%d jobs)", dec.parent, self._state(dec.parent), len(dec.jobs))
        for jid in dec.jobs:
            child = self.table.jobs.get(jid)
            if child is not None:
                self.cancel(child, now, dec.reason)
        return True

    def hold_subtree(self, dec: HoldSubtree) -> bool:
        """Hold the pending jobs of the subtree the core decided to keep; True: a scheduling pass is due."""
        for jid in dec.jobs:
            child = self.table.jobs.get(jid)
            if child is not None and child.state is JobState.PENDING and child.shepherd is None:
                transitions.hold(self.table, child, dec.reason)
        log.info(
            "job %d %s: its subtree (%d jobs) is kept, pending ones held",
            dec.parent,
            self._state(dec.parent),
            len(dec.jobs),
        )
        return True

    def _state(self, jid: int) -> str:
        st = self.fallen.get(jid)
        return st[0] if st is not None else "ended"

    def decided(self) -> None:
        """The pass has decided what becomes of the subtrees of the jobs that ended (``fallen``)."""
        if self.fallen:
            self.fallen = {}
            self._save_ended()

    # -- submissions and endings -------------------------------------------------------------
    def _row(self, jid: int) -> _Known | None:
        rec = self.table.jobs.get(jid)
        if rec is not None:
            return _Known(rec.uid, rec.state, rec.ncpus)
        row = self.db.conn.execute("SELECT uid, state, ncpus FROM jobs WHERE id = ?", (jid,)).fetchone()
        return None if row is None else _Known(row[0], JobState(row[1]), row[2])

    def check_submit(self, job: JobSpec) -> str | None:
        """Why a checked submission's ``parent`` cannot be accepted, or None (see the module docstring)."""
        pid = job.parent
        if pid is None:
            return None
        row = self._row(pid)
        if row is None:
            return f"parent {pid}: no such job"
        if row.uid != job.uid:
            return f"parent {pid}: another user's job"
        if row.state in ENDED_BADLY:
            return f"parent {pid} ended {row.state.value}"
        top, seen = pid, {pid}
        while (p := self.parent_of(top)) is not None and p not in seen and self._row(p) is not None:
            top = p
            seen.add(p)
        root = self._row(top) or row
        if job.ncpus > root.ncpus:
            return f"asks for {job.ncpus} cores, its tree (root job {top}) has {root.ncpus}"
        self.parent[job.id] = pid
        return None

    def ended(self, rec: Rec, state: JobState, end_time: float) -> bool:
        """``rec`` has ended in ``state``: forget its yield; cancel (or hold) its live subtree if it did not
        complete.  True: a scheduling pass is due to decide that subtree."""
        changed = self.yielded.pop(rec.id, None) is not None
        if changed:
            self._save()
        parent = self.parent_of(rec.id)
        if parent is not None:
            self.account(end_time, parent)  # its parent earns no more unless another child runs
        self.parents()  # the parent links of the live jobs are known before this one leaves them
        if state not in ENDED_BADLY or not self._edges(rec.id):
            self.parent.pop(rec.id, None)
            return False
        row = self.db.job(rec.id)
        self.fallen[rec.id] = (state.value, row is not None and row["spec"].recoverable)
        self._save_ended()
        return True

    def _edges(self, jid: int) -> dict[int, int]:
        """The parent links of the live children of ``jid`` (which has just left the live jobs)."""
        return {j: jid for j in self.table.jobs if self.parent.get(j) == jid}
