"""Selecting jobs by user, name, state and array ranges (gdel, ghold, grls, gstat), and gstat's REASON,
--format, --sort and --start, in-process on a state db written as the daemon writes it."""

from __future__ import annotations

import json
import os
import time

import pytest

from gridsched.cli import gdel, ghold, grls, gstat
from gridsched.protocol.reason_codes import code


def requests(spool, kind: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(spool.incoming.glob(f"{kind}-*.json"))]


def task(jid: int, array: int, index: int, **fields) -> dict:
    from tests.cli.conftest import job_row

    row = job_row(jid, name="arr", **fields)
    row["spec"] = {**row["spec"], "array_id": array, "array_index": index}
    return row


@pytest.fixture
def queue(make_row, put_rows, monkeypatch):
    """Jobs of me (uid 1000) and alice: 1 pending, 2 running, 3 held, 4 alice's pending, 5 done,
    and array 10 with tasks 10_1..10_5 (ids 10..14), all pending."""
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    now = time.time()
    me = {"user": "me", "uid": 1000}
    put_rows(
        make_row(1, name="prep", **me),
        make_row(2, name="sim", state="RUNNING", start_time=now - 60, **me),
        make_row(3, name="sim", state="HELD", reason="held by its owner (grls releases it)", **me),
        make_row(4, name="sim", user="alice", uid=4242),
        make_row(5, name="sim", state="COMPLETED", end_time=now - 5, **me),
        *(task(10 + k, 10, k + 1, **me) for k in range(5)),
    )


@pytest.mark.parametrize(
    "args, ids, said",
    [
        (["-n", "sim", "-u", "me"], [2, 3], "job 2: cancelling\njob 3: cancelling\n"),
        (["-s", "RUNNING"], [2], "job 2: cancelling\n"),
        (["-s", "r"], [2], "job 2: cancelling\n"),  # Slurm's short form, any case
        (["-s", "PD", "-n", "prep"], [1], "job 1: cancelling\n"),  # AND
        (["-s", "PENDING,HELD", "-n", "sim", "-u", "me"], [3], "job 3: cancelling\n"),
        (["10_1"], [10], "job 10_1: cancelling\n"),  # the first task has the array's id: it alone
        (["-u", "me", "-n", "arr,prep"], [1, 10, 11, 12, 13, 14], None),
        (["10_[2-4]"], [11, 12, 13], "job 10_2: cancelling\njob 10_3: cancelling\njob 10_4: cancelling\n"),
        (["10_[1,3-4]"], [10, 12, 13], None),
        (["10_3"], [12], "job 10_3: cancelling\n"),
        (["10_[1-5]", "-s", "PENDING", "-n", "arr"], [10, 11, 12, 13, 14], None),
        (["1,10_[5]"], [1, 14], None),
    ],
)
def test_gdel_selects(env, spool, run, queue, args, ids, said):
    r = run(gdel.cli, args)
    assert r.exit_code == 0 and "error" not in r.stderr
    if said is not None:
        assert r.stdout == said
    assert requests(spool, "cancel") == [{"type": "cancel", "jobs": ids}]


def test_gdel_another_users_job_is_refused_per_job(env, spool, run, queue):
    r = run(gdel.cli, ["-u", "alice"])
    assert r.exit_code == 1 and r.stderr == "gdel: error: job 4: owned by alice\n" and r.stdout == ""
    assert requests(spool, "cancel") == []
    r = run(gdel.cli, ["-n", "sim", "-s", "PD,HELD,R"])  # mine go, alice's is refused
    assert r.exit_code == 1 and r.stderr.splitlines()[0] == "gdel: error: job 4: owned by alice"
    assert requests(spool, "cancel") == [{"type": "cancel", "jobs": [2, 3]}]


def test_gdel_no_match_and_no_selection(env, spool, run, queue):
    r = run(gdel.cli, ["-u", "alice", "-s", "RUNNING"])
    assert r.exit_code == 1 and r.stderr == "gdel: error: no job matches -u alice -s RUNNING\n"
    r = run(gdel.cli, ["10_[7-9]"])
    assert r.exit_code == 1 and r.stderr == "gdel: error: no job matches 10_[7-9]\n"
    r = run(gdel.cli, [])
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("gdel: error: name the jobs")
    r = run(gdel.cli, ["-s", "WAITING"])
    assert r.exit_code == 2 and r.stderr.startswith("gdel: error: state 'WAITING': not a state")
    r = run(gdel.cli, ["10_[3-1]"])
    assert r.exit_code == 2 and r.stderr.startswith("gdel: error: '10_[3-1]': not a job id")
    assert requests(spool, "cancel") == []


def test_finished_jobs_only_when_the_state_names_them(env, spool, run, queue):
    r = run(gdel.cli, ["-n", "sim", "-s", "CD"])
    assert r.exit_code == 1 and r.stderr == "gdel: error: job 5: already COMPLETED\n"


def test_ghold_and_grls_share_the_selection(env, spool, run, queue):
    r = run(ghold.cli, ["-s", "PD", "-u", "me", "-n", "arr"])
    assert r.exit_code == 0 and requests(spool, "hold") == [{"type": "hold", "jobs": [10, 11, 12, 13, 14]}]
    r = run(grls.cli, ["-s", "HELD"])
    assert r.exit_code == 0 and r.stdout == "job 3: releasing\n"
    assert requests(spool, "release") == [{"type": "release", "jobs": [3]}]
    r = run(grls.cli, ["-n", "nothing"])
    assert r.exit_code == 1 and r.stderr == "grls: error: no job matches -n nothing\n"


# -- gstat ----------------------------------------------------------------------------------


def ids_of(stdout: str) -> list[str]:
    return [ln.split()[0] for ln in stdout.splitlines()[1:] if ln.strip()]


def test_gstat_filters(env, run, queue):
    assert ids_of(run(gstat.cli, ["-s", "PD", "-n", "sim"]).stdout) == ["4"]
    assert ids_of(run(gstat.cli, ["-s", "HELD,R"]).stdout) == ["2", "3"]
    assert ids_of(run(gstat.cli, ["-u", "alice"]).stdout) == ["4"]
    assert ids_of(run(gstat.cli, ["-j", "1,10_[2-3]"]).stdout) == ["1", "10_2", "10_3"]
    assert ids_of(run(gstat.cli, ["-j", "10_4"]).stdout) == ["10_4"]
    assert ids_of(run(gstat.cli, ["-s", "COMPLETED"]).stdout) == ["5"]
    r = run(gstat.cli, ["-s", "nope"])
    assert r.exit_code == 2 and r.stderr.startswith("gstat: error: state 'nope': not a state")


def test_gstat_format_and_sort(env, run, queue):
    r = run(gstat.cli, ["-s", "PD,R,HELD", "-n", "sim,prep", "--format", "%i %u %j %T %t %l %D %R", "--sort=-t,i"])
    assert r.exit_code == 0
    assert [ln.split() for ln in r.stdout.splitlines()] == [
        ["JOBID", "USER", "NAME", "STATE", "ST", "TIME_LIMIT", "NODES", "REASON"],
        ["2", "me", "sim", "RUNNING", "R", "01:00:00", "1"],
        ["1", "me", "prep", "PENDING", "PD", "01:00:00", "1", "None"],
        ["4", "alice", "sim", "PENDING", "PD", "01:00:00", "1", "None"],
        ["3", "me", "sim", "HELD", "PD", "01:00:00", "1", "JobHeldUser"],
    ]
    r = run(gstat.cli, ["-j", "2", "--format", "%.6i|%8j|%5u|100%%"])
    assert r.stdout.splitlines() == [" JOBID|NAME    |USER |100%", "     2|sim     |me   |100%"]
    for bad in ("%i %Q", "%-8j", "%i %"):
        r = run(gstat.cli, ["--format", bad])
        assert r.exit_code == 2 and r.stderr.startswith("gstat: error: --format: '%")
        assert len(r.stderr.splitlines()) == 1 and "not a field" in r.stderr
    by_name = run(gstat.cli, ["-s", "PD,R,HELD", "-n", "sim,prep", "--format", "%i", "--sort=-state,id"])
    assert by_name.stdout.split() == ["JOBID", "2", "1", "4", "3"]
    r = run(gstat.cli, ["--sort", "i,zz"])
    assert r.exit_code == 2 and r.stderr.startswith("gstat: error: --sort: 'zz': not a field")


def test_gstat_start_shows_a_date(env, run, make_row, put_rows):
    week = time.time() + 7 * 86400
    soon = time.time() + 60
    put_rows(
        make_row(1, state="RUNNING", start_time=time.time()),
        make_row(2, predicted_start=week, reason="Priority: waiting for jobs ahead of it in the queue to start first"),
        make_row(3, predicted_start=soon, reason="Resources: next to start, waiting for the resources it needs"),
        make_row(4, reason="waiting for dependency afterok:3: job 3 is PENDING"),
    )
    r = run(gstat.cli, ["--start"])
    rows = [ln.split() for ln in r.stdout.splitlines()]
    assert rows[0] == ["JOBID", "NAME", "USER", "STATE", "START_TIME", "REASON"]
    assert [(x[0], x[4], x[5]) for x in rows[1:]] == [
        ("3", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(soon)), "Resources"),
        ("2", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(week)), "Priority"),
        ("4", "N/A", "Dependency"),
    ]
    # the table's NOTE gives the date of a start that is not today
    table = {ln.split()[0]: ln for ln in run(gstat.cli, []).stdout.splitlines()[1:]}
    assert "start " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(week)) in table["2"]


def test_held_time_does_not_count(env, run, make_row, put_rows):
    """A job held after it ran (requeued, then held) shows the time it ran, not a clock that goes on."""
    put_rows(make_row(1, state="HELD", elapsed=75.0, start_time=time.time() - 3600, predicted_start=time.time() - 600))
    rows = [ln.split() for ln in run(gstat.cli, []).stdout.splitlines()[1:]]
    assert rows[0][3] == "HELD" and rows[0][6] == "00:01:15"


@pytest.mark.parametrize(
    "state, reason, want",
    [
        ("PENDING", "Resources: next to start, waiting for the resources it needs to come free", "Resources"),
        ("PENDING", "Priority: waiting for jobs ahead of it in the queue to start first", "Priority"),
        ("PENDING", "Reservation: waiting for reservation 3 to be activated", "Reservation"),
        ("PENDING", "can never start while cores 6-7 are drained (see gctl topology)", "ReqNodeNotAvail"),
        ("PENDING", "waiting for cores, while cores 4-7 are drained (see gctl topology)", "ReqNodeNotAvail"),
        ("PENDING", "can never start: it asks for matlab=3, the machine has matlab=2", "BadConstraints"),
        ("PENDING", "begin time 2030-01-01T00:00:00", "BeginTime"),
        ("PENDING", "waiting for dependency afterok:3: job 3 is RUNNING", "Dependency"),
        ("PENDING", "singleton: another job named 'x' is queued or running", "Dependency"),
        ("PENDING", "dependency never satisfied: afterok:3: job 3 ended FAILED", "DependencyNeverSatisfied"),
        ("PENDING", "array 7: 2 tasks already running (%2)", "JobArrayTaskLimit"),
        ("PENDING", "", "None"),
        ("HELD", "held by its owner (grls releases it)", "JobHeldUser"),
        ("HELD", "held by an admin (grls releases it)", "JobHeldAdmin"),
        ("RUNNING", "", ""),
    ],
)
def test_reason_codes(state, reason, want):
    assert code(state, reason) == want
