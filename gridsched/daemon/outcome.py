"""How a job's segment ended, and what follows: back to the queue (a preemption), or its end state.

:func:`finish` is called when a job's shepherd has gone, with the result it
wrote (None if it was killed before it could): a preempted job whose
checkpoint was taken (or that is rerun from the start) goes back to the
queue; otherwise the job ends CANCELLED, TIMEOUT, OUT_OF_MEMORY, FAILED or
COMPLETED, by why it was stopped and how its script exited.  What the
segment's processes used (CPU time, peak memory: measured by the shepherd)
is kept in the segment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridsched.daemon import jobtmp, transitions
from gridsched.daemon.table import Rec
from gridsched.protocol.jobs import EXIT_CHECKPOINTED, Checkpoint, JobState, Stop

if TYPE_CHECKING:
    from gridsched.daemon.table import JobTable

log = logging.getLogger("gschedd")


@dataclass(frozen=True)
class Ctx:
    """What deciding a job's outcome sees of the daemon: the job table, and how a job stops being watched,
    ends (state, when, exit code, signal, reason) and is announced back in the queue."""

    table: JobTable
    unwatch: Callable[[Rec], None]
    end: Callable[[Rec, JobState, float, int | None, int | None, str], None]
    requeued: Callable[[Rec], None]


def close_segment(rec: Rec, end: float, outcome: str) -> None:
    if rec.segments and "end" not in rec.segments[-1]:
        rec.segments[-1]["end"] = end
        rec.segments[-1]["outcome"] = outcome


def finish(ctx: Ctx, rec: Rec, result: dict[str, Any] | None) -> bool:
    """The shepherd of ``rec`` has gone: decide the job's new state from how it ended.  True: a scheduling pass
    is due (always: its cores are free, or it is back in the queue)."""
    ctx.unwatch(rec)
    jobtmp.remove_left(rec.segments, rec.uid)  # its shepherd removes it; one that was killed could not
    now = time.time()
    end = float(result.get("end", now)) if result else now
    ran = max(0.0, end - rec.start) if rec.start is not None else 0.0
    code = result.get("exit_code") if result else None
    sig = result.get("signal") if result else None
    error = result.get("error") if result else None
    why = result.get("reason") if result else None  # e.g. out of memory, from the shepherd
    usage = result.get("usage") if result else None
    if isinstance(usage, dict) and rec.segments and "end" not in rec.segments[-1]:
        rec.segments[-1]["usage"] = usage  # the job's usage sums these (gacct)
    was_queued = rec.state is JobState.SUSPENDED
    if was_queued:
        ctx.table.dequeue(rec)
    rec.kill_at = None
    if result is None:
        close_segment(rec, end, "lost")
        rec.elapsed += ran
        ctx.end(rec, JobState.FAILED, end, None, None, "the job's shepherd was killed; its outcome is unknown")
        return True
    if error:
        close_segment(rec, end, "failed")
        ctx.end(rec, JobState.FAILED, end, code, None, f"could not start: {error.strip()}")
        return True
    if (
        rec.stop is None
        and rec.checkpoint is Checkpoint.SIGNAL
        and code == EXIT_CHECKPOINTED
        and rec.state is JobState.RUNNING
    ):
        # saved its state and asked to be restarted: a preemption whose record a crash of the daemon lost
        transitions.stopping(rec, Stop.PREEMPT)
        rec.preemptions += 1
    if rec.stop in (Stop.PREEMPT, Stop.REQUEUE) and rec.state is JobState.STOPPING:
        checkpointed = rec.checkpoint is Checkpoint.SIGNAL and code == EXIT_CHECKPOINTED
        asked = rec.stop is Stop.REQUEUE  # grequeue: back to the queue however it ended
        if checkpointed or rec.checkpoint is Checkpoint.REQUEUE or sig is not None or asked:
            if checkpointed:
                rec.elapsed += ran
                rec.checkpoints += 1
                outcome = "checkpointed"
            elif rec.checkpoint is Checkpoint.REQUEUE or (asked and rec.checkpoint is not Checkpoint.SIGNAL):
                rec.lost += rec.elapsed + ran
                rec.elapsed = 0.0
                outcome = "requeued"
            else:  # did not save its state in time: restarts from its last checkpoint
                rec.lost += ran
                outcome = "killed before checkpoint"
            close_segment(rec, end, outcome)
            transitions.requeued(rec)
            rec.start = None
            rec.stop = None
            rec.cores = ()
            rec.set_devices((), ())
            rec._waiting = None
            ctx.table.enqueue(rec)
            ctx.table.save(rec)
            log.info("job %d back in the queue (%s)", rec.id, outcome)
            ctx.requeued(rec)
            return True
    rec.elapsed += ran
    if rec.stop is Stop.CANCEL:
        close_segment(rec, end, "cancelled")
        ctx.end(rec, JobState.CANCELLED, end, code, sig, "cancelled")
    elif rec.stop is Stop.RESVEND:
        close_segment(rec, end, "timeout")
        ctx.end(rec, JobState.TIMEOUT, end, code, sig, "reservation ended")
    elif rec.stop is Stop.TIMEOUT:
        close_segment(rec, end, "timeout")
        ctx.end(rec, JobState.TIMEOUT, end, code, sig, "reached its walltime")
    elif rec.stop is Stop.OVERRUN:  # backfilled on its own estimate, overran it while the head waited (core Kill)
        close_segment(rec, end, "timeout")
        ctx.end(rec, JobState.TIMEOUT, end, code, sig, rec.reason or "overran its estimate")
    elif result.get("oom_kills") and code != 0:
        # the kernel killed a process of the job's cgroup for want of memory, and the job did not succeed
        close_segment(rec, end, "out of memory")
        ctx.end(rec, JobState.OUT_OF_MEMORY, end, code, sig, why or "out of memory")
    elif sig is not None:
        close_segment(rec, end, "failed")
        ctx.end(rec, JobState.FAILED, end, None, sig, why or f"killed by signal {sig}")
    elif code == 0:
        close_segment(rec, end, "completed")
        ctx.end(rec, JobState.COMPLETED, end, 0, None, "")
    else:
        close_segment(rec, end, "failed")
        ctx.end(rec, JobState.FAILED, end, code, None, why or f"exit code {code}")
    return True
