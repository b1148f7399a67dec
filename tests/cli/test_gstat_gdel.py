"""gstat and gdel in-process, on a state db written as the daemon writes it."""

from __future__ import annotations

import json
import os
import pwd
import re
import time

import pytest

from gridsched.cli import gdel, gstat, gsub

JSON_KEYS = {
    "id",
    "name",
    "user",
    "state",
    "ncpus",
    "walltime",
    "submit_time",
    "start_time",
    "end_time",
    "elapsed",
    "predicted_start",
    "planned",
    "cores",
    "devices",
    "exit_code",
    "exit_signal",
    "reason",
    "reason_code",
    "restarts",
    "preemptions",
    "checkpoints",
    "backfilled",
    "stdout",
    "stderr",
    "workdir",
    "resources",
    "reservation",
    "array_id",
    "array_index",
    "split",
    "parent",
}


def table_rows(stdout: str) -> dict[int, list[str]]:
    """The table's rows by job id (the header is the first line)."""
    lines = stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "USER", "STATE", "CPUS", "WALLTIME", "TIME", "CORES", "REASON", "NOTE"]
    return {int(ln.split()[0]): ln.split() for ln in lines[1:] if ln.strip()}


# -- gstat ---------------------------------------------------------------------------


def test_empty_spool_that_does_not_exist(env, run):
    r = run(gstat.cli, [])
    assert r.exit_code == 0
    assert table_rows(r.stdout) == {}
    r = run(gstat.cli, ["--json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout) == {
        "jobs": [],
        "daemon": {"running": False, "pid": None, "spool": os.environ["GRIDSCHED_SPOOL"]},
    }


def test_pending_submits_show_as_pending(env, run):
    (env / "job.sh").write_text("#!/bin/sh\n#GS -n 2 -t 1:00:00\ntrue\n")
    assert run(gsub.cli, ["job.sh"]).exit_code == 0
    assert run(gsub.cli, ["--hold", "-N", "later", "job.sh"]).exit_code == 0
    r = run(gstat.cli, [])
    assert r.exit_code == 0
    rows = table_rows(r.stdout)
    assert rows[1] == ["1", "job.sh", pwd.getpwuid(os.getuid()).pw_name, "PENDING", "2", "01:00:00", "None"]
    assert rows[2][1] == "later" and rows[2][3] == "HELD" and rows[2][-1] == "JobHeldUser"
    doc = json.loads(run(gstat.cli, ["--json"]).stdout)
    assert [j["state"] for j in doc["jobs"]] == ["PENDING", "HELD"]
    for j in doc["jobs"]:
        assert set(j) == JSON_KEYS
    assert doc["jobs"][0]["stdout"] == str(env / "job.sh.o1")
    assert doc["jobs"][0]["workdir"] == str(env)


def test_table_states_times_and_filters(env, run, make_row, put_rows):
    now = time.time()
    put_rows(
        make_row(1, state="RUNNING", ncpus=4, cores="0-3", start_time=now - 3605, user="alice", uid=1001),
        make_row(2, state="PENDING", predicted_start=now + 600),
        make_row(3, state="PENDING"),
        make_row(4, state="COMPLETED", start_time=now - 50, end_time=now - 20, elapsed=30.0, exit_code=0),
    )
    rows = table_rows(run(gstat.cli, []).stdout)
    assert sorted(rows) == [1, 2, 3]  # finished jobs only with -a
    assert rows[1][3:] == ["RUNNING", "4", "01:00:00", rows[1][6], "0-3"]
    assert re.fullmatch(r"01:00:0\d", rows[1][6])  # run for 3605 s, give or take the test's own time
    assert re.fullmatch(r"00:(09:5\d|10:00)", rows[2][6])  # until its predicted start
    assert rows[3][6:] == ["None"]  # no TIME, no CORES; REASON: nothing said yet
    rows = table_rows(run(gstat.cli, ["-a"]).stdout)
    assert sorted(rows) == [1, 2, 3, 4]
    assert rows[4][3] == "COMPLETED" and rows[4][6] == "00:00:30"
    assert sorted(table_rows(run(gstat.cli, ["-a", "-u", "alice"]).stdout)) == [1]
    doc = json.loads(run(gstat.cli, ["--json", "-a"]).stdout)
    assert [j["id"] for j in doc["jobs"]] == [1, 2, 3, 4]
    assert all(set(j) == JSON_KEYS for j in doc["jobs"])
    first = doc["jobs"][0]
    assert first["cores"] == "0-3" and first["user"] == "alice" and 3605 <= first["elapsed"] < 3605 + 60
    assert doc["jobs"][3]["exit_code"] == 0 and doc["jobs"][3]["elapsed"] == 30.0


def test_state_db_row_wins_over_a_leftover_submit(env, run, make_row, put_rows):
    (env / "job.sh").write_text("#!/bin/sh\ntrue\n")
    assert run(gsub.cli, ["job.sh"]).exit_code == 0
    put_rows(make_row(1, state="RUNNING", start_time=time.time(), cores="5"))
    doc = json.loads(run(gstat.cli, ["--json"]).stdout)
    assert [(j["id"], j["state"], j["cores"]) for j in doc["jobs"]] == [(1, "RUNNING", "5")]


def test_piped_output_has_no_escape_codes(env, run, make_row, put_rows):
    put_rows(make_row(1, state="RUNNING", start_time=time.time(), cores="0"), make_row(2, state="FAILED"))
    r = run(gstat.cli, ["-a"])
    assert r.exit_code == 0 and "\x1b" not in r.stdout
    assert sorted(table_rows(r.stdout)) == [1, 2]


def test_full(env, run, make_row, put_rows):
    put_rows(
        make_row(
            7,
            state="TIMEOUT",
            exit_signal=9,
            reason="walltime reached",
            restarts=2,
            backfilled=1,
            start_time=1000.0,
            end_time=1060.0,
            elapsed=60.0,
            segments=[{"start": 1000.0, "end": 1060.0}],
        )
    )
    r = run(gstat.cli, ["-f", "7"])
    assert r.exit_code == 0
    fields = dict(re.split(r"\s{2,}", ln, maxsplit=1) if "  " in ln else (ln, "") for ln in r.stdout.splitlines())
    assert fields["state"] == "TIMEOUT"
    assert fields["exit_signal"] == "9 (SIGKILL)"
    assert fields["reason"] == "walltime reached"
    assert fields["restarts"] == "2" and fields["backfilled"] == "yes"
    assert fields["elapsed"] == "00:01:00"
    assert fields["workdir"] == "/w" and fields["stdout"] == "/w/job7.o7"
    assert fields["segment 1"].endswith("(00:01:00)")  # 1000 s to 1060 s
    doc = json.loads(run(gstat.cli, ["-f", "7", "--json"]).stdout)
    assert [j["id"] for j in doc["jobs"]] == [7]


def test_full_of_unknown_or_bad_id(env, run, make_row, put_rows):
    r = run(gstat.cli, ["-f", "99"])
    assert r.exit_code == 1 and r.stderr == "gstat: error: job 99: no such job\n"
    put_rows(make_row(1))
    r = run(gstat.cli, ["-f", "99"])
    assert r.exit_code == 1 and r.stderr == "gstat: error: job 99: no such job\n"
    r = run(gstat.cli, ["-f", "x1"])
    assert (
        r.exit_code == 2
        and r.stderr == "gstat: error: full 'x1': not a job id (ID, or ARRAYID_INDEX for an array task)\n"
    )


# -- gdel --------------------------------------------------------------------------


def cancel_requests(spool) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(spool.incoming.glob("cancel-*.json"))]


def test_gdel_valid_ids_go_in_one_request(env, spool, run, make_row, put_rows):
    (env / "job.sh").write_text("#!/bin/sh\ntrue\n")
    assert run(gsub.cli, ["job.sh"]).stdout == "1\n"  # a submit the daemon has not taken in
    put_rows(make_row(2, state="RUNNING", start_time=time.time()), make_row(3, state="HELD"))
    r = run(gdel.cli, ["3", "1", "2", "3"])
    assert r.exit_code == 0
    assert r.stdout == "job 3: cancelling\njob 1: cancelling\njob 2: cancelling\n"
    assert cancel_requests(spool) == [{"type": "cancel", "jobs": [3, 1, 2]}]


def test_gdel_errors(env, spool, run, make_row, put_rows):
    put_rows(make_row(1, state="RUNNING", start_time=time.time()), make_row(5, state="COMPLETED"))
    r = run(gdel.cli, ["17", "5", "1"])
    assert r.exit_code == 1
    assert r.stderr.splitlines()[:2] == ["gdel: error: job 17: no such job", "gdel: error: job 5: already COMPLETED"]
    assert r.stdout == "job 1: cancelling\n"
    assert cancel_requests(spool) == [{"type": "cancel", "jobs": [1]}]


def test_gdel_nothing_valid_sends_nothing(env, spool, run):
    r = run(gdel.cli, ["17"])
    assert r.exit_code == 1 and r.stderr == "gdel: error: job 17: no such job\n" and r.stdout == ""
    assert cancel_requests(spool) == []


@pytest.mark.parametrize("arg", ["abc", "0", "-3", "1.5"])
def test_gdel_bad_id(env, spool, run, arg):
    r = run(gdel.cli, ["--", arg])
    assert r.exit_code == 2
    assert (
        r.stderr
        == f"gdel: error: '{arg}': not a job id (a positive whole number, or ARRAYID_INDEX for an array task)\n"
    )
    assert cancel_requests(spool) == []


def test_gdel_needs_an_id(env, run):
    r = run(gdel.cli, [])
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("gdel: error: ")


def test_gdel_other_users_job(env, spool, run, make_row, put_rows, monkeypatch):
    put_rows(make_row(1, user="alice", uid=4242), make_row(2, user="me", uid=1000))
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    r = run(gdel.cli, ["1", "2"])
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == "gdel: error: job 1: owned by alice"
    assert cancel_requests(spool) == [{"type": "cancel", "jobs": [2]}]


def test_gdel_root_may_cancel_any_job(env, spool, run, make_row, put_rows, monkeypatch):
    put_rows(make_row(1, user="alice", uid=4242))
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert run(gdel.cli, ["1"]).exit_code == 0
    assert cancel_requests(spool) == [{"type": "cancel", "jobs": [1]}]


def test_gdel_check_unit():
    assert gdel.check(None, 0) == "no such job"
    assert gdel.check({"state": "CANCELLED", "uid": 5}, 5) == "already CANCELLED"
    assert gdel.check({"state": "PENDING", "uid": 5, "user": "bob"}, 6) == "owned by bob"
    assert gdel.check({"state": "SUSPENDED", "uid": 5}, 5) is None
