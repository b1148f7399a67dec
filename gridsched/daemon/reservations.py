"""The daemon's reservations: requests, activation, end, and their part of the snapshot.

A reservation lives in the ``reservations`` table of the state db and, while
it is ``WAITING`` or ``ACTIVE``, in the daemon's :class:`Book`.  A waiting
flexible reservation has a place in the queue (its id, taken from the job id
sequence); the core activates it (``Activate``) when that place comes and its
resources are free for the whole duration, and a fixed one at its start.
The core ends an active reservation at its end time (``EndReservation``,
:mod:`gridsched.core.endings`), and the daemon carries it out: the bound
jobs the decision names to kill, still running, are stopped as at their
walltime (SIGTERM, grace, SIGKILL; state ``TIMEOUT``, reason "reservation
ended") -- all of them unless the reservation was created with
``--no-kill``, in which case they go on as ordinary running jobs; bound jobs
still pending are cancelled.  A fixed reservation whose time passed before it
could be activated ends the same way, with the reason.

A reservation with a mapping requirement (``place``, ``threads_per_core``,
``exclusive_board``, as a job's) is refused at creation when the machine can
never meet it; the core activates it only on cores that meet it.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gridsched.core import cpuset
from gridsched.core import memory as mempool
from gridsched.core.placement import Request
from gridsched.core.types import Activate, EndReservation, Resv, Waiting
from gridsched.protocol import limits
from gridsched.protocol.jobs import JobState, Stop
from gridsched.protocol.reservations import (
    LIVE,
    ResvError,
    RState,
    check_bind,
    check_fit,
    check_request,
    place_request,
    place_text,
)

if TYPE_CHECKING:
    from gridsched.core.topology import MachineMap
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol import requests as rq
    from gridsched.protocol.config import Config
    from gridsched.protocol.state import StateDB

log = logging.getLogger("gschedd")


@dataclass(slots=True)
class RRec:
    """A live reservation as the daemon keeps it."""

    id: int
    user: str
    uid: int
    name: str
    ncpus: int
    duration: int
    create_time: float
    state: RState = RState.WAITING
    resources: dict[str, int] = field(default_factory=dict)
    start: float | None = None
    activate_time: float | None = None
    end_time: float | None = None
    predicted: float | None = None
    cores: tuple[int, ...] = ()
    users: list[str] = field(default_factory=list)
    kill: bool = True
    reason: str = ""
    place: Request | None = None  # its mapping requirement; None: the fewest boards, any thread
    nice: int = 0  # a flexible one's place among the jobs: as a job's nice and admin priority
    priority: int | None = None

    def core(self) -> Resv:
        return Resv(
            self.id,
            self.ncpus,
            float(self.duration),
            tuple(sorted(self.resources.items())),
            self.start,
            self.state is RState.ACTIVE,
            self.cores,
            self.end_time,
            self.kill,
            self.place,
        )

    def waiting(self) -> Waiting:
        """The flexible job that holds this reservation's place in the queue."""
        return Waiting(
            self.id,
            self.ncpus,
            float(self.duration),
            False,
            self.user,
            0.0,
            tuple(sorted(self.resources.items())),
            None,
            True,
            self.place,
            submitted=self.create_time,
            nice=self.nice,
            admin=self.priority,
        )

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state.value,
            "user": self.user,
            "uid": self.uid,
            "name": self.name,
            "ncpus": self.ncpus,
            "resources": self.resources,
            "duration": self.duration,
            "start": self.start,
            "create_time": self.create_time,
            "activate_time": self.activate_time,
            "end_time": self.end_time,
            "predicted": self.predicted,
            "cores": cpuset.format(self.cores),
            "users": self.users,
            "kill": self.kill,
            "reason": self.reason,
            "place": self.place.place if self.place is not None else None,
            "threads_per_core": self.place.threads_per_core if self.place is not None else 0,
            "exclusive_board": self.place.exclusive_board if self.place is not None else False,
            "nice": self.nice,
            "priority": self.priority,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RRec:
        return cls(
            id=row["id"],
            user=row["user"],
            uid=row["uid"],
            name=row["name"],
            ncpus=row["ncpus"],
            duration=row["duration"],
            create_time=row["create_time"],
            state=RState(row["state"]),
            resources=dict(row["resources"]),
            start=row["start"],
            activate_time=row["activate_time"],
            end_time=row["end_time"],
            predicted=row["predicted"],
            cores=tuple(sorted(cpuset.parse(row["cores"]))),
            users=list(row["users"]),
            kill=row["kill"],
            reason=row["reason"],
            place=place_request(row["ncpus"], row),
            nice=int(row.get("nice") or 0),
            priority=row.get("priority"),
        )


class Book:
    """The live reservations and the queue places of the waiting flexible ones."""

    def __init__(self) -> None:
        self.resvs: dict[int, RRec] = {}
        self.flex: list[int] = []  # ids of waiting flexible reservations, ascending

    def load(self, db: StateDB) -> None:
        for row in db.reservations():
            if row["state"] in LIVE:
                r = RRec.from_row(row)
                self.resvs[r.id] = r
                if r.state is RState.WAITING and r.start is None:
                    bisect.insort(self.flex, r.id)
        if self.resvs:
            log.info("recovered %d reservations", len(self.resvs))

    # -- the snapshot -------------------------------------------------------
    def core(self) -> tuple[Resv, ...]:
        return tuple(r.core() for r in self.resvs.values())

    def merge(self, pending: tuple[Waiting, ...]) -> tuple[Waiting, ...]:
        """The pending jobs with the flexible reservations' entries at their places (by id)."""
        if not self.flex:
            return pending
        flex = [self.resvs[i].waiting() for i in self.flex]
        # at their places by id (an array's tasks are at their array's: gridsched.daemon.table.queue_key)
        return tuple(heapq.merge(pending, flex, key=lambda w: w.id if w.array is None else w.array))

    def ranked(self) -> bool:
        """Whether a waiting flexible reservation has a nice value or a priority of its own."""
        return any(self.resvs[i].nice or self.resvs[i].priority is not None for i in self.flex)

    def next_end(self) -> float | None:
        ends = [r.end_time for r in self.resvs.values() if r.state is RState.ACTIVE and r.end_time is not None]
        ends += [r.start + r.duration for r in self.resvs.values() if r.state is RState.WAITING and r.start is not None]
        return min(ends) if ends else None


@dataclass(frozen=True)
class Ctx:
    """What the reservations' work sees of the daemon: the books, the job table, the state db, the
    configuration and machine in force, and how a job is ended and signalled."""

    book: Book
    table: JobTable
    db: StateDB
    cfg: Config
    machine: MachineMap
    end: Callable[[Rec, JobState, float, str], None]  # end a job (state, when, reason)
    terminate: Callable[[Rec, float, int, float], None]  # signal a running job (when, signal, grace)


def save(ctx: Ctx, r: RRec) -> None:
    ctx.table.begin()
    ctx.db.put_resv(r.row())
    ctx.table.forecast_dirty = True


def row_of(ctx: Ctx, rid: int) -> dict[str, Any] | None:
    r = ctx.book.resvs.get(rid)
    if r is not None:
        return r.row()
    rows = ctx.db.reservations([rid])
    return rows[0] if rows else None


# -- requests ------------------------------------------------------------------------


def create(ctx: Ctx, spec: rq.ResvSpec, digest: str, admin: bool = False) -> bool:
    """Take in a checked reservation request: waiting (flexible or fixed), or ended at once as refused
    (by the policy of ``[reservations]`` -- ``admin``: its sender administers the spool -- or the machine).
    True if it waits (a scheduling pass is due)."""
    now = time.time()
    rid = spec.id
    r = RRec(
        id=rid,
        user=spec.user,
        uid=spec.uid,
        name=spec.name,
        ncpus=spec.ncpus,
        duration=spec.duration,
        create_time=spec.create_time or now,
        resources={},
        start=spec.start,
        users=list(spec.users),
        kill=spec.kill,
        place=place_request(spec.ncpus, spec._asdict()),
        nice=spec.nice,
        priority=spec.priority,
    )
    try:
        live = (x.ncpus for x in ctx.book.resvs.values() if x.uid == spec.uid)
        why = limits.resv_refusal(spec.user, admin, spec.ncpus, spec.duration, live, ctx.cfg)
        if why:
            raise ResvError(why)
        resources = dict(spec.resources)
        check_request(
            r.ncpus,
            r.duration,
            resources,
            ctx.machine.ncores,
            mempool.floating(ctx.cfg.floating, ctx.table.memory),  # the memory pool too: gresv -l mem=SIZE
            ctx.cfg.resv_max_duration,
            ctx.machine,
            r.place,
        )
        if spec.devices:  # held as their slots, as a job's (gridsched.core.devices)
            from gridsched.core.devices import slots
            from gridsched.protocol.device_asks import refusal

            why = refusal(spec.devices, ctx.machine.devices)
            if why:
                raise ResvError(why)
            resources.update(slots(spec.devices, ctx.machine.devices))
        r.resources = dict(sorted(resources.items()))
        if r.start is not None and r.start + r.duration <= now:
            raise ResvError("its time had passed when the daemon took it in")
    except ResvError as e:
        r.state, r.reason, r.end_time = RState.ENDED, f"refused: {e}", now
        save(ctx, r)
        log.info("reservation %d refused: %s", rid, e)
        return False
    ctx.book.resvs[rid] = r
    if r.start is None:
        bisect.insort(ctx.book.flex, rid)
    save(ctx, r)
    log.info(
        "reservation %d created: %d cores%s%s for %ss, %s",
        rid,
        r.ncpus,
        f" ({place_text(r.row())})" if r.place is not None else "",
        "".join(f", {k}={v}" for k, v in r.resources.items()),
        r.duration,
        "flexible" if r.start is None else f"fixed at {time.strftime('%F %T', time.localtime(r.start))}",
    )
    return True


def delete(ctx: Ctx, rid: int, uid: int, release: bool) -> bool:
    """Delete reservation ``rid`` for ``uid`` (its owner or root); True if it was (a scheduling pass is due)."""
    r = ctx.book.resvs.get(rid)
    if r is None:
        log.info("resv_delete: reservation %s is not live", rid)
        return False
    if uid not in (0, r.uid):
        log.warning("resv_delete of reservation %d by uid %d refused: owned by uid %d", r.id, uid, r.uid)
        return False
    finish(ctx, r, time.time(), RState.DELETED, "deleted", release=release)
    return True


def alter(ctx: Ctx, req: rq.ResvAlter, uid: int) -> bool:
    """Change a waiting flexible reservation's nice or priority for ``uid`` (its owner or root; the boundary
    let only an admin raise it); True if it changed (a scheduling pass is due)."""
    r = ctx.book.resvs.get(req.id)
    if r is None:
        log.info("resv_alter: reservation %s is not live", req.id)
        return False
    if uid not in (0, r.uid):
        log.warning("resv_alter of reservation %d by uid %d refused: owned by uid %d", r.id, uid, r.uid)
        return False
    if r.state is not RState.WAITING or r.start is not None:
        log.info("resv_alter: reservation %d is not a waiting flexible one (%s)", r.id, r.state.value)
        return False
    nice = r.nice if req.nice is None else req.nice
    priority = None if req.unset_priority else (r.priority if req.priority is None else req.priority)
    if (nice, priority) == (r.nice, r.priority):
        return False
    r.nice, r.priority = nice, priority
    save(ctx, r)
    log.info("reservation %d: nice %d, priority %s (by uid %d)", r.id, nice, priority, uid)
    return True


def check_submit(ctx: Ctx, job: rq.JobSpec) -> str | None:
    """Why a checked job's floating resources or reservation binding are refused, or None."""
    for name, count in job.resources:
        if name not in ctx.cfg.floating:
            return f"unknown floating resource '{name}'"
        if count > ctx.cfg.floating[name]:
            return f"resource '{name}={count}': the machine has {ctx.cfg.floating[name]}"
    rid = job.reservation
    if rid is None:
        return None
    row = row_of(ctx, rid)
    try:
        check_bind(row, rid, job.uid, job.user)
    except ResvError as e:
        return str(e)
    assert row is not None
    place = None
    if job.placed:
        place = Request(job.ncpus, job.place or "pack", job.threads_per_core, job.exclusive_board)
    why = check_fit(row, job.ncpus, job.walltime, dict(job.resources), time.time(), ctx.machine, place)
    return f"cannot run in reservation {rid}: it {why}" if why else None


# -- lifecycle -------------------------------------------------------------------------


def activate(ctx: Ctx, a: Activate, now: float) -> None:
    r = ctx.book.resvs.get(a.resv)
    if r is None or r.state is not RState.WAITING:
        log.error("plan activates reservation %d, which is not waiting", a.resv)
        return
    r.state = RState.ACTIVE
    r.cores = tuple(a.cores)
    r.activate_time = now
    r.end_time = a.end
    r.predicted = None
    r.reason = ""
    i = bisect.bisect_left(ctx.book.flex, r.id)
    if i < len(ctx.book.flex) and ctx.book.flex[i] == r.id:
        del ctx.book.flex[i]
    save(ctx, r)
    log.info(
        "reservation %d active on cores %s until %s",
        r.id,
        cpuset.format(r.cores),
        time.strftime("%F %T", time.localtime(a.end)),
    )


def timers(book: Book, now: float) -> bool:
    """Whether a pass is due because a reservation's time is up: the core ends it (:func:`end` carries that out)."""
    due = book.next_end()
    return due is not None and now >= due


def end(ctx: Ctx, dec: EndReservation, now: float) -> bool:
    """Carry out the core's end of a reservation (module docstring); True if it ended (a pass is due)."""
    r = ctx.book.resvs.get(dec.resv)
    if r is None:
        log.error("plan ends reservation %d, which is not live", dec.resv)
        return False
    finish(ctx, r, now, RState.ENDED, dec.reason, kill=dec.kill, cancel=dec.cancel)
    return True


def bound(table: JobTable, rid: int) -> list[Rec]:
    return [rec for rec in table.jobs.values() if rec.resv == rid]


def finish(
    ctx: Ctx,
    r: RRec,
    now: float,
    state: RState,
    why: str,
    release: bool = False,
    kill: tuple[int, ...] | None = None,
    cancel: tuple[int, ...] | None = None,
) -> None:
    """End reservation ``r``: its resources return; its bound jobs are dealt with (module docstring).

    ``kill`` and ``cancel``: the bound jobs to stop and to cancel, as the core decided
    (:class:`~gridsched.core.types.EndReservation`); None (a deletion): all running ones if the reservation
    ends its jobs, and all waiting ones (or, with ``release``, those go back to the queue).
    The caller asks for a scheduling pass.
    """
    was_active = r.state is RState.ACTIVE
    r.state = state
    r.end_time = now if not was_active or state is RState.DELETED or r.end_time is None else r.end_time
    r.reason = why
    r.predicted = None
    i = bisect.bisect_left(ctx.book.flex, r.id)
    if i < len(ctx.book.flex) and ctx.book.flex[i] == r.id:
        del ctx.book.flex[i]
    ctx.book.resvs.pop(r.id, None)
    save(ctx, r)
    for rec in bound(ctx.table, r.id):
        if kill is not None and cancel is not None and rec.id not in kill and rec.id not in cancel:
            continue
        if rec.state in (JobState.PENDING, JobState.HELD) and rec.shepherd is None:
            if release:
                rec.resv = None
                rec._waiting = None
                rec.spec = rec.job._replace(reservation=None, wait_resv=False)
                ctx.table.save(rec, spec=rec.job.stored()[0])
                log.info("job %d released from reservation %d to the queue", rec.id, r.id)
            else:
                ctx.end(rec, JobState.CANCELLED, now, f"reservation {r.id} {state.value.lower()}")
        elif (
            (r.kill if kill is None else rec.id in kill)
            and rec.shepherd is not None
            and rec.stop is None
            and rec.state is JobState.RUNNING
        ):
            rec.stop = Stop.RESVEND
            ctx.terminate(rec, now, signal.SIGTERM, ctx.cfg.kill_grace)
            ctx.table.save(rec)
    log.info("reservation %d %s%s", r.id, state.value.lower(), f" ({why})" if why else "")


def set_predicted(book: Book, db: StateDB, pred: dict[int, float], now: float) -> None:
    """Store the predicted activation time of each waiting reservation."""
    for r in book.resvs.values():
        if r.state is not RState.WAITING:
            continue
        p = max(r.start, now) if r.start is not None and r.id not in pred else pred.get(r.id)
        if p is not None and p == float("inf"):
            p = None
        if p != r.predicted:
            r.predicted = p
            db.update_resv(r.id, predicted=p)
