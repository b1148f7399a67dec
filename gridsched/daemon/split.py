"""Splittable jobs in the daemon: the job, its pieces, and how both run.

A splittable job (``gsub --split N --task-time T -n C``) is one job in the
queue whose spec has ``split`` = ``{"n", "ncpus", "task_time", "left"}``:
``left`` holds the indices of the sub-tasks not yet run or taken out.  Its
``ncpus`` is one wave: ``C`` times as many sub-tasks as fit on the machine
(at most ``left``), its walltime the user's ``-t``.

When the core takes sub-tasks out of it (a ``StartTasks`` decision), they
become a *piece*: a new job (a new id the daemon claims) with the
parent's spec, ``split_of`` (the parent), ``split_chains`` (the chains the
core chose), ``ncpus`` = chains x ``C``, a walltime that ends when the
longest chain would, checkpoint mode ``none``, and output files named after
the parent's with ``.PIECEID`` appended.  It is started at once on the
decision's cores, marked backfilled.  The parent keeps the rest; once
nothing is left it leaves the queue and ends with its last piece:
COMPLETED if every piece completed, FAILED otherwise.  Cancelling the parent
cancels its running pieces.

Sub-tasks that ask for devices (``gsub --split N --gpus-per-task G``: the
spec's ``split`` has ``devices``, one sub-task's asks) make each chain a
piece of its own, holding that chain's devices (the decision's
``devices``): a piece is a job, so it is told of its devices and kept from
the others exactly as any job is (``device_env``, the device cgroup).  The
parent's ``ncpus`` is then one wave of as many sub-tasks as both the
cores and the devices' slots hold, and it asks for that wave's devices.

Both run through :mod:`gridsched.job.subtasks`: the job's ``script`` is a small
stub that starts it, and the user's script is the file ``task-script``; a
piece runs its chains, the parent (started whole) runs its ``left``
sub-tasks on ``ncpus / C`` slots of ``C`` cores, a new one as soon as a slot
is free (waves).  Each sub-task is a run of the user's script with
``GS_TASK_ID`` set.
"""

from __future__ import annotations

import logging
import math
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gridsched.core.types import SplitInfo, Start, StartTasks
from gridsched.protocol.arrays import ArrayError, parse
from gridsched.protocol.jobs import Checkpoint, JobState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gridsched.core.devices import DeviceAsk
    from gridsched.core.topology import Device
    from gridsched.daemon.jobfiles import JobFiles
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.requests import JobSpec, Split
    from gridsched.protocol.specview import SplitTask
    from gridsched.protocol.spool import Spool
    from gridsched.protocol.state import StateDB

log = logging.getLogger("gschedd")

STUB = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gridsched.job.subtasks "$@"\n'


def split_info(sp: Split | None) -> SplitInfo | None:
    """The core's view of a splittable job's ``split`` (None: not splittable, or nothing left)."""
    if sp is None or not sp.left:
        return None
    sizes = tuple((t.ncpus, float(t.time)) for t in sp.tasks)
    return SplitInfo(sp.ncpus, float(sp.task_time), sp.left, sizes, sp.devices)


def wave_asks(sp: Split | None, ncpus: int) -> tuple[DeviceAsk, ...]:
    """The devices a wave of ``ncpus`` cores of sub-tasks asks for: one sub-task's times the sub-tasks."""
    if sp is None or not sp.devices:
        return ()
    k = max(1, ncpus // sp.ncpus)
    return tuple(replace(a, count=a.count * k) for a in sp.devices)


def device_wave(asks: tuple[DeviceAsk, ...], devices: tuple[Device, ...]) -> int:
    """How many sub-tasks asking ``asks`` each the machine's devices hold at once (their slots)."""
    from gridsched.core.devices import slots, totals

    have = totals(devices)
    return min((have.get(name, 0) // n for name, n in slots(asks, devices) if n > 0), default=0)


def check(job: JobSpec, max_size: int) -> str | None:
    """Why the array or the split of a checked submission cannot be taken, or None."""
    if job.array is not None and job.split is not None:
        return "an array cannot be splittable too"
    if job.array is not None:
        try:
            parse(job.array, max_size)
        except ArrayError as e:
            return f"array {e}"
        return None
    sp = job.split
    assert sp is not None
    if sp.n > max_size:
        return f"split into {sp.n} sub-tasks, more than jobs.max_array_size ({max_size})"
    if sp.ncpus > job.ncpus or sp.task_time > job.walltime:
        return "a sub-task larger than the job"
    return None


@dataclass(frozen=True)
class Ctx:
    """What the work on splittable jobs sees of the daemon: the job table, the state db, the spool, the
    machine's devices, and how a job is taken in, started and ended and ids are claimed."""

    table: JobTable
    db: StateDB
    spool: Spool
    devices: tuple[Device, ...]
    take_in: Callable[[JobSpec, str, JobState, str, JobFiles | None], Rec | None]
    start: Callable[[Rec, Start, float], None]
    end: Callable[..., None]  # end a job: (rec, state, when, code=..., reason=...)
    new_ids: Callable[[int], list[int]]


def take_in(ctx: Ctx, job: JobSpec, state: JobState, reason: str) -> None:
    """Take in a checked splittable job: its stub, the user's script, every sub-task left."""
    sp = job.split
    assert sp is not None
    ncpus = job.ncpus
    if sp.devices:  # one wave: as many sub-tasks as the cores and the devices hold at once
        k = min(ncpus // sp.ncpus, device_wave(sp.devices, ctx.devices), sp.n)
        ncpus = max(1, k) * sp.ncpus
    # the sizes of its sub-tasks stay in the job table; their arguments are the owner's (private)
    args = tuple(t.args for t in sp.tasks) if sp.tasks else None
    job = job._replace(ncpus=ncpus, split=sp._replace(left=tuple(range(sp.n))), split_args=args)
    ctx.take_in(job, job.user, state, reason, {"script": STUB, "task-script": job.script})


def start_tasks(ctx: Ctx, rec: Rec, st: StartTasks, now: float) -> bool:
    """Carry out a ``StartTasks`` decision: a new piece job for the sub-tasks, started now; the parent keeps
    the rest.  Whether it changed what a scheduling pass sees."""
    sp = rec.split
    if sp is None or rec.state is not JobState.PENDING:
        log.error("plan splits job %d, which is not a pending splittable job", rec.id)
        return False
    taken = set(st.tasks)
    if not taken <= set(sp.left or ()) or len(taken) != len(st.tasks):
        log.error("plan takes sub-tasks %s of job %d, not all of them left", list(st.tasks), rec.id)
        return False
    spec = ctx.table.spec(rec.id)
    c = sp.ncpus
    widths = list(st.widths) or [c] * len(st.chains)
    if len(widths) != len(st.chains):
        log.error("plan splits job %d with %d chains but %d widths", rec.id, len(st.chains), len(widths))
        return False
    if st.devices and (len(st.devices) != len(st.chains) or st.widths or len(st.cores) < c * len(st.chains)):
        log.error("plan splits job %d with devices that do not match its chains", rec.id)
        return False
    if st.devices:  # each chain a piece of its own, with its own devices
        taken = set()
        for i, ch in enumerate(st.chains):
            n = len(ch) * float(sp.task_time)
            one = StartTasks(st.job, ch, st.cores[i * c : (i + 1) * c], (ch,), min(st.end, now + n))
            if not _piece(ctx, rec, spec, one, [c], now, st.devices[i]):
                break
            taken.update(ch)
        if not taken:
            return False
    elif not _piece(ctx, rec, spec, st, widths, now, ()):
        return False
    rec.split = sp = sp._replace(left=tuple(i for i in sp.left or () if i not in taken))
    rec.spec = rec.job._replace(split=sp)
    rec.ncpus = min(rec.ncpus, _wave(sp)) or rec.ncpus
    if sp.devices:
        rec.dev_asks = wave_asks(sp, rec.ncpus)
        from gridsched.core.devices import slots

        rec.dev_slots = slots(rec.dev_asks, ctx.devices)
    rec._waiting = None
    ctx.table.begin()
    ctx.db.update(rec.id, spec=rec.job.stored()[0], ncpus=rec.ncpus)
    if not sp.left:
        ctx.table.dequeue(rec)
        rec.reason = "every sub-task runs in pieces"
        ctx.table.save(rec, reason=rec.reason)
    ctx.table.forecast_dirty = True
    return True  # what a scheduling pass sees changed


def _piece(
    ctx: Ctx,
    rec: Rec,
    spec: JobSpec,
    st: StartTasks,
    widths: list[int],
    now: float,
    devices: tuple[tuple[str, int], ...],
) -> bool:
    """Start the sub-tasks of ``st`` as one new piece job of ``rec`` (holding ``devices``); False if it
    could not be taken in."""
    sp = rec.split
    assert sp is not None
    c = sp.ncpus
    pid = ctx.new_ids(1)[0]
    task: SplitTask = {"n": sp.n, "ncpus": c, "task_time": sp.task_time}
    if sp.retries:
        task["retries"] = sp.retries
    piece_args = None
    if sp.tasks:  # the sizes and arguments of its own sub-tasks only
        task["tasks"] = {str(i): [sp.tasks[i].ncpus, sp.tasks[i].time] for i in st.tasks}
        args = spec.split_args or ()
        piece_args = tuple((i, args[i]) for i in st.tasks if i < len(args))
    piece = spec._replace(
        id=pid,
        ncpus=sum(widths),
        walltime=max(1, math.ceil(st.end - now)),
        checkpoint=Checkpoint.NONE,
        hold=False,
        depend="",
        split=None,
        split_of=rec.id,
        split_chains=tuple(tuple(ch) for ch in st.chains),
        split_widths=tuple(widths),
        split_task=task,
        split_args=None,
        piece_args=piece_args,
        stdout=f"{spec.stdout}.{pid}",
        stderr=f"{spec.stderr}.{pid}",
        devices=sp.devices if devices else spec.devices,  # one chain: one sub-task's devices
    )
    pdir = ctx.spool.job_dir(rec.id)
    prec = ctx.take_in(
        piece, rec.user, JobState.PENDING, "", {"script": pdir / "script", "task-script": pdir / "task-script"}
    )
    if prec is None:
        return False
    ctx.start(prec, Start(pid, st.cores, True, None, devices), now)
    log.info(
        "job %d: sub-tasks %s taken out as job %d on cores %s%s",
        rec.id,
        ",".join(map(str, st.tasks)),
        pid,
        ",".join(map(str, st.cores)),
        f" with {','.join(f'{t}:{i}' for t, i in devices)}" if devices else "",
    )
    return True


def _wave(sp: Split) -> int:
    """The cores the sub-tasks left need all at once."""
    if sp.tasks:
        return sum(sp.tasks[i].ncpus for i in sp.left or ())
    return len(sp.left or ()) * sp.ncpus


def pieces_of(jobs: Mapping[int, Rec], ids: list[int]) -> list[int]:
    """The live pieces of the jobs ``ids`` among ``jobs`` (the job table's)."""
    want = set(ids)
    return sorted(r.id for r in jobs.values() if r.split_of in want)


def piece_ended(ctx: Ctx, piece: Rec, end: float) -> None:
    """A piece has ended: its parent ends too if it has nothing left and this was its last live piece."""
    parent = ctx.table.jobs.get(piece.split_of) if piece.split_of is not None else None
    if parent is None or parent.split is None or parent.split.left:
        return
    if any(r.split_of == parent.id for r in ctx.table.jobs.values()):
        return
    states = [r["state"] for r in ctx.db.by_spec("split_of", parent.id)]
    bad = [s for s in states if s is not JobState.COMPLETED]
    ctx.table.dequeue(parent)
    if parent.state is JobState.PENDING or parent.state is JobState.HELD:
        if bad:
            ctx.end(parent, JobState.FAILED, end, reason=f"{len(bad)} of its {len(states)} pieces did not complete")
        else:
            ctx.end(parent, JobState.COMPLETED, end, code=0)
