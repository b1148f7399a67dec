"""Jobs of walltime 0 (SWF traces: run time 0, no requested time) and the two ways the pass keeps time.

A machine with floating resources or devices has one availability profile per
resource; one with cores alone is counted in one sweep over the running jobs.
The two must decide the same for the same jobs: a head job of walltime 0 due
later holds the instant its reservation begins in both, so a job running across
that instant must leave it its cores.
"""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.policy import forecast, schedule
from gridsched.core.topology import Device
from gridsched.core.types import HeadReservation, Params, Policy, Running, Snapshot, Start, Waiting

GPUS = (Device("gpu", 0, 0), Device("gpu", 1, 0, share=2))
POLICIES = [
    Params(policy=Policy.FCFS),
    Params(policy=Policy.EASY),
    Params(policy=Policy.CONSERVATIVE),
    Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=600),
    Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.5, threshold=0),
]
WALLTIMES = st.sampled_from([0.0, 0.0, 5.0, 50.0, 100.0, 400.0, 4000.0])


def with_unused(snap: Snapshot, kind: str) -> Snapshot:
    """``snap`` on a machine that also has a resource no job asks for."""
    if kind == "licence":
        return replace(snap, floating={"matlab": 3})
    return replace(snap, devices=GPUS)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    ncores = draw(st.integers(2, 16))
    now = 1000.0
    running: list[Running] = []
    used = 0
    for k in range(draw(st.integers(0, 5))):
        n = draw(st.integers(1, ncores))
        if used + n > ncores:
            break
        used += n
        ran = draw(st.sampled_from([0.0, 10.0, 100.0, 600.0]))
        est = draw(WALLTIMES)
        backfilled = draw(st.booleans())
        running.append(
            Running(
                100 + k,
                n,
                now - ran,
                est,
                backfilled=backfilled,
                preemptable=backfilled and draw(st.booleans()),
                stopping=draw(st.integers(0, 5)) == 0,
            )
        )
    pending = [
        Waiting(k, draw(st.integers(1, ncores)), draw(WALLTIMES), preemptable=draw(st.booleans()))
        for k in range(1, draw(st.integers(1, 8)) + 1)
    ]
    params = draw(st.sampled_from(POLICIES))
    head = None
    if params.policy is Policy.CHECKPOINT_BACKFILL and draw(st.booleans()):
        head = HeadReservation(draw(st.sampled_from(pending)).id, now + draw(st.sampled_from([0.0, 50.0, 4000.0])))
    return Snapshot(now, ncores, tuple(running), tuple(pending), params, head=head, gated=False, splitting=False)


@settings(max_examples=400, deadline=None)
@given(snap=snapshots(), kind=st.sampled_from(["licence", "gpus"]))
def test_an_unused_resource_changes_no_plan_and_no_forecast(snap: Snapshot, kind: str) -> None:
    other = with_unused(snap, kind)
    assert schedule(other) == schedule(snap)
    assert forecast(other) == forecast(snap)


def test_a_zero_walltime_head_keeps_its_cores_at_its_reservation_on_both_paths() -> None:
    # 8 cores, 5 held until 4000.  Job 2 (7 cores, walltime 0) is the head, due at 4000: job 3 (1 core)
    # running past 4000 leaves it room, job 4 (2 cores) would not
    snap = Snapshot(
        10.0,
        8,
        (Running(1, 5, 0.0, 4000.0),),
        (Waiting(2, 7, 0.0), Waiting(3, 1, 4000.0), Waiting(4, 2, 4000.0)),
        Params(policy=Policy.EASY),
        gated=False,
    )
    for s in (snap, with_unused(snap, "licence"), with_unused(snap, "gpus")):
        plan = schedule(s)
        assert [d.job for d in plan.decisions if isinstance(d, Start)] == [3]
        assert plan.head == HeadReservation(2, 4000.0)


def test_a_zero_walltime_reservation_lets_a_job_end_or_start_at_its_instant() -> None:
    # the same head: a 2-core job ending at 4000 runs now; a conservative 2-core job is reserved
    # just as the head ends (the head holds only the instant it begins)
    snap = Snapshot(
        10.0,
        8,
        (Running(1, 5, 0.0, 4000.0),),
        (Waiting(2, 7, 0.0), Waiting(4, 2, 3990.0)),
        Params(policy=Policy.EASY),
        gated=False,
    )
    for s in (snap, with_unused(snap, "licence")):
        assert [d.job for d in schedule(s).decisions if isinstance(d, Start)] == [4]
    late = replace(snap, pending=(Waiting(2, 7, 0.0), Waiting(4, 2, 4000.0)))
    cons = replace(late, params=Params(policy=Policy.CONSERVATIVE))
    for s in (cons, with_unused(cons, "gpus")):
        assert schedule(s).decisions == ()
        times = forecast(s)
        assert times[2] == 4000.0 and 4000.0 <= times[4] == math.nextafter(4000.0, math.inf)
