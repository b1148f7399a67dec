"""gacct in-process, on a state db written with the daemon's own StateDB class."""

from __future__ import annotations

import ast
import json
from datetime import datetime
from pathlib import Path

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
            max_rss=63_000_000,
            cpu_user=61.25,
            cpu_sys=0.5,
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
    assert cells[7:] == ["00:00:10", "00:01:40", "0", "4", "1", "1", "1", "00:00:05", "61524K", "01:01.750"]


def array_rows(make_row):
    """Array 17 of three tasks (ids 17, 18, 19: indices 1-3) and job 20, all finished."""
    out = []
    for i, jid in enumerate((17, 18, 19), start=1):
        out.append(
            make_row(
                jid,
                state="COMPLETED" if i != 2 else "OUT_OF_MEMORY",
                name="arr",
                submit_time=T0,
                start_time=T0 + i,
                end_time=T0 + 10 * i,
                exit_code=0 if i != 2 else None,
                exit_signal=None if i != 2 else 9,
                segments=[{"start": T0 + i, "end": T0 + 10 * i}],
                spec={"array_id": 17, "array_index": i},
                max_rss=(i << 20) if i != 3 else None,
                cpu_user=0.25 * i if i != 3 else None,
                cpu_sys=0.125 if i != 3 else None,
            )
        )
    out.append(make_row(20, state="COMPLETED", submit_time=T0, end_time=T0 + 5, spec={}))
    return out


@pytest.mark.parametrize(
    "sel, ids",
    [
        ("17", ["17_1", "17_2", "17_3"]),
        ("17_2", ["17_2"]),
        ("17_[1,3]", ["17_1", "17_3"]),
        ("17_3,20", ["17_3", "20"]),
        ("18", ["17_2"]),  # a task's own id (JobIDRaw) names it too, as in sacct
    ],
)
def test_array_tasks_show_as_id_n(env, run, put_rows, make_row, sel, ids):
    put_rows(*array_rows(make_row))
    r = run(gacct.cli, ["-j", sel, "--json"])
    assert r.exit_code == 0
    assert [j["jobid"] for j in json.loads(r.stdout)["jobs"]] == ids
    r = run(gacct.cli, ["-j", sel, "-n"])
    assert [ln.split()[0] for ln in r.stdout.splitlines()] == ids


def test_format_parsable_read_back(env, run, put_rows, make_row):
    put_rows(*array_rows(make_row))
    r = run(gacct.cli, ["-j", "17", "--format", "jobid,STATE,ExitCode,MaxRSS,TotalCPU,UserCPU,SystemCPU,ReqMem", "-p"])
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert all(ln.endswith("|") for ln in lines)
    table = [ln[:-1].split("|") for ln in lines]
    assert table[0] == ["JobID", "State", "ExitCode", "MaxRSS", "TotalCPU", "UserCPU", "SystemCPU", "ReqMem"]
    assert table[1] == ["17_1", "COMPLETED", "0:0", "1M", "00:00.375", "00:00.250", "00:00.125", "0"]
    assert table[2] == ["17_2", "OUT_OF_MEMORY", "0:9", "2M", "00:00.625", "00:00.500", "00:00.125", "0"]
    assert table[3] == ["17_3", "COMPLETED", "0:0", "", "", "", "", "0"]  # not measured: empty, not zero
    r = run(gacct.cli, ["-j", "17_2", "-o", "JobID,Elapsed,ElapsedRaw,Timelimit,TimelimitRaw", "-P", "-n"])
    assert r.stdout == "17_2|00:00:18|18|01:00:00|60\n"


def test_format_widths_cut_as_sacct(env, run, put_rows, make_row):
    put_rows(*array_rows(make_row))
    r = run(gacct.cli, ["-j", "17_1", "--format", "JobID%3,State%12,MaxRSS"])
    head, dashes, line = r.stdout.splitlines()
    assert head.split() == ["Job", "State", "MaxRSS"]
    assert dashes.split() == ["---", "-" * 12, "-" * 6]
    assert line.split() == ["17+", "COMPLETED", "1M"]


def test_json_usage_in_bytes_and_seconds(env, run, put_rows, make_row):
    put_rows(*rows(make_row))
    a = {j["id"]: j for j in json.loads(run(gacct.cli, ["--json"]).stdout)["jobs"]}
    assert (a[1]["max_rss"], a[1]["cpu_user"], a[1]["cpu_sys"], a[1]["total_cpu"]) == (63_000_000, 61.25, 0.5, 61.75)
    assert a[1]["req_mem"] == 8 << 20 and a[1]["jobid"] == "1" and a[1]["array_id"] is None
    assert (a[2]["max_rss"], a[2]["total_cpu"], a[2]["req_mem"]) == (None, None, None)


def test_state_short_forms(env, run, put_rows, make_row):
    put_rows(*array_rows(make_row))
    r = run(gacct.cli, ["-s", "oom", "--json"])
    assert [j["jobid"] for j in json.loads(r.stdout)["jobs"]] == ["17_2"]


@pytest.mark.parametrize(
    "secs, text",
    [(0.0, "00:00.000"), (1.2345, "00:01.234"), (61.75, "01:01.750"), (3600, "01:00:00"), (90061, "1-01:01:01")],
)
def test_cpu_time_form(secs, text):
    from gridsched.cli.gacct_format import cpu_time

    assert cpu_time(secs) == text


@pytest.mark.parametrize(
    "n, text", [(0, "0"), (1, "1K"), (1024, "1K"), (60 << 20, "60M"), (63_000_000, "61524K"), (3 << 30, "3G")]
)
def test_memory_form(n, text):
    from gridsched.cli.gacct_format import memory

    assert memory(n) == text


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
        (["-s", "RUNNING"], "state 'RUNNING': must be one of CANCELLED, COMPLETED, FAILED, OUT_OF_MEMORY, TIMEOUT"),
        (["-j", "1,x"], "'x': not a job id"),
        (["-j", "17_x"], "'17_x': not a job id"),
        (["--format", "JobID,Bogus"], "--format: unknown field 'Bogus' (fields: JobID, JobIDRaw,"),
        (["--format", "JobID%0"], "--format: 'JobID%0': a width must be at least 1"),
        (["-p", "-P"], "--parsable and --parsable2 exclude each other"),
        (["--json", "--format", "JobID"], "--format, --parsable, --parsable2 and --noheader are for the table"),
        (["--json", "--swf"], "--json and --swf exclude each other"),
    ],
)
def test_bad_input(env, run, args, msg):
    r = run(gacct.cli, args)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"gacct: error: {msg}") and r.stderr.count("\n") == 1


def test_unknown_field_is_refused(env, run):
    r = run(gacct.cli, ["--format", "JobID,MaxRSSS"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("gacct: error: --format: unknown field 'MaxRSSS' (fields: JobID,")
    assert r.stderr.count("\n") == 1 and "MaxRSS" in r.stderr


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


def typed_keys(source: Path, name: str) -> set[str]:
    """The keys class ``name`` of the module at ``source`` declares (a TypedDict the type checker alone sees)."""
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raise LookupError(name)


def test_the_rows_it_reads_are_the_typed_row_of_the_jobs_table(env, spool, put_rows, make_row):
    """What gacct reads of the state db has the keys of ``JobRow``, the jobs table's columns, and no other; of
    the spec only the keys gacct shows."""
    from gridsched.protocol import state, view

    put_rows(*rows(make_row))
    got = list(gacct.read(spool))
    assert sorted(r["id"] for r in got) == [1, 2, 3, 4]
    keys = typed_keys(Path(view.__file__), "JobRow")  # for the type checker only: read from its source
    assert keys == set(state.ALL_COLUMNS)
    for r in got:
        assert set(r) == keys
        assert set(r["spec"]) <= set(gacct.SPEC_KEYS) and r["run"] == {}
