"""The simulator on tiny workloads whose schedule and metrics are worked out by hand."""

from __future__ import annotations

import pytest
from simtraces import HAND, swf_line

from gridsched.core.types import Params, Plan, Policy, Predictor, Preempt, Snapshot, Start
from gridsched.sim import engine, swf
from gridsched.sim.engine import Mode, SimulationError, simulate
from gridsched.sim.metrics import compute, percentile


def test_fcfs_hand_workload(write_trace):
    tr = swf.read(write_trace(HAND, max_procs=4))
    res = simulate(tr, Params(policy=Policy.FCFS))
    # t=0 job 1 takes all 4 cores until 100.  At 100 jobs 2 and 3 start (2 + 2 cores);
    # job 3 runs 0 s and ends at 100, then job 4 (1 core, cut to 100 s) starts: ends 200.
    assert res.start == [0, 100, 100, 100]
    assert res.end == [100, 150, 100, 200]
    m = compute(res)
    assert m.jobs == 4 and m.skipped == 0
    assert m.makespan == 200
    # useful work 100*4 + 50*2 + 0*2 + 100*1 = 600 core-s over 4 cores * 200 s
    assert m.utilization == pytest.approx(0.75)
    # waits 0, 90, 80, 70
    assert m.wait_avg == pytest.approx(60)
    assert m.wait_p95 == 90
    # responses 100, 140, 80, 170
    assert m.response_avg == pytest.approx(122.5)
    # bsld: 100/100=1, 140/50=2.8, 80/max(0,10)=8, 170/100=1.7 -> 13.5 / 4
    assert m.bsld_avg == pytest.approx(3.375)
    assert m.checkpoints == 0 and m.overhead_core_hours == 0 and m.rerun_core_hours == 0


def test_easy_backfills_where_fcfs_waits(write_trace):
    lines = [
        swf_line(1, 0, 100, 2, 100),  # 2 of 4 cores until 100
        swf_line(2, 1, 10, 4, 10),  # head: needs 4, shadow time 100
        swf_line(3, 2, 50, 2, 50),  # ends at 52 <= 100: backfills under EASY
    ]
    tr = swf.read(write_trace(lines, max_procs=4))
    fcfs = simulate(tr, Params(policy=Policy.FCFS))
    easy = simulate(tr, Params(policy=Policy.EASY))
    assert fcfs.start == [0, 100, 110]
    assert easy.start == [0, 100, 2]
    assert easy.end == [100, 110, 52]


def test_checkpoint_backfill_preempts_at_reservation(write_trace):
    lines = [
        swf_line(1, 0, 1000, 2, 1000),  # A: 2 of 4 cores until 1000
        swf_line(2, 10, 500, 4, 500),  # B: the head, reservation at 1000
        swf_line(3, 20, 3000, 2, 4000),  # C: 4000 s > 30 min threshold -> counts as 0.2*4000 = 800
    ]
    tr = swf.read(write_trace(lines, max_procs=4))
    params = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=1800)
    res = simulate(tr, params, overhead=120)
    # C backfills at 20 (20 + 800 <= 1000).  At 1000 A ends, B still needs 2 more cores:
    # C is checkpointed after 980 s of work; B runs 1000-1500; C restarts at 1500 and
    # needs 120 (checkpoint) + 120 (restart) + 3000 - 980 = 2260 s: ends at 3760.
    assert res.start == [0, 1000, 20]
    assert res.end == [1000, 1500, 3760]
    assert res.checkpoints == [0, 0, 1]
    assert res.runs(2) == [(20, 1000), (1500, 3760)]
    m = compute(res)
    assert m.checkpoints == 1 and m.preempted_jobs == 1
    assert m.overhead_core_hours == pytest.approx(240 * 2 / 3600)
    # waits 0, 990, 0; responses 1000, 1490, 3740
    assert m.wait_avg == pytest.approx(330)
    assert m.response_avg == pytest.approx((1000 + 1490 + 3740) / 3)

    # Requeue: the 980 s of C are lost; C reruns 3000 s from 1500.
    rq = simulate(tr, params, overhead=120, mode=Mode.REQUEUE)
    assert rq.end == [1000, 1500, 4500]
    assert compute(rq).rerun_core_hours == pytest.approx(980 * 2 / 3600)
    assert compute(rq).overhead_core_hours == 0

    # Never preempted: C is not checkpointable, so it is not backfilled on a shortened estimate.
    nn = simulate(tr, params, overhead=120, mode=Mode.NONE)
    assert nn.start == [0, 1000, 1500]
    assert nn.checkpoints == [0, 0, 0]


class Scripted:
    """A stand-in policy: preempt job 0 whenever another job waits, else start what fits in order.

    It records the snapshots it was given (and a copy of the history at that moment: the
    simulator passes its own mapping, which it updates as jobs end) so the test can check
    what the core is told.
    """

    def __init__(self) -> None:
        self.seen: list[Snapshot] = []
        self.history: list[dict[str, tuple[float, ...]]] = []

    def __call__(self, snap: Snapshot) -> Plan:
        self.seen.append(snap)
        self.history.append(dict(snap.history))
        running = {r.id for r in snap.running}
        others = [w for w in snap.pending if w.id != 0]
        if 0 in running and others:
            return Plan((Preempt(0), Start(others[0].id)))
        free = snap.ncores - sum(r.ncpus for r in snap.running)
        out = []
        for w in snap.pending:
            if w.ncpus <= free:
                out.append(Start(w.id))
                free -= w.ncpus
        return Plan(tuple(out))


def test_overhead_charged_per_checkpoint_and_restart(write_trace, monkeypatch):
    lines = [
        swf_line(1, 0, 1000, 4, 2000, user=1),  # A
        swf_line(2, 100, 50, 4, 50, user=2),  # B preempts A at 100
        swf_line(3, 200, 10, 4, 10, user=3),  # C preempts A again at 200
    ]
    tr = swf.read(write_trace(lines, max_procs=4))
    policy = Scripted()
    monkeypatch.setattr(engine, "schedule", policy)
    # fast=False: the scripted policy preempts under fcfs, which the skipping of passes
    # that cannot start anything relies on the core never doing
    # (the user-history predictor: the replay keeps the users' run times for it)
    res = simulate(tr, Params(policy=Policy.FCFS, predictor=Predictor.USER_HISTORY), overhead=120, fast=False)
    # A: 0-100 (100 s of work), checkpoint: owes 120 + 120.  B 100-150.  A restarts at 150
    # and has paid 50 s of its 240 s debt when C arrives at 200: owes 190 + 240 = 430.
    # C 200-210.  A restarts at 210 and needs 430 + (1000 - 100) = 1330 s: ends 1540.
    assert res.runs(0) == [(0, 100), (150, 200), (210, 1540)]
    assert res.checkpoints[0] == 2
    assert res.end == [1540, 150, 210]
    # overhead run: 50 + 430 s on 4 cores
    assert res.overhead_cs == pytest.approx(480 * 4)
    # What the policy saw of A when it was waiting at 150: estimate 2000 - 100 + 240, elapsed 100.
    k150 = next(k for k, s in enumerate(policy.seen) if s.now == 150)
    at150 = policy.seen[k150]
    (a,) = [w for w in at150.pending if w.id == 0]
    assert a.estimate == 2140 and a.elapsed == 100 and a.preemptable
    # B (user 2) ended at 150 with a run of 50 s: the history the core sees from then on.
    assert policy.history[k150] == {"2": (50,)}
    # At 200 the policy sees A running in the segment begun at 150, killed at 150 + 2140.
    k200 = next(k for k, s in enumerate(policy.seen) if s.now == 200)
    (ra,) = policy.seen[k200].running
    assert (ra.id, ra.start, ra.estimate) == (0, 150, 2140)
    final = simulate(tr, Params(policy=Policy.FCFS), overhead=0, fast=False)
    # Without overhead A just needs its 1000 s of work: 0-100, 150-200, 210-1060.
    assert final.runs(0) == [(0, 100), (150, 200), (210, 1060)]


def test_user_history_keeps_last_two_runs(write_trace, monkeypatch):
    lines = [swf_line(k, 10 * k, 5 * k, 1, 100, user=4) for k in range(1, 4)]
    tr = swf.read(write_trace(lines, max_procs=4))
    policy = Scripted()
    monkeypatch.setattr(engine, "schedule", policy)
    simulate(tr, Params(policy=Policy.FCFS, predictor=Predictor.USER_HISTORY), fast=False)
    # runs 5 (ends 15), 10 (ends 30), 15 (ends 45); the pass at 30 sees two, the last one the last two
    k30 = next(k for k, s in enumerate(policy.seen) if s.now == 30)
    assert policy.history[k30] == {"4": (5, 10)}
    assert policy.seen[-1].now == 45 and policy.history[-1] == {"4": (10, 15)}


def test_policy_errors_are_reported(write_trace, monkeypatch):
    tr = swf.read(write_trace(HAND, max_procs=4))
    monkeypatch.setattr(engine, "schedule", lambda snap: Plan((Start(99),)))
    with pytest.raises(SimulationError, match="started job #99, which is not waiting"):
        simulate(tr, Params(policy=Policy.FCFS), fast=False)
    monkeypatch.setattr(engine, "schedule", lambda snap: Plan())
    with pytest.raises(SimulationError, match="left 4 jobs waiting on an idle machine"):
        simulate(tr, Params(policy=Policy.FCFS), fast=False)
    monkeypatch.setattr(engine, "schedule", lambda snap: Plan(tuple(Start(w.id) for w in snap.pending)))
    with pytest.raises(SimulationError, match="on 2 cores with 0 free"):
        simulate(tr, Params(policy=Policy.FCFS), fast=False)


def test_preempting_without_checkpoints_is_refused(write_trace, monkeypatch):
    tr = swf.read(write_trace(HAND[:2], max_procs=4))
    monkeypatch.setattr(engine, "schedule", Scripted())
    with pytest.raises(SimulationError, match="not preemptable"):
        simulate(tr, Params(policy=Policy.FCFS), mode=Mode.NONE, fast=False)


def test_percentile_nearest_rank():
    assert percentile([], 95) == 0
    assert percentile([3.0], 95) == 3
    values = [float(v) for v in range(1, 21)]  # 1..20: rank ceil(0.95 * 20) = 19
    assert percentile(values, 95) == 19
    assert percentile(values, 100) == 20


def test_series_time_weighted_averages():
    from gridsched.sim.plot import averages

    # busy 4 on [0, 15), 2 on [15, 20); queue 1 then 0; buckets [0, 10) and [10, 20):
    # busy (4*10)/10 and (4*5 + 2*5)/10; queued 1 and (1*5)/10
    mids, busy, queued = averages([(0.0, 4, 1), (15.0, 2, 0), (20.0, 0, 0)], 0.0, 20.0, buckets=2)
    assert mids == [5.0, 15.0]
    assert busy == [4.0, 3.0]
    assert queued == [1.0, 0.5]
    # a step across a bucket edge: busy 3 on [5, 20) -> (0*5 + 3*5)/10 and 3
    _, busy, _ = averages([(0.0, 0, 0), (5.0, 3, 0)], 0.0, 20.0, buckets=2)
    assert busy == [1.5, 3.0]
