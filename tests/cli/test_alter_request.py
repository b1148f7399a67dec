"""The alter and requeue requests at the boundary: what galter and grequeue send, parsed and checked."""

from __future__ import annotations

import os

import pytest

from gridsched.protocol import requests as rq

SENDER = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), admin=False)


def parse(data: dict) -> rq.Request:
    return rq.parse(data, f"{data['type']}-1-1.json", SENDER)


def test_alter_takes_the_fields_given():
    req = parse(
        {
            "type": "alter",
            "jobs": [3, 3, 4],
            "arrays": [9],
            "changes": {"walltime": 60, "ncpus": 2, "name": "x", "depend": "afterok:1:2", "place": "board"},
        }
    )
    assert isinstance(req, rq.Alter)
    assert req.jobs == (3, 4) and req.arrays == (9,)
    assert req.changes.given() == {
        "walltime": 60,
        "ncpus": 2,
        "name": "x",
        "depend": "afterok:1:2",
        "place": "board",
    }


def test_alter_devices_as_a_submission_keeps_them():
    req = parse({"type": "alter", "jobs": [1], "changes": {"devices": [{"type": "gpu", "count": 2}]}})
    assert isinstance(req, rq.Alter)
    assert req.changes.given()["devices"] == [
        {"type": "gpu", "count": 2, "model": "", "bind": "closest", "exclusive": False}
    ]


def test_clearing_the_dependencies_is_a_change():
    req = parse({"type": "alter", "jobs": [1], "changes": {"depend": ""}})
    assert isinstance(req, rq.Alter) and req.changes.given() == {"depend": ""}


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({}, "alter: nothing to change"),
        ({"walltime": 0}, "field 'walltime' must lie between 1 and"),
        ({"walltime": "1h"}, "field 'walltime' must be a whole number"),
        ({"ncpus": True}, "field 'ncpus' must be a whole number"),
        ({"name": "a/b"}, "field 'name' must be non-empty, without '/'"),
        ({"name": " "}, "field 'name' must be non-empty"),
        ({"checkpoint": "criu"}, "field 'checkpoint' must be one of none, signal, suspend, requeue"),
        ({"depend": "afterok:x"}, "field 'depend'"),
        ({"place": "anywhere"}, "field 'place' must be one of pack, spread, board"),
        ({"mem": -1}, "field 'mem' must lie between"),
        ({"script": "x"}, "unknown field 'script'"),
        ({"uid": 0}, "unknown field 'uid'"),
        ({"type": "submit"}, "unknown field 'type'"),
        ({"devices": [{"type": "gpu", "count": 0}]}, "at least 1 device is needed"),
    ],
)
def test_alter_refuses_what_a_submission_refuses(changes, why):
    with pytest.raises(rq.Refused) as e:
        parse({"type": "alter", "jobs": [1], "changes": changes})
    assert why in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"type": "alter", "changes": {"walltime": 5}}, "alter: no job named"),
        ({"type": "alter", "jobs": [1]}, "missing field 'changes'"),
        ({"type": "alter", "jobs": [1], "changes": []}, "field 'changes' must be an object"),
        ({"type": "alter", "jobs": [0], "changes": {"walltime": 5}}, "must hold job ids"),
        ({"type": "alter", "jobs": [1], "changes": {"walltime": 5}, "uid": 0}, "unknown field 'uid'"),
        ({"type": "requeue"}, "requeue: no job named"),
        ({"type": "requeue", "jobs": ["1"]}, "must hold job ids"),
        ({"type": "requeue", "jobs": [1], "force": True}, "unknown field 'force'"),
    ],
)
def test_bad_requests_are_refused(data, why):
    with pytest.raises(rq.Refused) as e:
        parse(data)
    assert why in str(e.value)


def test_requeue():
    assert parse({"type": "requeue", "jobs": [5, 6]}) == rq.Requeue((5, 6), ())


def test_neither_brings_a_new_id():
    with pytest.raises(rq.Refused, match="cannot bring a new id"):
        rq.parse({"type": "requeue", "jobs": [1]}, rq.id_name(12), SENDER)


ADMIN = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), admin=True)


def test_nice_and_priority_raised_only_by_an_admin():
    for changes, why in (
        ({"priority": 5}, "alter: only an admin may set a job's priority (--priority)"),
        ({"priority": 0, "nice": 3}, "alter: only an admin may set a job's priority (--priority)"),
        ({"nice": -1}, "alter: nice -1: only an admin may give a negative nice value"),
    ):
        with pytest.raises(rq.Refused) as e:
            parse({"type": "alter", "jobs": [1], "changes": changes})
        assert str(e.value) == why
        req = rq.parse({"type": "alter", "jobs": [1], "changes": changes}, "alter-1-1.json", ADMIN)
        assert isinstance(req, rq.Alter) and req.changes.given() == changes
    # anyone may lower their own job, or bring its nice back to 0
    for nice in (0, 10000):
        req = parse({"type": "alter", "jobs": [1], "changes": {"nice": nice}})
        assert isinstance(req, rq.Alter) and req.changes.given() == {"nice": nice}


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"nice": 10001}, "field 'nice' must lie between -10000 and 10000"),
        ({"nice": "5"}, "field 'nice' must be a whole number"),
        ({"priority": -1}, "field 'priority' must lie between 0 and"),
        ({"priority": 1.5}, "field 'priority' must be a whole number"),
    ],
)
def test_bad_nice_and_priority_are_refused_even_to_an_admin(changes, why):
    with pytest.raises(rq.Refused) as e:
        rq.parse({"type": "alter", "jobs": [1], "changes": changes}, "alter-1-1.json", ADMIN)
    assert why in str(e.value)


def test_every_field_an_alter_changes_is_a_field_of_the_job():
    """The daemon applies an alter's changes to the job field by field (requests.altered), as galter checks them."""
    assert set(rq.Changes._fields) <= set(rq.JobSpec._fields)
