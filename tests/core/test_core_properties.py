"""Property tests: every policy driven over random workloads by a small virtual-clock loop.

The loop is a minimal driver: at each event time it ends the jobs whose actual run
time is up, adds the jobs submitted by then, and calls ``schedule`` until the plan has
no more decisions, applying them at once (a Preempt removes the job immediately and
puts it back in the queue at its original place, its estimate reduced by the time it
ran).  It then advances to the next end, submission or ``wake_at``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import topology
from gridsched.core.placement import Request
from gridsched.core.policy import forecast, schedule
from gridsched.core.predict import run_ratio
from gridsched.core.types import BackfillOrder, Params, Policy, Predictor, Running, Snapshot, Waiting

EPS = 1e-9


@dataclass
class Job:
    id: int
    submit: float
    ncpus: int
    estimate: float
    actual: float  # total run time needed, <= estimate
    preemptable: bool
    user: str
    place: str = ""  # on a machine map: pack, spread or board ("": pack by default)


@dataclass
class Result:
    finished: dict[int, list[float]] = field(default_factory=dict)  # id -> finish times
    starts: dict[int, list[float]] = field(default_factory=dict)
    first_head: dict[int, float] = field(default_factory=dict)  # reservation when first head
    first_forecast: dict[int, float] = field(default_factory=dict)
    preemptions: int = 0
    work: dict[int, float] = field(default_factory=dict)  # time actually run


def drive(jobs: list[Job], ncores: int, params: Params, placement: bool, boards: int = 0) -> Result:
    """Run ``jobs``; ``boards`` > 0: on a machine map of that many boards (with placement), each job
    placed as its ``place`` asks, and every start checked against it."""
    machine = None
    if boards:
        per = ncores // boards
        machine = topology.make(
            [topology.board(b, range(b * per, (b + 1) * per)) for b in range(boards)], range(boards * per)
        )
        ncores = boards * per
        placement = True
    res = Result()
    rank = {j.id: k for k, j in enumerate(jobs)}  # queue order = submission order
    spec = {j.id: j for j in jobs}
    arrivals = sorted(jobs, key=lambda j: (j.submit, rank[j.id]))
    pending: list[Waiting] = []
    running: dict[int, tuple[Running, float]] = {}  # id -> (segment, actual end)
    done_work: dict[int, float] = {j.id: 0.0 for j in jobs}  # work done before this segment
    history: dict[str, tuple[float, ...]] = {}
    ratios: dict[str, tuple[float, ...]] = {}
    head = None
    now = 0.0
    nxt = 0
    for _ in range(10_000):
        # 1. ends
        for jid, (seg, end) in list(running.items()):
            if end <= now + EPS:
                del running[jid]
                done_work[jid] += now - seg.start
                res.finished.setdefault(jid, []).append(now)
                user = spec[jid].user
                history[user] = history.get(user, ()) + (spec[jid].actual,)
                ratios[user] = ratios.get(user, ()) + (run_ratio(spec[jid].actual, spec[jid].estimate),)
                assert now <= seg.start + seg.estimate + EPS, "ran past its walltime"
        # 2. arrivals
        while nxt < len(arrivals) and arrivals[nxt].submit <= now:
            j = arrivals[nxt]
            req = Request(j.ncpus, j.place) if machine is not None and j.place else None
            pending.append(Waiting(j.id, j.ncpus, j.estimate, j.preemptable, j.user, place=req))
            pending.sort(key=lambda w: rank[w.id])
            nxt += 1
        # 3. schedule until quiet
        wake = None
        for _ in range(200):
            used = {c for seg, _ in running.values() for c in seg.cores}
            free = frozenset(range(ncores)) - used if placement else None
            nfree = ncores - sum(seg.ncpus for seg, _ in running.values())
            snap = Snapshot(
                now,
                ncores,
                tuple(s for s, _ in running.values()),
                tuple(pending),
                params,
                free,
                head,
                dict(history),
                machine=machine,
                ratios=dict(ratios),
            )
            plan = schedule(snap)
            if params.policy is Policy.CONSERVATIVE:
                for jid, t in forecast(snap).items():
                    res.first_forecast.setdefault(jid, t)
            head = plan.head
            if head is not None:
                res.first_head.setdefault(head.job, head.time)
            assert plan.wake_at is None or plan.wake_at > now
            wake = plan.wake_at
            if not plan.decisions:
                break
            # preemptions first: instantly gone, requeued at their place
            for p in plan.preempts:
                seg, _ = running.pop(p.job)
                assert seg.backfilled and seg.preemptable and not seg.stopping
                ran = now - seg.start
                done_work[p.job] += ran
                res.preemptions += 1
                j = spec[p.job]
                pending.append(
                    Waiting(
                        j.id,
                        j.ncpus,
                        seg.estimate - ran,
                        True,
                        j.user,
                        j.estimate - seg.estimate + ran,
                        place=Request(j.ncpus, j.place) if machine is not None and j.place else None,
                    )
                )
                pending.sort(key=lambda w: rank[w.id])
            given_cores: set[int] = set()
            total = 0
            for s in plan.starts:
                w = next(w for w in pending if w.id == s.job)
                pending.remove(w)
                total += w.ncpus
                if placement:
                    assert len(s.cores) == w.ncpus
                    assert set(s.cores) <= free, "core not free"
                    assert not (set(s.cores) & given_cores), "core given twice"
                    given_cores |= set(s.cores)
                    if machine is not None and spec[s.job].place == "board":
                        assert len({machine.board_index(c) for c in s.cores}) == 1, "a board job on two boards"
                else:
                    assert s.cores == ()
                if s.planned is not None:
                    assert s.backfilled and w.preemptable and s.planned < w.estimate
                left = spec[s.job].actual - done_work[s.job]
                seg = Running(
                    w.id,
                    w.ncpus,
                    now,
                    w.estimate,
                    tuple(s.cores),
                    s.backfilled,
                    w.preemptable,
                    s.planned,
                    False,
                    w.user,
                )
                running[w.id] = (seg, now + left)
                res.starts.setdefault(w.id, []).append(now)
            assert total <= nfree, "more cores than free"
        else:
            raise AssertionError("the plan never settles")
        # 4. next event
        times = [end for _, end in running.values()]
        if nxt < len(arrivals):
            times.append(arrivals[nxt].submit)
        if wake is not None:
            times.append(wake)
        if not times:
            assert not pending, f"stuck with pending jobs {pending}"
            break
        now = max(now, min(times))
    else:
        raise AssertionError("too many events")
    res.work = done_work
    return res


@st.composite
def workloads(draw, exact: bool):
    ncores = draw(st.integers(1, 12))
    n = draw(st.integers(1, 18))
    jobs = []
    t = 0.0
    for k in range(n):
        t += draw(st.sampled_from([0, 0, 1, 5, 20, 60]))
        est = float(draw(st.integers(1, 200)))
        actual = est if exact else max(0.5, est * draw(st.sampled_from([0.05, 0.3, 0.7, 1.0])))
        jobs.append(
            Job(
                id=k + 1,
                submit=t,
                ncpus=draw(st.integers(1, ncores)),
                estimate=est,
                actual=actual,
                preemptable=draw(st.booleans()),
                user=draw(st.sampled_from(["ann", "bob", "cyd"])),
            )
        )
    return ncores, jobs, draw(st.booleans())


def check_terminal(jobs: list[Job], res: Result) -> None:
    for j in jobs:
        assert len(res.finished.get(j.id, [])) == 1, f"job {j.id} ended {res.finished.get(j.id)}"
        assert math.isclose(res.work[j.id], j.actual, abs_tol=1e-6), "work lost or duplicated"
        assert res.starts[j.id][0] >= j.submit


POLICIES = [Policy.FCFS, Policy.EASY, Policy.CONSERVATIVE, Policy.CHECKPOINT_BACKFILL]


@settings(max_examples=60, deadline=None)
@given(w=workloads(exact=False), policy=st.sampled_from(POLICIES))
def test_every_policy_is_safe_and_finishes_every_job(w, policy):
    ncores, jobs, placement = w
    res = drive(jobs, ncores, Params(policy=policy, p=0.2, threshold=20.0), placement)
    check_terminal(jobs, res)
    if policy is not Policy.CHECKPOINT_BACKFILL:
        assert res.preemptions == 0
        assert all(len(s) == 1 for s in res.starts.values())


@settings(max_examples=80, deadline=None)
@given(w=workloads(exact=False), order=st.sampled_from(list(BackfillOrder)))
def test_easy_head_starts_by_its_reservation(w, order):
    # holds also when jobs end before their estimates, whatever the backfill order
    ncores, jobs, placement = w
    res = drive(jobs, ncores, Params(policy=Policy.EASY, backfill_order=order), placement)
    check_terminal(jobs, res)
    for jid, t in res.first_head.items():
        assert res.starts[jid][0] <= t + EPS, f"job {jid} reserved at {t}, started {res.starts[jid][0]}"


@settings(max_examples=80, deadline=None)
@given(w=workloads(exact=True))
def test_conservative_jobs_start_by_their_reservations(w):
    ncores, jobs, placement = w
    res = drive(jobs, ncores, Params(policy=Policy.CONSERVATIVE), placement)
    check_terminal(jobs, res)
    for j in jobs:
        assert res.starts[j.id][0] <= res.first_forecast[j.id] + EPS


@settings(max_examples=120, deadline=None)
@given(
    w=workloads(exact=False),
    p=st.sampled_from([0.05, 0.2, 0.5]),
    predictor=st.sampled_from(list(Predictor)),
    order=st.sampled_from(list(BackfillOrder)),
)
def test_checkpoint_backfill_head_starts_at_its_reservation(w, p, predictor, order):
    # Backfilled jobs overrun their shortened estimates all the time here (actual run
    # times are up to the full estimate): the head still starts by its reservation.
    ncores, jobs, placement = w
    prm = Params(policy=Policy.CHECKPOINT_BACKFILL, p=p, threshold=10.0, predictor=predictor, backfill_order=order)
    res = drive(jobs, ncores, prm, placement)
    check_terminal(jobs, res)
    for jid, t in res.first_head.items():
        first = res.starts[jid][0]
        assert first <= t + EPS, f"job {jid} reserved at {t}, started {first}"


@settings(max_examples=60, deadline=None)
@given(w=workloads(exact=False))
def test_naive_reading_is_still_safe(w):
    ncores, jobs, placement = w
    res = drive(jobs, ncores, Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=10.0, cascade=True), placement)
    check_terminal(jobs, res)


def test_checkpoint_backfill_preempts_and_resumes():
    # 4 cores, p = 0.05, threshold 10.
    # Job 1: 3 cores, 0-100.  One core free.
    # Job 2 (submitted at 1): 4 cores, 500 s: head, reservation 100 (job 1's end).
    # Job 3 (submitted at 2): 1 core, estimate 1000 -> prediction 50, checkpointable,
    #   really 300 s.  2 + 50 <= 100: backfills at 2 with planned 50.
    # At 100 job 1 ends and job 3 has overrun its plan: it is preempted after 98 s of
    # work; job 2 runs 100-600; job 3 resumes at 600 with 300 - 98 = 202 s left: ends 802.
    jobs = [
        Job(1, 0.0, 3, 100.0, 100.0, False, "a"),
        Job(2, 1.0, 4, 500.0, 500.0, False, "a"),
        Job(3, 2.0, 1, 1000.0, 300.0, True, "b"),
    ]
    res = drive(jobs, 4, Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.05, threshold=10.0), False)
    assert res.first_head[2] == 100.0
    assert res.starts == {1: [0.0], 2: [100.0], 3: [2.0, 600.0]}
    assert res.finished == {1: [100.0], 2: [600.0], 3: [802.0]}
    assert res.preemptions == 1


def test_naive_reading_loses_the_head_reservation():
    # 4 cores, p = 0.1, threshold 10.
    # J1: 3 cores, 0-100.  J2: 2 cores, 10 s: head at 0, shadow 100.
    # J3: 1 core, estimate 200 (prediction 20), checkpointable, really 200 s: backfills at
    #   0 on its prediction (0 + 20 <= 100).  J4: 4 cores, 10 s, queued after J3.
    # At 100 J1 ends, J2 starts (100-110) and J4 becomes the head.
    # Default: J3 counts at its user estimate end 200: J4's reservation is 200, J3 ends
    #   then, J4 starts at 200.
    # Naive: J3 (past its plan) counts as ending now: J4's reservation is 110 (J2's end).
    #   At 110 J3 is preempted, requeued ahead of J4, restarts at once (it fits) and J4's
    #   reservation slips to 200: it starts later than it was promised.
    jobs = [
        Job(1, 0.0, 3, 100.0, 100.0, False, "a"),
        Job(2, 0.0, 2, 10.0, 10.0, False, "a"),
        Job(3, 0.0, 1, 200.0, 200.0, True, "a"),
        Job(4, 0.0, 4, 10.0, 10.0, False, "a"),
    ]
    calm = drive(jobs, 4, Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=10.0), False)
    assert calm.first_head[4] == 200.0 and calm.starts[4] == [200.0]
    assert calm.preemptions == 0
    naive = drive(jobs, 4, Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=10.0, cascade=True), False)
    assert naive.first_head[4] == 110.0
    assert naive.starts[3] == [0.0, 110.0]
    assert naive.starts[4] == [200.0]
    assert naive.preemptions == 1


@st.composite
def mapped_workloads(draw, exact: bool):
    """Jobs on a map of 1-3 boards of 2-4 cores, a third of them asking for one board."""
    boards = draw(st.integers(1, 3))
    per = draw(st.integers(2, 4))
    ncores, jobs, _ = draw(workloads(exact))
    out = []
    for j in jobs:
        place = draw(st.sampled_from(["", "spread", "board", "board"]))
        n = min(j.ncpus, per if place == "board" else boards * per)
        out.append(Job(j.id, j.submit, n, j.estimate, j.actual, j.preemptable, j.user, place))
    return boards * per, out, boards


@settings(max_examples=80, deadline=None)
@given(w=mapped_workloads(exact=False), policy=st.sampled_from(POLICIES))
def test_on_a_map_every_job_is_placed_as_it_asks_and_ends(w, policy):
    ncores, jobs, boards = w
    res = drive(jobs, ncores, Params(policy=policy, p=0.2, threshold=20.0), True, boards)
    check_terminal(jobs, res)


@settings(max_examples=80, deadline=None)
@given(w=mapped_workloads(exact=False))
def test_on_a_map_the_easy_head_starts_by_its_reservation(w):
    ncores, jobs, boards = w
    res = drive(jobs, ncores, Params(policy=Policy.EASY), True, boards)
    check_terminal(jobs, res)
    for jid, t in res.first_head.items():
        assert res.starts[jid][0] <= t + EPS, f"job {jid} reserved at {t}, started {res.starts[jid][0]}"


@settings(max_examples=80, deadline=None)
@given(w=mapped_workloads(exact=False), p=st.sampled_from([0.05, 0.2, 0.5]))
def test_on_a_map_the_checkpoint_backfill_head_starts_at_its_reservation(w, p):
    ncores, jobs, boards = w
    res = drive(jobs, ncores, Params(policy=Policy.CHECKPOINT_BACKFILL, p=p, threshold=10.0), True, boards)
    check_terminal(jobs, res)
    for jid, t in res.first_head.items():
        first = res.starts[jid][0]
        assert first <= t + EPS, f"job {jid} reserved at {t}, started {first}"
