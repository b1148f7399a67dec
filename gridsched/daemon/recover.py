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

The daemon signals a job (walltime, cancel, preemption) a moment before the
job table records why.  A job that ended of such a signal while the daemon
was down, with no reason recorded, is given the reason the signal itself
tells: a cancel request still waiting in the spool, a walltime passed, the
checkpoint exit status (or signal) of a ``signal``-mode job, SIGTERM for a
``requeue``-mode job.  So a crash in that moment neither fails a job that was
being checkpointed nor turns a timeout or a cancel into a failure.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridsched.daemon import confine, intake, jobtmp, outcome, procs, transitions
from gridsched.protocol.jobs import EXIT_CHECKPOINTED, Checkpoint, JobState, Stop

if TYPE_CHECKING:
    from gridsched.core.topology import Device
    from gridsched.daemon.spawn import Processes, Stub
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.config import Config
    from gridsched.protocol.spool import Spool
    from gridsched.protocol.state import StateDB

log = logging.getLogger("gschedd")


@dataclass(frozen=True)
class Ctx:
    """What finding the jobs again sees of the daemon: the job table, the state db, the spool, the
    configuration in force, the machine's devices, the executor of the jobs' processes, the senders of requests
    (whose cancels may wait in the spool), what deciding an outcome sees, and how a job's shepherd is watched
    (its pid and start ticks; whether it could be) and its segment's exit read (None if it wrote none)."""

    table: JobTable
    db: StateDB
    spool: Spool
    cfg: Config
    devices: tuple[Device, ...]
    ex: Processes | Stub
    senders: intake.Senders
    outcome: outcome.Ctx
    watch: Callable[[Rec, int, int | None], bool]
    read_exit: Callable[[Rec], dict[str, Any] | None]


LIVE = [s.value for s in (JobState.PENDING, JobState.HELD, JobState.RUNNING, JobState.STOPPING, JobState.SUSPENDED)]


def recover(ctx: Ctx, now: float) -> bool:
    """Find every live job of the table again (``now``: when a record that cannot be read ends); whether what
    a scheduling pass sees changed (a job ended or went back to the queue)."""
    from gridsched.daemon.table import Rec

    changed = False
    adopted = collected = requeued = 0
    cancels: dict[int, set[int]] | None = None
    for row in ctx.db.jobs(states=LIVE):
        try:
            rec = Rec.from_row(row, ctx.devices, memory=ctx.table.memory)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            # a row no request can make any more (written by an older version): the job ends, the daemon runs
            ctx.table.begin()
            why = f"its record cannot be read ({type(e).__name__}: {str(e)[:200]})"
            transitions.unreadable(ctx.db, row["id"], now, why)
            log.error("job %s: its record cannot be read; marked FAILED", row.get("id"))
            continue
        ctx.table.share(rec)
        ctx.table.jobs[rec.id] = rec
        if rec.state is JobState.PENDING:
            ctx.table.enqueue(rec)
            continue
        if rec.state is JobState.HELD:
            continue
        if rec.state is JobState.SUSPENDED:
            ctx.table.enqueue(rec)
        jdir = ctx.spool.job_dir(rec.id)
        result = ctx.read_exit(rec)
        if result is not None:
            if cancels is None:
                cancels = intake.pending_cancels(ctx.spool, ctx.senders)
            _unrecorded_stop(ctx, rec, result, cancels)
            if outcome.finish(ctx.outcome, rec, result):
                changed = True
            collected += 1
            continue
        info = ctx.ex.pid_info(jdir, rec.segment)
        if info is None:
            # committed as started, never forked: it did not run
            if rec.state is not JobState.SUSPENDED:
                jobtmp.remove_left([s for s in rec.segments if "end" not in s], rec.uid)
                ctx.ex.unstarted(str(jdir), rec.segment)  # cgroups made before a fork that never armed
                rec.segments = [s for s in rec.segments if "end" in s]
                rec.segment -= 1
                if rec.segment == 0:
                    rec.first_start = None
                    rec.restarts = 0
                elif rec.restarts:
                    rec.restarts -= 1
                transitions.requeued(rec)
                rec.start = None
                rec.cores = ()
                rec.set_devices((), ())
                rec.stop = None
                rec.shepherd = rec.ticks = None  # it died with the daemon: a cancel ends the job at once
                ctx.table.enqueue(rec)
                ctx.table.save(rec)
                requeued += 1
            continue
        if ctx.ex.alive(info["pid"], info.get("ticks")) and ctx.watch(rec, info["pid"], info.get("ticks")):
            adopted += 1
            continue
        result = ctx.read_exit(rec)  # it may have ended just now
        if result is not None:
            if cancels is None:
                cancels = intake.pending_cancels(ctx.spool, ctx.senders)
            _unrecorded_stop(ctx, rec, result, cancels)
        else:
            listed = info.get("cgroups")
            cgroups: list[Any] = listed if isinstance(listed, list) else []
            for path in {info.get("cgroup"), info.get("devcgroup"), *cgroups}:  # its shepherd was killed first
                if confine.valid(path):
                    ctx.ex.remove_cgroup(str(path))
        rec.shepherd = None
        if outcome.finish(ctx.outcome, rec, result):
            changed = True
        collected += 1
    if adopted or collected or requeued:
        log.info(
            "recovered: %d running jobs adopted, %d endings collected, %d starts undone", adopted, collected, requeued
        )
    return changed


def _unrecorded_stop(ctx: Ctx, rec: Rec, result: dict[str, Any], cancels: dict[int, set[int]]) -> None:
    """Give ``rec`` the reason it was stopped for, if the daemon signalled it and died before saying why."""
    if rec.stop is not None or rec.state is not JobState.RUNNING or result.get("error"):
        return
    code, sig = result.get("exit_code"), result.get("signal")
    checkpointed = rec.checkpoint is Checkpoint.SIGNAL and sig is None and code == EXIT_CHECKPOINTED
    if sig is None and not checkpointed:
        return  # it ended by itself
    end = float(result.get("end", 0.0))
    ckpt_sig = procs.SIGNALS.get(ctx.cfg.checkpoint_signal, signal.SIGUSR1)
    if sig is not None and cancels.get(rec.id, set()) & {0, rec.uid}:
        rec.stop = Stop.CANCEL
    elif sig is not None and rec.deadline is not None and end >= (rec.due(end, ctx.cfg.max_walltime) or rec.deadline):
        rec.stop = Stop.TIMEOUT
    elif (
        checkpointed
        or (rec.checkpoint is Checkpoint.SIGNAL and sig == ckpt_sig)
        or (rec.checkpoint is Checkpoint.REQUEUE and sig == signal.SIGTERM)
    ):
        transitions.stopping(rec, Stop.PREEMPT)
        rec.preemptions += 1
    else:
        return
    log.info("job %d ended while the daemon was down, stopped for %s before that was recorded", rec.id, rec.stop)
