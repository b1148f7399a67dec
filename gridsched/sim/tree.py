"""Replaying parent-child tree workloads through the core, with and without yielding.

The tree workload format (CSV; blank lines and lines starting with ``#`` are
skipped; a first line starting with ``id`` is a header)::

    id,parent,submit,ncpus,walltime,run

* ``id``: a positive job id, unique; ``parent``: the id of its parent, or
  empty (a root).  A parent comes before its children in the file.
* ``submit``: for a root, seconds from the start of the replay; for a
  child, seconds after its parent starts (the parent submits it while it
  computes), at most the parent's ``run``.
* ``ncpus``, ``walltime``: the request; ``walltime`` is the estimate the
  policy sees (it is not enforced).  A child may not ask for more cores
  than the root of its tree.
* ``run``: seconds the job computes.  A job with children computes ``run``
  seconds and then waits for all of them (``gwait``); with yielding its cores
  are lent meanwhile (``gwait --yield``), and it ends when its children have
  ended and its cores are clear of the tasks that borrowed them.

The clock jumps from event to event (arrivals, child submissions, ends of
computation, job ends).  After each batch of simultaneous events the
:class:`~gridsched.core.types.Snapshot` (placement mode: core numbers, the
``parents`` of live jobs, the cores yielding parents lend) goes to
:func:`gridsched.core.policy.schedule` and the starts are carried out, as in
the daemon.  Jobs are never preempted here (checkpoint mode none).  When no
event is left while jobs have not ended, the replay stops: a scheduling
deadlock, reported with the jobs stuck.

Metrics: makespan (first submission to last end), utilization (core-seconds
of computation over cores times makespan), mean wait (first start minus
submission), and the jobs that ran on lent cores.
"""

from __future__ import annotations

import csv
import heapq
import io
from dataclasses import dataclass, field
from math import inf

from gridsched.core.policy import schedule
from gridsched.core.tree import credit_limit, credit_spans, tops, walltime_credit
from gridsched.core.types import Lent, Params, Policy, Reclaim, Resume, Running, Snapshot, Start, Waiting

FIELDS = ("id", "parent", "submit", "ncpus", "walltime", "run")


class TreeFormatError(ValueError):
    """A tree workload that cannot be read; the message names the line."""


@dataclass(frozen=True, slots=True)
class TreeJob:
    id: int
    parent: int | None
    submit: float
    ncpus: int
    walltime: float
    run: float


def parse(text: str, name: str = "<tree>") -> list[TreeJob]:
    """The jobs of a tree workload (see the module docstring); :class:`TreeFormatError` if it is bad."""
    jobs: dict[int, TreeJob] = {}
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if row[0].strip() == "id":
            continue
        where = f"{name}:{lineno}"
        if len(row) != len(FIELDS):
            raise TreeFormatError(f"{where}: {len(row)} fields, expected {len(FIELDS)} ({','.join(FIELDS)})")
        try:
            jid = int(row[0])
            parent = int(row[1]) if row[1].strip() else None
            submit, ncpus, wall, run = float(row[2]), int(row[3]), float(row[4]), float(row[5])
        except ValueError:
            raise TreeFormatError(f"{where}: not a number in {','.join(row)!r}") from None
        if jid <= 0 or jid in jobs:
            raise TreeFormatError(f"{where}: job id {jid} is not positive or not unique")
        if ncpus < 1 or not (wall > 0 and run >= 0 and submit >= 0) or inf in (wall, run, submit):
            raise TreeFormatError(f"{where}: ncpus, walltime must be positive, submit and run not negative")
        if parent is not None:
            p = jobs.get(parent)
            if p is None:
                raise TreeFormatError(f"{where}: parent {parent} is not an earlier job")
            if submit > p.run:
                raise TreeFormatError(
                    f"{where}: submitted {submit:g}s after its parent starts, after the parent's run ({p.run:g}s)"
                )
            top = p
            while top.parent is not None:
                top = jobs[top.parent]
            if ncpus > top.ncpus:
                raise TreeFormatError(f"{where}: asks for {ncpus} cores, its tree (root job {top.id}) has {top.ncpus}")
        jobs[jid] = TreeJob(jid, parent, submit, ncpus, wall, run)
    if not jobs:
        raise TreeFormatError(f"{name}: no jobs")
    return list(jobs.values())


@dataclass(slots=True)
class TreeResult:
    ncores: int
    yielding: bool
    start: dict[int, float] = field(default_factory=dict)
    end: dict[int, float] = field(default_factory=dict)
    submitted: dict[int, float] = field(default_factory=dict)
    cores: dict[int, tuple[int, ...]] = field(default_factory=dict)
    on_lent: set[int] = field(default_factory=set)
    stuck: list[int] = field(default_factory=list)
    busy: float = 0.0  # core-seconds of computation
    total: int = 0  # jobs in the workload

    @property
    def deadlock(self) -> bool:
        return bool(self.stuck)

    def metrics(self) -> dict[str, float | int | bool]:
        first = min(self.submitted.values()) if self.submitted else 0.0
        last = max(self.end.values()) if self.end else first
        span = inf if self.stuck else last - first
        waits = [self.start[j] - self.submitted[j] for j in self.start]
        return {
            "jobs": self.total,
            "ended": len(self.end),
            "deadlock": self.deadlock,
            "stuck": len(self.stuck),
            "makespan": span,
            "utilization": 0.0 if not span or span == inf else self.busy / (self.ncores * span),
            "mean_wait": sum(waits) / len(waits) if waits else 0.0,
            "on_lent": len(self.on_lent),
        }


_SUBMIT, _COMPUTED, _ARRIVE = 0, 1, 2


def simulate(jobs: list[TreeJob], ncores: int, params: Params | None = None, yielding: bool = True) -> TreeResult:
    """Replay ``jobs`` on ``ncores`` cores (see the module docstring)."""
    params = params or Params(policy=Policy.EASY)
    by_id = {j.id: j for j in jobs}
    kids: dict[int, list[int]] = {}
    for j in jobs:
        if j.parent is not None:
            kids.setdefault(j.parent, []).append(j.id)
    res = TreeResult(ncores, yielding, total=len(jobs))
    events: list[tuple[float, int, int, int]] = []
    seq = 0

    def push(t: float, kind: int, jid: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, jid))
        seq += 1

    for j in jobs:
        if j.parent is None:
            push(j.submit, _ARRIVE, j.id)
    queue: list[int] = []  # pending, in submission order
    running: dict[int, tuple[int, ...]] = {}  # computing or waiting for children: holds its cores
    waiting: set[int] = set()  # done computing, waits for its children
    lent: dict[int, bool] = {}  # yielding parent -> resuming
    left = {jid: len(kids.get(jid, [])) for jid in by_id}  # children not ended
    done: set[int] = set()
    head = None
    now = 0.0

    spans: dict[int, tuple[tuple[float, float | None], ...]] = {}  # when each parent earned walltime credit
    backfilled: set[int] = set()  # jobs started ahead of a waiting job: they earn no credit

    def account(t: float) -> None:
        """A yielding parent earns credit while a child of its runs (gridsched.core.tree.credit_spans)."""
        for p in list(lent):
            spans[p] = credit_spans(spans.get(p, ()), any(c in running for c in kids.get(p, ())), t)

    def finish(jid: int, t: float) -> None:
        running.pop(jid, None)
        waiting.discard(jid)
        lent.pop(jid, None)
        done.add(jid)
        res.end[jid] = t
        p = by_id[jid].parent
        if p is not None:
            left[p] -= 1
            if left[p] == 0 and p in waiting and p not in lent:
                finish(p, t)  # a yielding parent asks for its cores back, and is resumed, as the core decides

    def parents_now() -> dict[int, int]:
        live = set(running) | set(queue)
        return {j: by_id[j].parent for j in live if by_id[j].parent in live}  # type: ignore[misc]

    def runs(t: float) -> tuple[Running, ...]:
        return tuple(
            Running(
                j,
                len(c),
                res.start[j],
                by_id[j].walltime + walltime_credit(spans.get(j, ()), t, credit_limit(0.0, inf, j in backfilled)),
                c,
            )
            for j, c in running.items()
        )

    def awaiting(p: int) -> tuple[int, ...]:
        return tuple(c for c in kids.get(p, ()) if c not in done)

    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, kind, jid = heapq.heappop(events)
            if kind in (_ARRIVE, _SUBMIT):
                queue.append(jid)
                res.submitted[jid] = now
            elif kind == _COMPUTED:
                if left[jid] == 0:
                    finish(jid, now)
                else:
                    waiting.add(jid)
                    if yielding:
                        lent[jid] = False
        account(now)
        for _ in range(64):
            parents = parents_now()
            used = {c for cs in running.values() for c in cs}
            snap = Snapshot(
                now=now,
                ncores=ncores,
                params=params,
                free=frozenset(range(ncores)) - used,
                head=head,
                running=runs(now),
                pending=tuple(Waiting(j, by_id[j].ncpus, by_id[j].walltime, user="") for j in queue),
                parents=parents,
                lent=tuple(Lent(p, frozenset(running[p]), r, awaiting(p)) for p, r in sorted(lent.items())),
                gated=False,  # trees without dependencies or arrays
            )
            plan = schedule(snap)
            head = plan.head
            started = [d for d in plan.decisions if isinstance(d, Start)]
            moved = False
            for d in plan.decisions:
                if isinstance(d, Reclaim):
                    lent[d.parent] = True  # resumed when its cores are clear
                    moved = True
                elif isinstance(d, Resume):
                    spans[d.parent] = credit_spans(spans.get(d.parent, ()), False, now)
                    lent.pop(d.parent, None)
                    finish(d.parent, now)  # resumed, with nothing left to compute
                    moved = True
            if not started and not moved:
                break
            top = tops(snap.running, parents)
            for d in started:
                j = by_id[d.job]
                queue.remove(j.id)
                running[j.id] = tuple(d.cores)
                res.start[j.id] = now
                if d.backfilled:
                    backfilled.add(j.id)
                res.cores[j.id] = tuple(d.cores)
                res.busy += j.ncpus * j.run
                if any(c in top for c in d.cores):  # on cores a yielding job holds
                    res.on_lent.add(j.id)
                for c in kids.get(j.id, []):
                    push(now + by_id[c].submit, _SUBMIT, c)
                push(now + j.run, _COMPUTED, j.id)
            account(now)
    res.stuck = sorted(j for j in by_id if j not in done)
    return res
