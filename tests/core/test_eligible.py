"""Eligibility in the core: dependencies and array throttles decide which pending jobs the policy sees."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import depend
from gridsched.core.eligible import eligibility
from gridsched.core.policy import forecast, schedule
from gridsched.core.types import Cancel, Params, Policy, Running, Snapshot, Waiting


def snap(pending, running=(), states=None, cancel=False, ncores=8) -> Snapshot:
    return Snapshot(
        now=0.0,
        ncores=ncores,
        running=tuple(running),
        pending=tuple(pending),
        params=Params(policy=Policy.EASY, cancel_never_satisfied=cancel),
        states=states or {},
    )


def w(i, n=1, deps="", user="u", name="j", array=None, amax=None) -> Waiting:
    return Waiting(i, n, 60.0, user=user, name=name, deps=depend.parse(deps), array=array, array_max=amax)


def test_no_dependencies_and_no_throttle_is_the_queue_itself():
    s = snap([w(1), w(2)])
    pending, reasons, cancels = eligibility(s)
    assert pending is s.pending and reasons == {} and cancels == ()


def test_dependencies_wait_start_or_never():
    s = snap(
        [w(5, deps="afterok:1"), w(6, deps="afterok:2"), w(7, deps="afterany:3")],
        states={1: "RUNNING", 2: "COMPLETED", 3: "FAILED"},
    )
    plan = schedule(s)
    assert [d.job for d in plan.starts] == [6, 7]
    assert plan.reasons == {5: "waiting for dependency afterok:1: job 1 is RUNNING"}


def test_a_dependency_never_met_waits_with_the_reason_or_is_cancelled():
    s = snap([w(5, deps="afterok:1"), w(6)], states={1: "FAILED"})
    plan = schedule(s)
    assert plan.reasons[5].startswith("dependency never satisfied: afterok:1: job 1 ended FAILED")
    assert [d.job for d in plan.starts] == [6]
    plan = schedule(snap([w(5, deps="afterok:1"), w(6)], states={1: "FAILED"}, cancel=True))
    assert Cancel(5, "dependency never satisfied: afterok:1: job 1 ended FAILED") in plan.decisions
    assert 5 not in plan.reasons
    assert 5 not in forecast(snap([w(5, deps="afterok:1")], states={1: "FAILED"}))


def test_an_unknown_job_never_satisfies():
    plan = schedule(snap([w(5, deps="afterany:4")]))
    assert "job 4 is unknown" in plan.reasons[5]


def test_singleton_waits_for_the_same_users_earlier_job_of_that_name():
    running = [Running(3, 1, 0.0, 60.0, user="u", name="j")]
    s = snap(
        [w(5, deps="singleton"), w(6, deps="singleton", user="v"), w(7, deps="singleton", name="k")], running=running
    )
    plan = schedule(s)
    assert [d.job for d in plan.starts] == [6, 7]
    assert "singleton" in plan.reasons[5]


def test_an_array_throttle_counts_running_tasks_then_queue_order():
    running = [Running(10, 1, 0.0, 60.0, array=10)]
    s = snap([w(i, array=10, amax=2) for i in range(11, 15)], running=running)
    plan = schedule(s)
    assert [d.job for d in plan.starts] == [11]
    assert set(plan.reasons) == {12, 13, 14}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.sampled_from([None, 1, 2, 3])), min_size=1, max_size=12), st.integers(0, 4)
)
def test_never_more_tasks_of_an_array_run_than_its_throttle(tasks, already):
    amax = 2
    running = [Running(100 + k, 1, 0.0, 60.0, array=7) for k in range(min(already, amax))]
    pending = [
        w(i, n, array=7 if a is not None else None, amax=amax if a is not None else None)
        for i, (n, a) in enumerate(tasks, start=1)
    ]
    plan = schedule(snap(pending, running, ncores=64))
    started = {d.job for d in plan.starts}
    in_array = [x for x in pending if x.array == 7 and x.id in started]
    assert len(in_array) + len(running) <= amax
    assert all(x.id in started or x.id in plan.reasons for x in pending if x.array == 7)
