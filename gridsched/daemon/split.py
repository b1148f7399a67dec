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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gridsched.core.types import SplitInfo, Start, StartTasks
from gridsched.protocol.arrays import ArrayError, parse
from gridsched.protocol.jobs import Checkpoint, JobState

if TYPE_CHECKING:
    from gridsched.core.devices import DeviceAsk
    from gridsched.core.topology import Device
    from gridsched.daemon.loop import Daemon
    from gridsched.daemon.table import Rec

log = logging.getLogger("gschedd")

STUB = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gridsched.job.subtasks "$@"\n'


def split_info(sp: dict[str, Any] | None) -> SplitInfo | None:
    """The core's view of a splittable job's ``split`` spec (None: not splittable, or nothing left)."""
    if not sp or not sp.get("left"):
        return None
    tasks = sp.get("tasks")
    sizes = tuple((int(t[0]), float(t[1])) for t in tasks) if tasks else ()
    return SplitInfo(int(sp["ncpus"]), float(sp["task_time"]), tuple(sp["left"]), sizes, task_asks(sp))


def task_asks(sp: dict[str, Any] | None) -> tuple[DeviceAsk, ...]:
    """The devices each sub-task of the splittable job ``sp`` asks for (``()``: none)."""
    if not sp or not sp.get("devices"):
        return ()
    from gridsched.host.devices import asks_from_spec

    return asks_from_spec(sp["devices"])


def wave_asks(sp: dict[str, Any] | None, ncpus: int) -> tuple[DeviceAsk, ...]:
    """The devices a wave of ``ncpus`` cores of sub-tasks asks for: one sub-task's times the sub-tasks."""
    asks = task_asks(sp)
    if not asks or sp is None:
        return ()
    k = max(1, ncpus // int(sp["ncpus"]))
    return tuple(replace(a, count=a.count * k) for a in asks)


def device_wave(asks: tuple[DeviceAsk, ...], devices: tuple[Device, ...]) -> int:
    """How many sub-tasks asking ``asks`` each the machine's devices hold at once (their slots)."""
    from gridsched.core.devices import slots, totals

    have = totals(devices)
    return min((have.get(name, 0) // n for name, n in slots(asks, devices) if n > 0), default=0)


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def check(job: dict[str, Any], max_size: int) -> str | None:
    """Why the ``array`` or ``split`` keys of a submitted spec cannot be taken, or None."""
    if "array" in job and "split" in job:
        return "an array cannot be splittable too"
    if "array" in job:
        if not isinstance(job["array"], str):
            return "field 'array' has the wrong type"
        try:
            parse(job["array"], max_size)
        except ArrayError as e:
            return f"array {e}"
        return None
    sp = job["split"]
    if not isinstance(sp, dict) or not all(_count(sp.get(k)) for k in ("n", "ncpus", "task_time")):
        return "field 'split' must hold positive whole numbers n, ncpus and task_time"
    if sp["n"] > max_size:
        return f"split into {sp['n']} sub-tasks, more than jobs.max_array_size ({max_size})"
    if sp["ncpus"] > job["ncpus"] or sp["task_time"] > job["walltime"]:
        return "a sub-task larger than the job"
    return None


def take_in(d: Daemon, job: dict[str, Any], user: str, state: JobState, reason: str) -> None:
    """Take in a checked splittable job: its stub, the user's script, every sub-task left."""
    sp = job["split"]
    job["split"] = {"n": sp["n"], "ncpus": sp["ncpus"], "task_time": sp["task_time"], "left": list(range(sp["n"]))}
    if sp.get("retries"):
        job["split"]["retries"] = sp["retries"]
    if sp.get("tasks"):  # sizes in the job table; the arguments are the owner's (private)
        job["split"]["tasks"] = [[t[0], t[1]] for t in sp["tasks"]]
        job["split_args"] = [list(t[2]) for t in sp["tasks"]]
    if sp.get("devices"):  # one wave: as many sub-tasks as the cores and the devices hold at once
        job["split"]["devices"] = sp["devices"]
        per = int(sp["ncpus"])
        k = min(int(job["ncpus"]) // per, device_wave(task_asks(sp), d.machine.devices), int(sp["n"]))
        job["ncpus"] = max(1, k) * per
    d.take_in(job, user, state, reason, {"script": STUB, "task-script": job.pop("script")})


def start_tasks(d: Daemon, rec: Rec, st: StartTasks, now: float) -> None:
    """Carry out a ``StartTasks`` decision: a new piece job for the sub-tasks, started now; the parent keeps
    the rest."""
    sp = rec.split
    if sp is None or rec.state is not JobState.PENDING:
        log.error("plan splits job %d, which is not a pending splittable job", rec.id)
        return
    taken = set(st.tasks)
    if not taken <= set(sp["left"]) or len(taken) != len(st.tasks):
        log.error("plan takes sub-tasks %s of job %d, not all of them left", list(st.tasks), rec.id)
        return
    spec = d.table.spec(rec.id)
    c = int(sp["ncpus"])
    widths = list(st.widths) or [c] * len(st.chains)
    if len(widths) != len(st.chains):
        log.error("plan splits job %d with %d chains but %d widths", rec.id, len(st.chains), len(widths))
        return
    if st.devices and (len(st.devices) != len(st.chains) or st.widths or len(st.cores) < c * len(st.chains)):
        log.error("plan splits job %d with devices that do not match its chains", rec.id)
        return
    if st.devices:  # each chain a piece of its own, with its own devices
        taken = set()
        for i, ch in enumerate(st.chains):
            n = len(ch) * float(sp["task_time"])
            one = StartTasks(st.job, ch, st.cores[i * c : (i + 1) * c], (ch,), min(st.end, now + n))
            if not _piece(d, rec, spec, one, [c], now, st.devices[i]):
                break
            taken.update(ch)
        if not taken:
            return
    elif not _piece(d, rec, spec, st, widths, now, ()):
        return
    sp["left"] = [i for i in sp["left"] if i not in taken]
    spec["split"] = sp
    rec.ncpus = min(rec.ncpus, _wave(sp)) or rec.ncpus
    if sp.get("devices"):
        rec.dev_asks = wave_asks(sp, rec.ncpus)
        from gridsched.core.devices import slots

        rec.dev_slots = slots(rec.dev_asks, d.machine.devices)
    rec._waiting = None
    d.table.begin()
    d.db.update(rec.id, spec=spec, ncpus=rec.ncpus)
    if not sp["left"]:
        d.table.dequeue(rec)
        rec.reason = "every sub-task runs in pieces"
        d.table.save(rec, reason=rec.reason)
    d.dirty = True
    d.table.forecast_dirty = True


def _piece(
    d: Daemon,
    rec: Rec,
    spec: dict[str, Any],
    st: StartTasks,
    widths: list[int],
    now: float,
    devices: tuple[tuple[str, int], ...],
) -> bool:
    """Start the sub-tasks of ``st`` as one new piece job of ``rec`` (holding ``devices``); False if it
    could not be taken in."""
    sp = rec.split
    assert sp is not None
    c = int(sp["ncpus"])
    pid = d.new_ids(1)[0]
    piece = {k: v for k, v in spec.items() if k != "split"}
    task = {"n": sp["n"], "ncpus": c, "task_time": sp["task_time"]}
    if sp.get("retries"):
        task["retries"] = sp["retries"]
    if sp.get("tasks"):  # the sizes and arguments of its own sub-tasks only
        task["tasks"] = {str(i): sp["tasks"][i] for i in st.tasks}
        args = spec.get("split_args") or []
        piece["split_args"] = {str(i): args[i] for i in st.tasks if i < len(args)}
    if devices:  # one chain: one sub-task's devices
        piece["devices"] = sp["devices"]
    piece.update(
        id=pid,
        ncpus=sum(widths),
        walltime=max(1, math.ceil(st.end - now)),
        checkpoint=Checkpoint.NONE,
        hold=False,
        depend="",
        split_of=rec.id,
        split_chains=[list(ch) for ch in st.chains],
        split_widths=widths,
        split_task=task,
        stdout=f"{spec['stdout']}.{pid}",
        stderr=f"{spec['stderr']}.{pid}",
    )
    pdir = d.spool.job_dir(rec.id)
    prec = d.take_in(
        piece, rec.user, JobState.PENDING, "", {"script": pdir / "script", "task-script": pdir / "task-script"}
    )
    if prec is None:
        return False
    from gridsched.daemon.apply import start

    start(d, prec, Start(pid, st.cores, True, None, devices), now)
    log.info(
        "job %d: sub-tasks %s taken out as job %d on cores %s%s",
        rec.id,
        ",".join(map(str, st.tasks)),
        pid,
        ",".join(map(str, st.cores)),
        f" with {','.join(f'{t}:{i}' for t, i in devices)}" if devices else "",
    )
    return True


def _wave(sp: dict[str, Any]) -> int:
    """The cores the sub-tasks left need all at once."""
    tasks = sp.get("tasks")
    if tasks:
        return sum(int(tasks[i][0]) for i in sp["left"])
    return len(sp["left"]) * int(sp["ncpus"])


def pieces_of(d: Daemon, ids: list[int]) -> list[int]:
    """The live pieces of the jobs ``ids``."""
    want = set(ids)
    return sorted(r.id for r in d.table.jobs.values() if r.split_of in want)


def piece_ended(d: Daemon, piece: Rec, end: float) -> None:
    """A piece has ended: its parent ends too if it has nothing left and this was its last live piece."""
    parent = d.table.jobs.get(piece.split_of) if piece.split_of is not None else None
    if parent is None or parent.split is None or parent.split.get("left"):
        return
    if any(r.split_of == parent.id for r in d.table.jobs.values()):
        return
    states = [r["state"] for r in d.db.by_spec("split_of", parent.id)]
    bad = [s for s in states if s != JobState.COMPLETED.value]
    d.table.dequeue(parent)
    if parent.state is JobState.PENDING or parent.state is JobState.HELD:
        if bad:
            d.end(parent, JobState.FAILED, end, reason=f"{len(bad)} of its {len(states)} pieces did not complete")
        else:
            d.end(parent, JobState.COMPLETED, end, code=0)
