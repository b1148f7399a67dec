"""A suspended job keeps its devices (as Slurm keeps a suspended job's GRES) and is continued on them alone."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import devices as dev
from gridsched.core.policy import forecast, schedule
from gridsched.core.topology import Device, board, make
from gridsched.core.types import HeadReservation, Params, Policy, Running, Snapshot, Start, Waiting

G0, G1 = ("gpu", 0), ("gpu", 1)
CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.25, threshold=5.0)
EASY = Params(policy=Policy.EASY)


def machine(ngpu=2, share=1):
    devs = tuple(Device("gpu", i, i % 2, share=share) for i in range(ngpu))
    return make([board(0, range(4)), board(1, range(4, 8))], list(range(8)), devices=devs), devs


def gjob(jid, n=1, gpus=1, est=100.0, suspend=False, kept=False, devs=(), **kw) -> Waiting:
    asks = (dev.DeviceAsk("gpu", gpus),) if gpus else ()
    slots = () if kept else dev.slots(asks, devs)  # a suspended job needs none from the pool
    return Waiting(
        jid, n, est, preemptable=suspend, resources=slots, devices=asks, keeps_devices=suspend and bool(asks), **kw
    )


def run(jid, cores, devs, keys=(), bf=False, suspend=False, start=0.0, est=1000.0) -> Running:
    return Running(
        jid,
        len(cores),
        start,
        est,
        tuple(cores),
        backfilled=bf,
        preemptable=bf,
        planned=10.0 if bf else None,
        devices=tuple(keys),
        resources=dev.held(keys, devs, False),
        keeps_devices=suspend and bool(keys),
    )


def snap(m, devs, running, pending, kept=None, params=EASY, now=50.0, **kw) -> Snapshot:
    busy = {c for r in running for c in r.cores}
    return Snapshot(
        now=now,
        ncores=8,
        running=tuple(running),
        pending=tuple(pending),
        params=params,
        free=frozenset(range(8)) - busy,
        machine=m,
        devices=devs,
        kept=dict(kept or {}),
        **kw,
    )


def starts(plan) -> dict[int, Start]:
    return {s.job: s for s in plan.starts}


def test_a_suspended_jobs_gpu_is_given_to_no_one_else():
    m, devs = machine()
    big = run(9, range(7), devs)  # one core left
    s = snap(
        m,
        devs,
        [big],
        [gjob(1, n=2, suspend=True, kept=True, devs=devs), gjob(2, devs=devs), gjob(3, devs=devs)],
        kept={1: ((G0,), False)},
    )
    st_ = starts(schedule(s))
    assert 1 not in st_ and st_[2].devices == (G1,) and 3 not in st_
    # without the suspended job keeping GPU 0, job 3 would have had it
    free = snap(m, devs, [run(9, range(6), devs)], [gjob(2, devs=devs), gjob(3, devs=devs)])
    assert set(starts(schedule(free))) == {2, 3}


def test_a_suspended_job_is_continued_on_its_own_gpu_only():
    m, devs = machine()
    # board 0's cores are busy: closest would take GPU 1 on board 1; the job kept GPU 0
    s = snap(
        m, devs, [run(9, range(4), devs)], [gjob(1, n=2, suspend=True, kept=True, devs=devs)], kept={1: ((G0,), False)}
    )
    st_ = starts(schedule(s))
    assert st_[1].devices == (G0,) and set(st_[1].cores) <= set(range(4, 8))


def test_a_job_needing_the_kept_gpu_does_not_block_the_queue():
    m, devs = machine()
    s = snap(
        m,
        devs,
        [run(9, range(7), devs, [G1])],
        [gjob(1, n=2, suspend=True, kept=True, devs=devs), gjob(2, n=1, gpus=2, devs=devs), Waiting(3, 1, 10.0)],
        kept={1: ((G0,), False)},
    )
    assert set(starts(schedule(s))) == {3}
    assert forecast(s)[2] == math.inf  # not while the suspended job keeps its GPU


def test_a_suspend_mode_job_is_not_preempted_for_a_gpu_it_would_keep_but_is_for_cores():
    m, devs = machine(ngpu=1)
    head = gjob(1, n=1, gpus=1, devs=devs)
    for suspend, expect in ((True, []), (False, [5])):
        bf = run(5, (0,), devs, [G0], bf=True, suspend=suspend)
        other = run(6, range(1, 8), devs)
        s = snap(m, devs, [bf, other], [head], params=CKPT, head=HeadReservation(1, 50.0))
        assert [p.job for p in schedule(s).preempts] == expect
    # a head asking for cores only: the suspend-mode job is preempted for its core
    bf = run(5, (0,), devs, [G0], bf=True, suspend=True)
    s = snap(
        m, devs, [bf, run(6, range(1, 8), devs)], [Waiting(1, 1, 100.0)], params=CKPT, head=HeadReservation(1, 50.0)
    )
    assert [p.job for p in schedule(s).preempts] == [5]


def test_a_job_that_would_keep_its_gpu_is_not_backfilled_on_a_shortened_estimate_before_a_gpu_head():
    m, devs = machine(ngpu=2)
    block = run(9, range(7), devs, est=100.0)  # ends at 100: the head's reservation then
    for head_gpus, suspend, expect in ((1, False, True), (1, True, False), (0, True, True)):
        head = gjob(1, n=8, gpus=head_gpus, devs=devs)
        # 1 core for 200 s: shortened (p = 0.25) to 50 s, it would end by the shadow time
        w = replace(gjob(2, n=1, est=200.0, suspend=suspend, devs=devs), preemptable=True)
        s = snap(m, devs, [block], [head, w], params=CKPT, now=50.0)
        assert (2 in starts(schedule(s))) is expect, (head_gpus, suspend)


# -- property: devices kept by suspended jobs are never given away ----------------------------


@settings(max_examples=150, deadline=None)
@given(
    share=st.integers(1, 2),
    jobs=st.lists(
        st.tuples(st.integers(1, 8), st.integers(0, 2), st.integers(1, 80), st.booleans()), min_size=1, max_size=8
    ),
    block=st.integers(0, 7),
)
def test_kept_devices_are_never_overcommitted_and_a_job_continues_on_them(share, jobs, block):
    m, devs = machine(share=share)
    by_key = {d.key: d for d in devs}
    spec = {10 + i: j for i, j in enumerate(jobs)}
    pending = [gjob(jid, n, g, float(e), suspend=s, devs=devs) for jid, (n, g, e, s) in spec.items()]
    running: list[Running] = []
    if block:  # a job of every core waits behind it: later ones are backfilled and preempted for it
        running.append(run(9, range(block), devs, est=20.0))
        pending.insert(0, Waiting(8, 8, 30.0))
        spec[8] = (8, 0, 30, False)
    kept: dict[int, tuple] = {}
    now = 0.0
    head = None
    for _ in range(80):
        if not pending and not running:
            break
        s = snap(m, devs, running, pending, kept, params=CKPT, now=now, head=head)
        plan = schedule(s)
        head = plan.head
        for p in plan.preempts:
            r = next(x for x in running if x.id == p.job)
            running.remove(r)
            n, g, e, sus = spec[r.id]
            left = max(1.0, r.estimate - (now - r.start))
            if sus and r.devices:
                kept[r.id] = (r.devices, False)
            pending.append(gjob(r.id, n, g, left, suspend=sus, kept=r.id in kept, devs=devs))
        for st_ in plan.starts:
            w = next(x for x in pending if x.id == st_.job)
            pending.remove(w)
            if w.id in kept:
                assert st_.devices == kept.pop(w.id)[0]  # continued on its own devices
            running.append(
                replace(
                    run(
                        w.id,
                        st_.cores,
                        devs,
                        st_.devices,
                        bf=st_.backfilled and w.preemptable,
                        suspend=w.keeps_devices,
                        start=now,
                        est=w.estimate,
                    ),
                    planned=st_.planned,
                )
            )
        holders = [(r.devices, r.whole_devices) for r in running] + list(kept.values())
        used = dev.used_slots(holders, devs)
        assert all(used[k] <= by_key[k].share for k in used)
        cores = [c for r in running for c in r.cores]
        assert len(cores) == len(set(cores))
        ends = [r.end for r in running]
        now = min(ends) if ends else now + 1
        running = [r for r in running if r.end > now]
