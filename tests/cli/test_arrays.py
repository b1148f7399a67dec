"""Job arrays and splittable jobs at the command line: ranges, gsub, gdel, gstat (no daemon)."""

from __future__ import annotations

import json
import time

import pytest

from gridsched.cli import gdel, gstat, gsub
from gridsched.protocol import arrays

# -- the range syntax ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, indices, mx",
    [
        ("0-4", (0, 1, 2, 3, 4), None),
        ("1,3,5-7", (1, 3, 5, 6, 7), None),
        ("0-10:5", (0, 5, 10), None),
        ("0-9:4%2", (0, 4, 8), 2),
        ("7", (7,), None),
        ("3,1,3", (1, 3), None),
    ],
)
def test_parse(text, indices, mx):
    spec = arrays.parse(text)
    assert spec.indices == indices and spec.max_running == mx


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("0-4", "0-4"),
        ("1,3,5-7", "1,3,5-7"),
        ("0-10:5", "0-10:5"),
        ("0-9:4%2", "0-8:4%2"),
        ("4,5", "4-5"),
        ("1,2,4", "1-2,4"),
        ("2,9", "2,9"),
    ],
)
def test_canonical_text_round_trips(text, canonical):
    spec = arrays.parse(text)
    assert spec.text == canonical
    assert arrays.parse(spec.text) == spec


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty"),
        ("  ", "empty"),
        ("5-1", "the range ends before it starts"),
        ("0-10:0", "the step must be positive"),
        ("0-10:-2", "the step must be positive"),
        ("0-100", "index 100 is too large"),
        ("1-3%0", "must be a positive whole number"),
        ("1-3%x", "must be a positive whole number"),
        ("%4", "no indices before %"),
        ("1,,2", "not an index or a range"),
        ("a-b", "not an index or a range"),
        ("-1", "not an index or a range"),
    ],
)
def test_bad_ranges(text, why):
    with pytest.raises(arrays.ArrayError) as e:
        arrays.parse(text, max_size=100)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_refs():
    assert arrays.parse_ref("12") == (12, None)
    assert arrays.parse_ref("12_7") == (12, 7)
    for bad in ("0", "12_", "_7", "12_x", "1.5", "12_7_1"):
        with pytest.raises(arrays.ArrayError):
            arrays.parse_ref(bad)


def test_task_path():
    assert arrays.task_path("/o/x-12_%a.%j.out", 15, 3) == "/o/x-12_3.15.out"
    assert arrays.task_path("/o/100%%-%a", 15, 3) == "/o/100%-3"


# -- gsub ---------------------------------------------------------------------------------


def test_gsub_array_spec(env, run, submits):
    (env / "job.sh").write_text("#!/bin/sh\n#GS --array 1-9:2%2\ntrue\n")
    (env / "out").mkdir()
    r = run(gsub.cli, ["-o", "out/%x-%A_%a.out", "job.sh"])
    assert r.exit_code == 0
    [spec] = submits()
    assert spec["array"] == "1-9:2%2"
    assert spec["stdout"] == str(env / "out" / "job.sh-1_%a.out")  # %a and %j are the daemon's
    assert spec["stderr"] == str(env / "job.sh.e1_%a")


@pytest.mark.parametrize(
    "arg, msg",
    [
        ("", "array '': empty"),
        ("9-3", "array '9-3': the range ends before it starts"),
        ("0-9:0", "array '0-9:0': the step must be positive"),
        ("0-4000001", "array '0-4000001': index 4000001 is too large"),
        ("0-3%0", "the number of tasks running at once must be a positive whole number"),
    ],
)
def test_gsub_bad_array(env, run, submits, arg, msg):
    r = run(gsub.cli, ["--array", arg, "--wrap", "true"])
    assert r.exit_code == 2
    [line] = r.stderr.splitlines()
    assert line.startswith("gsub: error: ") and msg in line
    assert submits() == []


def test_max_array_size_from_the_config(env, run, submits):
    (env / "cfg.toml").write_text("[daemon]\nautostart = false\n[machine]\ncores = 16\n[jobs]\nmax_array_size = 10\n")
    assert run(gsub.cli, ["--array", "0-9", "--wrap", "true"]).exit_code == 0
    r = run(gsub.cli, ["--array", "0-10", "--wrap", "true"])
    assert r.exit_code == 2 and "index 10 is too large (indices go up to 9" in r.stderr
    assert len(submits()) == 1


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--split", "0", "--task-time", "10"], "'0'"),
        (["--split", "4"], "--split needs --task-time"),
        (["--task-time", "10"], "--task-time goes with --split"),
        (["--split", "4", "--task-time", "2h", "-t", "1h"], "task time 02:00:00 is longer than the walltime 01:00:00"),
        (["--split", "40", "--task-time", "1h", "-t", "2h", "-n", "4"], "too short for 40 sub-tasks"),
        (["--split", "4", "--task-time", "10", "--array", "1-3"], "--array and --split exclude each other"),
        (["--split", "4", "--task-time", "10", "-n", "17"], "the machine has 16"),
    ],
)
def test_gsub_bad_split(env, run, submits, args, msg):
    r = run(gsub.cli, [*args, "--wrap", "true"])
    assert r.exit_code != 0
    [line] = r.stderr.splitlines()
    assert line.startswith("gsub: error: ") and msg in line
    assert submits() == []


def test_gsub_split_spec(env, run, submits):
    # 40 one-hour sub-tasks of 4 cores on 16 cores: waves of 4, 10 waves
    assert run(gsub.cli, ["--split", "40", "--task-time", "1h", "-n", "4", "--wrap", "true"]).exit_code == 0
    [spec] = submits()
    assert spec["split"] == {"n": 40, "ncpus": 4, "task_time": 3600}
    assert spec["ncpus"] == 16 and spec["walltime"] == 10 * 3600
    assert run(gsub.cli, ["--split", "3", "--task-time", "1h", "-n", "2", "--wrap", "true"]).exit_code == 0
    assert submits()[1]["ncpus"] == 6 and submits()[1]["walltime"] == 3600  # one wave of 3


# -- gdel and gstat on arrays the daemon took in -----------------------------------------


def tasks(make_row, array_id, first_id, indices, states, mx=None):
    out = []
    for k, (i, st) in enumerate(zip(indices, states)):
        spec = {"stdout": "/w/o", "stderr": "/w/e", "workdir": "/w", "array_id": array_id, "array_index": i}
        if mx is not None:
            spec["array_max"] = mx
        extra = {"start_time": time.time() - 5, "cores": str(k)} if st == "RUNNING" else {}
        out.append(make_row(first_id + k, name="arr", state=st, spec=spec, **extra))
    return out


def cancels(spool):
    return [json.loads(p.read_text()) for p in sorted(spool.incoming.glob("cancel-*.json"))]


def test_gdel_array_and_task(env, spool, run, make_row, put_rows):
    put_rows(*tasks(make_row, 10, 10, [0, 1, 2, 7], ["RUNNING", "PENDING", "COMPLETED", "PENDING"]))
    r = run(gdel.cli, ["10_7"])
    assert r.exit_code == 0 and r.stdout == "job 10_7: cancelling\n"
    assert cancels(spool)[-1]["jobs"] == [13]
    r = run(gdel.cli, ["10"])
    assert r.exit_code == 0 and r.stdout == "job 10: cancelling\n"
    assert cancels(spool)[-1] == {"type": "cancel", "jobs": [], "arrays": [10]}


def test_gdel_task_that_does_not_exist(env, spool, run, make_row, put_rows):
    put_rows(*tasks(make_row, 10, 10, [0, 1], ["RUNNING", "PENDING"]))
    r = run(gdel.cli, ["10_999"])
    assert r.exit_code == 1
    assert r.stderr == "gdel: error: job 10_999: no such array task\n"
    assert cancels(spool) == []
    r = run(gdel.cli, ["10_x"])
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1


def test_gdel_array_all_ended(env, spool, run, make_row, put_rows):
    put_rows(*tasks(make_row, 10, 10, [0, 1], ["COMPLETED", "FAILED"]))
    r = run(gdel.cli, ["10"])
    assert r.exit_code == 1 and r.stderr == "gdel: error: job 10: every task has ended\n"
    assert cancels(spool) == []


def test_gstat_folds_an_array(env, run, make_row, put_rows):
    put_rows(
        make_row(9),
        *tasks(make_row, 10, 10, [0, 1, 2, 3, 4], ["RUNNING", "RUNNING", "PENDING", "PENDING", "COMPLETED"], mx=2),
    )
    r = run(gstat.cli, [])
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert len(lines) == 3  # header, job 9, the array
    row = lines[2]
    assert row.split()[:4] == ["10_[0-4%2]", "arr", "root", "RUNNING"]
    assert "2 running, 2 pending, 1 completed" in row
    r = run(gstat.cli, ["-t"])
    ids = [ln.split()[0] for ln in r.stdout.splitlines()[1:]]
    assert ids == ["9", "10_0", "10_1", "10_2", "10_3"]  # the completed task only with -a
    doc = json.loads(run(gstat.cli, ["--json"]).stdout)
    assert [(j["id"], j["array_id"], j["array_index"]) for j in doc["jobs"]] == [
        (9, None, None),
        (10, 10, 0),
        (11, 10, 1),
        (12, 10, 2),
        (13, 10, 3),
    ]


def test_gstat_full_of_a_task(env, run, make_row, put_rows):
    put_rows(*tasks(make_row, 10, 10, [0, 7], ["PENDING", "PENDING"], mx=1))
    r = run(gstat.cli, ["-f", "10_7"])
    assert r.exit_code == 0
    fields = dict(ln.split(None, 1) for ln in r.stdout.splitlines() if len(ln.split(None, 1)) == 2)
    assert fields["id"] == "11" and fields["array"] == "10_7 (at most 1 tasks at once)"
    r = run(gstat.cli, ["-f", "10_8"])
    assert r.exit_code == 1 and r.stderr == "gstat: error: job 10_8: no such array task\n"


def test_gstat_counts_sub_tasks(env, run, make_row, put_rows):
    split = {"n": 10, "ncpus": 1, "task_time": 60, "left": [6, 7, 8, 9]}
    parent = make_row(1, spec={"stdout": "/w/o", "stderr": "/w/e", "workdir": "/w", "split": split})
    piece = {"stdout": "/w/o.2", "stderr": "/w/e.2", "workdir": "/w", "split_of": 1}
    p2 = make_row(2, state="COMPLETED", spec={**piece, "split_chains": [[0, 1], [2]]})
    p3 = make_row(3, state="RUNNING", start_time=time.time(), spec={**piece, "split_chains": [[3], [4], [5]]})
    put_rows(parent, p2, p3)
    r = run(gstat.cli, [])
    assert "sub-tasks 3 done, 3 running, 4 left" in r.stdout
    assert "piece of 1" in r.stdout
    doc = json.loads(run(gstat.cli, ["--json"]).stdout)
    assert doc["jobs"][0]["split"] == {
        "n": 10,
        "ncpus": 1,
        "task_time": 60,
        "done": 3,
        "running": 3,
        "failed": 0,
        "timeout": 0,
        "left": 4,
        "retried": 0,
    }
    assert doc["jobs"][1]["split"] == {"of": 1, "tasks": [3, 4, 5]}


# -- indices kept as runs ----------------------------------------------------------------------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

SETS = hs.sets(hs.integers(0, 300), max_size=120)


@given(SETS, SETS, hs.integers(0, 130))
def test_indices_behave_as_the_sets_they_hold(a, b, n):
    x, y = arrays.Indices.of(a), arrays.Indices.of(b)
    assert list(x) == sorted(a) and len(x) == len(a)
    assert list(x.without(y)) == sorted(a - b)
    assert list(x.union(y)) == sorted(a | b)
    assert list(x.only(y)) == sorted(a & b)
    assert list(x.after(n)) == sorted(a)[n:] and x.head(n) == sorted(a)[:n]
    assert all((i in x) == (i in a) for i in range(-1, 302))
    if a:
        assert arrays.Indices.from_text(x.text) == x
        assert x[0] == min(a) and x[-1] == max(a)


def test_a_million_indices_are_a_few_runs():
    big = arrays.parse("0-3999999").indices
    assert len(big) == 4_000_000 and len(big.runs) == 1
    cut = big.without(arrays.Indices.of([5, 7, 100])).without(arrays.parse("10-3999990").indices)
    assert cut.text == "0-4,6,8-9,3999991-3999999" and len(cut.runs) == 4
    with pytest.raises(arrays.ArrayError, match="overlap"):
        arrays.parse("0-3999999,1-3999999", 1 << 62, 1000)
