"""ghold and grls, begin times and estimates, in the daemon (in process: stub executor, driven clock).

The commands run in process on the daemon's spool; the daemon takes what they wrote at its next turn.  The
signals sent before the walltime go to real jobs in test_begin_signal.py.
"""

from __future__ import annotations

import time

import pytest

from tests.daemon.driven import Driven
from tests.daemon.test_begin_signal import EASY_TWO_CORES
from tests.daemon.test_hold import ONE_CORE


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(ONE_CORE))


def test_hold_and_release(dr):
    blocker = dr.gsub("--wrap", "wait for go", work=None)
    later = dr.gsub("--wrap", "echo ran")
    assert dr.running(blocker)

    r = dr.command("ghold", str(blocker), str(later), "999", check=False)
    assert r.exit_code == 1
    assert r.stdout == f"job {later}: holding\n"
    assert r.stderr.splitlines() == [
        f"ghold: error: job {blocker}: is RUNNING, only pending jobs can be held",
        "ghold: error: job 999: no such job",
    ]
    assert dr.state(later) == "HELD"

    r = dr.command("grls", str(blocker), check=False)
    assert r.exit_code == 1
    assert r.stderr == f"grls: error: job {blocker}: is RUNNING, only held jobs can be released\n"

    assert dr.job(later)["reason"] == "held by its owner (grls releases it)"

    dr.finish(blocker)
    dr.run_to(1)
    assert dr.state(later) == "HELD"  # the core is free, but a held job does not start

    r = dr.command("grls", str(later))
    assert r.exit_code == 0 and r.stdout == f"job {later}: releasing\n"
    dr.run_until(lambda: dr.state(later) == "COMPLETED", 5)
    assert [s.job_id for s in dr.d.ex.started].count(later) == 1
    assert dr.job(later)["reason"] == ""


def test_submit_held_then_release(dr):
    jid = dr.gsub("--hold", "--wrap", "true")
    assert dr.state(jid) == "HELD"
    r = dr.command("ghold", str(jid), check=False)
    assert r.exit_code == 1 and r.stderr == f"ghold: error: job {jid}: is HELD, only pending jobs can be held\n"
    assert dr.command("grls", str(jid)).exit_code == 0
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 5)


def test_bad_ids_are_usage_errors(dr):
    r = dr.command("ghold", "x", check=False)
    assert (
        r.exit_code == 2
        and r.stderr
        == "ghold: error: 'x': not a job id (a positive whole number, or ARRAYID_INDEX for an array task)\n"
    )


def test_a_begin_time_holds_the_job_until_then(dr):
    before = time.time()
    jid = dr.gsub("-t", "60s", "--begin", "now+3", "--wrap", "true")
    rows = dr.command("gstat", "--format", "%i %T %R", turn=False).stdout.split()
    assert rows[-3:] == [str(jid), "PENDING", "BeginTime"]
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 20)
    j = dr.job(jid)
    assert j["start_time"] >= before + 3
    assert j["start_time"] <= dr.now


def test_a_begin_time_in_the_past_starts_the_job_now(dr):
    jid = dr.gsub("-t", "60s", "--begin", "2020-01-01T00:00", "--wrap", "true")
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 1)


def test_pbs_a_begin_time(dr, tmp_path):
    t = time.localtime(time.time() + 120)
    script = tmp_path / "p.sh"
    script.write_text(f"#!/bin/sh\n#PBS -a {time.strftime('%Y%m%d%H%M', t)}\n#PBS -l walltime=60\ntrue\n")
    jid = dr.gsub(str(script))
    row = dr.command("gstat", "--start", turn=False).stdout.splitlines()[-1].split()
    assert row[0] == str(jid) and row[5:] == ["BeginTime"]
    assert time.mktime(time.strptime(row[4], "%Y-%m-%dT%H:%M:%S")) == time.mktime((*t[:5], 0, 0, 0, -1))
    dr.command("gdel", str(jid))


@pytest.mark.parametrize("how", ["--estimate", "#PBS -l soft_walltime"])
def test_an_estimate_shorter_than_the_walltime_backfills(stub_daemon, tmp_path, how):
    """One core is busy for up to 60 s and the head needs both: a one-core job with a walltime of 120 s
    backfills only because its estimate (10 s) ends before the head's reservation."""
    dr = Driven(stub_daemon(EASY_TWO_CORES))
    busy = dr.gsub("-n", "1", "-t", "60s", "--wrap", "wait for go", work=None)
    assert dr.running(busy)
    head = dr.gsub("-n", "2", "-t", "60s", "--wrap", "true")
    plain = dr.gsub("-n", "1", "-t", "120s", "--wrap", "true")
    if how == "--estimate":
        short = dr.gsub("-n", "1", "-t", "120s", "--estimate", "10s", "--wrap", "true")
    else:
        script = tmp_path / "p.sh"
        script.write_text("#!/bin/sh\n#PBS -l ncpus=1,walltime=00:02:00,soft_walltime=00:00:10\ntrue\n")
        short = dr.gsub(str(script))
    dr.run_until(lambda: dr.state(short) == "COMPLETED", 20)
    assert dr.state(plain) == "PENDING" and dr.state(head) == "PENDING"
    dr.finish(busy)
    dr.run_until(lambda: dr.state(head) == "COMPLETED", 30)
