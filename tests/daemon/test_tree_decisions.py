"""The daemon carries out the core's tree decisions, in process (stub executor): a subtree ending survives a
restart of the daemon between the parent's end and the pass that decides it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from gridsched.daemon.loop import Daemon
from gridsched.daemon.spawn import Stub
from gridsched.protocol import config as configmod
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState
from gridsched.protocol.spool import Spool
from tests.fuzz.test_requests import valid_job

CONFIG = '[scheduler]\npolicy = "fcfs"\n[machine]\ncores = 1\n[daemon]\nautostart = false\n'


def open_daemon(root: Path) -> Daemon:
    cfgfile = root / "gridsched.toml"
    if not cfgfile.exists():
        cfgfile.write_text(CONFIG)
    spool = Spool(root / "spool")
    spool.ensure()
    d = Daemon(spool, configmod.load(str(cfgfile)), str(cfgfile), executor=Stub())
    d.lock()
    d.open()
    return d


def submit(d: Daemon, now: float, **fields: object) -> int:
    nid = d.id_high + 1
    job = {**valid_job(nid), **fields}
    (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
    d.turn(now, scan=True)
    return nid


def test_a_failed_parents_subtree_is_cancelled_by_the_next_pass_even_after_a_restart(tmp_path):
    now = time.time()
    d = open_daemon(tmp_path)
    try:
        p = submit(d, now)
        assert d.table.jobs[p].state is JobState.RUNNING
        kid = submit(d, now, parent=p)
        assert d.table.jobs[kid].state is JobState.PENDING  # the one core is the parent's
        d.end(d.table.jobs[p], JobState.FAILED, now + 1)
        d.table.commit()
        assert d.table.jobs[kid].state is JobState.PENDING  # decided by the next pass, which has not run
    finally:
        d.close()
    d = open_daemon(tmp_path)
    try:
        d.turn(now + 2)
        row = d.db.job(kid)
        assert row is not None and row["state"] == "CANCELLED"
        assert row["reason"] == f"parent {p} ended FAILED"
        assert d.trees.fallen == {}  # decided once
    finally:
        d.close()
