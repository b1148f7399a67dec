"""Job arrays in the daemon: one record for the tasks not started yet, a job for each task about to start.

An array (spec key ``array``) is checked whole when its request is read
(:mod:`.handlers.submit`) and taken in whole, at once, whatever its size: its
first task is made as a job of its own (it keeps the request's id, which is
the array's id), and the others are one record, a :class:`Rest` (as Slurm
keeps one record for an array's pending tasks): the spec they share once,
and which indices are still pending, held, or were cancelled before they
were made, kept as runs of indices (:class:`gridsched.protocol.arrays.Indices`).
Its row is the ``arrays`` table's; its private part (environment, paths,
the output templates, the script) is the daemon's own file in the first
task's directory (:func:`gridsched.daemon.jobfiles.write_array`).

A task is made (a job row, directory and files, a new id) when it may be
about to start: each turn, before the scheduling pass, every array with
pending indices has a few of them made (:func:`fill`), enough for the
machine to start as many as it could hold at once and one more (the next
task waits first in the queue, as it would if every task were a job).  The
core sees them as the jobs they are; the ones not made wait behind them in
the array's place in the queue (:func:`gridsched.daemon.table.queue_key`),
so a million-task array costs a scheduling pass what a few jobs do.  A task
named on its own (``gdel 12_7``, ``ghold 12_[3-5]``) is acted on in the
record (cancelled, held, released); ``galter`` and ``grequeue`` of a task
not made yet make it first.  Holding, releasing and cancelling a whole
array change the record and the tasks made: their cost does not grow with
the array.

Each task's spec gets ``array_id``, ``array_index``, ``array_max`` (with
``%MAX``), ``array_range`` and its own output paths (``%j``, ``%a`` filled
in); its ``GS_ARRAY_*`` variables are computed at each start
(:func:`gridsched.job.env.environment`).  The tasks share one script file
(hard links; a new file for each :data:`LINKS_PER_SCRIPT` tasks, below the
file system's limit on links).

The throttle: at most ``array_max`` tasks of an array run at once.  Each
task's ``Waiting`` carries its array and ``array_max``; the core
(:mod:`gridsched.core.eligible`) offers only the first ``array_max`` minus
running tasks in queue order to the policy.
"""

from __future__ import annotations

import errno
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gridsched.core.eligible import array_window
from gridsched.daemon import jobfiles
from gridsched.protocol.arrays import MAKE_AT_ONCE, Indices, parse, task_path
from gridsched.protocol.jobs import PRIVATE_KEYS, JobState
from gridsched.protocol.requests import JobSpec, Refused
from gridsched.protocol.specview import SpecView

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gridsched.daemon.slices import Budget
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.spool import Spool
    from gridsched.protocol.state import StateDB
    from gridsched.protocol.view import RestRow

log = logging.getLogger("gschedd")

# tasks that share one script file by hard links: a file system allows only so many links to a file (65,000 on
# ext4), so each run of this many tasks starts from a file of its own
LINKS_PER_SCRIPT = 10_000
OLD_INTAKE = "intake-"  # the state db's meta key of an array an earlier release was taking in a slice per turn


@dataclass(frozen=True)
class Ctx:
    """What the work on arrays sees of the daemon: the job table, the state db, the spool, the records of the
    arrays, the machine's size, and how a job is taken in and ids are claimed and let go."""

    table: JobTable
    db: StateDB
    spool: Spool
    rests: dict[int, Rest]
    ncores: int
    take_in: Callable[[JobSpec, str, JobState, str, jobfiles.JobFiles | None], Rec | None]
    new_ids: Callable[[int], list[int]]
    unclaim: Callable[[list[int]], None]


@dataclass(slots=True)
class Rest:
    """The tasks of an array not made yet."""

    aid: int  # the array's id (its first task's)
    uid: int
    user: str
    job: JobSpec  # every task's spec before its index: its output paths are the templates, its script ""
    script: str  # the script's text, for a task that cannot link to a file of an earlier one
    total: int  # tasks in all
    pending: Indices
    held: Indices
    cancelled: Indices
    reason: str  # why the held ones are held
    link: int  # the task whose script file the next task made links to
    linked: int = 0  # tasks made that link to it
    cancel_time: float | None = None  # when tasks of it were last cancelled before they were made

    @property
    def live(self) -> bool:
        return bool(self.pending or self.held)

    def row(self) -> RestRow:
        j = self.job
        return {
            "id": self.aid,
            "user": self.user,
            "uid": self.uid,
            "name": j.name,
            "ncpus": j.ncpus,
            "walltime": j.walltime,
            "submit_time": j.submit_time,
            "total": self.total,
            "pending": self.pending.text,
            "held": self.held.text,
            "cancelled": self.cancelled.text,
            "reason": self.reason,
            "spec": SpecView(j.stored()[0]),
            "cancel_time": self.cancel_time,
        }


def take_in(ctx: Ctx, job: JobSpec, user: str, state: JobState, reason: str) -> None:
    """Take in a checked array submission whole: its first task made, the others one :class:`Rest`."""
    assert job.array is not None
    spec = parse(job.array, 1 << 62)  # checked against jobs.max_array_size when the request was read
    base = job._replace(array=None, array_id=job.id, array_max=spec.max_running, array_range=spec.text)
    first = spec.indices[0]
    ctx.take_in(_task(base, job.id, first), user, state, reason, {"script": job.script})
    others = spec.indices.without(Indices((range(first, first + 1),)))
    if others:
        _begin(ctx, base, user, len(spec.indices), others, state, reason)
    log.info("array %d: %d tasks (%s)", job.id, len(spec.indices), spec.text)


def _begin(ctx: Ctx, base: JobSpec, user: str, total: int, others: Indices, state: JobState, reason: str) -> Rest:
    """Record the tasks ``others`` of an array, not made yet, made in ``state``."""
    none = Indices()
    rest = Rest(
        aid=base.id,
        uid=base.uid,
        user=user,
        job=base._replace(script=""),
        script=base.script,
        total=total,
        pending=others if state is JobState.PENDING else none,
        held=others if state is JobState.HELD else none,
        cancelled=others if state is JobState.FAILED else none,
        reason=reason,
        link=base.id,
        linked=1,  # the first task's own file
        cancel_time=base.submit_time if state is JobState.FAILED else None,
    )
    private = {k: v for k, v in base.to_spec().items() if k in PRIVATE_KEYS or k == "script"}
    jobfiles.write_array(ctx.spool.job_dir(base.id), json.dumps(private).encode())
    ctx.table.begin()
    ctx.db.put_array(rest.row())
    if rest.live:
        ctx.rests[rest.aid] = rest
    return rest


def resume(ctx: Ctx, job: JobSpec, user: str) -> bool:
    """Go on with an array an earlier release was taking in a slice per turn when it stopped: the tasks it had
    not made become the array's record.  False if there is none (the request was served whole)."""
    raw = ctx.db.meta().get(OLD_INTAKE + str(job.id))
    if raw is None or job.array is None or job.id in ctx.rests:
        return False
    try:
        got = json.loads(raw)
        done, state, reason = int(got["done"]), JobState(got["state"]), str(got["reason"])
    except (ValueError, KeyError, TypeError) as e:
        log.error("array %d: its progress cannot be read (%s): taken in no further", job.id, e)
        return False
    spec = parse(job.array, 1 << 62)
    left = Indices.of(spec.indices[k] for k in range(done, len(spec.indices)))  # an earlier release's: <= 100,000
    base = job._replace(array=None, array_id=job.id, array_max=spec.max_running, array_range=spec.text)
    ctx.table.begin()
    ctx.db.del_meta(OLD_INTAKE + str(job.id))
    if left:
        _begin(ctx, base, user, len(spec.indices), left, state, reason)
    log.info(
        "array %d: taken in by an earlier release up to task %d of %d; the others go on",
        job.id,
        done,
        len(spec.indices),
    )
    return True


def load(ctx: Ctx) -> None:
    """Read the records of the arrays whose tasks are not all made (a restart)."""
    for row in ctx.db.array_rests():
        pending, held = Indices.from_text(row["pending"]), Indices.from_text(row["held"])
        if not pending and not held:
            continue
        aid = int(row["id"])
        try:
            private = jobfiles.read_array(ctx.spool.job_dir(aid))
        except jobfiles.JobFilesError as e:
            log.error("array %d: %s: its %d tasks not started are lost", aid, e, len(pending) + len(held))
            continue
        job = JobSpec.from_spec({**row["spec"].raw, **private})
        ctx.rests[aid] = Rest(
            aid=aid,
            uid=int(row["uid"]),
            user=str(row["user"]),
            job=job._replace(script=""),
            script=job.script,
            total=int(row["total"]),
            pending=pending,
            held=held,
            cancelled=Indices.from_text(row["cancelled"]),
            reason=str(row["reason"]),
            link=aid,
            cancel_time=row.get("cancel_time"),
        )
    if ctx.rests:
        log.info(
            "%d arrays have tasks not started: %d of them",
            len(ctx.rests),
            sum(len(r.pending) + len(r.held) for r in ctx.rests.values()),
        )


def save(ctx: Ctx, rest: Rest) -> None:
    """Write the record's indices (in the open transaction); a record with no task left to make is dropped."""
    ctx.table.begin()
    ctx.db.update_array(
        rest.aid,
        pending=rest.pending.text,
        held=rest.held.text,
        cancelled=rest.cancelled.text,
        reason=rest.reason,
        cancel_time=rest.cancel_time,
    )
    if not rest.live:
        ctx.rests.pop(rest.aid, None)


def window(rest: Rest, ncores: int) -> int:
    """How many of an array's pending tasks are made ahead of their start, as the core offers them
    (:func:`gridsched.core.eligible.array_window`)."""
    return array_window(ncores, rest.job.ncpus, rest.job.array_max)


def fill(ctx: Ctx, budget: Budget) -> bool:
    """Make the next pending tasks of each array up to its :func:`window` (within ``budget``); whether some are
    left for the next turn (the budget ran out first)."""
    if not any(r.pending for r in ctx.rests.values()):
        return False
    made = Counter(
        r.array_id for r in ctx.table.jobs.values() if r.state is JobState.PENDING and r.array_id in ctx.rests
    )
    for rest in list(ctx.rests.values()):
        short = min(window(rest, ctx.ncores) - made[rest.aid], len(rest.pending))
        want = min(short, budget.left())
        if want <= 0:
            if short > 0:
                return True
            continue
        indices = rest.pending.head(want)
        ids = ctx.new_ids(len(indices))
        done: list[int] = []
        try:
            for tid, i in zip(ids, indices):
                make(ctx, rest, tid, i, JobState.PENDING, "")
                done.append(i)
                budget.spend()
        except OSError as e:
            log.error(
                "array %d: cannot make task %d (%s): tried again later", rest.aid, indices[len(done)], e.strerror or e
            )
        finally:
            if len(done) < len(ids):
                ctx.unclaim(ids[len(done) :])
            if done:
                rest.pending = rest.pending.after(len(done))  # the first ones, in order
                save(ctx, rest)
        if len(done) < short:
            return True
    return False


def make_now(ctx: Ctx, rest: Rest, indices: Indices) -> list[Rec]:
    """Make the tasks ``indices`` of ``rest`` now (pending or held as they are; those not in it are skipped);
    :class:`gridsched.protocol.requests.Refused` for more than :data:`MAKE_AT_ONCE`."""
    out: list[Rec] = []
    pending, held = rest.pending.only(indices), rest.held.only(indices)
    if len(pending) + len(held) > MAKE_AT_ONCE:
        raise Refused(
            f"{len(pending) + len(held)} tasks not started yet named on their own (at most {MAKE_AT_ONCE}): "
            "name the whole array"
        )
    todo = [(i, JobState.PENDING, "") for i in pending]
    todo += [(i, JobState.HELD, rest.reason) for i in held]
    if not todo:
        return out
    todo.sort()
    ids = ctx.new_ids(len(todo))
    for tid, (i, state, reason) in zip(ids, todo):
        rec = make(ctx, rest, tid, i, state, reason)
        if rec is not None:
            out.append(rec)
    made = Indices.of(i for i, _, _ in todo)
    rest.pending, rest.held = rest.pending.without(made), rest.held.without(made)
    save(ctx, rest)
    return out


def make(ctx: Ctx, rest: Rest, tid: int, index: int, state: JobState, reason: str) -> Rec | None:
    """Make task ``index`` of the array as job ``tid``: its files (its script a link where it can be) and row."""
    task = _task(rest.job, tid, index)
    if rest.linked < LINKS_PER_SCRIPT:
        try:
            rec = ctx.take_in(task, rest.user, state, reason, {"script": ctx.spool.job_dir(rest.link) / "script"})
            rest.linked += 1
            return rec
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EMLINK):
                raise
            # the file it links to is gone or has all the links it may have: a new run starts here
    rec = ctx.take_in(task, rest.user, state, reason, {"script": rest.script})
    rest.link, rest.linked = tid, 1
    return rec


def _task(base: JobSpec, tid: int, index: int) -> JobSpec:
    return base._replace(
        id=tid,
        array_index=index,
        stdout=task_path(base.stdout, tid, index),
        stderr=task_path(base.stderr, tid, index),
    )


# -- acting on a whole array, or on tasks not made yet ------------------------------------------------------
MAX_RUNS = 100_000  # runs of indices a record may be cut into by tasks named on their own (each act costs them)


def _scattered(rest: Rest, *parts: Indices) -> bool:
    if sum(len(p.runs) for p in parts) <= MAX_RUNS:
        return False
    log.warning("array %d: tasks named on their own would cut it into more than %d runs: not done", rest.aid, MAX_RUNS)
    return True


def hold(ctx: Ctx, rest: Rest, which: Indices | None, reason: str) -> bool:
    """Hold the pending tasks ``which`` (None: all) of the record; whether any was."""
    moved = rest.pending if which is None else rest.pending.only(which)
    if not moved:
        return False
    pending, held = rest.pending.without(moved), rest.held.union(moved)
    if _scattered(rest, pending, held):
        return False
    rest.pending, rest.held, rest.reason = pending, held, reason
    save(ctx, rest)
    return True


def release(ctx: Ctx, rest: Rest, which: Indices | None) -> bool:
    """Release the held tasks ``which`` (None: all) of the record; whether any was."""
    moved = rest.held if which is None else rest.held.only(which)
    if not moved:
        return False
    held, pending = rest.held.without(moved), rest.pending.union(moved)
    if _scattered(rest, pending, held):
        return False
    rest.held, rest.pending = held, pending
    save(ctx, rest)
    return True


def cancel(ctx: Ctx, rest: Rest, which: Indices | None, now: float) -> int:
    """Cancel the tasks ``which`` (None: all) of the record at ``now``: they are never made; how many were."""
    gone = rest.pending.union(rest.held) if which is None else rest.pending.union(rest.held).only(which)
    if not gone:
        return 0
    pending, held, cancelled = rest.pending.without(gone), rest.held.without(gone), rest.cancelled.union(gone)
    if _scattered(rest, pending, held, cancelled):
        return 0
    rest.pending, rest.held, rest.cancelled, rest.cancel_time = pending, held, cancelled, now
    save(ctx, rest)
    log.info("array %d: %d tasks not started cancelled", rest.aid, len(gone))
    return len(gone)


def alter(ctx: Ctx, rest: Rest, job: JobSpec) -> None:
    """The tasks not made yet of the record take ``job`` (the altered spec of the array's tasks)."""
    rest.job = job._replace(id=rest.aid, array_index=None, script="", stdout=rest.job.stdout, stderr=rest.job.stderr)
    row = rest.row()
    ctx.table.begin()
    ctx.db.update_array(rest.aid, name=row["name"], ncpus=row["ncpus"], walltime=row["walltime"], spec=row["spec"])


def members(jobs: Mapping[int, Rec], arrays: list[int]) -> list[int]:
    """The ids of the live tasks of ``arrays`` among ``jobs`` (the job table's)."""
    want = set(arrays)
    return sorted(r.id for r in jobs.values() if r.array_id in want)


# -- an array named in a dependency -------------------------------------------------------------------------
# The state a dependency on an array's id sees is the whole array's, as Slurm reads a dependency on an array
# job's id ("afterok:12" waits for every task; the highest exit code of the tasks decides afterok and
# afternotok: slurm's doc/html/job_array.shtml, "Job Dependencies"): pending while a task has not started,
# running while one runs, and once all have ended COMPLETED only if every task did (else the worst end).
WORST_FIRST = (JobState.FAILED, JobState.OUT_OF_MEMORY, JobState.TIMEOUT, JobState.CANCELLED)


def whole_states(
    named: set[int], jobs: Mapping[int, Rec], rests: Mapping[int, Rest], db: StateDB, ended: dict[int, str]
) -> dict[int, str]:
    """The state of each array of ``named`` as a whole (see above); ``ended`` keeps that of the arrays whose
    tasks have all ended, read once from the state db (dropped again while a task is live: a requeue)."""
    live: dict[int, list[JobState]] = {}
    for r in jobs.values():
        if r.array_id in named:
            live.setdefault(r.array_id, []).append(r.state)
    out: dict[int, str] = {}
    for aid in named:
        rest = rests.get(aid)
        states = live.get(aid, [])
        if states or (rest is not None and rest.live):
            ended.pop(aid, None)
            waits = (rest is not None and rest.live) or any(s in (JobState.PENDING, JobState.HELD) for s in states)
            out[aid] = (JobState.PENDING if waits else JobState.RUNNING).value
            continue
        if aid not in ended:
            ended[aid] = _ended_state(db, aid)
        out[aid] = ended[aid]
    return out


def _ended_state(db: StateDB, aid: int) -> JobState:
    """COMPLETED if every task of array ``aid`` did (none cancelled before it was made), else the worst end."""
    seen = {row["state"] for row in db.by_spec("array_id", aid, brief=True)}
    if any(Indices.from_text(str(row["cancelled"])) for row in db.array_rests([aid])):
        seen.add(JobState.CANCELLED)
    for s in WORST_FIRST:
        if s in seen:
            return s
    return JobState.COMPLETED
