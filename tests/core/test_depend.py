"""Dependency specs: parsing, canonical text, and the ready / wait / never verdict."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridsched.core.depend import Dep, DependError, job_ids, normalize, parse, status

STATES = ["PENDING", "HELD", "RUNNING", "STOPPING", "SUSPENDED", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"]
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}


def test_parse_forms():
    assert parse("") == ()
    assert parse("afterok:3") == (Dep("afterok", (3,)),)
    assert parse(" afterok:3:4 , afterany:5,singleton") == (
        Dep("afterok", (3, 4)),
        Dep("afterany", (5,)),
        Dep("singleton"),
    )
    assert parse("AFTER:1:1") == (Dep("after", (1,)),)  # case and duplicates do not matter
    assert normalize(parse("afternotok:7, singleton")) == "afternotok:7,singleton"
    assert job_ids(parse("afterok:3:4,afterany:4:5")) == [3, 4, 5]


@pytest.mark.parametrize(
    "spec, why",
    [
        ("afterok", "needs at least one job id"),
        ("afterok:", "'' is not a job id"),
        ("afterok:x", "'x' is not a job id"),
        ("afterok:0", "'0' is not a job id"),
        ("afterok:-3", "'-3' is not a job id"),
        ("before:3", "unknown condition 'before'"),
        ("singleton:3", "singleton takes no job ids"),
        ("afterok:3,,afterany:4", "empty condition"),
    ],
)
def test_parse_errors(spec, why):
    with pytest.raises(DependError) as e:
        parse(spec)
    assert why in str(e.value)
    assert str(e.value).startswith(f"'{spec}'")


@pytest.mark.parametrize(
    "kind, state, verdict",
    [
        ("after", "PENDING", "wait"),
        ("after", "HELD", "wait"),
        ("after", "RUNNING", "ready"),
        ("after", "SUSPENDED", "ready"),
        ("after", "FAILED", "ready"),
        ("after", "CANCELLED", "ready"),
        ("afterany", "RUNNING", "wait"),
        ("afterany", "COMPLETED", "ready"),
        ("afterany", "FAILED", "ready"),
        ("afterany", "TIMEOUT", "ready"),
        ("afterok", "RUNNING", "wait"),
        ("afterok", "COMPLETED", "ready"),
        ("afterok", "FAILED", "never"),
        ("afterok", "CANCELLED", "never"),
        ("afterok", "TIMEOUT", "never"),
        ("afternotok", "PENDING", "wait"),
        ("afternotok", "COMPLETED", "never"),
        ("afternotok", "FAILED", "ready"),
        ("afternotok", "TIMEOUT", "ready"),
        ("afternotok", "CANCELLED", "ready"),
    ],
)
def test_each_condition(kind, state, verdict):
    s = status(parse(f"{kind}:5"), {5: state})
    assert s.verdict == verdict
    if verdict != "ready":
        assert "job 5" in s.reason and state in s.reason


def test_never_wins_and_unknown_jobs_never_satisfy():
    s = status(parse("afterok:1,afterok:2"), {1: "RUNNING", 2: "FAILED"})
    assert s.verdict == "never" and s.reason == "dependency never satisfied: afterok:2: job 2 ended FAILED"
    s = status(parse("afterany:9"), {})
    assert s.verdict == "never" and "job 9 is unknown" in s.reason


def test_singleton():
    deps = parse("singleton")
    assert status(deps, {}, running_names={"other"}, name="mine").verdict == "ready"
    s = status(deps, {}, running_names={"mine"}, name="mine")
    assert s.verdict == "wait" and "'mine'" in s.reason


deps_st = st.lists(
    st.one_of(
        st.builds(
            Dep,
            st.sampled_from(["after", "afterany", "afterok", "afternotok"]),
            st.lists(st.integers(1, 50), min_size=1, max_size=4, unique=True).map(tuple),
        ),
        st.just(Dep("singleton")),
    ),
    max_size=5,
).map(tuple)
states_st = st.dictionaries(st.integers(1, 50), st.sampled_from(STATES))


@given(deps_st)
def test_canonical_text_round_trips(deps):
    assert parse(normalize(deps)) == deps


@given(deps_st, states_st)
def test_verdict_is_the_worst_of_the_parts(deps, states):
    """AND of the conditions: never if any is never, else wait if any waits, else ready."""
    parts = [status((d,), states, (), "n").verdict for d in deps if d.kind != "singleton"]
    whole = status(deps, states, (), "n").verdict
    if "never" in parts:
        assert whole == "never"
    elif "wait" in parts:
        assert whole == "wait"
    else:
        assert whole == "ready"


@given(deps_st, states_st)
def test_no_wait_once_every_named_job_has_ended(deps, states):
    """When every job named has ended, the answer is final: never 'wait' (singleton aside)."""
    ended = {j: (s if s in TERMINAL else "COMPLETED") for j, s in states.items()}
    assert status(deps, ended, (), "n").verdict in ("ready", "never")


@given(deps_st, states_st, st.integers(51, 99), st.sampled_from(STATES))
def test_jobs_not_named_do_not_matter(deps, states, other, other_state):
    assert status(deps, {**states, other: other_state}) == status(deps, states)
