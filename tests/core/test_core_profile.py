"""The availability profile: unit tests and property tests."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core.profile import Profile, earliest_common_start, from_ends


def test_new_profile_is_flat():
    prof = Profile(10.0, 8)
    assert prof.steps() == [(10.0, 8)]
    assert prof.free_at(10.0) == 8
    assert prof.free_at(1e9) == 8
    assert prof.earliest_start(8, 100.0) == 10.0
    assert prof.earliest_start(9, 1.0) == math.inf


def test_release_and_reserve_make_steps():
    # 2 free now; 4 more at t=5, 2 more at t=20 -> 2, 6, 8
    prof = from_ends(0.0, 2, [(20.0, 2), (5.0, 4)])
    assert prof.steps() == [(0.0, 2), (5.0, 6), (20.0, 8)]
    prof.reserve(10.0, 15.0, 3)  # [10, 25): -3
    assert prof.steps() == [(0.0, 2), (5.0, 6), (10.0, 3), (20.0, 5), (25.0, 8)]
    assert prof.min_free(0.0, 30.0) == 2
    assert prof.min_free(5.0, 10.0) == 6
    assert prof.min_free(5.0, 10.5) == 3


def test_earliest_start_skips_holes_too_short():
    # free: [0,5):2 [5,10):6 [10,25):3 [20..]: see steps above
    prof = from_ends(0.0, 2, [(20.0, 2), (5.0, 4)])
    prof.reserve(10.0, 15.0, 3)
    # 4 cores for 5s: [5,10) has 6 -> starts at 5
    assert prof.earliest_start(4, 5.0) == 5.0
    # 4 cores for 6s: [5,11) crosses [10,..) with 3 -> next step with >=4 is 20 (5), 25 (8)
    assert prof.earliest_start(4, 6.0) == 20.0
    # 6 cores for 1s not before 6: [6,7) inside [5,10) with 6
    assert prof.earliest_start(6, 1.0, not_before=6.0) == 6.0
    # 7 cores: only from 25 on
    assert prof.earliest_start(7, 1.0) == 25.0
    # zero duration needs the amount at the instant
    assert prof.earliest_start(6, 0.0, not_before=9.0) == 9.0
    assert prof.earliest_start(6, 0.0, not_before=10.0) == 25.0


def test_not_before_origin_is_clipped():
    prof = Profile(100.0, 4)
    assert prof.earliest_start(1, 1.0, not_before=0.0) == 100.0
    prof.add(50.0, 150.0, 1)  # clipped to [100, 150)
    assert prof.steps() == [(100.0, 5), (150.0, 4)]


def test_negative_amounts_are_never_enough():
    prof = Profile(0.0, 1)
    prof.reserve(0.0, 10.0, 3)
    assert prof.free_at(5.0) == -2
    assert prof.earliest_start(0, 1.0) == 10.0


def test_split_before_origin_is_an_error():
    prof = Profile(10.0, 1)
    with pytest.raises(ValueError):
        prof._split(5.0)


def test_common_start_over_two_resources():
    cores = from_ends(0.0, 0, [(10.0, 4)])  # 4 cores from 10
    licences = Profile(0.0, 1)
    licences.reserve(0.0, 30.0, 1)  # the only licence is taken until 30
    assert earliest_common_start([(cores, 2), (licences, 1)], 5.0, 0.0) == 30.0
    assert earliest_common_start([(cores, 2)], 5.0, 0.0) == 10.0
    assert earliest_common_start([(cores, 5), (licences, 1)], 5.0, 0.0) == math.inf


# -- properties ---------------------------------------------------------------

ops = st.lists(
    st.tuples(
        st.integers(0, 50),  # start
        st.integers(0, 30),  # duration
        st.integers(1, 4),  # amount
        st.booleans(),  # release (True) or reserve (False)
    ),
    max_size=12,
)


def build(free_now: int, steps: list[tuple[int, int, int, bool]]) -> Profile:
    prof = Profile(0.0, free_now)
    for start, dur, amount, release in steps:
        if release:
            prof.release(float(start), amount)
        else:
            prof.reserve(float(start), float(dur), amount)
    return prof


def brute_fits(prof: Profile, amount: int, start: float, duration: float) -> bool:
    """Checks every instant the step function can change within [start, start + duration)."""
    points = [start] + [t for t, _ in prof.steps() if start < t < start + duration]
    return all(prof.free_at(t) >= amount for t in points)


@settings(max_examples=200, deadline=None)
@given(
    free_now=st.integers(-2, 8),
    steps=ops,
    amount=st.integers(0, 10),
    duration=st.integers(0, 40),
    not_before=st.integers(0, 90),
)
def test_earliest_start_is_feasible_and_earliest(free_now, steps, amount, duration, not_before):
    prof = build(free_now, steps)
    t = prof.earliest_start(amount, float(duration), float(not_before))
    candidates = sorted({float(not_before)} | {s for s, _ in prof.steps() if s >= not_before})
    if t == math.inf:
        assert not any(brute_fits(prof, amount, c, float(duration)) for c in candidates)
        return
    assert t >= not_before
    assert brute_fits(prof, amount, t, float(duration))
    # no earlier candidate fits (the answer is not_before or a step time, so these are all)
    assert not any(brute_fits(prof, amount, c, float(duration)) for c in candidates if c < t)


@settings(max_examples=200, deadline=None)
@given(free_now=st.integers(0, 8), steps=ops, probes=st.lists(st.integers(0, 100), max_size=10))
def test_amounts_match_a_direct_sum(free_now, steps, probes):
    prof = build(free_now, steps)
    times = [t for t, _ in prof.steps()]
    assert times == sorted(times) and len(set(times)) == len(times)
    for x in probes:
        expect = free_now
        for start, dur, amount, release in steps:
            if release and x >= start:
                expect += amount
            if not release and start <= x < start + dur:
                expect -= amount
        assert prof.free_at(float(x)) == expect


@settings(max_examples=100, deadline=None)
@given(a=ops, b=ops, amounts=st.tuples(st.integers(0, 4), st.integers(0, 4)), duration=st.integers(0, 20))
def test_common_start_fits_every_profile(a, b, amounts, duration):
    pa, pb = build(2, a), build(1, b)
    t = earliest_common_start([(pa, amounts[0]), (pb, amounts[1])], float(duration), 0.0)
    if t == math.inf:
        return
    assert brute_fits(pa, amounts[0], t, float(duration))
    assert brute_fits(pb, amounts[1], t, float(duration))
    earlier = sorted(c for c in {0.0} | {s for s, _ in pa.steps() + pb.steps()} if c < t)
    assert not any(
        brute_fits(pa, amounts[0], c, float(duration)) and brute_fits(pb, amounts[1], c, float(duration))
        for c in earlier
    )


@settings(max_examples=300, deadline=None)
@given(
    free_now=st.integers(0, 8),
    script=st.lists(
        st.one_of(
            st.tuples(st.just("q"), st.integers(1, 6), st.sampled_from([0, 5, 10, 30]), st.integers(0, 60)),
            st.tuples(st.just("r"), st.integers(0, 60), st.integers(1, 30), st.integers(1, 4)),
            st.tuples(st.just("f"), st.integers(0, 60), st.just(0), st.integers(1, 4)),
        ),
        max_size=25,
    ),
)
def test_repeated_queries_match_a_fresh_profile(free_now, script):
    # earliest_start remembers where each amount is first available; interleaved
    # reservations and releases must give the answers a profile without memory gives.
    prof = Profile(0.0, free_now)
    log: list[tuple[str, int, int, int]] = []
    for op in script:
        kind, a, b, c = op
        if kind == "q":
            fresh = Profile(0.0, free_now)
            for k, x, y, z in log:
                if k == "r":
                    fresh.reserve(float(x), float(y), z)
                else:
                    fresh.release(float(x), z)
            assert prof.earliest_start(a, float(b), float(c)) == fresh.earliest_start(a, float(b), float(c))
            assert prof.earliest_start(a, float(b)) == fresh.earliest_start(a, float(b))
        else:
            log.append(op)
            if kind == "r":
                prof.reserve(float(a), float(b), c)
            else:
                prof.release(float(a), c)
