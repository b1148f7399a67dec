"""Property tests of the pass with floating resources and reservations.

1. Without floating resources or reservations it decides exactly what the
   count-only pass decides (same plan, same forecast): the general pass is
   forced by a floating resource nobody asks for.
2. Driven over random workloads with licences and flexible and fixed
   reservations, no core and no licence unit is ever used twice at any time,
   bound jobs stay inside their reservation, and fixed reservations are active
   over their whole window whenever their resources were free at the start.
"""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.policy import forecast, schedule
from gridsched.core.types import (
    Activate,
    HeadReservation,
    Params,
    Policy,
    Preempt,
    Resv,
    Running,
    Snapshot,
    Waiting,
)

POLICIES = list(Policy)


@st.composite
def plain_snapshots(draw):
    ncores = draw(st.sampled_from([4, 8, 16]))
    now = 100.0
    placement = draw(st.booleans())
    running = []
    used = 0
    for i in range(draw(st.integers(0, 5))):
        n = draw(st.integers(1, 4))
        if used + n > ncores:
            break
        cores = tuple(range(used, used + n))
        used += n
        est = draw(st.sampled_from([20.0, 60.0, 100.0, 300.0, 1000.0]))
        bf, pre = draw(st.booleans()), draw(st.booleans())
        planned = est * 0.2 if bf and pre and draw(st.booleans()) else None
        running.append(
            Running(
                1000 + i,
                n,
                now - draw(st.floats(0, 50)),
                est,
                cores if placement else (),
                bf,
                pre,
                planned,
                draw(st.integers(0, 9)) == 0,
            )
        )
    pending = [
        Waiting(
            i,
            draw(st.integers(1, ncores + 1)),
            draw(st.sampled_from([10.0, 50.0, 100.0, 500.0, 3000.0])),
            draw(st.booleans()),
        )
        for i in range(draw(st.integers(0, 8)))
    ]
    head = None
    if pending and draw(st.booleans()):
        head = HeadReservation(draw(st.sampled_from(pending)).id, now + draw(st.floats(-10, 200)))
    params = Params(policy=draw(st.sampled_from(POLICIES)), p=0.2, threshold=100.0, cascade=draw(st.booleans()))
    free = frozenset(range(used, ncores)) if placement else None
    return Snapshot(now, ncores, tuple(running), tuple(pending), params, free, head)


@settings(max_examples=400, deadline=None)
@given(plain_snapshots())
def test_general_pass_equals_count_only_pass(s):
    forced = dataclasses.replace(s, floating={"unused": 1})
    assert schedule(forced) == schedule(s)
    assert forecast(forced) == forecast(s)


# -- a small driver ------------------------------------------------------------------

LIC = "lic"


@dataclasses.dataclass
class Item:
    id: int
    submit: float
    ncpus: int
    estimate: float
    actual: float
    lic: int
    preemptable: bool
    kind: str  # job | flex | fixed | bound
    start: float | None = None  # fixed reservations
    bind: int | None = None


@st.composite
def workloads(draw):
    ncores = draw(st.sampled_from([4, 8]))
    nlic = draw(st.integers(1, 3))
    items: list[Item] = []
    n = draw(st.integers(1, 14))
    resv_ids = []
    for i in range(1, n + 1):
        kind = draw(st.sampled_from(["job", "job", "job", "flex", "fixed", "bound"]))
        if kind == "bound" and not resv_ids:
            kind = "job"
        submit = float(draw(st.integers(0, 40)))
        ncpus = draw(st.integers(1, ncores))
        est = float(draw(st.integers(1, 60)))
        lic = draw(st.integers(0, nlic))
        it = Item(i, submit, ncpus, est, float(draw(st.integers(1, int(est)))), lic, draw(st.booleans()), kind)
        if kind == "fixed":
            it.start = submit + draw(st.integers(1, 60))
        if kind == "bound":
            it.bind = draw(st.sampled_from(resv_ids))
        if kind in ("flex", "fixed"):
            resv_ids.append(i)
        items.append(it)
    params = Params(
        policy=draw(st.sampled_from(POLICIES)), p=0.3, threshold=10.0, preempt_for_fixed=draw(st.booleans())
    )
    return ncores, nlic, items, params, draw(st.booleans())


def res(lic: int) -> tuple[tuple[str, int], ...]:
    return ((LIC, lic),) if lic else ()


def run(ncores: int, nlic: int, items: list[Item], params: Params, placement: bool) -> None:
    by_id = {it.id: it for it in items}
    arrived: set[int] = set()
    pending: list[int] = []  # ids of pending jobs and flexible entries, in id order
    running: dict[int, tuple[Running, float]] = {}  # job id -> (run, actual end)
    done: dict[int, float] = {}  # work done by preempted jobs
    resvs: dict[int, Resv] = {}  # live reservations
    finished: set[int] = set()
    head = None
    now = 0.0
    for _ in range(3000):
        # ends
        for jid, (_r, end) in list(running.items()):
            if end <= now + 1e-9:
                del running[jid]
                finished.add(jid)
        for rid, rv in list(resvs.items()):
            if rv.active and rv.end is not None and rv.end <= now + 1e-9:
                del resvs[rid]
                for jid, (r, _end) in list(running.items()):
                    if r.bind == rid:  # killed with the reservation
                        del running[jid]
                        finished.add(jid)
                pending[:] = [p for p in pending if by_id[p].bind != rid]
            elif not rv.active and rv.start is not None and rv.start + rv.duration <= now:
                del resvs[rid]
                pending[:] = [p for p in pending if by_id[p].bind != rid]
        # arrivals
        for it in items:
            if it.id not in arrived and it.submit <= now:
                arrived.add(it.id)
                if it.kind in ("flex", "fixed"):
                    resvs[it.id] = Resv(it.id, it.ncpus, it.estimate, res(it.lic), it.start)
                    if it.kind == "flex":
                        pending.append(it.id)
                elif it.kind == "bound" and it.bind not in resvs:
                    finished.add(it.id)  # its reservation is over: refused
                else:
                    pending.append(it.id)
                pending.sort()
        for _ in range(20):
            used = set()
            for r, _e in running.values():
                used.update(r.cores)
            for rv in resvs.values():
                used.update(rv.cores)
            free = frozenset(range(ncores)) - used if placement else None
            entries = []
            for p in pending:
                it = by_id[p]
                if it.kind == "flex":
                    entries.append(Waiting(it.id, it.ncpus, it.estimate, False, "", 0.0, res(it.lic), None, True))
                else:
                    entries.append(
                        Waiting(
                            it.id,
                            it.ncpus,
                            it.estimate - done.get(it.id, 0.0),
                            it.preemptable,
                            "",
                            done.get(it.id, 0.0),
                            res(it.lic),
                            it.bind,
                        )
                    )
            snap = Snapshot(
                now,
                ncores,
                tuple(r for r, _ in running.values()),
                tuple(entries),
                params,
                free,
                head,
                {},
                {LIC: nlic},
                tuple(resvs.values()),
            )
            plan = schedule(snap)
            forecast(snap)  # must not fail
            head = plan.head
            for d in plan.decisions:
                if isinstance(d, Preempt):
                    r, _e = running.pop(d.job)
                    assert r.preemptable
                    done[d.job] = done.get(d.job, 0.0) + (now - r.start)
                    pending.append(d.job)
                    pending.sort()
                elif isinstance(d, Activate):
                    rv = resvs[d.resv]
                    assert not rv.active
                    if rv.start is not None:
                        assert now >= rv.start and d.end == rv.start + rv.duration
                    resvs[d.resv] = dataclasses.replace(rv, active=True, cores=d.cores, end=d.end)
                    pending.remove(d.resv) if d.resv in pending else None
                else:
                    it = by_id[d.job]
                    assert d.job in pending
                    pending.remove(d.job)
                    left = it.estimate - done.get(it.id, 0.0)
                    r = Running(
                        it.id,
                        it.ncpus,
                        now,
                        left,
                        d.cores,
                        d.backfilled,
                        it.preemptable,
                        d.planned,
                        False,
                        "",
                        res(it.lic),
                        it.bind,
                    )
                    running[it.id] = (r, now + it.actual - done.get(it.id, 0.0))
            check(ncores, nlic, running, resvs, placement, now)
            if not plan.decisions:
                break
        times = [e for _r, e in running.values() if e > now]
        times += [it.submit for it in items if it.id not in arrived]
        times += [rv.end for rv in resvs.values() if rv.active and rv.end is not None and rv.end > now]
        times += [rv.start for rv in resvs.values() if rv.start is not None and rv.start > now]
        times += [rv.start + rv.duration for rv in resvs.values() if rv.start is not None and not rv.active]
        if plan.wake_at is not None and plan.wake_at > now:
            times.append(plan.wake_at)
        if head is not None and head.time > now and head.time < math.inf:
            times.append(head.time)
        times = [t for t in times if t > now]
        if not times:
            break
        now = min(times)


def check(ncores, nlic, running, resvs, placement, now) -> None:
    general_cores = 0
    lic = 0
    seen: set[int] = set()
    inside: dict[int, list[Running]] = {}
    for r, _e in running.values():
        if r.bind is not None and r.bind in resvs and resvs[r.bind].active:
            inside.setdefault(r.bind, []).append(r)
            continue
        general_cores += r.ncpus
        lic += dict(r.resources).get(LIC, 0)
        if placement:
            assert not seen & set(r.cores), "a core given twice"
            seen |= set(r.cores)
    for rv in resvs.values():
        if not rv.active:
            continue
        general_cores += rv.ncpus
        lic += dict(rv.resources).get(LIC, 0)
        if placement:
            assert not seen & set(rv.cores), "a reserved core given to someone else"
            seen |= set(rv.cores)
        jobs = inside.get(rv.id, [])
        assert sum(j.ncpus for j in jobs) <= rv.ncpus
        assert sum(dict(j.resources).get(LIC, 0) for j in jobs) <= dict(rv.resources).get(LIC, 0)
        for j in jobs:
            assert j.start + j.estimate <= rv.end + 1e-9
            if placement:
                assert set(j.cores) <= set(rv.cores)
        if placement:
            inner = [c for j in jobs for c in j.cores]
            assert len(inner) == len(set(inner)), "a reservation core given twice"
    assert general_cores <= ncores, f"{general_cores} cores in use on {ncores} at {now}"
    assert lic <= nlic, f"{lic} licences in use of {nlic} at {now}"


@settings(max_examples=300, deadline=None)
@given(workloads())
def test_no_core_or_licence_is_used_twice(w):
    ncores, nlic, items, params, placement = w
    run(ncores, nlic, items, params, placement)
