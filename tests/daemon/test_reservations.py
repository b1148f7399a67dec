"""Reservations and floating resources in the real daemon, with real jobs.

A declared 8-core machine with two ``matlab`` licences.  The scheduling of reservations and licences (waiting
for a licence, deleting an active reservation, one made with --no-kill) is tested in process, on a driven
clock, in test_reservations_driven.py.
"""

from __future__ import annotations

import json
import os

import pytest

from gridsched.core import cpuset
from gridsched.protocol.spool import Spool, atomic_write
from tests.conftest import wait_for

CONFIG = """
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
[machine]
cores = 8
[daemon]
autostart = false
[resources.floating]
matlab = 2
"""


def resv(gs, rid: int) -> dict:
    return json.loads(gs.run("gresv", "show", str(rid), "--json", check=True).stdout)


def wait_resv(gs, rid: int, *states: str, timeout: float = 20) -> dict:
    try:
        return wait_for(
            lambda: (r := resv(gs, rid))["state"] in states and r,
            timeout,
            f"reservation {rid} to be {'/'.join(states)}",
        )
    except AssertionError:
        raise AssertionError(f"reservation {rid} is {resv(gs, rid)['state']}; log:\n{gs.log()}") from None


def test_bound_job_starts_on_the_reservations_cores_when_it_activates(make_gs):
    gs = make_gs(CONFIG)
    # a long job holds the whole machine; the flexible reservation waits behind it
    long = gs.gsub("-n", "8", "-t", "30s", "--wrap", "while [ ! -e go ]; do sleep 0.05; done")
    gs.wait_state(long, "RUNNING")
    rid = int(gs.run("gresv", "create", "-n", "4", "-t", "20", check=True).stdout)
    job = gs.gsub("--reservation", str(rid), "-n", "2", "-t", "10s", "--wrap", 'echo "$GS_CORES" > cores.txt')
    assert resv(gs, rid)["state"] == "WAITING"
    assert gs.job(job)["state"] == "PENDING"
    (gs.work / "go").touch()  # the long job ends now (not after a sleep a loaded machine may outlast)
    r = wait_resv(gs, rid, "ACTIVE")
    j = gs.wait_state(job, "RUNNING", "COMPLETED")
    lj = gs.job(long)
    assert lj["state"] == "COMPLETED"
    assert r["activate_time"] >= lj["end_time"] - 0.2  # not before the long job ended
    assert j["start_time"] - r["activate_time"] < 1.0  # the bound job starts within a second
    gs.wait_state(job, "COMPLETED")
    inside = cpuset.parse((gs.work / "cores.txt").read_text().strip())
    assert len(inside) == 2 and inside <= cpuset.parse(r["cores"])
    assert r["jobs"] == [job]


def test_daemon_refuses_binding_by_another_user(make_gs):
    if os.getuid() != 0:
        pytest.skip("writing a request file owned by another user needs root")
    gs = make_gs(CONFIG)
    rid = int(gs.run("gresv", "create", "-n", "2", "-t", "60", check=True).stdout)
    wait_resv(gs, rid, "ACTIVE")
    spool = Spool(gs.spool)
    jid = spool.next_id()
    nobody = 65534
    spec = {
        "id": jid,
        "name": "intruder",
        "user": "nobody",
        "uid": nobody,
        "gid": nobody,
        "ncpus": 1,
        "walltime": 10,
        "mem": None,
        "checkpoint": "none",
        "hold": False,
        "depend": "",
        "script": "#!/bin/sh\ntrue\n",
        "args": [],
        "workdir": "/tmp",
        "stdout": "/dev/null",
        "stderr": "/dev/null",
        "env": {},
        "submit_time": 0.0,
        "submit_dir": "/tmp",
        "reservation": rid,
    }
    tmp = spool.incoming / f".submit-{jid:010d}.json"
    atomic_write(tmp, json.dumps({"type": "submit", "job": spec}).encode())
    os.chown(tmp, nobody, nobody)
    os.rename(tmp, spool.incoming / f"submit-{jid:010d}.json")
    spool.wake()
    j = gs.wait_state(jid, "FAILED")
    assert f"reservation {rid}: owned by" in j["reason"]
