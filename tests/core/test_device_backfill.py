"""Backfilling beside a head job that asks for devices, before its reservation time has come.

Counts of device slots are not devices: with ``share = 2`` two free slots of
one GPU are not two GPUs.  A job backfilled now that would still run at the
head's reservation time must leave the head what :func:`gridsched.core.devices.choose`
(the function its start uses) can give it then: distinct devices with a free
slot and, on a map, cores near them.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import devices as dev
from gridsched.core.policy import schedule
from gridsched.core.topology import Device, MachineMap, board, make
from gridsched.core.types import Params, Plan, Policy, Running, Snapshot, Waiting


def gpu_job(jid: int, ncpus: int, gpus: int, estimate: float, bind: str = "closest", excl: bool = False) -> Waiting:
    asks = (dev.DeviceAsk("gpu", gpus, "", bind, excl),) if gpus else ()
    return Waiting(jid, ncpus, estimate, devices=asks)


def holder(jid: int, ncpus: int, start: float, estimate: float, keys, devs, cores=(), excl=False) -> Running:
    keys = tuple(keys)
    return Running(
        jid,
        ncpus,
        start,
        estimate,
        cores=tuple(cores),
        devices=keys,
        whole_devices=excl,
        resources=dev.held(keys, devs, excl),
    )


def make_snap(
    machine: MachineMap | None,
    devs: tuple[Device, ...],
    ncores: int,
    pending,
    running,
    policy: Policy,
    now: float,
) -> Snapshot:
    pend = tuple(replace(w, resources=dev.merge(w.resources, dev.slots(w.devices, devs))) for w in pending)
    free = None
    if machine is not None:
        free = frozenset(range(ncores)) - {c for r in running for c in (*r.cores, *r.held)}
    return Snapshot(
        now=now,
        ncores=ncores,
        running=tuple(running),
        pending=pend,
        params=Params(policy=policy, p=0.2, threshold=0),
        free=free,
        machine=machine,
        devices=devs,
        gated=False,
        splitting=False,
    )


def test_a_backfilled_job_leaves_the_head_two_distinct_gpus_not_two_slots_of_one() -> None:
    # 2 GPUs of 2 slots.  Jobs 1 and 2 hold both slots of GPU 0 until 100; job 3 one slot of GPU 1
    # for ever.  The head (job 4) asks for 2 GPUs: at 100, GPU 0 and the last slot of GPU 1.  Job 5
    # (1 GPU, past 100) fits by count (3 slots free then, 2 for the head), but it could only get
    # that last slot of GPU 1 now, leaving the head one GPU at 100: it waits.  Job 6 (1 GPU) ends by
    # 100 and runs now.
    devs = (Device("gpu", 0, 0, share=2), Device("gpu", 1, 0, share=2))
    running = [
        holder(1, 1, 0.0, 100.0, [("gpu", 0)], devs),
        holder(2, 1, 0.0, 100.0, [("gpu", 0)], devs),
        holder(3, 1, 0.0, 1e6, [("gpu", 1)], devs),
    ]
    for policy in (Policy.EASY, Policy.CHECKPOINT_BACKFILL):
        pending = [gpu_job(4, 1, 2, 50.0), gpu_job(5, 1, 1, 500.0)]
        plan = schedule(make_snap(None, devs, 8, pending, running, policy, 10.0))
        assert plan.starts == () and plan.head is not None and (plan.head.job, plan.head.time) == (4, 100.0)
        pending.append(gpu_job(6, 1, 1, 80.0))
        plan = schedule(make_snap(None, devs, 8, pending, running, policy, 10.0))
        assert [s.job for s in plan.starts] == [6]


def test_on_a_map_a_backfilled_job_leaves_the_head_cores_near_its_gpu() -> None:
    # 2 boards of 2 cores, GPU 0 on board 0.  Job 1 holds GPU 0 and core 0 until 100.  The head (job 2,
    # strict binding) needs GPU 0 and 2 cores of board 0 at 100.  Job 3 (1 core, past 100) would get
    # core 1 now, the last free core of board 0 but for job 1's: it waits; job 4 (2 cores) goes to board 1.
    devs = (Device("gpu", 0, 0),)
    machine = make([board(0, [0, 1]), board(1, [2, 3])], [0, 1, 2, 3], devices=devs)
    running = [holder(1, 1, 0.0, 100.0, [("gpu", 0)], devs, cores=[0])]
    pending = [gpu_job(2, 2, 1, 50.0, bind="strict"), gpu_job(3, 1, 0, 500.0), gpu_job(4, 2, 0, 500.0)]
    plan = schedule(make_snap(machine, devs, 4, pending, running, Policy.EASY, 10.0))
    assert [(s.job, s.cores) for s in plan.starts] == [(4, (2, 3))]
    assert plan.head is not None and (plan.head.job, plan.head.time) == (2, 100.0)


# -- the property --------------------------------------------------------------------------------


@st.composite
def machines(draw: st.DrawFn) -> tuple[MachineMap | None, tuple[Device, ...], int]:
    nb = draw(st.integers(1, 3))
    per = draw(st.integers(2, 6))
    ndev = draw(st.integers(1, 4))
    share = draw(st.sampled_from([1, 2, 2, 3]))  # mostly shared: slots by count are not devices
    devs = tuple(Device("gpu", i, draw(st.integers(0, nb - 1)), share=share) for i in range(ndev))
    ncores = nb * per
    if not draw(st.booleans()):
        return None, devs, ncores
    return make([board(b, range(b * per, (b + 1) * per)) for b in range(nb)], range(ncores), devices=devs), devs, ncores


@st.composite
def jobs(draw: st.DrawFn, first: int, ncores: int, ndev: int, size: int, estimates: list[float]) -> list[Waiting]:
    out = []
    for jid in range(first, first + draw(st.integers(1, size))):
        out.append(
            gpu_job(
                jid,
                draw(st.sampled_from([1, 1, 1, 2, ncores // 2 or 1])),
                draw(st.sampled_from([0, 1, 1, 2, ndev])),
                draw(st.sampled_from(estimates)),
                draw(st.sampled_from(dev.BINDS)),
                draw(st.integers(0, 5)) == 0,
            )
        )
    return out


@st.composite
def passes(draw: st.DrawFn) -> tuple[Snapshot, MachineMap | None]:
    """A pass at time 10 over the jobs a first pass at 0 started (fcfs), with a new queue."""
    machine, devs, ncores = draw(machines())
    first = draw(jobs(1, ncores, len(devs), 8, [20.0, 60.0, 100.0, 300.0, 1e4]))
    s0 = make_snap(machine, devs, ncores, first, [], Policy.FCFS, 0.0)
    running = []
    for s in schedule(s0).starts:
        w = next(x for x in first if x.id == s.job)
        excl = bool(w.devices) and w.devices[0].exclusive
        running.append(holder(w.id, w.ncpus, 0.0, w.estimate, s.devices, devs, s.cores, excl))
    pending = draw(jobs(100, ncores, len(devs), 10, [5.0, 30.0, 100.0, 500.0, 1e4]))
    policy = draw(st.sampled_from([Policy.EASY, Policy.CHECKPOINT_BACKFILL]))
    return make_snap(machine, devs, ncores, pending, running, policy, 10.0), machine


@st.composite
def shared_gpus(draw: st.DrawFn) -> tuple[Snapshot, MachineMap | None]:
    """A pass at time 10 on GPUs of 2 or 3 slots partly held by running jobs of one GPU (some ending at
    100, some never), with a queue of jobs asking for one GPU or more (the first is often the head)."""
    machine, devs, ncores = draw(machines())
    share = draw(st.sampled_from([2, 3]))
    devs = tuple(replace(d, share=share) for d in devs)
    if len(devs) < 2:
        devs = (*devs, replace(devs[0], index=1))
    if machine is not None:
        machine = replace(machine, devices=devs)
    running = []
    free = list(range(ncores))
    jid = 1
    for d in devs:  # most devices full now, some of their slots held for ever, some until 100
        long = draw(st.integers(0, share))
        short = max(share - long - draw(st.sampled_from([0, 0, 1])), 0)
        for est in [1e6] * long + [100.0] * short:
            cores = [free.pop(0)] if machine is not None and free else []
            if machine is not None and not cores:
                break
            running.append(holder(jid, 1, 0.0, est, [d.key], devs, cores))
            jid += 1
    pending = [gpu_job(100, draw(st.integers(1, 2)), draw(st.integers(2, len(devs))), 50.0)]
    pending[0] = replace(pending[0], devices=(replace(pending[0].devices[0], bind=draw(st.sampled_from(dev.BINDS))),))
    for k in range(draw(st.integers(1, 5))):
        pending.append(
            gpu_job(101 + k, 1, draw(st.sampled_from([0, 1, 1, 1, 2])), draw(st.sampled_from([50.0, 500.0, 500.0])))
        )
    policy = draw(st.sampled_from([Policy.EASY, Policy.CHECKPOINT_BACKFILL]))
    return make_snap(machine, devs, ncores, pending, running, policy, 10.0), machine


def head_placeable(snap: Snapshot, plan: Plan, head: Waiting, t: float, backfilled: bool) -> bool:
    """Whether devices.choose places ``head`` at ``t`` on what the running jobs and the jobs ``plan`` starts
    (the backfilled ones only if ``backfilled``) leave free then."""
    starts = [s for s in plan.starts if backfilled or not s.backfilled]
    pend = {w.id: w for w in snap.pending}
    holders = [(r.devices, r.whole_devices) for r in snap.running if r.end > t]
    cores = set(snap.free) if snap.free is not None else None
    for s in starts:
        w = pend[s.job]
        end = snap.now + (s.planned if s.planned is not None else w.estimate)
        if cores is not None:
            cores.difference_update(s.cores)
        if end > t:
            holders.append((s.devices, bool(w.devices) and w.devices[0].exclusive))
        elif cores is not None:
            cores.update(s.cores)
    if cores is not None:
        for r in snap.running:
            if r.end <= t:
                cores.update(r.cores)
    used = dev.used_slots(holders, snap.devices)
    free = frozenset(cores) if cores is not None else None
    machine = snap.machine if free is not None else None
    return dev.choose(head.devices, snap.devices, used, machine, free, head.ncpus, head.place) is not None


@settings(max_examples=1500, deadline=None)
@given(st.one_of(passes(), shared_gpus(), shared_gpus()))
def test_a_job_backfilled_past_the_head_reservation_leaves_the_head_placeable_then(p) -> None:
    snap, _ = p
    plan = schedule(snap)
    if plan.head is None or not snap.now < plan.head.time < float("inf"):
        return
    head = next(w for w in snap.pending if w.id == plan.head.job)
    t = plan.head.time
    late = [
        s
        for s in plan.starts
        if s.backfilled
        and snap.now + (s.planned if s.planned is not None else next(w for w in snap.pending if w.id == s.job).estimate)
        > t
    ]
    if not head.devices or not late or not head_placeable(snap, plan, head, t, backfilled=False):
        return
    assert head_placeable(snap, plan, head, t, backfilled=True), (plan, head)
