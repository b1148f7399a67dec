"""Finding every job again when the daemon starts.

A job the table says is running (or stopping, or suspended) is in one of
three conditions, told apart by the files its shepherd writes:

* ``seg-N.exit`` exists: it ended while the daemon was down; its exit status
  is collected as if the daemon had watched it end.
* ``seg-N.pid`` names a live shepherd: the job is adopted (watched through a
  pidfd) and goes on as if nothing had happened.
* neither: the daemon died between committing the start and forking the
  shepherd, so not one instruction of the job ran: it is pending again.

A shepherd that is gone without an exit file was killed from outside; the
job's outcome is unknown and it ends FAILED with that reason.  Nothing is
started twice.
"""

from __future__ import annotations

import bisect
import json
import logging
from typing import TYPE_CHECKING

from ..jobs import JobState
from . import launch, procs

if TYPE_CHECKING:
    from .main import Daemon

log = logging.getLogger("gschedd")

LIVE = [s.value for s in (JobState.PENDING, JobState.HELD, JobState.RUNNING, JobState.STOPPING, JobState.SUSPENDED)]


def recover(d: "Daemon") -> None:
    from .main import Rec

    adopted = collected = requeued = 0
    for row in d.db.jobs(states=LIVE):
        rec = Rec.from_row(row)
        d.jobs[rec.id] = rec
        if rec.state is JobState.PENDING:
            bisect.insort(d.queue, rec.id)
            continue
        if rec.state is JobState.HELD:
            continue
        if rec.state is JobState.SUSPENDED:
            bisect.insort(d.queue, rec.id)
        jdir = d.spool.job_dir(rec.id)
        result = d.read_exit(rec)
        if result is not None:
            d.finish(rec, result)
            collected += 1
            continue
        try:
            info = json.loads(launch.pid_file(jdir, rec.segment).read_text())
        except (OSError, ValueError):
            info = None
        if info is None:
            # committed as started, never forked: it did not run
            if rec.state is not JobState.SUSPENDED:
                rec.segments = [s for s in rec.segments if "end" in s]
                rec.segment -= 1
                if rec.segment == 0:
                    rec.first_start = None
                    rec.restarts = 0
                elif rec.restarts:
                    rec.restarts -= 1
                rec.state = JobState.PENDING
                rec.start = None
                rec.cores = ()
                rec.stop = None
                bisect.insort(d.queue, rec.id)
                d.save(rec)
                requeued += 1
            continue
        rec.pgid = info.get("pgid")
        if procs.alive(info["pid"], info.get("ticks")) and d.watch(rec, info["pid"], info.get("ticks")):
            adopted += 1
            continue
        result = d.read_exit(rec)  # it may have ended just now
        rec.shepherd = None
        d.finish(rec, result)
        collected += 1
    if adopted or collected or requeued:
        log.info("recovered: %d running jobs adopted, %d endings collected, %d starts undone", adopted, collected, requeued)
