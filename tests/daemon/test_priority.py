"""Job priorities at the daemon's boundary: raises refused from an ordinary user, bad values written by hand,
fair share on the daemon's table.

Raises written by another user and refused by the daemon, ordering the queue with gsub --nice and
--priority and galter, fair share (between two users, across a restart), gstat --priority, and bad values
refused by gsub and galter are tested in process, on a driven clock, in test_priority_driven.py."""

from __future__ import annotations

import json
import os
import time

import pytest

from gridsched.protocol import requests as rq
from tests.fuzz.test_requests import valid_job

ONE_CORE = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
[machine]
cores = 1
[daemon]
autostart = false
"""

FAIRSHARE = (
    ONE_CORE
    + """
[priority]
weight_fairshare = 1000
half_life = "1h"
"""
)


def test_a_non_admin_cannot_raise_a_job_at_the_boundary():
    user = rq.Sender(1, "someone", frozenset({1}), admin=False)
    for extra, why in (
        ({"priority": 5}, "job: only an admin may set a job's priority (--priority)"),
        ({"nice": -1}, "job: nice -1: only an admin may give a negative nice value"),
    ):
        with pytest.raises(rq.Refused) as e:
            rq.parse({"type": "submit", "job": {**valid_job(7), "uid": 1, "gid": -1, **extra}}, rq.id_name(7), user)
        assert str(e.value) == why
    ok = rq.parse({"type": "submit", "job": {**valid_job(7), "uid": 1, "gid": -1, "nice": 10}}, rq.id_name(7), user)
    assert ok.job.nice == 10  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [10001, -10001, "5", 1.5, True])
def test_the_daemon_refuses_a_bad_nice_written_by_hand(stub_daemon, value):
    d = stub_daemon(ONE_CORE)
    nid = d.id_high + 1
    (d.spool.incoming / rq.id_name(nid)).write_text(
        json.dumps({"type": "submit", "job": {**valid_job(nid), "nice": value}})
    )
    d.ingest()
    assert nid not in d.table.jobs
    assert "nice" in (d.spool.quarantine / (rq.id_name(nid) + ".why")).read_text()
    assert d.db.id_record(nid)["refused"]


def test_fair_share_starts_the_lighter_user_first(stub_daemon):
    """Two users (root submits for another uid); the one with usage waits behind the one without."""
    d = stub_daemon(FAIRSHARE)
    now = time.time()
    heavy, light = os.getuid(), 1
    ids = []
    for uid in (heavy, light):
        nid = d.id_high + 1
        job = {**valid_job(nid), "uid": uid, "gid": -1, "submit_time": now}
        (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
        d.ingest()
        ids.append(nid)
    assert all(i in d.table.jobs for i in ids)
    d.table.usage.add(d.table.jobs[ids[0]].user, 3600.0, now, d.table.half_life)  # as if it had run an hour
    d.turn(now)
    assert [d.table.jobs[i].state.value for i in ids] == ["PENDING", "RUNNING"]


NOBODY = 65534


NOBODY = 65534
