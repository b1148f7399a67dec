"""Job arrays in the daemon: one job per index, taken in a slice per turn, and the ``%MAX`` throttle.

A submitted array (spec key ``array``) is taken in as one job per index.  It
is checked whole when its request is read (:mod:`.handlers.submit`): it is
refused whole, or accepted and then taken in whole.  The first task keeps
the request's job id (which is the array's id) and is taken in at once (a
small array's other tasks with it, up to :data:`WHOLE_PER_TURN` tasks a turn);
the others follow a slice per turn of the loop (:mod:`.slices`), each slice
with the new ids it needs, claimed then (:meth:`gridsched.protocol.spool.Spool.claim_ids`),
consecutive unless another submission took an id between.  Each task's
spec gets ``array_id``, ``array_index``, ``array_max`` (with ``%MAX``),
``array_range`` and its own output paths (``%j``, ``%a`` filled in); its
``GS_ARRAY_*`` variables (and the Slurm, PBS and Grid Engine names with
``[compat] env``) are computed from them at each start
(:func:`gridsched.job.env.environment`).  The tasks share one script file (hard links; a new file for each
:data:`LINKS_PER_SCRIPT` tasks, below the file system's limit on links).  After
that a task is a job like any other: it is cancelled, held, started and
accounted on its own.

While an array is taken in (an :class:`Intake`), its progress is kept in the
state db (meta ``intake-ID``: the tasks taken in, the task whose script the
next ones link to), written in the transaction of each slice, and its request
stays in ``incoming/``: a daemon stopped or killed meanwhile reads the request
again at its next start and goes on from the last committed slice (never
making a task twice or leaving one out).  A hold or release of the array
meanwhile applies to the tasks still to come; a cancel stops the intake (the
tasks still to come are never made) and cancels those taken in.

The throttle: at most ``array_max`` tasks of an array run at once.  Each
task's ``Waiting`` carries its array and ``array_max``; the core
(:mod:`gridsched.core.eligible`) offers only the first ``array_max`` minus
running tasks in queue order to the policy.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gridsched.protocol.arrays import parse, task_path
from gridsched.protocol.jobs import JobState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gridsched.daemon.loop import Daemon
    from gridsched.daemon.slices import Budget
    from gridsched.daemon.table import Rec
    from gridsched.protocol.requests import JobSpec

log = logging.getLogger("gschedd")

# tasks that share one script file by hard links: a file system allows only so many links to a file (65,000 on
# ext4), so each run of this many tasks starts from a file of its own
LINKS_PER_SCRIPT = 10_000
META = "intake-"  # the state db's meta key of an array being taken in: META + its id
CLAIM = 256  # ids claimed at a time while a slice is taken in (those left over are let go at once)
RETRY = 1.0  # seconds before an intake that could not write its tasks tries again
OFFER_EVERY = 1.0  # seconds between the scheduling passes the new tasks of an array ask for while it is taken in
WHOLE_PER_TURN = 256  # tasks of small arrays a turn takes in whole with their requests (Daemon.whole_left)


@dataclass(slots=True)
class Intake:
    """An array being taken in: its checked spec and how far it has come."""

    name: str  # its request file, in incoming/ until the last task is committed
    first: int  # the array's id (its first task's)
    uid: int
    user: str
    job: JobSpec  # the job every task starts from (without its ``array`` and ``script``)
    script: str
    indices: tuple[int, ...]
    text: str  # the range, for the log
    max_running: int | None
    state: JobState  # what its tasks are made in: PENDING, HELD, or FAILED (with ``reason``)
    reason: str
    done: int = 0  # tasks taken in
    link: int | None = None  # the task whose script the next tasks of its run link to
    last: int = 0  # the last task's id
    wait_until: float = 0.0  # after a failed write: not before this (time.monotonic)
    trouble: int | None = None  # the errno last logged
    cost: float = 0.001  # seconds a task takes to be taken in, as measured (how many ids a slice claims)
    offered: float = 0.0  # when its tasks last asked for a scheduling pass (time.monotonic)
    started: float = field(default_factory=time.monotonic)

    def progress(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "done": self.done,
                "link": self.link,
                "last": self.last,
                "state": self.state.value,
                "reason": self.reason,
            }
        )


def _intake(d: Daemon, name: str, job: JobSpec, user: str, state: JobState, reason: str) -> Intake:
    assert job.array is not None
    spec = parse(job.array, 1 << 62)  # checked against jobs.max_array_size when the request was read
    return Intake(
        name=name,
        first=job.id,
        uid=job.uid,
        user=user,
        job=job._replace(array=None, script=""),
        script=job.script,
        indices=spec.indices,
        text=spec.text,
        max_running=spec.max_running,
        state=state,
        reason=reason,
    )


def take_in(d: Daemon, name: str, job: JobSpec, user: str, state: JobState, reason: str) -> None:
    """Begin to take in a checked array submission: its progress recorded, its first task taken in now, the
    others a slice per turn (:func:`advance`)."""
    from gridsched.daemon.slices import Budget

    it = _intake(d, name, job, user, state, reason)
    start(d, it)
    # a small array is taken in whole with its request (all its tasks show at once), while the small arrays of
    # one turn together stay within WHOLE_PER_TURN tasks; a larger one begins with its first task alone, so the
    # other requests of this turn are served too
    n = len(it.indices)
    whole = n <= d.whole_left
    if whole:
        d.whole_left -= n
    advance(d, it, Budget(limit=n if whole else 1))


def resume(d: Daemon, name: str, job: JobSpec, user: str) -> bool:
    """Go on taking in the array of a request read again after a restart, from the progress its last committed
    slice recorded; False if it was taken in whole (or stopped by a cancel) before."""
    raw = d.db.meta().get(META + str(job.id))
    if raw is None:
        return False
    try:
        got = json.loads(raw)
        it = _intake(d, name, job, user, JobState(got["state"]), str(got["reason"]))
        it.done, it.link, it.last = int(got["done"]), got["link"], int(got["last"])
    except (ValueError, KeyError, TypeError) as e:
        log.error("array %d: its progress cannot be read (%s): taken in no further", job.id, e)
        return False
    log.info("array %d: taken in from task %d of %d on", it.first, it.done, len(it.indices))
    start(d, it)
    return True


def start(d: Daemon, it: Intake) -> None:
    d.intakes[it.first] = it
    d.busy.add(it.name)
    save(d, it)


def save(d: Daemon, it: Intake) -> None:
    """Record the intake's progress in the open transaction (with the rows of the tasks it counts)."""
    d.table.begin()
    d.db.set_meta(META + str(it.first), it.progress())


def stop(d: Daemon, it: Intake, why: str) -> None:
    """End the intake of an array before its last task (a cancel): the tasks still to come are never made."""
    d.intakes.pop(it.first, None)
    d.busy.discard(it.name)
    d.table.begin()
    d.db.del_meta(META + str(it.first))
    d.settling[it.name] = None
    log.info(
        "array %d: %s after %d of its %d tasks were taken in; the other %d are not made",
        it.first,
        why,
        it.done,
        len(it.indices),
        len(it.indices) - it.done,
    )


def _finish(d: Daemon, it: Intake) -> None:
    d.intakes.pop(it.first, None)
    d.busy.discard(it.name)
    d.table.begin()
    d.db.del_meta(META + str(it.first))
    d.settling[it.name] = None  # leaves incoming/ once the last slice is committed and published
    log.info(
        "array %d: %d tasks (%s), job ids %d to %d, taken in in %.2fs",
        it.first,
        len(it.indices),
        it.text,
        it.first,
        it.last,
        time.monotonic() - it.started,
    )


def advance(d: Daemon, it: Intake, budget: Budget) -> None:
    """Take in the array's next tasks within ``budget``.  A write that fails (a full disk) leaves the tasks
    written so far counted and the rest for a later turn; the intake is never given up for it."""
    if it.wait_until > time.monotonic():
        return
    claimed: list[int] = []
    t0, n0 = time.monotonic(), it.done
    dirty = d.dirty
    try:
        while it.done < len(it.indices) and (room := budget.left()) > 0:
            if it.done == 0:
                tid = it.first
            else:
                if not claimed:  # as many as the time left is expected to take in
                    fit = int(budget.time_left() / it.cost) + 1
                    claimed = d.new_ids(max(1, min(CLAIM, len(it.indices) - it.done, room, fit)))
                    claimed.reverse()
                tid = claimed[-1]
            _task(d, it, tid)
            if claimed and claimed[-1] == tid:
                claimed.pop()
            it.done += 1
            it.last = tid
            budget.spend()
        if it.trouble is not None:
            log.info("array %d: tasks are taken in again", it.first)
            it.trouble = None
    except OSError as e:
        it.wait_until = time.monotonic() + RETRY
        if it.trouble != e.errno:
            it.trouble = e.errno
            log.error(
                "array %d: cannot write task %d (%s): its intake waits and tries again",
                it.first,
                it.done,
                e.strerror or e,
            )
    except Exception:  # noqa: BLE001 - a task that cannot be made never stops the daemon; the intake waits
        it.wait_until = time.monotonic() + RETRY
        log.exception("array %d: task %d could not be taken in; tried again later", it.first, it.done)
    finally:
        if claimed:
            d.unclaim(claimed)
    now = time.monotonic()
    if it.done - n0 >= 8:
        it.cost = 0.5 * it.cost + 0.5 * (now - t0) / (it.done - n0)
    if n0 and it.done < len(it.indices) and now - it.offered < OFFER_EVERY:
        d.dirty = dirty  # the tasks of a slice alone ask for a scheduling pass at most every OFFER_EVERY
    elif d.dirty:
        it.offered = now
    if it.done >= len(it.indices):
        _finish(d, it)
    else:
        save(d, it)


def _task(d: Daemon, it: Intake, tid: int) -> None:
    """Write task number ``it.done`` (id ``tid``): its files and its row."""
    k = it.done
    i = it.indices[k]
    task = it.job._replace(
        id=tid,
        array_id=it.first,
        array_index=i,
        array_max=it.max_running,
        stdout=task_path(it.job.stdout, tid, i),
        stderr=task_path(it.job.stderr, tid, i),
        array_range=it.text,
    )
    if k % LINKS_PER_SCRIPT and it.link is not None:
        try:
            d.take_in(task, it.user, it.state, it.reason, {"script": d.spool.job_dir(it.link) / "script"})
            return
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EMLINK):
                raise
            # the file the run links to is gone (its task's directory was removed) or has all the links it may
            # have: a new run starts here
    d.take_in(task, it.user, it.state, it.reason, {"script": it.script})
    it.link = tid


def members(jobs: Mapping[int, Rec], arrays: list[int]) -> list[int]:
    """The ids of the live tasks of ``arrays`` among ``jobs`` (the job table's)."""
    want = set(arrays)
    return sorted(r.id for r in jobs.values() if r.array_id in want)
