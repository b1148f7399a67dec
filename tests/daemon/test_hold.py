"""ghold and grls against a real daemon: hold a pending job, refuse the wrong states, release it."""

from __future__ import annotations

import json
import time

import pytest

from gridsched.protocol import requests as rq
from tests.fuzz.test_requests import valid_job

pytestmark = pytest.mark.daemon

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


def test_hold_and_release(make_gs):
    gs = make_gs(ONE_CORE)
    blocker = gs.gsub("--wrap", "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")
    later = gs.gsub("--wrap", "echo ran")
    gs.wait_state(blocker, "RUNNING")

    r = gs.run("ghold", str(blocker), str(later), "999")
    assert r.returncode == 1
    assert r.stdout == f"job {later}: holding\n"
    assert r.stderr.splitlines() == [
        f"ghold: error: job {blocker}: is RUNNING, only pending jobs can be held",
        "ghold: error: job 999: no such job",
    ]
    gs.wait_state(later, "HELD")

    r = gs.run("grls", str(blocker))
    assert r.returncode == 1
    assert r.stderr == f"grls: error: job {blocker}: is RUNNING, only held jobs can be released\n"

    assert gs.job(later)["reason"] == "held by its owner (grls releases it)"

    (gs.work / "go").touch()
    gs.wait_state(blocker, "COMPLETED")
    assert gs.job(later)["state"] == "HELD"  # the core is free, but a held job does not start

    r = gs.run("grls", str(later))
    assert r.returncode == 0 and r.stdout == f"job {later}: releasing\n"
    j = gs.wait_state(later, "COMPLETED")
    assert open(j["stdout"]).read() == "ran\n"
    assert j["reason"] == ""


def test_submit_held_then_release(gs):
    jid = gs.gsub("--hold", "--wrap", "true")
    gs.wait_state(jid, "HELD")
    r = gs.run("ghold", str(jid))
    assert r.returncode == 1 and r.stderr == f"ghold: error: job {jid}: is HELD, only pending jobs can be held\n"
    assert gs.run("grls", str(jid)).returncode == 0
    gs.wait_state(jid, "COMPLETED")


def test_bad_ids_are_usage_errors(gs):
    r = gs.run("ghold", "x")
    assert (
        r.returncode == 2
        and r.stderr
        == "ghold: error: 'x': not a job id (a positive whole number, or ARRAYID_INDEX for an array task)\n"
    )


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
