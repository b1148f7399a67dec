"""Carrying out a plan: the daemon's snapshot for the core, and what each decision does.

:func:`snapshot` builds the core's view from the job table, the
reservations, the trees and the drained cores; :func:`schedule` asks the core
for a plan and carries out its decisions (a start, with the job's launch
prepared from the daemon's own files; a preemption in the job's checkpoint
mode; sub-tasks taken out of a splittable job; a reservation activated).
"""

from __future__ import annotations

import logging
import math
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, assert_never

from gridsched.core import board_memory, cpuset, depend
from gridsched.core import memory as mempool
from gridsched.core import policy as corepolicy
from gridsched.core.placement import claimed, free_map, status_maps
from gridsched.core.types import (
    Activate,
    Cancel,
    CancelSubtree,
    Decision,
    EndReservation,
    HeadReservation,
    HoldSubtree,
    Kill,
    Predictor,
    Preempt,
    Reclaim,
    Resume,
    Snapshot,
    Start,
    StartTasks,
    Waiting,
)
from gridsched.daemon import (
    arrays,
    devcgroup,
    jobfiles,
    jobtmp,
    launch,
    outcome,
    procs,
    reservations,
    split,
    transitions,
)
from gridsched.daemon import reasons as wording
from gridsched.daemon.table import Rec, queue_key
from gridsched.job import env as jobenv
from gridsched.job.env import device_env
from gridsched.protocol import requests as rq
from gridsched.protocol.device_asks import format_keys
from gridsched.protocol.jobs import Checkpoint, JobState, Stop
from gridsched.protocol.state import planned_text

if TYPE_CHECKING:
    from gridsched.core.topology import MachineMap
    from gridsched.daemon.spawn import Processes, Stub
    from gridsched.daemon.table import JobTable
    from gridsched.daemon.tree import Trees
    from gridsched.protocol.config import Config
    from gridsched.protocol.spool import Spool
    from gridsched.protocol.state import StateDB
    from gridsched.protocol.view import Segment

log = logging.getLogger("gschedd")


@dataclass(frozen=True)
class Ctx:
    """What carrying out a plan sees of the daemon: the job table, the configuration and machine in force,
    the state db, the spool, the executor of the jobs' processes, the reservations' books, the job trees, the
    drained cores, the head job's reservation of the last plan, the reasons the last forecast gave, the list
    of starts to fork once committed, and how a job is ended, signalled and found (its job directory and
    segment), and what the reservations' and the splittable jobs' work see."""

    table: JobTable
    cfg: Config
    machine: MachineMap
    db: StateDB
    spool: Spool
    ex: Processes | Stub
    book: reservations.Book
    trees: Trees
    drained: frozenset[int]
    head: HeadReservation | None
    forecast_said: Mapping[int, str]
    launches: list[tuple[Rec, launch.Launch]]  # starts committed, their shepherds forked after the commit
    end: Callable[..., None]  # end a job: (rec, state, when, reason=...)
    terminate: Callable[[Rec, float, int, float], None]  # signal a running job (when, signal, grace)
    where: Callable[[Rec], tuple[Path, int]]  # a running job's directory and segment, as the executor finds it
    resv_ctx: Callable[[], reservations.Ctx]  # what the reservations' work sees
    split_ctx: Callable[[], split.Ctx]  # what the work on splittable jobs sees
    rests: Mapping[int, arrays.Rest]  # the arrays' tasks not made yet (a dependency on an array's id)
    arrays_ended: dict[int, str]  # the state of arrays named in dependencies whose tasks have all ended


@dataclass(frozen=True)
class Scheduled:
    """What a scheduling pass leaves the loop: whether what the next pass sees changed (beyond a start), the
    head job's reservation, and when the plan is due again without anything else changing."""

    changed: bool
    head: HeadReservation | None
    wake_at: float | None


def snapshot(ctx: Ctx, now: float) -> Snapshot:
    memory = memory_in_force(ctx)  # first: it may make the jobs' asks again
    running = tuple(
        r.running(now, ctx.cfg.max_walltime)
        for r in ctx.table.jobs.values()
        if r.start is not None and r.state in (JobState.RUNNING, JobState.STOPPING)
    )
    resvs = ctx.book.core()
    # the free map from the status maps, as gctl topology shows them (lenders' cores are their own)
    free = free_map(ctx.machine, status_maps(ctx.machine, running, resvs, ctx.drained))
    queued = [rec for rec in (ctx.table.jobs[i] for i in ctx.table.queue) if offered(rec)]
    waiting = tuple(r.waiting() for r in queued)
    # suspended jobs keep their devices (their processes still hold them): gridsched.core.types.Snapshot.kept
    kept = (
        {r.id: (r.devices, r.whole) for r in queued if r.devices and r.state is JobState.SUSPENDED}
        if ctx.machine.devices
        else {}
    )
    kept_mem = _kept_memory(queued)
    held = [r for r in ctx.table.jobs.values() if r.state is JobState.HELD and offered(r)]
    if held:  # held jobs wait in the core's eligibility (gridsched.core.eligible), in queue order
        queued = sorted(queued + held, key=queue_key)
        waiting = tuple(held_view(r) for r in queued)
    return ctx.trees.annotate(
        Snapshot(
            now=now,
            ncores=ctx.machine.ncores,
            running=running,
            pending=ctx.book.merge(waiting),
            params=ctx.cfg.params,
            free=free,
            head=ctx.head,
            history={u: tuple(h) for u, h in ctx.table.history.items()},
            ratios={u: tuple(r) for u, r in ctx.table.ratios.items()}
            if ctx.cfg.params.predictor is Predictor.USER_RATIO
            else {},
            floating=mempool.floating(ctx.cfg.floating, memory),
            kept_floating=kept_mem,
            kept_boards=_kept_boards(ctx.machine, memory, ctx.table.jobs, kept_mem) if kept_mem else {},
            reservations=resvs,
            machine=ctx.machine,
            devices=ctx.machine.devices,
            kept=kept,
            drained=ctx.drained,
            states=dep_states(ctx.table.jobs, ctx.db, [r for r in queued if r.deps], ctx.rests, ctx.arrays_ended),
            usage=ctx.table.usage.now(now, ctx.table.half_life) if ctx.cfg.params.priority.weight_fairshare else {},
            ranked=any(r.nice or r.admin_prio is not None for r in queued) or ctx.book.ranked(),
        )
    )


def _kept_memory(queued: list[Rec]) -> dict[int, tuple[tuple[str, int], ...]]:
    """The memory suspended jobs keep, MiB by job (Snapshot.kept_floating)."""
    return {r.id: ((mempool.MEMORY, k),) for r in queued if (k := r.kept_memory())}


def _kept_boards(
    machine: MachineMap, memory: mempool.MemoryPool | None, jobs: Mapping[int, Rec], kept: Mapping[int, object]
) -> dict[int, tuple[tuple[int, int], ...]]:
    """Where the suspended jobs ``kept`` keep their memory, where the boards' memory is counted
    (Snapshot.kept_boards): MiB by board, taken from the boards of the cores of the job's last segment (the
    one it was suspended in) as a running job's is."""
    if memory is None or board_memory.capacities(machine, memory.total) is None:
        return {}
    out: dict[int, tuple[tuple[int, int], ...]] = {}
    for jid in kept:
        r = jobs[jid]
        cores = r.segments[-1].get("cores") if r.segments else None
        if cores:
            out[jid] = tuple(sorted(board_memory.shares(machine, cpuset.parse(cores), r.kept_memory()).items()))
    return out


def memory_pool(machine: MachineMap, cfg: Config) -> mempool.MemoryPool | None:
    """The machine's memory as the pool of the passes (the figure gsub checks --mem against, less
    ``[machine] memory_reserved``); None where the memory is not known."""
    from gridsched.submission.submit import machine_memory

    return mempool.pool(machine_memory(machine), cfg.memory_reserved, cfg.default_mem_per_cpu)


def memory_in_force(ctx: Ctx) -> mempool.MemoryPool | None:
    """The memory pool as the configuration in force has it: after a reload that changed
    ``memory_reserved`` or ``default_mem_per_cpu``, the pool and every job's ask are made again (as a
    restart would make them)."""
    m = ctx.table.memory
    if m is None or (m.reserved, m.per_cpu) == (ctx.cfg.memory_reserved, ctx.cfg.default_mem_per_cpu):
        return m
    m = ctx.table.memory = memory_pool(ctx.machine, ctx.cfg)
    for rec in ctx.table.jobs.values():
        spec = rec.job
        rec.resources = (
            spec.resources if m is None or rec.resv is not None else m.asks(spec.resources, spec.mem, rec.ncpus)
        )
        rec._waiting = None
    return m


def held_view(rec: Rec) -> Waiting:
    """The core's view of a queued or held job: a held one carries its hold's reason."""
    w = rec.waiting()
    if rec.state is not JobState.HELD:
        return w
    return replace(w, held=rec.reason or HELD)


HELD = "held (grls releases it)"


def offered(rec: Rec) -> bool:
    """Whether a queued job is offered to the core: all but a splittable job whose every sub-task went to
    pieces (it ends with the last of them, split.piece_ended) and a job a cancel under way will end."""
    return (rec.split is None or bool(rec.split.left)) and not rec.withdrawn


def dep_states(
    jobs: Mapping[int, Rec],
    db: StateDB,
    pending: list[Rec],
    rests: Mapping[int, arrays.Rest] | None = None,
    ended: dict[int, str] | None = None,
) -> dict[int, str]:
    """The state of every job the dependencies of ``pending`` name (live in ``jobs``, else from ``db``); an
    array's id names the whole array (:func:`gridsched.daemon.arrays.whole_states`: ``rests``, the records of
    its tasks not made yet; ``ended``, the states of arrays read once all their tasks ended)."""
    out: dict[int, str] = {}
    named_arrays: set[int] = set()
    for rec in pending:
        for jid in depend.job_ids(rec.deps):
            if jid in out:
                continue
            live = jobs.get(jid)
            if live is not None:
                out[jid] = live.state.value
                if live.array_id == jid:
                    named_arrays.add(jid)
                continue
            row = db.conn.execute(
                "SELECT state, CASE WHEN instr(spec, '\"array_id\"') AND json_valid(spec) "
                "THEN json_extract(spec, '$.array_id') END FROM jobs WHERE id = ?",
                (jid,),
            ).fetchone()
            if row is not None:
                out[jid] = row[0]
                if row[1] == jid:
                    named_arrays.add(jid)
    if named_arrays:
        out.update(arrays.whole_states(named_arrays, jobs, rests or {}, db, {} if ended is None else ended))
    return out


def note_reasons(table: JobTable, cfg: Config, said: Mapping[int, str], reasons: Mapping[int, str]) -> None:
    """Record why jobs with dependencies, an array throttle or a begin time wait (and clear it once they may
    start, unless the last forecast said why they wait beyond that: ``said``); a begin time is shown as the
    local date and time."""
    limited = bool(cfg.params.max_cpus_per_user)
    for jid in table.queue:
        rec = table.jobs[jid]
        if not rec.deps and rec.array_max is None and rec.begin is None and not limited:
            continue
        why = reasons.get(jid, "")
        if not why and rec.reason and said.get(jid) == rec.reason:
            continue
        why = wording.eligibility_text(rec, why)
        if rec.reason != why:
            rec.reason = why
            table.save(rec, reason=why)


def schedule(ctx: Ctx, now: float) -> Scheduled:
    """Ask the core for a plan and carry out its decisions (the starts are forked once committed:
    ``ctx.launches``)."""
    plan = corepolicy.schedule(snapshot(ctx, now))
    note_reasons(ctx.table, ctx.cfg, ctx.forecast_said, plan.reasons)
    changed = False
    for dec in plan.decisions:
        if carry_out(ctx, dec, now):
            changed = True
    ctx.trees.decided()
    return Scheduled(changed, plan.head, plan.wake_at)


def carry_out(ctx: Ctx, dec: Decision, now: float) -> bool:
    """Carry out one decision of the core; whether it changed what a scheduling pass sees (beyond a start).
    Every kind of decision has its case (``assert_never``: a new kind is a type error until it has one)."""
    match dec:
        case Activate():
            reservations.activate(ctx.resv_ctx(), dec, now)
            return False
        case EndReservation():
            return reservations.end(ctx.resv_ctx(), dec, now)
        case Reclaim():
            return ctx.trees.reclaim(dec.parent)
        case Resume():
            return ctx.trees.resumed(dec.parent, dec.implicit, now)
        case CancelSubtree():
            return ctx.trees.cancel_subtree(dec, now)
        case HoldSubtree():
            return ctx.trees.hold_subtree(dec)
        case Cancel() | Start() | Preempt() | Kill() | StartTasks():
            job = ctx.table.jobs.get(dec.job)
            if job is None:
                log.error("plan names unknown job %d", dec.job)
                return False
            return _on_job(ctx, job, dec, now)
        case _:
            assert_never(dec)


def _on_job(ctx: Ctx, job: Rec, dec: Cancel | Start | Preempt | Kill | StartTasks, now: float) -> bool:
    match dec:
        case Cancel():
            if job.state is JobState.PENDING and job.shepherd is None:
                ctx.end(job, JobState.CANCELLED, now, reason=dec.reason)
            return False
        case Start():
            start(ctx, job, dec, now)
            return False
        case Preempt():
            return preempt(ctx.table, ctx.cfg, partial(_pause, ctx), ctx.terminate, job, now)
        case Kill():
            return kill(ctx.table, ctx.terminate, ctx.cfg.kill_grace, job, dec.reason, now)
        case StartTasks():
            return split.start_tasks(ctx.split_ctx(), job, dec, now)
        case _:
            assert_never(dec)


def start(ctx: Ctx, rec: Rec, dec: Start, now: float) -> None:
    """Carry out a start: the job runs on the decision's cores (a suspended one is continued there)."""
    ctx.table.dequeue(rec)
    rec.cores = tuple(dec.cores)
    rec.backfilled = dec.backfilled
    rec.planned = dec.planned
    if rec.first_start is None:
        rec.first_start = now
    if rec.segment > 0:
        rec.restarts += 1
    rec.start = now
    rec.stop = None
    rec.kill_at = None
    rec.deadline = now + rec.remaining()
    rec.warned = False
    rec.mailed = 0  # a new start: its time limit mails come again
    rec.lent = []
    rec._waiting = None
    rec.set_devices(tuple(dec.devices), ctx.machine.devices)
    rec.held = ()
    if rec.place is not None and (rec.place.threads_per_core or rec.place.exclusive_board) and rec.cores:
        rec.held = tuple(sorted(claimed(ctx.machine, rec.cores, rec.place) - set(rec.cores)))
    boards = ",".join(str(b) for b in sorted({ctx.machine.board_of(c).id for c in rec.cores}))
    cpus = frozenset(ctx.machine.host_set(rec.cores))
    if rec.state is JobState.SUSPENDED and rec.shepherd is not None:
        transitions.start(rec)
        ctx.ex.set_affinity(rec.shepherd, ctx.where(rec), set(cpus))
        ctx.ex.signal(rec.shepherd, ctx.where(rec), signal.SIGCONT)
        rec.segments.append({"start": now, "cores": cpuset.format(rec.cores), "boards": boards, "resumed": True})
        ctx.table.save(rec)
        log.info("job %d resumed on cores %s", rec.id, cpuset.format(rec.cores))
        return
    rec.segment += 1
    launch.mark("d_spec_begin", rec.id)
    try:
        spec = launch_spec(ctx, rec)
    except (jobfiles.JobFilesError, KeyError, TypeError, ValueError) as e:
        rec.cores = ()
        rec.start = None
        ctx.end(rec, JobState.FAILED, now, reason=f"cannot start: {rq.safe(str(e))}")
        return
    launch.mark("d_spec_built", rec.id)
    transitions.start(rec)
    seg: Segment = {"start": now, "cores": cpuset.format(rec.cores), "boards": boards}
    if rec.devices:
        seg["devices"] = format_keys(rec.devices)
    if spec.private:
        seg["tmpdir"] = spec.private  # removed at the segment's end, by the shepherd or (if it was killed) here
    rec.segments.append(seg)
    if rec.reason:  # why it waited
        rec.reason = ""
        ctx.table.save(rec, reason="")
    else:
        ctx.table.save(rec)
    ctx.launches.append((rec, spec))


def mem_nodes(machine: MachineMap, cores: tuple[int, ...]) -> tuple[int, ...]:
    """The host NUMA nodes of the boards a job runs on, when every one of them is a host node."""
    nodes = {machine.board_of(c).node for c in cores}
    if not nodes or None in nodes:
        return ()
    return tuple(sorted(n for n in nodes if n is not None))


def launch_spec(ctx: Ctx, rec: Rec) -> launch.Launch:
    spec = ctx.table.spec(rec.id)
    jdir = ctx.spool.job_dir(rec.id)
    script = str(jdir / "script")
    args = spec.args
    try:
        with open(script, "rb") as f:
            shebang = f.read(2) == b"#!"
    except OSError:
        shebang = True  # let the exec fail and say why
    shell = not shebang
    if shell:  # what the submission chose (its form checked at the boundary; the job's process runs it), else /bin/sh
        script, args = spec.shell or "/bin/sh", (script, *args)
    start = jobenv.Start(
        ncpus=rec.ncpus,
        walltime=rec.walltime,
        cores=cpuset.format(rec.cores),
        host_cpus=cpuset.format(ctx.machine.host_set(rec.cores)),
        restarts=rec.restarts,
        job_dir=str(jdir),
        spool=str(ctx.spool.root),
        host=jobenv.host(),
        devices=device_env(rec.devices, ctx.machine.devices, ctx.cfg.compat_env, ctx.cfg.device_visible == "uuid"),
    )
    user_set = dict(spec.env_set)
    # whether an MPI is on the job's PATH is found out by the job's own process, as its owner (launch.py):
    # the daemon never walks a PATH a user wrote
    mpi_path = jobenv.own_path(str(user_set.get("PATH", dict(spec.env).get("PATH", ""))))
    private = private_dir(ctx.ex, ctx.cfg.tmpdir, rec, spec, jobenv.job_of(spec, start))
    env = jobenv.environment(spec, start, private, ctx.cfg.compat_env)
    return launch.Launch(
        job_id=rec.id,
        segment=rec.segment,
        job_dir=str(jdir),
        script=script,
        args=args,
        shell=shell,
        workdir=spec.workdir,
        stdout=spec.stdout,
        stderr=spec.stderr,
        append=rec.segment > 1 or spec.open_mode == "append",
        env=env,
        cpus=frozenset(ctx.machine.host_set(rec.cores)),
        uid=rec.uid,
        gid=spec.gid,
        user=rec.user,
        mem=spec.mem,
        mem_nodes=mem_nodes(ctx.machine, rec.cores),
        umask=spec.umask,
        private=private.root if private else "",
        mpi_path=mpi_path if private else "",
        deny_devices=devcgroup.denied(ctx.machine.devices, rec.devices, ctx.cfg.device_enforce),
        device_enforce="required" if ctx.cfg.device_enforce == "required" and ctx.cfg.system else "auto",
        user_env=_user_env(spec, env),
        max_processes=ctx.cfg.max_processes,
    )


def _user_env(spec: rq.JobSpec, env: dict[str, str]) -> tuple[int, bool, str] | None:
    """--get-user-env: its timeout, login shell or not, and what goes before the login's PATH when the job
    has only the plain PATH of --export=NONE (which yields to the login's, as Slurm's job gets it), else ""."""
    ue = spec.get_user_env
    if ue is None:
        return None
    from gridsched.submission.submit import LOGIN_PATH

    path = env.get("PATH", "")
    plain = dict(spec.env).get("PATH") == LOGIN_PATH and path.endswith(LOGIN_PATH)
    return ue.timeout, ue.login, path[: -len(LOGIN_PATH)] if plain else ""


def private_dir(ex: Processes | Stub, tmpdir: str, rec: Rec, spec: rq.JobSpec, job: jobenv.Job) -> jobenv.Private:
    """The job's private directory for this start (its TMPDIR, host files and srun) under ``tmpdir`` (the
    config's), made by the executor ``ex``; OSError if it cannot be made (the job fails with why)."""
    ranks = jobenv.mpi_ranks(job)
    base = jobtmp.base_dir(tmpdir)
    try:
        return ex.make_private(base, rec.id, rec.uid, jobtmp.owner_gid(rec.uid, spec.gid), job.host, rec.ncpus, ranks)
    except OSError as e:
        raise jobfiles.JobFilesError(f"cannot make its private directory in {base}: {e.strerror or e}") from None


def kill(
    table: JobTable, terminate: Callable[[Rec, float, int, float], None], grace: float, rec: Rec, why: str, now: float
) -> bool:
    """Carry out a :class:`~gridsched.core.types.Kill`: the job is stopped as at its walltime (SIGTERM, the
    ``grace``, SIGKILL: ``terminate``) and ends TIMEOUT with the core's reason.  True if it is stopped now
    (a scheduling pass is due)."""
    if rec.shepherd is None or rec.state is not JobState.RUNNING or rec.stop is not None:
        return False
    rec.stop = Stop.OVERRUN
    rec.reason = why
    log.info("job %d %s: stopped", rec.id, why)
    terminate(rec, now, signal.SIGTERM, grace)
    table.save(rec, reason=why)
    return True


def _pause(ctx: Ctx, rec: Rec) -> None:
    """Stop the processes of running job ``rec`` (SIGSTOP to its shepherd's group)."""
    assert rec.shepherd is not None
    ctx.ex.signal(rec.shepherd, ctx.where(rec), signal.SIGSTOP)


def preempt(
    table: JobTable,
    cfg: Config,
    pause: Callable[[Rec], None],
    terminate: Callable[[Rec, float, int, float], None],
    rec: Rec,
    now: float,
) -> bool:
    """Carry out a :class:`~gridsched.core.types.Preempt` as the job's checkpoint mode says: suspended
    (``pause`` stops its processes, and it waits in the queue), asked to checkpoint, or stopped to be requeued
    (``terminate``).  True if it went back to the queue now (a scheduling pass is due)."""
    if rec.shepherd is None or rec.state is not JobState.RUNNING:
        return False
    mode = rec.checkpoint
    rec.preemptions += 1
    queued = False
    if mode is Checkpoint.SUSPEND:
        pause(rec)
        outcome.close_segment(rec, now, "suspended")
        rec.elapsed += now - (rec.start or now)
        transitions.suspend(rec)
        rec.start = None
        rec.cores = ()
        rec._waiting = None
        table.enqueue(rec)
        queued = True
        log.info("job %d suspended for the head job", rec.id)
    elif mode is Checkpoint.SIGNAL:
        transitions.stopping(rec, Stop.PREEMPT)
        sig = procs.SIGNALS.get(cfg.checkpoint_signal, signal.SIGUSR1)
        terminate(rec, now, sig, cfg.checkpoint_grace)
        log.info("job %d asked to checkpoint (SIG%s)", rec.id, cfg.checkpoint_signal)
    elif mode is Checkpoint.REQUEUE:
        transitions.stopping(rec, Stop.PREEMPT)
        terminate(rec, now, signal.SIGTERM, cfg.kill_grace)
        log.info("job %d stopped to be requeued", rec.id)
    else:
        log.error("job %d has checkpoint mode none and cannot be preempted", rec.id)
        return False
    table.save(rec)
    return queued


def forecast(ctx: Ctx, now: float) -> dict[int, str] | None:
    """Predicted start times and why each pending job waits, both from the core
    (:func:`gridsched.core.policy.forecast_reasons`), worded by :mod:`gridsched.daemon.reasons`; the reasons
    beyond eligibility it gave (job id -> text: kept by :func:`note_reasons`), None if it failed."""
    ctx.table.forecast_dirty = False
    snap = snapshot(ctx, now)
    try:
        fc = corepolicy.forecast_reasons(snap)
    except Exception:  # noqa: BLE001 - a forecast is advice; it never stops the daemon
        log.exception("forecast failed")
        return None
    pred = fc.times
    ctx.table.begin()
    ctx.db.set_predicted((_finite(pred.get(w.id)), w.id) for w in snap.pending)
    ctx.db.set_planned((planned_text(fc.tasks.get(w.id, ())), w.id) for w in snap.pending if w.split is not None)
    said: dict[int, str] = {}
    facts = wording.Facts(ctx.table.devices, ctx.book.resvs, ctx.machine)
    for w in snap.pending:
        rec = ctx.table.jobs.get(w.id)
        if rec is None or rec.state is not JobState.PENDING:
            continue  # a reservation's entry, or a held job (its reason is its hold's)
        wait = fc.reasons.get(w.id)
        why = wording.text(rec, wait, facts) if wait is not None else ""
        if wait is not None and wait.kind not in wording.ELIGIBILITY:
            said[w.id] = why
        if rec.reason != why:
            rec.reason = why
            ctx.table.save(rec, reason=why)
    reservations.set_predicted(ctx.book, ctx.db, pred, snap.now)
    return said


def _finite(t: float | None) -> float | None:
    """A predicted time as the job table keeps it: never (infinity) is no time."""
    return t if t is None or math.isfinite(t) else None
