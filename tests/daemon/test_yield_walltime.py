"""The walltime of a yielding job, in process (stub executor, driven clock).

A job's walltime always holds.  A job with nothing to wait for cannot yield
(the daemon refuses the request in one line, gyield before it); a yielding job
is not charged only for the time a child of its ran while it yielded, and its
run never lasts past ``max(its walltime, jobs.max_walltime)`` from its start.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gridsched.cli.gwait import gyield_cli
from gridsched.daemon.loop import Daemon
from gridsched.daemon.spawn import Stub
from gridsched.protocol import config as configmod
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState
from gridsched.protocol.spool import Spool
from tests.fuzz.test_requests import valid_job

CONFIG = """
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
default_walltime = "10s"
max_walltime = "{longest}"
[machine]
cores = 8
[daemon]
autostart = false
"""


@pytest.fixture
def d(stub_daemon) -> Daemon:
    return stub_daemon(CONFIG.format(longest="1h"))


def submit(d: Daemon, now: float, **fields: object) -> int:
    nid = d.spool.next_id()
    job = {**valid_job(nid), "submit_time": now, **fields}
    (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
    d.turn(now, scan=True)
    return nid


def request(d: Daemon, now: float, kind: str, **fields: object) -> str:
    name = f"{kind}-{time.time_ns()}-1.json"
    (d.spool.incoming / name).write_text(json.dumps({"type": kind, **fields}))
    d.turn(now, scan=True)
    return name


def end(d: Daemon, jid: int, now: float) -> None:
    rec = d.table.jobs[jid]
    d.ex.end(jid, rec.segment, end=now, exit_code=0)
    d.job_ended(jid)


def termed(d: Daemon, jid: int) -> bool:
    return (jid, signal.SIGTERM) in d.ex.signals


def refusal(d: Daemon, name: str) -> str | None:
    why = d.spool.quarantine / (name + ".why")
    return why.read_text() if why.exists() else None


def no_child(jid: int) -> str:
    return f"job {jid} cannot yield: it has no live child, so there is nothing to lend its cores to"


def killed_between(d: Daemon, jid: int, before: float, after: float) -> None:
    """``jid`` still runs unsignalled at ``before`` and is sent SIGTERM for its walltime by ``after``."""
    d.turn(before)
    assert not termed(d, jid), f"job {jid} was stopped before {before}"
    d.turn(after)
    assert termed(d, jid) and d.table.jobs[jid].stop == "timeout", f"job {jid} still runs at {after}"


def test_a_job_with_nothing_to_wait_for_cannot_yield_and_is_killed_at_its_walltime(d):
    t = time.time()
    p = submit(d, t, walltime=10, ncpus=8)
    done = submit(d, t, walltime=10, ncpus=1)  # waits: the parent has every core
    assert d.table.jobs[p].state is JobState.RUNNING
    name = request(d, t + 1, "yield", job=p)
    assert refusal(d, name) == no_child(p) + "\n"
    itself = request(d, t + 1, "yield", job=p, until=[p, 10**6])  # itself, and a job that does not exist
    assert "none of the jobs it would wait for is live" in (refusal(d, itself) or "")
    assert d.trees.yielded == {} and d.table.jobs[p].lent == []
    killed_between(d, p, t + 9.9, t + 10.1)
    end(d, p, t + 10.5)
    d.turn(t + 10.5)
    assert d.db.job(p)["state"] == "TIMEOUT"
    assert d.table.jobs[done].state is JobState.RUNNING  # the cores went on to the next job


def test_children_that_never_run_earn_their_parent_nothing(d):
    t = time.time()
    p = submit(d, t, walltime=10, ncpus=2)
    held = submit(d, t, parent=p, hold=True)
    later = submit(d, t, parent=p, begin=t + 3600)
    assert d.table.jobs[held].state is JobState.HELD and d.table.jobs[later].state is JobState.PENDING
    name = request(d, t + 1, "yield", job=p)
    assert refusal(d, name) is None and p in d.trees.yielded  # it has children to wait for
    killed_between(d, p, t + 9.9, t + 10.1)
    assert d.table.jobs[p].credit(t + 10.1, 3600) == 0.0


def test_a_job_waited_for_that_is_not_a_child_earns_nothing(d):
    t = time.time()
    p = submit(d, t, walltime=10, ncpus=2)
    other = submit(d, t, walltime=60)  # the same user's, no parent: it runs beside p
    assert d.table.jobs[other].state is JobState.RUNNING
    name = request(d, t + 1, "yield", job=p, until=[other])
    assert refusal(d, name) is None and p in d.trees.yielded
    killed_between(d, p, t + 9.9, t + 10.1)


def test_the_credit_is_the_time_a_child_ran_while_the_parent_yielded(d):
    t = time.time()
    p = submit(d, t, walltime=10, ncpus=2)
    kid = submit(d, t, parent=p, hold=True, walltime=60)
    request(d, t + 1, "yield", job=p)  # yields from t+1; its child is held until t+2
    request(d, t + 2, "release", jobs=[kid])
    assert d.table.jobs[kid].state is JobState.RUNNING
    end(d, kid, t + 7)  # ran 5 s
    d.turn(t + 7)
    assert p not in d.trees.yielded  # its last child ended: it has its cores back
    assert d.table.jobs[p].credit(t + 7, 3600) == pytest.approx(5.0)
    killed_between(d, p, t + 14.9, t + 15.1)  # 10 s of walltime and 5 s of credit


def test_yielding_and_resuming_again_earns_only_what_children_ran_meanwhile(d):
    t = time.time()
    p = submit(d, t, walltime=10, ncpus=2)
    kid = submit(d, t, parent=p, walltime=60)  # runs beside p from t on
    assert d.table.jobs[kid].state is JobState.RUNNING
    for since, until in ((1, 3), (5, 6)):  # 3 s yielded in all while the kid ran
        request(d, t + since, "yield", job=p)
        assert p in d.trees.yielded
        request(d, t + until, "resume", job=p)
        assert p not in d.trees.yielded  # nothing ran on its cores: resumed at once
    end(d, kid, t + 8)
    assert d.table.jobs[p].credit(t + 8, 3600) == pytest.approx(3.0)
    killed_between(d, p, t + 12.9, t + 13.1)


def test_no_credit_carries_a_run_past_max_walltime(stub_daemon):
    d = stub_daemon(CONFIG.format(longest="30s"))
    t = time.time()
    p = submit(d, t, walltime=10, ncpus=2)
    kid = submit(d, t, parent=p, hold=True, walltime=30)
    request(d, t + 1, "yield", job=p)
    request(d, t + 5, "release", jobs=[kid])  # it runs from t+5 to t+35, if nothing stops it
    assert d.table.jobs[kid].state is JobState.RUNNING
    assert d.table.jobs[p].due(t + 20, d.cfg.max_walltime) == pytest.approx(t + 25)  # 15 s earned by then
    killed_between(d, p, t + 29.9, t + 30.1)  # 25 s earned, but at most 30 s from its start
    assert not termed(d, kid)


def test_gyield_refuses_a_job_without_a_live_child(d):
    t = time.time()
    p = submit(d, t, walltime=60, ncpus=2)
    env = {"GS_JOBID": str(p), "GS_SPOOL": str(d.spool.root)}
    r = CliRunner().invoke(gyield_cli, [], env=env)
    assert r.exit_code == 1
    assert r.output == f"gyield: error: {no_child(p)}\n"
    assert not [n for n in os.listdir(d.spool.incoming) if n.startswith("yield-")]
    kid = submit(d, t, parent=p, hold=True)
    r = CliRunner().invoke(gyield_cli, [], env=env)
    assert r.exit_code == 0, r.output
    d.turn(t + 1, scan=True)
    assert p in d.trees.yielded
    d.turn(t + 1, scan=True)
    request(d, t + 2, "cancel", jobs=[kid])
    assert p not in d.trees.yielded  # no child left: it lends its cores no more


class Kept(Stub):
    """The stub executor whose shepherds outlive a daemon: a restarted daemon finds them again."""

    def pid_info(self, job_dir: Path, segment: int) -> dict[str, Any] | None:
        jid = int(Path(job_dir).name)
        return next(({"pid": pid, "ticks": 0} for pid, j in self.pids.items() if j == jid), None)


def open_daemon(root: Path, ex: Stub) -> Daemon:
    cfgfile = root / "gridsched.toml"
    if not cfgfile.exists():
        cfgfile.write_text(CONFIG.format(longest="1h"))
    spool = Spool(root / "spool")
    spool.ensure()
    d = Daemon(spool, configmod.load(str(cfgfile)), str(cfgfile), executor=ex)
    d.lock()
    d.open()
    return d


def test_a_child_that_ended_while_the_daemon_was_down_earns_only_what_it_ran(tmp_path):
    t = time.time()
    ex = Kept()
    d = open_daemon(tmp_path, ex)
    try:
        p = submit(d, t, walltime=10, ncpus=2)
        kid = submit(d, t, parent=p, walltime=60)
        request(d, t + 1, "yield", job=p)
        assert d.table.jobs[p].lent == [[t + 1, None]]
        ex.end(kid, d.table.jobs[kid].segment, end=t + 3, exit_code=0)  # ends while the daemon is down
    finally:
        d.close()
    d = open_daemon(tmp_path, ex)
    try:
        assert d.db.job(kid)["state"] == "COMPLETED" and d.table.jobs[p].state is JobState.RUNNING
        assert d.table.jobs[p].lent == [[t + 1, t + 3]]  # it stopped earning when its child ended
        killed_between(d, p, t + 11.9, t + 12.1)
    finally:
        d.close()
