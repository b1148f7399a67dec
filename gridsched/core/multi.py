"""The pass with floating resources and reservations.

:func:`gridsched.core.policy.schedule` comes here when the snapshot names
floating resources (``Snapshot.floating``) or reservations
(``Snapshot.reservations``); without them the count-only pass of
:mod:`gridsched.core.policy` runs, unchanged and as fast as before.

Resources
---------
A request is a vector: cores, then one count per floating resource (licences
and the like, machine-wide counters without placement).  A job *fits now*
when every component fits in what is free now *and* the availability profile
of every component (:mod:`gridsched.core.profile`) holds it for its whole
estimate from now: a job never starts on resources promised to someone
later.  A job asking for an unknown floating resource, or for more than the
machine has, never starts and never blocks the queue.

Reservations
------------
* *Active* reservations hold their cores (never in ``Snapshot.free``) and
  resources until their end.  Jobs bound to one (``bind``) are not in the
  general queue: after the general pass, each active reservation (including
  one activated in this pass) starts its bound pending jobs in queue order,
  every one that fits in what it has left (cores, floating resources) and,
  unless the reservation lets its jobs outlive it (``kill`` False), whose
  estimate ends by the reservation's end.  Jobs bound to a waiting
  reservation wait.
* *Fixed* reservations (``start`` set) come first, before every job.  Future
  ones are held in the profiles over ``[start, start + duration)``: a job may
  run before one only if it ends by its start -- or, with
  ``Params.preempt_for_fixed``, if it is checkpointable, in which case it is
  preempted at the start.  A due one is activated as soon as its resources
  are free, until ``start + duration``; with ``preempt_for_fixed`` running
  checkpointable jobs are preempted for it (most cores first), otherwise it
  waits for them.  ``Plan.wake_at`` includes the next future start.
* *Flexible* reservations wait in the queue, at their place, as
  ``Waiting(flex=True)`` entries, and are scheduled exactly like a
  non-checkpointable job of their size and duration; when such an entry
  would start, the reservation is activated instead
  (``Activate(resv, cores, now + duration)``).

Policies
--------
The same rules as the count-only pass, stated with profiles.  fcfs: queue
order while jobs fit now; the first that does not is the head, at its
earliest common start.  easy: the head's shadow time is the earliest time
its whole request is free for its estimate; it is held in the profiles; every
later entry starts now if it fits now (so it ends by the shadow time or uses
only what the head leaves).  checkpoint-backfill: as easy, with running jobs
counted at their planned ends, the head memo (kept unless it can no longer
be met, even by preempting every checkpointable backfilled job), a
checkpointable candidate tried first on its own estimate and then on its
prediction, and, when the shadow time has come and the head still does not
fit, checkpointable backfilled jobs preempted (most cores first) until every
component fits.  conservative: every entry in queue order is held at its
earliest common start; it starts if that is now.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import inf

from .ends import NAIVE as _NAIVE
from .ends import PLANNED as _PLANNED
from .ends import USER as _USER
from .ends import counted_end
from .placement import assign
from .predict import make_predictor
from .profile import Profile, earliest_common_start
from .tree import preempt_order
from .types import (
    Activate,
    Decision,
    HeadReservation,
    Plan,
    Policy,
    Preempt,
    Resv,
    Running,
    Snapshot,
    Start,
    Waiting,
)

Vec = tuple[int, ...]


def _pick(free: frozenset[int] | None, n: int) -> tuple[int, ...]:
    if free is None:
        return ()
    return tuple(sorted(free)[:n])


class _Pass:
    """One pass over a snapshot: the profiles, what is free now, the decisions taken."""

    def __init__(self, snap: Snapshot, mode: int) -> None:
        self.snap = snap
        now = self.now = snap.now
        self.names = names = sorted(snap.floating)
        self.index = {n: k + 1 for k, n in enumerate(names)}
        self.dims = dims = len(names) + 1
        self.total = (snap.ncores, *(snap.floating[n] for n in names))
        active = self.active = {r.id: r for r in snap.reservations if r.active}
        general = [r for r in snap.running if r.bind is None or r.bind not in active]
        self.general = general
        self.bound = [r for r in snap.running if r.bind is not None and r.bind in active]
        free = [0] * dims
        held = [0] * dims
        for r in general:
            self._acc(held, self.vec(r))
        for rv in active.values():
            self._acc(held, self.vec(rv))
        for d in range(1, dims):
            free[d] = self.total[d] - held[d]
        if snap.free is not None:
            free[0] = len(snap.free)
        else:
            free[0] = snap.ncores - held[0]
        self.free_now = free
        self.cap = [free[d] + held[d] for d in range(dims)]
        self.free_set = snap.free
        self.profs = [Profile(now, free[d]) for d in range(dims)]
        self.loose: list[Profile] | None = None
        self.counted: dict[int, float] = {}
        for r in general:
            e = self._counted(r, now, mode)
            self.counted[r.id] = e
            self._release(e, self.vec(r))
        for rv in active.values():
            v = list(self.vec(rv))
            end = rv.end if rv.end is not None else inf
            if not rv.kill:
                for b in self.bound:
                    if b.bind == rv.id and b.end > end:
                        bv = self.vec(b)
                        for d in range(dims):
                            v[d] -= bv[d]
                        self._release(max(b.end, now), bv)
            self._release(max(end, now), tuple(v))
        self.decisions: list[Decision] = []
        self.preempted: set[int] = set()
        self.wake = inf
        self.activated: dict[int, tuple[tuple[int, ...], float]] = {}

    # -- vectors ------------------------------------------------------------
    def vec(self, x: Waiting | Running | Resv) -> Vec:
        if not x.resources:
            return (x.ncpus,) + (0,) * (self.dims - 1)
        v = [0] * self.dims
        v[0] = x.ncpus
        for name, k in x.resources:
            d = self.index.get(name)
            if d is None:
                if k > 0:
                    v[0] = -1  # unknown resource: never fits (see possible)
                continue
            v[d] += k
        return tuple(v)

    def possible(self, v: Vec) -> bool:
        """Whether ``v`` can ever be had."""
        return v[0] >= 0 and all(v[d] <= self.cap[d] for d in range(self.dims))

    @staticmethod
    def _acc(acc: list[int], v: Vec) -> None:
        for d, x in enumerate(v):
            acc[d] += x

    def _release(self, when: float, v: Iterable[int]) -> None:
        for d, x in enumerate(v):
            if x:
                self.profs[d].release(when, x)

    _counted = staticmethod(counted_end)

    # -- questions --------------------------------------------------------
    def earliest(self, v: Vec, duration: float, profs: list[Profile] | None = None) -> float:
        ps = profs or self.profs
        req = [(ps[d], v[d]) for d in range(self.dims) if v[d] > 0]
        return earliest_common_start(req, duration, self.now)

    def fits_now(self, v: Vec, duration: float, profs: list[Profile] | None = None) -> bool:
        free = self.free_now
        for d in range(self.dims):
            if v[d] > free[d]:
                return False
        return self.earliest(v, duration, profs) == self.now

    # -- changes ----------------------------------------------------------
    def hold(self, start: float, duration: float, v: Vec, fixed: bool = False) -> None:
        """Hold ``v`` over ``[start, start + duration)`` (``fixed``: not in the loose profiles)."""
        for d in range(self.dims):
            if v[d]:
                self.profs[d].reserve(start, duration, v[d])
                if self.loose is not None and not fixed:
                    self.loose[d].reserve(start, duration, v[d])

    def placeable(self, w: Waiting, v: Vec) -> bool:
        """Whether the free cores can hold ``w``'s mapping requirement now (always, without a map)."""
        if self.free_set is None or self.snap.machine is None or w.flex:
            return True
        return assign(self.snap.machine, self.free_set, v[0], w.place) is not None

    def take(self, v: Vec, w: Waiting | None = None) -> tuple[int, ...]:
        """Take ``v`` from what is free now; the cores picked.

        A job's mapping requirement is met: the pass starts a job only where
        :meth:`placeable` says the free cores can hold it (a reservation gets
        the lowest-numbered free cores).
        """
        for d in range(self.dims):
            self.free_now[d] -= v[d]
        if self.free_set is None:
            return ()
        got = None
        if w is not None and self.snap.machine is not None:
            got = assign(self.snap.machine, self.free_set, v[0], w.place)
        cores, held = got if got is not None else (_pick(self.free_set, v[0]), None)
        self.free_set = self.free_set.difference(held if held is not None else cores)
        return cores

    def start(self, w: Waiting, v: Vec, duration: float, backfilled: bool, planned: float | None) -> None:
        now = self.now
        self.hold(now, duration, v)
        cores = self.take(v, None if w.flex else w)
        if w.flex:
            self.decisions.append(Activate(w.id, cores, now + w.estimate))
            self.activated[w.id] = (cores, now + w.estimate)
        else:
            self.decisions.append(Start(w.id, cores, backfilled, planned))
            if planned is not None and now < now + planned < self.wake:
                self.wake = now + planned

    def preempt(self, cands: list[Running], short: list[int]) -> bool:
        """Preempt ``cands`` (most cores first) until no component of ``short`` is positive.

        Nothing is preempted unless all of them together would do.
        """
        vecs = {r.id: self.vec(r) for r in cands}
        total = [0] * self.dims
        for v in vecs.values():
            self._acc(total, v)
        if any(short[d] > total[d] for d in range(self.dims)):
            return False
        cands = preempt_order(self.snap, cands)  # most cores first; leaves first in job trees
        for r in cands:
            if all(s <= 0 for s in short):
                break
            v = vecs[r.id]
            if not any(v[d] > 0 and short[d] > 0 for d in range(self.dims)):
                continue
            self.decisions.append(Preempt(r.id))
            self.preempted.add(r.id)
            e = self.counted.get(r.id, self.now)
            for d in range(self.dims):
                short[d] -= v[d]
                if v[d] and e > self.now:
                    self.profs[d].add(self.now, e, v[d])
                    if self.loose is not None:
                        self.loose[d].add(self.now, e, v[d])
        return True

    def coming(self) -> list[int]:
        """Free now plus held by stopping or just preempted jobs."""
        acc = list(self.free_now)
        for r in self.general:
            if r.stopping or r.id in self.preempted:
                self._acc(acc, self.vec(r))
        return acc

    # -- reservations -----------------------------------------------------
    def fixed(self) -> None:
        """Due fixed reservations are activated (or held, or make room); future ones are held."""
        now = self.now
        waiting = sorted(
            (r for r in self.snap.reservations if not r.active and r.start is not None), key=lambda r: (r.start, r.id)
        )
        future = [r.start for r in waiting if r.start is not None and r.start > now]
        if future:
            self.wake = min(self.wake, future[0])
            if self.snap.params.preempt_for_fixed:
                self.loose = [p.copy() for p in self.profs]
        for r in waiting:
            assert r.start is not None
            end = r.start + r.duration
            if end <= now:
                continue  # over before it could begin: the driver ends it
            v = self.vec(r)
            if not self.possible(v):
                continue
            if r.start > now:
                self.hold(r.start, r.duration, v, fixed=True)
                continue
            left = end - now
            if self.fits_now(v, left):
                self.hold(now, left, v)
                cores = self.take(v)
                self.decisions.append(Activate(r.id, cores, end))
                self.activated[r.id] = (cores, end)
                continue
            if self.snap.params.preempt_for_fixed:
                have = self.coming()
                short = [v[d] - have[d] for d in range(self.dims)]
                cands = [x for x in self.general if x.preemptable and not x.stopping and x.id not in self.preempted]
                self.preempt(cands, short)
            t = self.earliest(v, 0.0)
            if t < end:
                self.hold(t, end - t, v)

    def bound_starts(self, pending: tuple[Waiting, ...]) -> None:
        """Start bound jobs inside their active reservations (see the module docstring)."""
        now = self.now
        inside: dict[int, tuple[list[int], frozenset[int] | None, float]] = {}
        resvs = {r.id: r for r in self.snap.reservations}
        for rid, rv in self.active.items():
            room = list(self.vec(rv))
            cores = frozenset(rv.cores) if self.snap.free is not None else None
            for b in self.bound:
                if b.bind == rid:
                    bv = self.vec(b)
                    for d in range(self.dims):
                        room[d] -= bv[d]
                    if cores is not None:
                        cores = cores.difference(b.cores)
            inside[rid] = (room, cores, rv.end if rv.end is not None else inf)
        for rid, (cores_t, end) in self.activated.items():
            new = resvs.get(rid)
            if new is not None:
                inside[rid] = (list(self.vec(new)), frozenset(cores_t) if self.snap.free is not None else None, end)
        kill = {rid: r.kill for rid, r in resvs.items()}
        for w in pending:
            if w.bind is None or w.bind not in inside:
                continue
            left, cores, end = inside[w.bind]
            v = self.vec(w)
            if v[0] < 0 or (kill[w.bind] and now + w.estimate > end) or any(v[d] > left[d] for d in range(self.dims)):
                continue
            for d in range(self.dims):
                left[d] -= v[d]
            picked = _pick(cores, v[0])
            if cores is not None:
                inside[w.bind] = (left, cores.difference(picked), end)
            self.decisions.append(Start(w.id, picked))


def schedule(snap: Snapshot) -> Plan:
    """The pass with floating resources and reservations (see the module docstring)."""
    policy = snap.params.policy
    if policy is Policy.CONSERVATIVE:
        return _conservative(snap, None)
    if policy is Policy.FCFS:
        return _fcfs(snap, None)[0]
    ckpt = policy is Policy.CHECKPOINT_BACKFILL
    return _backfill(snap, ckpt, ckpt and snap.params.cascade)[0]


def forecast(snap: Snapshot) -> dict[int, float]:
    """Predicted start (activation, for flexible entries) of every pending entry; ``inf``: never."""
    out: dict[int, float] = {}
    params = snap.params
    if params.policy is Policy.CONSERVATIVE:
        _conservative(snap, out)
    else:
        if params.policy is Policy.FCFS:
            plan, ps = _fcfs(snap, out)
        else:
            ckpt = params.policy is Policy.CHECKPOINT_BACKFILL
            plan, ps = _backfill(snap, ckpt, ckpt and params.cascade)
        now = snap.now
        started = {d.job for d in plan.starts} | {a.resv for a in plan.activations}
        last = now
        if plan.head is not None:  # already held in the profiles by the pass
            last = out[plan.head.job] = max(plan.head.time, now)
        fcfs = params.policy is Policy.FCFS
        for w in snap.pending:
            if w.bind is not None:
                continue
            if w.id in started:
                out[w.id] = now
            elif w.id not in out:
                v = ps.vec(w)
                if not ps.possible(v):
                    out[w.id] = inf
                    continue
                t = earliest_common_start(
                    [(ps.profs[d], v[d]) for d in range(ps.dims) if v[d] > 0], w.estimate, last if fcfs else now
                )
                if t < inf:
                    ps.hold(t, w.estimate, v)
                out[w.id] = t
                if fcfs:
                    last = t
    _bound_forecast(snap, out)
    return out


def _bound_forecast(snap: Snapshot, out: dict[int, float]) -> None:
    """A job bound to a waiting reservation is predicted to start when the reservation activates."""
    when: dict[int, float] = {}
    for r in snap.reservations:
        if r.active:
            continue
        if r.start is not None:
            when[r.id] = max(r.start, snap.now)
        elif r.id in out:
            when[r.id] = out[r.id]
    for w in snap.pending:
        if w.bind is not None and w.bind in when:
            out[w.id] = when[w.bind]


def _queue(snap: Snapshot) -> list[Waiting]:
    return [w for w in snap.pending if w.bind is None]


def _fcfs(snap: Snapshot, record: dict[int, float] | None) -> tuple[Plan, _Pass]:
    ps = _Pass(snap, _USER)
    ps.fixed()
    head: HeadReservation | None = None
    for w in _queue(snap):
        v = ps.vec(w)
        if not ps.possible(v):
            continue
        if (ps.fits_now(v, w.estimate) or _loose_fit(ps, w, v)) and ps.placeable(w, v):
            ps.start(w, v, w.estimate, False, None)
            continue
        t = ps.earliest(v, w.estimate)
        head = HeadReservation(w.id, t)
        if t < inf:
            ps.hold(t, w.estimate, v)
        if record is not None:
            record[w.id] = t
        break
    ps.bound_starts(snap.pending)
    return _plan(ps, head), ps


def _loose_fit(ps: _Pass, w: Waiting, v: Vec) -> bool:
    """A checkpointable job that fits if it is preempted at the next fixed reservation."""
    return ps.loose is not None and w.preemptable and not w.flex and ps.fits_now(v, w.estimate, ps.loose)


def _plan(ps: _Pass, head: HeadReservation | None, wake: float = inf) -> Plan:
    w = min(ps.wake, wake)
    decisions = [d for d in ps.decisions if type(d) is Preempt] + [d for d in ps.decisions if type(d) is not Preempt]
    return Plan(tuple(decisions), head, w if w < inf else None)


def _conservative(snap: Snapshot, record: dict[int, float] | None) -> Plan:
    ps = _Pass(snap, _USER)
    ps.fixed()
    now = snap.now
    head: HeadReservation | None = None
    for w in _queue(snap):
        v = ps.vec(w)
        if not ps.possible(v):
            if record is not None:
                record[w.id] = inf
            continue
        t = ps.earliest(v, w.estimate)
        if (
            (t == now and all(v[d] <= ps.free_now[d] for d in range(ps.dims))) or _loose_fit(ps, w, v)
        ) and ps.placeable(w, v):
            ps.start(w, v, w.estimate, head is not None, None)
            t = now
        else:
            if head is None:
                head = HeadReservation(w.id, t)
            if t < inf:
                ps.hold(t, w.estimate, v)
        if record is not None:
            record[w.id] = t
        elif head is not None and ps.free_now[0] <= 0:
            break
    ps.bound_starts(snap.pending)
    if record is None and head is not None:
        _split(ps, snap, _queue(snap))
    return _plan(ps, head)


def _backfill(snap: Snapshot, ckpt: bool, naive: bool) -> tuple[Plan, _Pass]:
    now = snap.now
    ps = _Pass(snap, (_NAIVE if naive else _PLANNED) if ckpt else _USER)
    ps.fixed()
    queue = _queue(snap)
    h = -1
    shadow = inf
    skip = -1
    memo = snap.head if ckpt and not naive else None
    if memo is not None:
        for i, w in enumerate(queue):
            if w.id != memo.job:
                continue
            v = ps.vec(w)
            if not ps.possible(v):
                break
            if ps.fits_now(v, w.estimate) and ps.placeable(w, v):
                ps.start(w, v, w.estimate, False, None)
                skip = i
            else:
                t = min(memo.time, ps.earliest(v, w.estimate))
                if _meetable(ps, v, w.estimate, max(t, now)):
                    h, shadow = i, t
            break
    if h < 0:
        for i, w in enumerate(queue):
            if i == skip:
                continue
            v = ps.vec(w)
            if not ps.possible(v):
                continue
            if (ps.fits_now(v, w.estimate) or _loose_fit(ps, w, v)) and ps.placeable(w, v):
                ps.start(w, v, w.estimate, False, None)
                continue
            h = i
            break
        if h < 0:
            ps.bound_starts(snap.pending)
            return _plan(ps, None), ps
        shadow = ps.earliest(ps.vec(queue[h]), queue[h].estimate)
        rest = [w for k, w in enumerate(queue) if k > h and k != skip]
    else:
        rest = [w for k, w in enumerate(queue) if k != h and k != skip]
    head = queue[h]
    hv = ps.vec(head)
    if ckpt and now >= shadow:
        have = ps.coming()
        short = [hv[d] - have[d] for d in range(ps.dims)]
        if any(s > 0 for s in short):
            cands = [
                r for r in ps.general if r.backfilled and r.preemptable and not r.stopping and r.id not in ps.preempted
            ]
            ps.preempt(cands, short)
    if shadow < inf:
        ps.hold(max(shadow, now), head.estimate, hv)
    predict = make_predictor(snap.params, snap.history) if ckpt else None
    reclaimable = any(r.backfilled and r.preemptable and not r.stopping for r in ps.general)
    # Once the reservation time has come, only what is free now or coming free
    # (stopping, preempted) is left beyond the head, never jobs merely counted as ended.
    extra = [c - x for c, x in zip(ps.coming(), hv)] if shadow <= now else None
    for w in rest:
        if ps.free_now[0] <= 0:
            break
        v = ps.vec(w)
        if not ps.possible(v) or v[0] > ps.free_now[0]:
            continue
        if extra is not None and any(v[d] > extra[d] for d in range(ps.dims)):
            continue
        if not ps.placeable(w, v):
            continue
        est = w.estimate
        shorten = predict is not None and w.preemptable and not w.flex
        if ps.fits_now(v, est) and (not shorten or now + est <= shadow):
            ps.start(w, v, est, True, None)
        elif (
            shorten
            and predict is not None
            and (planned := predict(w)) is not None
            and now + planned <= shadow
            and ps.fits_now(v, planned)
        ):
            ps.start(w, v, planned, True, planned)
        elif ps.fits_now(v, est) or _loose_fit(ps, w, v):
            ps.start(w, v, est, True, None)
        else:
            continue
        if extra is not None:
            for d in range(ps.dims):
                extra[d] -= v[d]
        if w.preemptable and not w.flex:
            reclaimable = True
    wake = inf
    if ckpt:
        for r in ps.general:
            if r.planned is not None and not r.stopping:
                pe = r.start + r.planned
                if now < pe < wake:
                    wake = pe
        if now < shadow < wake and reclaimable:
            wake = shadow
    ps.bound_starts(snap.pending)
    _split(ps, snap, rest)
    return _plan(ps, HeadReservation(head.id, shadow), wake), ps


def _split(ps: _Pass, snap: Snapshot, rest: list[Waiting]) -> None:
    """Sub-tasks of splittable jobs in the window left after backfilling.

    The window is the cores free now that nothing holds (the head's
    reservation, fixed reservations) until the first time something does; a
    job that also asks for floating resources is not split.
    """
    from .policy import _split_fill  # the same rule as the count-only pass

    width = min(ps.free_now[0], ps.profs[0].free_at(ps.now))
    end = next((t for t, v in ps.profs[0].steps() if t > ps.now and v < width), inf)
    if width <= 0 or end == inf:
        return
    cands = {w.id: w for w in rest if w.split is not None and not w.resources}
    started = [d for d in ps.decisions if type(d) is Start]
    for d in _split_fill(snap, list(cands.values()), started, ps.free_set, width, end):
        ps.decisions.append(d)
        n = len(d.chains) * cands[d.job].split.ncpus  # type: ignore[union-attr]
        ps.free_now[0] -= n
        ps.hold(ps.now, d.end - ps.now, (n,) + (0,) * (ps.dims - 1))
        if ps.free_set is not None:
            ps.free_set = ps.free_set.difference(d.cores)


def _meetable(ps: _Pass, v: Vec, duration: float, t: float) -> bool:
    """Whether ``v`` can be had from ``t`` on, preempting every checkpointable backfilled job."""
    extra = [0] * ps.dims
    for r in ps.general:
        if r.backfilled and r.preemptable and not r.stopping and ps.counted.get(r.id, t) > t:
            ps._acc(extra, ps.vec(r))
    for d in range(ps.dims):
        if v[d] and ps.profs[d].min_free(t, t + duration) + extra[d] < v[d]:
            return False
    return True
