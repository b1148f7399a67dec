"""Waiting for a submitted job or array to end (gsub --wait, the Python API): polling the state db, and
the exit status a finished job gives.  Importable from :mod:`gridsched.submission.submit` too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gridsched.protocol.jobs import TERMINAL, JobState
from gridsched.protocol.spool import Spool
from gridsched.submission.errors import SubmitError

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow

WAIT_FIRST, WAIT_MAX = 0.05, 2.0  # seconds between state polls: growing, bounded


def job_exit_status(job: Mapping[str, Any]) -> int:
    """The exit status gsub --wait gives for a finished job (as a shell reports a child)."""
    if job.get("exit_signal"):
        return 128 + int(job["exit_signal"])
    if job.get("exit_code") is not None:
        return int(job["exit_code"])
    return 0 if job["state"] == JobState.COMPLETED else 1


class WaitTimeout(Exception):
    """The job had not ended when the time given ran out."""


def wait_job(spool: Spool, job_id: int, timeout: float | None = None) -> JobRow:
    """Block until job ``job_id`` has ended (polling the state db); its row.

    A submission the daemon refused is a :class:`SubmitError` with its
    reason; no end within ``timeout`` seconds is :class:`WaitTimeout`.
    """
    import sqlite3

    from gridsched.protocol.state import StateDB

    db: StateDB | None = None
    delay = WAIT_FIRST
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            if db is None and spool.db.exists():
                db = StateDB(spool.db)
            if db is not None:
                try:
                    job = db.job(job_id)
                    why = db.id_record(job_id) if job is None else None
                except sqlite3.OperationalError:  # a new daemon has not made its tables yet
                    job = why = None
                if job is not None and job["state"] in TERMINAL:
                    return job
                if why is not None and why["refused"]:
                    raise SubmitError(f"job {job_id}: refused by the daemon: {why['refused']}")
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {job_id} has not ended after {timeout}s")
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 1.5, WAIT_MAX)
    finally:
        if db is not None:
            db.close()


def wait_array(spool: Spool, array_id: int, tasks: int, timeout: float | None = None) -> list[JobRow]:
    """Block until all ``tasks`` tasks of array ``array_id`` have ended; their rows (as :func:`wait_job`)."""
    from gridsched.protocol.arrays import Indices
    from gridsched.protocol.state import StateDB

    first = wait_job(spool, array_id, timeout)  # the first task has the array's id
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = WAIT_FIRST
    while True:
        db = StateDB(spool.db)
        try:
            rows = db.by_spec("array_id", array_id)
            rest = db.array_rests([array_id])  # its tasks not made yet: ended only if cancelled
        finally:
            db.close()
        cancelled = sum(len(Indices.from_text(r["cancelled"])) for r in rest)
        unmade = any(r["pending"] or r["held"] for r in rest)
        if not unmade and len(rows) + cancelled >= tasks and all(r["state"] in TERMINAL for r in rows):
            return rows or [first]
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(f"array {array_id} has not ended after {timeout}s")
        time.sleep(delay)
        delay = min(delay * 1.5, WAIT_MAX)
