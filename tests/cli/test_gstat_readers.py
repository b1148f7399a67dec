"""gstat and gacct read only what they show: the default views never read a finished job's row, gstat
--json writes each record as it reads it, gacct reads the time window asked through its index.

The commands run as whole processes (the console scripts beside this interpreter) on a spool whose
rows are written as the daemon writes them; where a row must not be read, its JSON columns are
garbage that any read of it would fail on.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gridsched.protocol.requests import id_name
from gridsched.protocol.spool import Spool
from gridsched.protocol.state import SCHEMA, StateDB
from gridsched.protocol.text import dumps
from tests.cli.conftest import job_row, write_rows

BIN = Path(sys.executable).parent
GARBAGE = "{not json"


def command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def penv(tmp_path: Path) -> dict[str, str]:
    """The environment of a command on ``tmp_path/spool`` (no daemon)."""
    (tmp_path / "cfg.toml").write_text("[daemon]\nautostart = false\n[machine]\ncores = 16\n")
    return {**os.environ, "GRIDSCHED_SPOOL": str(tmp_path / "spool"), "GRIDSCHED_CONFIG": str(tmp_path / "cfg.toml")}


def finished(jid: int, ended: float, **fields: Any) -> dict[str, Any]:
    return job_row(
        jid, state="COMPLETED", start_time=ended - 30, end_time=ended, elapsed=30.0, exit_code=0, cores="0", **fields
    )


def spoil(spool: Spool, ids: list[int]) -> None:
    """Make the JSON columns of rows ``ids`` unreadable: any read that decodes them fails."""
    conn = sqlite3.connect(spool.db)
    with conn:
        conn.executemany(
            "UPDATE jobs SET spec = ?, segments = ?, run = ? WHERE id = ?",
            [(GARBAGE, GARBAGE, GARBAGE, i) for i in ids],
        )
    conn.close()


def ids_in(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[1:] if line.strip()]


def test_default_views_never_read_a_finished_row(tmp_path, penv):
    spool = Spool(tmp_path / "spool")
    now = time.time()
    write_rows(
        spool,
        job_row(1, reason="waiting for cores"),
        job_row(2, state="RUNNING", start_time=now - 60, cores="0-1", segments=[{"start": now - 60, "cores": "0-1"}]),
        job_row(3, state="HELD"),
        *(finished(i, now - 10 * 86400) for i in range(4, 40)),
        finished(40, now - 60),
    )
    spoil(spool, list(range(4, 40)))

    r = command(penv, "gstat")
    assert r.returncode == 0, r.stderr
    assert ids_in(r.stdout) == ["1", "2", "3"]
    r = command(penv, "gstat", "-t", "-u", "root")
    assert r.returncode == 0, r.stderr
    assert ids_in(r.stdout) == ["1", "2", "3"]
    r = command(penv, "gstat", "--json")
    assert r.returncode == 0, r.stderr
    assert [j["id"] for j in json.loads(r.stdout)["jobs"]] == [1, 2, 3]
    # a finished job's row is read when it is to be shown, and then the garbage is found
    assert command(penv, "gstat", "-a").returncode != 0
    assert command(penv, "gstat", "-s", "CD").returncode != 0

    # gacct reads the window asked: the spoiled rows ended ten days ago
    r = command(penv, "gacct", "-S", "-1d", "--json")
    assert r.returncode == 0, r.stderr
    assert [j["id"] for j in json.loads(r.stdout)["jobs"]] == [40]
    assert r.stdout == dumps(json.loads(r.stdout), indent=2) + "\n"  # streamed, the same text as one dumps
    r = command(penv, "gacct", "-S", "now", "--json")
    assert r.returncode == 0, r.stderr
    assert r.stdout == dumps({"jobs": []}, indent=2) + "\n"
    r = command(penv, "gacct", "-S", "-1d")
    assert r.returncode == 0, r.stderr
    assert ids_in(r.stdout) == ["40"]
    assert command(penv, "gacct").returncode != 0


def test_array_row_counts_its_finished_tasks(tmp_path, penv):
    """An array with a task left shows every task (its finished ones read for it); an array whose tasks
    have all ended is not read at all."""
    spool = Spool(tmp_path / "spool")
    now = time.time()

    def task(jid: int, aid: int, index: int, **fields: Any) -> dict[str, Any]:
        row = fields.pop("row", job_row)(jid, **fields)
        row["spec"] = {**row["spec"], "array_id": aid, "array_index": index, "array_max": 2}
        return row

    write_rows(
        spool,
        task(1, 1, 0, row=lambda j, **f: finished(j, now - 60, **f)),
        finished(2, now - 50),
        task(3, 1, 1, state="RUNNING", start_time=now - 5, cores="3"),
        task(4, 1, 2),
        task(5, 5, 0, row=lambda j, **f: finished(j, now - 40, **f)),
        task(6, 5, 1, row=lambda j, **f: finished(j, now - 40, **f)),
    )
    spoil(spool, [2, 5, 6])
    r = command(penv, "gstat")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["1_[0-2%2]"]
    assert "1 running, 1 pending, 1 completed" in lines[1] and " RUNNING " in lines[1]
    r = command(penv, "gstat", "-t")
    assert r.returncode == 0, r.stderr
    assert ids_in(r.stdout) == ["1_1", "1_2"]


def test_json_is_streamed_whole_and_in_memory_bounded_by_a_row(tmp_path, penv):
    """gstat --json writes the same document as one dumps of it would, and its peak memory does not grow
    with the number of jobs (ten times the jobs: not ten times the memory)."""
    spool = Spool(tmp_path / "spool")
    now = time.time()
    big = {"stdout": "/w/o", "stderr": "/w/e", "workdir": "/w", "args": ["x" * 2000], "resources": {"lic": 1}}
    write_rows(spool, *(job_row(i, spec=big, predicted_start=now + i) for i in range(1, 1001)))
    (spool.incoming / id_name(1001)).write_text(
        json.dumps({"type": "submit", "job": {"id": 1001, "name": "late", "user": "root", "ncpus": 1}})
    )

    r = command(penv, "gstat", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [j["id"] for j in doc["jobs"]] == list(range(1, 1002))
    assert doc["jobs"][1000]["name"] == "late" and doc["daemon"]["running"] is False
    assert r.stdout == dumps(doc, indent=2) + "\n"
    empty = command(penv, "gstat", "--json", "-u", "nobody-at-all")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout == dumps({"jobs": [], "daemon": doc["daemon"]}, indent=2) + "\n"

    small = rss(penv, "--json")
    write_rows(spool, *(job_row(i, spec=big) for i in range(1002, 10002)))
    large = rss(penv, "--json")
    assert large - small < 8 << 20, (small, large)


# gstat run so that it reports its own peak resident memory as it exits (VmHWM: the ru_maxrss a parent
# is told also counts the parent's memory at the fork)
PEAK = (
    "import atexit, os, sys\n"
    "def peak():\n"
    "    hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM')][0].split()[1]\n"
    "    os.write(2, ('\\nVmHWM ' + hwm).encode())\n"
    "atexit.register(peak)\n"
    "from gridsched.cli.gstat import main\n"
    "sys.argv[0] = 'gstat'\n"
    "main()\n"
)


def rss(env: dict[str, str], *args: str) -> int:
    """Peak resident memory (bytes) of one gstat run."""
    r = subprocess.run([sys.executable, "-c", PEAK, *args], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "VmHWM " in r.stderr, r.stderr
    return int(r.stderr.rsplit("VmHWM ", 1)[1].split()[0]) * 1024


def test_an_old_table_gets_the_end_time_index_and_gacct_reads_through_it(tmp_path):
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA.replace("CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_time);", ""))
    assert "jobs_end" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    StateDB(path, write=True).close()  # the daemon opens it
    db = StateDB(path)
    try:
        names = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master")}
        assert "jobs_end" in names
        plan = db.conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE +state IN ('COMPLETED') AND end_time >= ?", (1.0,)
        ).fetchall()
        assert any("jobs_end" in str(step) for step in plan), plan
        assert list(db.iter_jobs(states=["COMPLETED"], ended=(1.0, None))) == []
    finally:
        db.close()
