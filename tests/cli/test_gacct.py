"""gacct in-process, on a state db written with the daemon's own StateDB class."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from gridsched.cli import gacct
from gridsched.cli.gacct import TimeType

T0 = datetime(2026, 11, 22, 10, 0, 0).timestamp()


def rows(make_row):
    """Four finished jobs and one running one, with hand-checked times."""
    return [
        make_row(
            1,
            state="COMPLETED",
            user="alice",
            uid=1001,
            name="a",
            ncpus=4,
            walltime=600,
            submit_time=T0,
            start_time=T0 + 10,
            end_time=T0 + 130,
            exit_code=0,
            segments=[{"start": T0 + 10, "end": T0 + 50}, {"start": T0 + 70, "end": T0 + 130}],
            restarts=1,
            preemptions=1,
            checkpoints=1,
            lost=5.0,
            spec={"gid": 100, "mem": 8 << 20, "depend": ""},
        ),
        make_row(
            2,
            state="FAILED",
            user="bob",
            uid=1002,
            submit_time=T0 + 5,
            start_time=T0 + 20,
            end_time=T0 + 25,
            exit_code=3,
            segments=[{"start": T0 + 20, "end": T0 + 25}],
            spec={"gid": 200, "depend": "afterok:1"},
        ),
        make_row(3, state="CANCELLED", user="alice", uid=1001, submit_time=T0 + 30, end_time=T0 + 40, spec={}),
        make_row(
            4,
            state="TIMEOUT",
            user="alice",
            uid=1001,
            submit_time=T0 + 86400,
            start_time=T0 + 86400,
            end_time=T0 + 86400 + 60,
            exit_signal=9,
            segments=[{"start": T0 + 86400, "end": T0 + 86460}],
            spec={},
        ),
        make_row(5, state="RUNNING", start_time=T0, spec={}),
    ]


def test_json_has_the_sums(env, run, put_rows, make_row):
    put_rows(*rows(make_row))
    r = run(gacct.cli, ["--json"])
    assert r.exit_code == 0
    recs = {j["id"]: j for j in json.loads(r.stdout)["jobs"]}
    assert sorted(recs) == [1, 2, 3, 4]  # the running job is not accounted yet
    a = recs[1]
    assert list(a) == gacct.JSON_KEYS
    assert (a["wait"], a["run"], a["lost"]) == (10.0, 100.0, 5.0)  # 40 s + 60 s of segments
    assert (a["restarts"], a["preemptions"], a["checkpoints"], a["ncpus"]) == (1, 1, 1, 4)
    assert recs[3]["wait"] is None and recs[3]["run"] == 0.0
    assert recs[2]["exit_code"] == 3 and recs[4]["exit_signal"] == 9


@pytest.mark.parametrize(
    "args, ids",
    [
        (["-u", "alice"], [1, 3, 4]),
        (["-s", "completed,timeout"], [1, 4]),
        (["-j", "2,4"], [2, 4]),
        (["-S", "2026-11-23"], [4]),
        (["-E", "2026-11-22T12:00"], [1, 2, 3]),
        (["-S", "2026-11-22T10:00:30", "-E", "2026-11-22T11:00"], [1, 3]),
    ],
)
def test_filters(env, run, put_rows, make_row, args, ids):
    put_rows(*rows(make_row))
    r = run(gacct.cli, [*args, "--json"])
    assert r.exit_code == 0
    assert [j["id"] for j in json.loads(r.stdout)["jobs"]] == ids


def test_table(env, run, put_rows, make_row):
    put_rows(*rows(make_row))
    r = run(gacct.cli, ["-j", "1"])
    assert r.exit_code == 0
    head, line = r.stdout.splitlines()
    assert head.split() == list(gacct.COLUMNS)
    cells = line.split()
    assert cells[:4] == ["1", "a", "alice", "COMPLETED"]
    assert cells[4:7] == ["2026-11-22T10:00:00", "2026-11-22T10:00:10", "2026-11-22T10:02:10"]
    assert cells[7:] == ["00:00:10", "00:01:40", "0", "4", "1", "1", "1", "00:00:05"]


def test_swf(env, run, put_rows, make_row):
    put_rows(*rows(make_row), meta={"machine": json.dumps({"ncores": 16, "host_cpus": [0, 1]})})
    r = run(gacct.cli, ["--swf"])
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    header = [ln for ln in lines if ln.startswith(";")]
    assert "; Version: 2.2" in header and "; MaxProcs: 16" in header
    assert f"; UnixStartTime: {int(T0)}" in header
    jobs = [ln.split() for ln in lines if not ln.startswith(";")]
    assert all(len(f) == 18 for f in jobs)
    by_id = {int(f[0]): [int(x) for x in f] for f in jobs}
    # id submit wait run alloc cpu mem req_procs req_time req_mem status uid gid exe queue part prev think
    assert by_id[1] == [1, 0, 10, 100, 4, -1, -1, 4, 600, 2048, 1, 1001, 100, -1, -1, -1, -1, -1]
    assert by_id[2] == [2, 5, 15, 5, 1, -1, -1, 1, 3600, -1, 0, 1002, 200, -1, -1, -1, 1, -1]
    assert by_id[3] == [3, 30, -1, -1, -1, -1, -1, 1, 3600, -1, 5, 1001, -1, -1, -1, -1, -1, -1]
    assert by_id[4][1:5] == [86400, 0, 60, 1] and by_id[4][10] == 0  # a timeout counts as failed


@pytest.mark.parametrize(
    "args, msg",
    [
        (["-S", "yesterday-ish"], "starttime 'yesterday-ish': not a time"),
        (["-s", "RUNNING"], "state 'RUNNING': must be one of CANCELLED, COMPLETED, FAILED, TIMEOUT"),
        (["-j", "1,x"], "jobs '1,x': 'x' is not a job id"),
        (["--json", "--swf"], "--json and --swf exclude each other"),
    ],
)
def test_bad_input(env, run, args, msg):
    r = run(gacct.cli, args)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"gacct: error: {msg}") and r.stderr.count("\n") == 1


def test_time_forms():
    now = T0
    t = TimeType(now)
    assert t.convert("-1d", None, None) == now - 86400
    assert t.convert("-90m", None, None) == now - 5400
    assert t.convert("+2h", None, None) == now + 7200
    assert t.convert("now", None, None) == now
    assert t.convert("today", None, None) == datetime(2026, 11, 22).timestamp()
    assert t.convert("2026-11-22T10:00", None, None) == T0


def test_empty_spool(env, run):
    r = run(gacct.cli, ["--json"])
    assert r.exit_code == 0 and json.loads(r.stdout) == {"jobs": []}
