"""The forecast plans splittable jobs' sub-tasks into future windows (the revised schedule)."""

from __future__ import annotations

from dataclasses import replace
from math import inf

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.policy import forecast_reasons, schedule
from gridsched.core.profile import Profile
from gridsched.core.split import plan_tasks
from gridsched.core.types import Params, Policy, Resv, Running, Snapshot, SplitInfo, Start, StartTasks, Waiting

H = 3600.0


def later_window(policy=Policy.EASY, split=None):
    """8 cores; job 1 holds 4 until 100 s, job 2 the other 4 until 50 s; head 3 needs all 8 for 100 s;
    job 4 is 8 one-core sub-tasks of 40 s.  The window, 4 cores over [50, 100), opens later."""
    running = (Running(1, 4, 0.0, 100.0), Running(2, 4, 0.0, 50.0))
    sp = split or SplitInfo(1, 40.0, tuple(range(8)))
    pend = (Waiting(3, 8, 100.0), Waiting(4, 8, 400.0, split=sp))
    return Snapshot(0.0, 8, running, pend, Params(policy=policy))


def test_a_window_that_opens_later_is_planned_and_the_rest_in_the_jobs_start():
    for policy in (Policy.EASY, Policy.CHECKPOINT_BACKFILL):
        fc = forecast_reasons(later_window(policy))
        assert fc.times[3] == 100.0  # the head's reservation stands
        plan = fc.tasks[4]
        assert [i for i, _, _ in plan] == list(range(8))
        assert [(s, e) for _, s, e in plan[:4]] == [(50.0, 90.0)] * 4  # in the window, ending before the head
        assert [(s, e) for _, s, e in plan[4:]] == [(200.0, 240.0)] * 4  # the rest after the head
        assert fc.times[4] == 50.0  # the job's predicted start is its first sub-task's
        # and when the window opens, the pass takes out exactly the sub-tasks planned into it
        at50 = replace(later_window(policy), now=50.0, running=(Running(1, 4, 0.0, 100.0),))
        [d] = [d for d in schedule(at50).decisions if isinstance(d, StartTasks)]
        assert d.tasks == (0, 1, 2, 3) and d.end == 90.0


def test_conservative_plans_into_the_windows_its_reservations_leave():
    # job 5, queued after the splittable job 4, holds 2 of the window's 4 cores over [50, 80): two sub-tasks
    # of 40 s fit beside it before the head's reservation at 100 s, the six others run in job 4's own
    # reservation at 200 s; no reservation moves
    base = later_window(Policy.CONSERVATIVE)
    scene = replace(base, pending=(*base.pending, Waiting(5, 2, 30.0)))
    fc = forecast_reasons(scene)
    assert (fc.times[3], fc.times[5]) == (100.0, 50.0)
    assert [(i, s) for i, s, _ in fc.tasks[4]] == [(0, 50.0), (1, 50.0)] + [(i, 200.0) for i in range(2, 8)]
    assert fc.times[4] == 50.0
    # and when the window opens, the pass starts job 5 and takes out the two sub-tasks planned beside it
    at50 = replace(scene, now=50.0, running=(Running(1, 4, 0.0, 100.0),))
    got = schedule(at50).decisions
    assert [d.job for d in got if isinstance(d, Start)] == [5]
    [d] = [d for d in got if isinstance(d, StartTasks)]
    assert d.tasks == (0, 1) and d.end == 90.0


def test_without_a_window_the_job_keeps_its_start_as_a_whole():
    running = (Running(1, 8, 0.0, 100.0),)
    pend = (Waiting(3, 8, 100.0), Waiting(4, 8, 400.0, split=SplitInfo(1, 40.0, tuple(range(8)))))
    fc = forecast_reasons(Snapshot(0.0, 8, running, pend, Params(policy=Policy.EASY)))
    assert fc.times[4] == 200.0
    assert [(s, e) for _, s, e in fc.tasks[4]] == [(200.0, 240.0)] * 8


def test_sub_tasks_of_their_own_sizes_keep_their_order():
    # 0: 2 cores 40 s (window), 1: 4 cores 60 s (too long for the window: the job's start),
    # 2: 1 core 10 s (would fit the window, but comes after 1)
    sizes = ((2, 40.0), (4, 60.0), (1, 10.0))
    fc = forecast_reasons(later_window(split=SplitInfo(4, 60.0, (0, 1, 2), sizes)))
    plan = fc.tasks[4]
    assert [i for i, _, _ in plan] == [0, 1, 2]
    assert plan[0][1:] == (50.0, 90.0)
    assert plan[1][1] == 200.0 and plan[2][1] == 200.0  # in the whole start, side by side on its 8 cores
    assert [s for _, s, _ in plan] == sorted(s for _, s, _ in plan)


def test_sub_tasks_the_pass_takes_out_now_are_planned_now_chain_by_chain():
    # at 50 s the window is open: the pass takes out 0-3; the forecast says so, and plans the rest after the head
    at50 = replace(later_window(), now=50.0, running=(Running(1, 4, 0.0, 100.0),))
    fc = forecast_reasons(at50)
    assert fc.times[4] == 50.0
    assert [(i, s) for i, s, _ in fc.tasks[4]] == [(0, 50.0), (1, 50.0), (2, 50.0), (3, 50.0)] + [
        (i, 200.0) for i in range(4, 8)
    ]


def test_cores_free_now_that_no_hold_needs_are_left_as_the_pass_leaves_them():
    # 2 cores free now and for ever: the pass splits nothing into them, so the forecast plans nothing now
    running = (Running(1, 6, 0.0, 100.0),)
    pend = (Waiting(3, 4, 100.0), Waiting(4, 8, 400.0, split=SplitInfo(1, 40.0, tuple(range(4)))))
    scene = Snapshot(0.0, 8, running, pend, Params(policy=Policy.EASY))
    assert not [d for d in schedule(scene).decisions if isinstance(d, StartTasks)]
    fc = forecast_reasons(scene)
    assert min(s for _, s, _ in fc.tasks[4]) >= 100.0


@pytest.mark.parametrize("policy", [Policy.EASY, Policy.CONSERVATIVE])
def test_a_fixed_reservation_closes_a_window(policy):
    # 8 cores, 4 free from 30 s, 8 from 100 s; a fixed reservation takes all 8 over [120, 220), head 3 over
    # [220, 320): of 50 s sub-tasks, 4 fit before the reservation, the rest run in the job's start at 320 s
    running = (Running(1, 4, 0.0, 100.0), Running(2, 4, 0.0, 30.0))
    pend = (Waiting(3, 8, 100.0), Waiting(4, 8, 400.0, split=SplitInfo(1, 50.0, tuple(range(12)))))
    resv = Resv(9, 8, 100.0, start=120.0)
    fc = forecast_reasons(Snapshot(0.0, 8, running, pend, Params(policy=policy), reservations=(resv,)))
    assert fc.times[3] == 220.0
    assert [(i, s) for i, s, _ in fc.tasks[4]] == [(i, 30.0) for i in range(4)] + [(i, 320.0) for i in range(4, 12)]
    for _, s, e in fc.tasks[4]:
        assert e <= 120.0 or s >= 220.0  # never across the reservation


def test_plan_tasks_holds_each_window_sub_task_and_stops_at_the_first_that_fits_none():
    prof = Profile(0.0, 4)
    prof.reserve(0.0, 10.0, 4)  # busy until 10, then 4 free
    held = []

    def hold(s, t, c):
        held.append((s, t, c))
        prof.reserve(s, t, c)

    sizes = {0: (2, 20.0), 1: (2, 20.0), 2: (4, 50.0), 3: (1, 5.0)}
    planned, whole = plan_tasks(prof, hold, (0, 1, 2, 3), sizes.__getitem__, 0.0, 40.0, 4, 100.0)
    assert planned[:2] == ((0, 10.0, 30.0), (1, 10.0, 30.0))
    assert held == [(10.0, 20.0, 2), (10.0, 20.0, 2)]  # only window sub-tasks are held one by one
    assert whole and planned[2:] == ((2, 40.0, 90.0), (3, 90.0, 95.0))  # order kept in the whole start
    # what ends past the whole start's walltime is never planned
    planned, _ = plan_tasks(Profile(0.0, 4), lambda *a: None, (2, 2), sizes.__getitem__, 0.0, 0.0, 4, 60.0)
    assert planned == ((2, 0.0, 50.0),)


def intervals(snap: Snapshot, fc, split_id: int) -> list[tuple[float, float, int]]:
    """What holds cores over time in a forecast: running jobs to their ends, every other pending job from
    its predicted start for its estimate, the splittable job's planned sub-tasks."""
    out = [(r.start, r.start + r.estimate, r.ncpus) for r in snap.running]
    for w in snap.pending:
        if w.id != split_id and fc.times.get(w.id, inf) < inf:
            out.append((fc.times[w.id], fc.times[w.id] + w.estimate, w.ncpus))
    sp = next(w.split for w in snap.pending if w.id == split_id)
    for i, s, e in fc.tasks.get(split_id, ()):
        c = sp.sizes[i][0] if sp.sizes else sp.ncpus
        out.append((s, e, c))
    return out


@settings(max_examples=200, deadline=None)
@given(
    run=st.lists(st.tuples(st.integers(1, 6), st.floats(10.0, 5000.0)), min_size=1, max_size=4),
    later=st.lists(st.tuples(st.integers(1, 16), st.floats(10.0, 3000.0)), min_size=1, max_size=3),
    sizes=st.lists(st.tuples(st.integers(1, 4), st.floats(5.0, 3000.0)), min_size=1, max_size=25),
    mixed=st.booleans(),
    behind=st.integers(0, 2),
    policy=st.sampled_from([Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE]),
)
def test_planned_sub_tasks_never_overlap_a_reservation_or_another_job(run, later, sizes, mixed, behind, policy):
    ncores = 16
    running, used = [], 0
    for k, (w, e) in enumerate(run):
        if used + w > ncores:
            break
        running.append(Running(100 + k, w, 0.0, e))
        used += w
    n = len(sizes)
    if mixed:
        sp = SplitInfo(max(c for c, _ in sizes), max(t for _, t in sizes), tuple(range(n)), tuple(sizes))
    else:
        sp = SplitInfo(sizes[0][0], sizes[0][1], tuple(range(n)))
    wave = min(n, ncores // sp.ncpus) * sp.ncpus
    jobs = [Waiting(1 + k, c, t) for k, (c, t) in enumerate(later)]
    split = Waiting(99, wave, sum(t for _, t in sizes), split=sp)
    queue = (*jobs[: len(jobs) - behind], split, *jobs[len(jobs) - behind :])
    scene = Snapshot(0.0, ncores, tuple(running), queue, Params(policy=policy))
    fc = forecast_reasons(scene)
    plan = schedule(scene)
    bare = forecast_reasons(replace(scene, splitting=False))
    if policy is Policy.CONSERVATIVE:  # planning never moves a reservation, the job's own as a whole included
        assert {j: t for j, t in fc.times.items() if j != 99} == {j: t for j, t in bare.times.items() if j != 99}
    elif plan.head is not None:  # planning never moves the head's reservation
        assert fc.times[plan.head.job] == max(plan.head.time, 0.0)
    planned = fc.tasks.get(99, ())
    order = [i for i, _, _ in planned]
    assert order == [i for i in sp.left if i in set(order)]  # each at most once, in the sub-tasks' order
    at = {i: (s, e) for i, s, e in planned}
    now: set[int] = set()
    for d in plan.decisions:  # what the pass takes out now: each chain's sub-tasks one after another from now
        if isinstance(d, StartTasks):
            for ch in d.chains:
                t = 0.0
                for i in ch:
                    assert at[i][0] == t
                    t = at[i][1]
                    now.add(i)
    starts = [s for i, s, _ in planned if i not in now]
    assert starts == sorted(starts)  # the others in order
    if policy is Policy.CONSERVATIVE:  # each in a window closed by the job's reservation, or in that reservation
        whole = bare.times[99]
        assert all(e <= whole or s >= whole for i, s, e in planned if i not in now)
    for i, s, e in planned:
        assert e == s + (sp.sizes[i][1] if sp.sizes else sp.task_time)
    if planned:
        assert fc.times[99] == min(s for _, s, _ in planned)
    # at no instant do the jobs and sub-tasks of the forecast hold more cores than the machine has
    iv = intervals(scene, fc, 99)
    for t0, _, _ in iv:
        assert sum(c for s, e, c in iv if s <= t0 < e) <= ncores


@settings(max_examples=200, deadline=None)
@given(
    busy=st.lists(st.tuples(st.floats(0.0, 500.0), st.floats(1.0, 500.0), st.integers(1, 8)), max_size=6),
    n=st.integers(1, 40),
    c=st.integers(1, 4),
    t=st.floats(1.0, 200.0),
    whole=st.floats(0.0, 2000.0),
    length=st.floats(1.0, 2000.0),
)
def test_identical_sub_tasks_planned_together_as_one_by_one(busy, n, c, t, whole, length):
    def run(same):
        prof = Profile(0.0, 8)
        for s, d, k in busy:
            prof.reserve(s, d, k)
        return plan_tasks(
            prof, lambda s, d, k: prof.reserve(s, d, k), tuple(range(n)), lambda i: (c, t), 0.0, whole, 8, length, same
        )

    assert run(True) == run(False)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 50)), min_size=1, max_size=30),
    wave=st.integers(1, 8),
    length=st.integers(1, 400),
)
def test_the_whole_start_runs_its_sub_tasks_in_order_as_its_cores_free(sizes, wave, length):
    # nothing fits before the whole start at 100 (no core free before it): every sub-task goes there
    prof = Profile(0.0, wave)
    prof.reserve(0.0, 100.0, wave)
    size = [(c, float(t)) for c, t in sizes]
    planned, whole = plan_tasks(prof, prof.reserve, tuple(range(len(size))), size.__getitem__, 0.0, 100.0, wave, length)
    assert whole
    # the same by the profile: each at the earliest time, not before the one ahead, its cores are free
    inner, after, want = Profile(100.0, wave), 100.0, []
    for i, (c, t) in enumerate(size):
        s = inner.earliest_start(c, t, after) if c <= wave else inf
        if s + t > 100.0 + length:
            break
        inner.reserve(s, t, c)
        want.append((i, s, s + t))
        after = s
    assert list(planned) == want
