"""A start that a kill of the daemon undid (committed as started, its shepherd died with the daemon before it
wrote its pid file): at the next start the job waits again, and nothing of that start is left on it."""

from __future__ import annotations

import json
import time

from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState
from tests.fuzz.test_requests import valid_job

CONFIG = """
[scheduler]
policy = "fcfs"
[machine]
cores = 2
[daemon]
autostart = false
"""


def test_a_job_whose_start_a_kill_undid_waits_again_and_a_cancel_ends_it_at_once(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    jid = d.spool.next_id()
    (d.spool.incoming / rq.id_name(jid)).write_text(json.dumps({"type": "submit", "job": valid_job(jid)}))
    d.turn(t, scan=True)
    rec = d.table.jobs[jid]
    assert rec.state is JobState.RUNNING and rec.shepherd is not None
    d.table.commit()
    d = stub_daemon.restart(d, crash=True)  # the stub's shepherd wrote no pid file: as if it died unborn
    rec = d.table.jobs[jid]
    assert rec.state is JobState.PENDING
    assert rec.shepherd is None and rec.start is None and rec.cores == ()
    d.cancel(rec, t + 1, "cancelled before it started")
    assert d.table.jobs.get(jid) is None or d.table.jobs[jid].state is JobState.CANCELLED
    assert d.db.job(jid)["state"] == "CANCELLED"
