"""Parent-child job trees on the command side: the parent of a submission, and what gwait, gyield,
gresume and gresume-tree read and write.

Inside a job (``GS_JOBID`` set and ``GS_SPOOL`` naming this spool) a new
submission is a child of that job unless ``--no-parent``; ``--parent ID``
attaches it to another running job of the same user.  The parent must be
running and the submitter's own; a child may not ask for more cores than
the root of its tree has (the tree's cores are allocated to its root).

The commands learn a job's state from the state db: the job table, and the
meta key ``yielded`` the daemon keeps (:mod:`gridsched.daemon.tree`).
Standard library only: this is on gsub's path.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridsched.protocol.jobs import TERMINAL, JobState
from gridsched.protocol.spool import Spool

if TYPE_CHECKING:
    from typing import TypedDict

    from gridsched.protocol.view import JobRow, ViewRow

    class Yielded(TypedDict):
        """What the daemon records of a job that yields its cores (the meta key ``yielded``): the cores
        (canonical list), whether it is getting them back (``resuming``: it waits for the tasks on them), the
        children it waits for (None: all), and since when."""

        cores: str
        resuming: bool
        until: list[int] | None
        since: float


POLL_FIRST, POLL_MAX = 0.05, 1.0  # seconds between looks at the state db: growing, bounded
RUNNING_STATES = (JobState.RUNNING, JobState.STOPPING)


class TreeError(Exception):
    """A request about a job tree that is refused; the message is one line."""


def current_job(spool: Spool | None = None, env: Mapping[str, str] | None = None) -> tuple[Spool, int]:
    """The spool and id of the job this process runs in; :class:`TreeError` outside a job."""
    env = os.environ if env is None else env
    raw = env.get("GS_JOBID")
    if not raw:
        raise TreeError("not inside a job (GS_JOBID is not set): run this from a job script")
    try:
        jid = int(raw)
    except ValueError:
        raise TreeError(f"GS_JOBID={raw!r}: not a job id") from None
    if spool is None:
        root = env.get("GS_SPOOL")
        if not root:
            raise TreeError("not inside a job (GS_SPOOL is not set): run this from a job script")
        spool = Spool(root)
    return spool, jid


def _same_spool(spool: Spool, env: Mapping[str, str]) -> bool:
    root = env.get("GS_SPOOL")
    if not root:
        return False
    try:
        return Path(root).resolve() == spool.root.resolve()
    except OSError:
        return False


def _jobs(spool: Spool, ids: list[int] | None = None) -> dict[int, ViewRow]:
    from gridsched.protocol.view import QueueError, load_jobs  # the queue's reader: only where jobs are read

    try:
        return {j["id"]: j for j in load_jobs(spool, ids)}
    except QueueError as e:
        raise TreeError(str(e)) from None


def root_of(jobs: Mapping[int, JobRow], jid: int) -> int:
    """The root of ``jid``'s tree among ``jobs`` (following ``spec.parent``)."""
    seen = {jid}
    while True:
        p = jobs[jid]["spec"].parent if jid in jobs else None
        if not isinstance(p, int) or p in seen or p not in jobs:
            return jid
        seen.add(p)
        jid = p


def submit_keys(
    spool: Spool,
    ncpus: int,
    uid: int,
    parent: int | None = None,
    no_parent: bool = False,
    recoverable: bool = False,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The spec keys ``parent`` and ``recoverable`` of a submission; :class:`TreeError` if refused."""
    env = os.environ if env is None else env
    if parent is not None and no_parent:
        raise TreeError("--parent and --no-parent exclude each other")
    out: dict[str, Any] = {}
    if recoverable:
        out["recoverable"] = True
    if no_parent:
        return out
    if parent is None:
        raw = env.get("GS_JOBID", "")
        if not raw or not _same_spool(spool, env):
            return out
        try:
            parent = int(raw)
        except ValueError:
            return out
        what = f"parent {parent} (this job, GS_JOBID)"
    else:
        what = f"parent {parent}"

    jobs = _jobs(spool)
    job = jobs.get(parent)
    if job is None:
        raise TreeError(f"{what}: no such job")
    if uid != 0 and job.get("uid") is not None and job["uid"] != uid:
        raise TreeError(f"{what}: owned by {job.get('user') or job['uid']}, not you")
    if job["state"] in TERMINAL:
        raise TreeError(f"{what}: already {job['state']}, only a running job can be a parent")
    if job["state"] not in RUNNING_STATES:
        raise TreeError(f"{what}: is {job['state']}, only a running job can be a parent")
    top = root_of(jobs, parent)
    have = int(jobs[top]["ncpus"])
    if ncpus > have:
        raise TreeError(f"job can never run: it asks for {ncpus} cores, its tree (root job {top}) has {have}")
    out["parent"] = parent
    return out


def children(spool: Spool, jid: int) -> list[int]:
    """The ids of the jobs whose parent is ``jid`` (those not yet taken in by the daemon too)."""
    return sorted(j["id"] for j in _jobs(spool).values() if j["spec"].parent == jid)


def live_children(spool: Spool, jid: int) -> list[int]:
    """The ids of the children of ``jid`` that have not ended (those not yet taken in by the daemon too)."""

    return sorted(j["id"] for j in _jobs(spool).values() if j["spec"].parent == jid and j["state"] not in TERMINAL)


def descendants(jobs: Mapping[int, JobRow], jid: int) -> list[int]:
    """The ids below ``jid`` among ``jobs``."""
    kids: dict[int, list[int]] = {}
    for j in jobs.values():
        p = j["spec"].parent
        if isinstance(p, int):
            kids.setdefault(p, []).append(j["id"])
    out: list[int] = []
    todo = [jid]
    while todo:
        for c in kids.get(todo.pop(), ()):
            if c not in out and c != jid:
                out.append(c)
                todo.append(c)
    return sorted(out)


def yielded(spool: Spool) -> dict[int, Yielded]:
    """The yielding jobs as the daemon last recorded them: id -> {cores, resuming, until, since}."""
    if not spool.db.exists():
        return {}
    import sqlite3

    from gridsched.protocol.state import StateDB

    try:
        db = StateDB(spool.db)
        try:
            raw = db.meta().get("yielded") or "{}"
        finally:
            db.close()
        return {int(k): v for k, v in json.loads(raw).items()}
    except (sqlite3.Error, ValueError, AttributeError) as e:
        raise TreeError(f"cannot read {spool.db}: {e}") from None


def poll(cond: Any, timeout: float | None = None) -> bool:
    """Call ``cond`` with growing, bounded pauses until it is true (True) or ``timeout`` seconds pass (False)."""
    delay = POLL_FIRST
    deadline = None if timeout is None else time.monotonic() + timeout
    while not cond():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 1.5, POLL_MAX)
    return True


def wait_ended(spool: Spool, ids: list[int], timeout: float | None = None) -> dict[int, JobState] | None:
    """Block until every job of ``ids`` has ended; id -> final state (None when ``timeout`` ran out)."""
    from gridsched.protocol.view import load_jobs

    final: dict[int, JobState] = {}

    def done() -> bool:
        for j in load_jobs(spool, [i for i in ids if i not in final]):
            if j["state"] in TERMINAL:
                final[j["id"]] = j["state"]
        return len(final) == len(ids)

    return final if poll(done, timeout) else None


def wait_resumed(spool: Spool, jid: int, request: Path, timeout: float | None = None) -> bool:
    """Block until the daemon has taken ``request`` in and ``jid`` no longer yields (its cores are back)."""
    return poll(lambda: not request.exists() and jid not in yielded(spool), timeout)
