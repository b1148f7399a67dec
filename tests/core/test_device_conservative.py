"""Conservative backfilling with jobs that ask for devices.

Under conservative every waiting job holds a reservation.  Counts of device
slots are not devices: with ``share = 2`` two free slots of one GPU are not two
GPUs.  A job asking for devices is reserved at the first time
:func:`gridsched.core.devices.choose` can place it on what is free then, and a
job started now that would still run at such a reservation's time must leave
that job a placement then.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.policy import forecast, schedule
from gridsched.core.topology import Device
from gridsched.core.types import Policy
from tests.core.test_device_backfill import gpu_job, head_placeable, holder, make_snap, passes, shared_gpus


def test_a_job_started_now_leaves_a_reserved_job_two_distinct_gpus_not_two_slots_of_one() -> None:
    # 2 GPUs of 2 slots.  Jobs 1 and 2 hold both slots of GPU 0 until 100; job 3 one slot of GPU 1
    # for ever.  Job 4 asks for 2 GPUs: reserved at 100 (GPU 0 and the last slot of GPU 1).  Job 5
    # (1 GPU, past 100) fits by count (3 slots free then, 2 for job 4), but it could only get that
    # last slot of GPU 1 now, leaving job 4 one GPU at 100: it waits, reserved at 100 too (beside
    # job 4, on GPU 0's other slot).  Job 6 (1 GPU) ends by 100 and runs now.
    devs = (Device("gpu", 0, 0, share=2), Device("gpu", 1, 0, share=2))
    running = [
        holder(1, 1, 0.0, 100.0, [("gpu", 0)], devs),
        holder(2, 1, 0.0, 100.0, [("gpu", 0)], devs),
        holder(3, 1, 0.0, 1e6, [("gpu", 1)], devs),
    ]
    pending = [gpu_job(4, 1, 2, 50.0), gpu_job(5, 1, 1, 500.0)]
    snap = make_snap(None, devs, 8, pending, running, Policy.CONSERVATIVE, 10.0)
    plan = schedule(snap)
    assert plan.starts == () and plan.head is not None and (plan.head.job, plan.head.time) == (4, 100.0)
    times = forecast(snap)
    assert times[4] == times[5] == 100.0
    pending.append(gpu_job(6, 1, 1, 80.0))
    plan = schedule(make_snap(None, devs, 8, pending, running, Policy.CONSERVATIVE, 10.0))
    assert [s.job for s in plan.starts] == [6]


def test_a_job_is_reserved_when_distinct_devices_are_free_not_when_slots_are() -> None:
    # 2 GPUs of 2 slots.  Jobs 1 and 2 hold GPU 0 until 1000; job 3 one slot of GPU 1 until 100.
    # Job 4 asks for 2 GPUs: at 100 two slots are free, both of GPU 1, so it is reserved at 1000,
    # when GPU 0 comes free.  Job 5 (1 GPU until 510) then runs now on GPU 1's free slot: by count,
    # with job 4 held from 100, it would not have.
    devs = (Device("gpu", 0, 0, share=2), Device("gpu", 1, 0, share=2))
    running = [
        holder(1, 1, 0.0, 1000.0, [("gpu", 0)], devs),
        holder(2, 1, 0.0, 1000.0, [("gpu", 0)], devs),
        holder(3, 1, 0.0, 100.0, [("gpu", 1)], devs),
    ]
    pending = [gpu_job(4, 1, 2, 50.0), gpu_job(5, 1, 1, 500.0)]
    snap = make_snap(None, devs, 8, pending, running, Policy.CONSERVATIVE, 10.0)
    plan = schedule(snap)
    assert plan.head is not None and (plan.head.job, plan.head.time) == (4, 1000.0)
    assert [s.job for s in plan.starts] == [5]
    assert forecast(snap)[4] == 1000.0


# -- the property --------------------------------------------------------------------------------


@settings(max_examples=1000, deadline=None)
@given(st.one_of(passes(), shared_gpus(), shared_gpus()))
def test_a_job_started_past_a_reservation_leaves_the_reserved_job_placeable_then(p) -> None:
    snap, _ = p
    snap = replace(snap, params=replace(snap.params, policy=Policy.CONSERVATIVE))
    plan = schedule(snap)
    times = forecast(snap)
    started = {s.job for s in plan.starts}
    pend = {w.id: w for w in snap.pending}
    for jid, t in times.items():
        w = pend[jid]
        if jid in started or not w.devices or not snap.now < t < float("inf"):
            continue
        late = [
            s
            for s in plan.starts
            if s.backfilled and snap.now + (s.planned if s.planned is not None else pend[s.job].estimate) > t
        ]
        # (placeable without the jobs started once a reservation was held: else nothing is promised)
        if not late or not head_placeable(snap, plan, w, t, backfilled=False):
            continue
        assert head_placeable(snap, plan, w, t, backfilled=True), (plan, jid, t)
