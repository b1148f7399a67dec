"""Job arrays in the daemon: one job per index, and the ``%MAX`` throttle.

A submitted array (spec key ``array``) is taken in as one job per index, all
in the transaction that takes the request in: the first task keeps the
request's job id (which is the array's id), the others get new ids the
daemon claims (:meth:`gridsched.spool.Spool.claim_ids`), consecutive unless
another submission took an id between.  Each task's
spec gets ``array_id``, ``array_index``, ``array_max`` (with ``%MAX``), its
own output paths (``%j``, ``%a`` filled in) and, in its environment,
``GS_ARRAY_JOB_ID`` and ``GS_ARRAY_TASK_ID`` (and the Slurm and PBS names
with ``[compat] env``).  The tasks share one script file (hard links; a new file for each
:data:`LINKS_PER_SCRIPT` tasks, below the file system's limit on links).  After
that a task is a job like any other: it is cancelled, held, started and
accounted on its own.

The throttle: at most ``array_max`` tasks of an array run at once.  Each
task's ``Waiting`` carries its array and ``array_max``; the core
(:mod:`gridsched.core.eligible`) offers only the first ``array_max`` minus
running tasks in queue order to the policy.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..arrays import parse, task_path
from ..jobenv import array_env
from ..jobs import JobState

if TYPE_CHECKING:
    from .loop import Daemon

log = logging.getLogger("gschedd")

# tasks that share one script file by hard links: a file system allows only so many links to a file (65,000 on
# ext4), so each run of this many tasks starts from a file of its own
LINKS_PER_SCRIPT = 10_000


def take_in(d: Daemon, job: dict[str, Any], user: str, state: JobState, reason: str) -> None:
    """Take in a checked array submission as one job per index."""
    spec = parse(job.pop("array"), d.cfg.max_array_size)
    script = job.pop("script")
    idx = spec.indices
    first = job["id"]
    ids = [first, *d.new_ids(len(idx) - 1)]
    shared: Any = script
    for k, (tid, i) in enumerate(zip(ids, idx)):
        if k % LINKS_PER_SCRIPT == 0:
            shared = script
        task = dict(job)
        task.update(
            id=tid,
            array_id=first,
            array_index=i,
            stdout=task_path(job["stdout"], tid, i),
            stderr=task_path(job["stderr"], tid, i),
            env={**job["env"], **array_env(first, i, idx, d.cfg.compat_env)},
        )
        if spec.max_running is not None:
            task["array_max"] = spec.max_running
        d.take_in(task, user, state, reason, {"script": shared})
        if shared is script:
            shared = d.spool.job_dir(tid) / "script"
    log.info("array %d: %d tasks (%s), job ids %d to %d", first, len(idx), spec.text, ids[0], ids[-1])


def members(d: Daemon, arrays: list[int]) -> list[int]:
    """The ids of the live tasks of ``arrays``."""
    want = set(arrays)
    return sorted(r.id for r in d.table.jobs.values() if r.array_id in want)
