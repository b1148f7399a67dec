"""A begin time in a job's spec, in the daemon (in process: stub executor).

ghold and grls (hold a pending job, refuse the wrong states, release it) are tested in process, on a driven
clock, in test_hold_begin_driven.py."""

from __future__ import annotations

import json
import time

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


def test_a_begin_time_keeps_a_job_waiting_until_then(stub_daemon):
    """A job whose spec has a begin time is not started before it; the reason gives the time."""
    d = stub_daemon(ONE_CORE)
    now = time.time()
    nid = d.id_high + 1
    job = {**valid_job(nid), "begin": now + 100.0}
    (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
    d.turn(now, scan=True)
    rec = d.table.jobs[nid]
    assert rec.state.value == "PENDING"
    assert rec.reason == "begin time " + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now + 100.0))
    assert d.wake_at == now + 100.0  # the daemon is woken then
    d.turn(now + 100.5)
    assert d.table.jobs[nid].state.value == "RUNNING" and d.table.jobs[nid].reason == ""
