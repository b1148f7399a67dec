"""gstat's view of job arrays and splittable jobs.

Without ``-t/--tasks`` the tasks of an array are folded into one row: its id
is ``ARRAYID_[RANGE%MAX]``, its state the most active one among its tasks
(RUNNING, STOPPING, SUSPENDED, PENDING, HELD; then COMPLETED when every task
completed, else FAILED, TIMEOUT or CANCELLED), and its note the number of
tasks in each state.  A splittable job's note counts its sub-tasks: done,
running, failed, timed out (killed at their own time) and left, from the
results file each run of sub-tasks writes (:mod:`gridsched.job.subtasks`).
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gridsched.core import cpuset
from gridsched.protocol.jobs import ACTIVE, WAITING, JobState

if TYPE_CHECKING:
    from gridsched.protocol.view import ViewRow as Row

ORDER = (JobState.RUNNING, JobState.STOPPING, JobState.SUSPENDED, JobState.PENDING, JobState.HELD)
ENDED = (JobState.FAILED, JobState.TIMEOUT, JobState.CANCELLED, JobState.OUT_OF_MEMORY)


def array_state(states: Counter[JobState]) -> JobState:
    for s in ORDER:
        if states.get(s):
            return s
    if set(states) <= {JobState.COMPLETED}:
        return JobState.COMPLETED
    return next(s for s in ENDED if states.get(s))


def _counts(states: Counter[JobState]) -> str:
    order = [*ORDER, JobState.COMPLETED, *ENDED]
    return ", ".join(f"{states[s]} {s.lower()}" for s in order if states.get(s))


def _cores(tasks: list[Row]) -> str:
    used: set[int] = set()
    for t in tasks:
        if t.get("cores") and t["state"] in ACTIVE:
            used |= cpuset.parse(t["cores"])
    return cpuset.format(used)


def fold(jobs: list[Row]) -> list[Row]:
    """``jobs`` with each array's tasks replaced by one row (at the place of its first task)."""
    groups: dict[int, list[Row]] = {}
    for j in jobs:
        aid = j["spec"].array_id
        if aid is not None:
            groups.setdefault(aid, []).append(j)
    out: list[Row] = []
    for j in jobs:
        spec = j["spec"]
        aid = spec.array_id
        if aid is None:
            if spec.array is not None:  # submitted, not yet taken in
                j = {**j, "label": f"{j['id']}_[{spec.array}]", "note": "array, not yet taken in"}
            out.append(j)
            continue
        tasks = groups.pop(aid, None)
        if tasks is None:
            continue  # already folded
        states: Counter[JobState] = Counter()
        for t in tasks:
            states[t["state"]] += t.get("count", 1)  # a row of tasks not made yet counts them all
        from gridsched.protocol.arrays import Indices  # only when the queue holds an array

        made = Indices.of(int(i) for t in tasks if (i := t["spec"].array_index) is not None)
        for t in tasks:
            if t.get("unmade"):
                made = made.union(Indices.from_text(t["unmade"]))
        rng = made.text
        mx = spec.array_max
        row = tasks[0].copy()
        row["id"] = aid
        row["state"] = array_state(states)
        row["label"] = f"{aid}_[{rng}{'' if mx is None else f'%{mx}'}]"
        row["cores"] = _cores(tasks)
        row["note"] = _counts(states)
        row["predicted_start"] = None
        row["start_time"] = None
        row["elapsed"] = 0.0
        row["backfilled"] = False
        row["preemptions"] = 0
        row["restarts"] = 0
        out.append(row)
    return out


def label_tasks(jobs: list[Row]) -> list[Row]:
    """``jobs`` with each array task shown as ``ARRAYID_INDEX`` (gstat -t)."""
    out = []
    for j in jobs:
        spec = j["spec"]
        if j.get("unmade"):  # tasks not made yet: one row for them all
            j = {**j, "label": f"{spec.array_id}_[{j['unmade']}]", "note": f"{j['count']} tasks not started yet"}
        elif spec.array_id is not None:
            j = {**j, "label": f"{spec.array_id}_{spec.array_index}"}
        out.append(j)
    return out


RESULTS = "gridsched-subtasks.jsonl"  # written by each run of sub-tasks (gridsched.job.subtasks)
LIVE = (JobState.RUNNING, JobState.STOPPING, JobState.SUSPENDED)


def results(job_dir: Path | None) -> dict[int, tuple[str, int]] | None:
    """Each sub-task's last event in a job's results file and how many times it was run again (None: no
    file to read)."""
    if job_dir is None:
        return None
    out: dict[int, tuple[str, int]] = {}
    try:
        text = _read_user_file(job_dir / "checkpoint", RESULTS)
    except OSError:
        return None
    for line in text.splitlines():
        try:
            ev = json.loads(line)
            i, what, k = int(ev["task"]), str(ev["event"]), int(ev.get("try", 0))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            continue
        if what in ("start", "done", "failed", "timeout"):
            out[i] = (what, k)
    return out


MAX_RESULTS = 1 << 22  # bytes of a results file read at most (a run writes two short lines a sub-task)


def _read_user_file(folder: Path, name: str) -> str:
    """The text of ``folder/name``, a file the job's user wrote, read without following a link at either
    step, and only if it is a regular file (an admin's gstat must not block on a FIFO a user planted, or
    read what a link points at); at most :data:`MAX_RESULTS` bytes."""
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{name}: not a regular file")
        chunks, left = [], MAX_RESULTS
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _tasks_of(row: Row) -> list[int]:
    spec = row["spec"]
    if spec.split_of is not None:
        return [i for c in spec.split_chains for i in c]
    sp = spec.split or {}
    left = sp.get("left")
    return list(left) if isinstance(left, list) else list(range(int(sp.get("n", 0))))


def split_counts(job: Row, pieces: list[Row], job_dir: Callable[[int], Path] | None = None) -> dict[str, int]:
    """Sub-tasks of splittable job ``job`` done, failed, timed out (at their own time), running and left, and
    the runs again (``retried``), from its row, its pieces' rows and their results files (``job_dir``).

    A sub-task of a job or piece that is running counts as running once it has started, else as left;
    one of a job or piece that ended without an outcome for it (cancelled, out of time) counts as failed.
    Without a results file, every sub-task of the job or piece counts by its state, as before a run.
    """
    out = {"done": 0, "failed": 0, "timeout": 0, "running": 0, "left": 0, "retried": 0}
    for row in (job, *pieces):
        st = row["state"]
        tasks = _tasks_of(row)
        waiting = row is job and st in WAITING
        got = results(job_dir(int(row["id"]))) if job_dir is not None else None
        for i in tasks:
            what, k = got.get(i, ("", 0)) if got is not None else ("", 0)
            out["retried"] += k
            if what in ("done", "failed", "timeout"):
                out[what] += 1
            elif waiting:
                out["left"] += 1
            elif st in LIVE or st == JobState.PENDING:
                out["running" if what == "start" or got is None else "left"] += 1
            elif st == JobState.COMPLETED:
                out["done"] += 1
            else:
                out["failed"] += 1
    return out


def annotate(jobs: list[Row], every: list[Row], job_dir: Callable[[int], Path] | None = None) -> None:
    """Give each splittable job in ``jobs`` its sub-task counts (``note``, ``split_counts``) from ``every`` row
    and, where they can be read, the results files in ``job_dir(id)``."""
    pieces: dict[int, list[Row]] = {}
    for j in every:
        of = j["spec"].split_of
        if of is not None:
            pieces.setdefault(of, []).append(j)
    for j in jobs:
        spec = j["spec"]
        if spec.split is not None:
            c = split_counts(j, pieces.get(j["id"], []), job_dir)
            j["split_counts"] = c
            j["note"] = (
                f"sub-tasks {c['done']} done, {c['running']} running, "
                + (f"{c['failed']} failed, " if c["failed"] else "")
                + (f"{c['timeout']} timed out, " if c["timeout"] else "")
                + f"{c['left']} left"
                + (f" ({c['retried']} runs again)" if c["retried"] else "")
            )
        elif spec.split_of is not None:
            j["note"] = f"piece of {spec.split_of}"


def planned_rows(job: Row) -> list[Row]:
    """A pending splittable job as ``gstat --start`` lists it: one row per planned start of its sub-tasks
    (``ID sub-tasks 0-3``), or the job's own row where nothing is planned."""
    from gridsched.protocol.state import planned_runs

    starts: dict[float, set[int]] = {}
    for a, b, s, _ in planned_runs(str(job.get("planned") or "")):
        starts.setdefault(s, set()).update(range(a, b + 1))
    if job["state"] != JobState.PENDING or not starts:
        return [job]
    return [
        cast("Row", {**job, "label": f"{job['id']} sub-tasks {cpuset.format(ix)}", "predicted_start": s})
        for s, ix in sorted(starts.items())
    ]


def _planned(job: Row) -> list[tuple[float, float, set[int]]]:
    """A pending splittable job's planned sub-tasks grouped by planned start and end, in order ([] where
    nothing is planned or the job is not pending)."""
    from gridsched.protocol.state import planned_runs

    if job["state"] != JobState.PENDING:
        return []
    groups: dict[tuple[float, float], set[int]] = {}
    for a, b, s, e in planned_runs(str(job.get("planned") or "")):
        groups.setdefault((s, e), set()).update(range(a, b + 1))
    return [(s, e, ix) for (s, e), ix in sorted(groups.items())]


def planned_record(job: Row) -> list[dict[str, object]] | None:
    """gstat --json's ``planned`` of a pending splittable job: its sub-tasks by planned start and end,
    ``[{"start", "end", "tasks"}, ...]`` (``tasks`` in the range form, ``0-3,8``); None where nothing is
    planned."""
    return [{"start": s, "end": e, "tasks": cpuset.format(ix)} for s, e, ix in _planned(job)] or None


def planned_text(job: Row, when: Callable[[float], str]) -> str:
    """gstat -f's ``planned`` line of a pending splittable job: its sub-tasks by planned start and end."""
    return "; ".join(f"{cpuset.format(ix)} {when(s)} to {when(e)}" for s, e, ix in _planned(job))
