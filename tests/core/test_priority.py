"""Multifactor priority and fair share (gridsched.core.priority), and the queue order of the pass."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import priority
from gridsched.core.params import PriorityParams
from gridsched.core.policy import forecast, schedule
from gridsched.core.types import Params, Policy, Running, Snapshot, Start, Waiting

FCFS = Params(policy=Policy.FCFS)

jobs = st.lists(
    st.tuples(
        st.integers(1, 8),  # cores
        st.integers(-50, 50),  # nice
        st.sampled_from(["alice", "bob", "carol"]),
        st.floats(0, 1000),  # submitted
    ),
    min_size=1,
    max_size=12,
)


def _pending(spec: list[tuple[int, int, str, float]]) -> tuple[Waiting, ...]:
    return tuple(Waiting(i + 1, n, 100.0, user=u, submitted=t, nice=nice) for i, (n, nice, u, t) in enumerate(spec))


def _started(plan_decisions: tuple[object, ...]) -> set[int]:
    return {d.job for d in plan_decisions if isinstance(d, Start)}


weights = st.builds(
    PriorityParams,
    weight_age=st.sampled_from([0.0, 10.0, 1000.0]),
    weight_job_size=st.sampled_from([0.0, 10.0, 1000.0]),
    weight_fairshare=st.sampled_from([0.0, 10.0, 1000.0]),
    favor_small=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(jobs, weights, st.integers(0, 8), st.dictionaries(st.sampled_from(["alice", "bob", "carol"]), st.floats(0, 1e6)))
def test_fcfs_never_starts_a_lower_priority_job_ahead_of_a_waiting_higher_one(spec, pp, free, usage) -> None:
    pending = _pending(spec)
    snap = Snapshot(
        now=2000.0,
        ncores=8,
        running=(Running(99, 8 - free, 1900.0, 500.0),) if free < 8 else (),
        pending=pending,
        params=replace(FCFS, priority=pp),
        usage=usage,
        ranked=True,
    )
    prio = {f.job: f.priority for f in priority.factors(snap)}
    started = _started(schedule(snap).decisions)
    for w in pending:
        if w.id in started:
            continue
        for s in started:
            assert prio[s] >= prio[w.id], (s, w.id, prio)
            if prio[s] == prio[w.id]:
                assert s < w.id  # ties: submission order


@settings(max_examples=200, deadline=None)
@given(jobs, st.integers(0, 8))
def test_default_weights_keep_submission_order(spec, free) -> None:
    pending = tuple(replace(w, nice=0) for w in _pending(spec))
    for ranked in (False, True):
        snap = Snapshot(
            now=2000.0,
            ncores=8,
            running=(Running(99, 8 - free, 1900.0, 500.0),) if free < 8 else (),
            pending=pending,
            usage={"alice": 5e5},
            ranked=ranked,
        )
        assert priority.ordered(snap) is pending
        started = sorted(_started(schedule(replace(snap, params=FCFS)).decisions))
        assert started == [w.id for w in pending[: len(started)]]


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["bob", "carol", "dave"]), st.floats(0, 1e6)),
    st.floats(0, 1e6),
    st.floats(0, 1e6),
)
def test_fair_share_falls_as_usage_grows(others, a, b) -> None:
    lo, hi = sorted((a, b))
    users = {"alice", *others}
    f_lo = priority.fairshare({**others, "alice": lo}, users)["alice"]
    f_hi = priority.fairshare({**others, "alice": hi}, users)["alice"]
    assert 0.0 < f_hi <= f_lo <= 1.0


def test_fair_share_puts_the_light_user_first() -> None:
    pending = (Waiting(1, 1, 10.0, user="heavy"), Waiting(2, 1, 10.0, user="light"))
    pp = PriorityParams(weight_fairshare=1000.0)
    snap = Snapshot(0.0, 1, (), pending, params=replace(FCFS, priority=pp), usage={"heavy": 3600.0})
    assert [w.id for w in priority.ordered(snap)] == [2, 1]
    assert _started(schedule(snap).decisions) == {2}
    f = {x.job: x for x in priority.factors(snap)}
    assert f[2].fairshare == 1.0 and f[1].fairshare == 0.25  # 2 ** (-1 / 0.5)


def test_nice_and_admin_priority() -> None:
    pending = (
        Waiting(1, 1, 10.0, nice=100),
        Waiting(2, 1, 10.0),
        Waiting(3, 1, 10.0, nice=-5),
        Waiting(4, 1, 10.0, admin=7, nice=10000),
    )
    snap = Snapshot(0.0, 4, (), pending, params=FCFS, ranked=True)
    assert [w.id for w in priority.ordered(snap)] == [4, 3, 2, 1]
    times = forecast(replace(snap, ncores=1))
    assert times[4] == 0.0 and times[3] == 10.0 and times[2] == 20.0 and times[1] == 30.0


def test_age_and_size_factors() -> None:
    pending = (Waiting(1, 1, 10.0, submitted=90.0), Waiting(2, 4, 10.0, submitted=0.0))
    pp = PriorityParams(weight_age=10.0, weight_job_size=1.0, max_age=100.0)
    snap = Snapshot(100.0, 4, (), pending, params=replace(FCFS, priority=pp))
    f = {x.job: x for x in priority.factors(snap)}
    assert (f[1].age, f[2].age) == (0.1, 1.0)
    assert (f[1].size, f[2].size) == (0.25, 1.0)
    small = replace(snap, params=replace(FCFS, priority=replace(pp, favor_small=True)))
    f = {x.job: x for x in priority.factors(small)}
    assert (f[1].size, f[2].size) == (1.0, 0.25)


def test_decay_halves_each_half_life() -> None:
    assert priority.decay(100.0, 60.0, 60.0) == 50.0
    assert priority.decay(100.0, 120.0, 60.0) == 25.0
    assert priority.decay(100.0, 1e9, 0.0) == 100.0


def test_the_priority_table_is_checked_one_line_per_key() -> None:
    import pytest

    from gridsched.protocol.config import ConfigError, parse

    pp = parse({"priority": {"weight_age": 1000, "max_age": "1d", "half_life": 0, "favor_small": True}}).params.priority
    assert (pp.weight_age, pp.max_age, pp.half_life, pp.favor_small) == (1000.0, 86400.0, 0.0, True)
    assert parse({}).params.priority == PriorityParams()
    for table, line in (
        ({"weight_age": -1}, "<config>: priority.weight_age = -1: must be a number from 0 to 1000000000"),
        ({"weight_fairshare": "x"}, "<config>: priority.weight_fairshare = 'x': must be a float"),
        ({"max_age": 0}, "<config>: priority.max_age = 0: must be positive"),
        ({"favor_small": 1}, "<config>: priority.favor_small = 1: must be a bool"),
        ({"weight": 1}, "<config>: unknown key priority.weight"),
    ):
        with pytest.raises(ConfigError) as e:
            parse({"priority": table})
        assert str(e.value) == line
