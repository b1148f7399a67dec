"""The tasks of a job (``ntasks``, ``cpus_per_task``) at the trust boundary: any value is accepted as a
positive whole number that divides the job's cores (or null: not given), or refused with one line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridsched.protocol import requests as rq
from tests.fuzz.test_requests import FUZZ, SENDER, json_values, valid_job


def parse_job(**fields) -> rq.JobSpec:
    job = valid_job() | fields
    req = rq.parse({"type": "submit", "job": job}, rq.id_name(1), SENDER)
    assert isinstance(req, rq.Submit)
    return req.job


@FUZZ
@given(st.sampled_from(["ntasks", "cpus_per_task"]), json_values, st.integers(1, 64))
def test_any_value_is_a_divisor_of_the_cores_or_refused(key, value, ncpus):
    try:
        spec = parse_job(ncpus=ncpus, **{key: value})
    except rq.Refused as e:
        assert str(e) and "\n" not in str(e)
        return
    got = getattr(spec, key)
    if value is None:  # null is "not given", as for every optional field
        assert got is None and key not in spec.to_spec()
        return
    assert isinstance(got, int) and not isinstance(got, bool) and got >= 1 and ncpus % got == 0
    assert spec.to_spec()[key] == got


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"ncpus": 8, "ntasks": 4, "cpus_per_task": 3}, "is not its 8 cores"),
        ({"ncpus": 8, "ntasks": 3}, "does not divide its 8 cores"),
        ({"ncpus": 6, "cpus_per_task": 4}, "does not divide its 6 cores"),
        ({"ncpus": 4, "ntasks": 0}, "ntasks"),
        ({"ncpus": 4, "cpus_per_task": -2}, "cpus_per_task"),
        ({"ncpus": 4, "ntasks": True}, "ntasks"),
        ({"ncpus": 4, "ntasks": 2, "split": {"n": 2, "ncpus": 1, "task_time": 10}}, "not a splittable one"),
    ],
)
def test_tasks_that_do_not_make_the_cores_are_refused(fields, why):
    with pytest.raises(rq.Refused, match=why):
        parse_job(**fields)


def test_tasks_are_kept_as_given():
    spec = parse_job(ncpus=8, ntasks=4, cpus_per_task=2).to_spec()
    assert (spec["ntasks"], spec["cpus_per_task"]) == (4, 2)
    plain = parse_job(ncpus=8).to_spec()
    assert "ntasks" not in plain and "cpus_per_task" not in plain
