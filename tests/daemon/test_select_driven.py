"""Selecting jobs (gdel, ghold, grls -u/-n/-s and array ranges) and gstat's REASON, --start and --format, in the
daemon (in process: stub executor, driven clock; the commands run in process on its spool).

The default test machine: 8 declared cores, fcfs.
"""

from __future__ import annotations

import getpass
import json
import time

import pytest

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(DEFAULT_CONFIG))


def by_id(dr: Driven, *args: str) -> dict[str, list[str]]:
    """gstat's output lines (after the header) by their first field."""
    out = dr.command("gstat", *args, turn=False).stdout
    return {ln.split()[0]: ln.split() for ln in out.splitlines()[1:] if ln.split()}


def test_reason_codes_and_start(dr):
    blocker = dr.gsub("-n", "6", "-t", "60s", "-N", "blocker", "--wrap", "wait for go", work=None)
    assert dr.running(blocker)
    nxt = dr.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    after = dr.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    dep = dr.gsub("-n", "1", "-t", "60s", "-d", f"afterok:{blocker}", "--wrap", "true")
    held = dr.gsub("-n", "1", "-t", "60s", "--hold", "--wrap", "true")
    later = dr.gsub("-n", "1", "-t", "60s", "--begin", "now+7days", "--wrap", "true")
    want = {
        nxt: "Resources",
        after: "Priority",
        dep: "Dependency",
        held: "JobHeldUser",
        later: "BeginTime",
        blocker: "",
    }
    rows = by_id(dr, "--format", "%i %T %R")
    assert {j: rows[str(j)][2:] for j in want} == {j: ([w] if w else []) for j, w in want.items()}
    # the table's REASON column (before NOTE) says the same
    table = by_id(dr)
    assert "Resources" in table[str(nxt)] and "Priority" in table[str(after)]
    assert "JobHeldUser" in table[str(held)] and "BeginTime" in table[str(later)]
    # --start: pending and held jobs with a full date; the begin time a week away shows its date
    begin = time.time() + 7 * 86400  # --begin now+7days: within the seconds the submission took
    start = by_id(dr, "--start")
    assert str(blocker) not in start
    shown = time.mktime(time.strptime(start[str(later)][4], "%Y-%m-%dT%H:%M:%S"))
    assert begin - 60 < shown <= begin
    assert start[str(later)][5] == "BeginTime" and start[str(held)][4:] == ["N/A", "JobHeldUser"]
    assert start[str(nxt)][4] != "N/A"
    dr.finish(blocker)
    dr.run_until(lambda: dr.state(nxt) == "COMPLETED", 5)


def test_gdel_ghold_grls_by_filters_and_ranges(dr):
    me = getpass.getuser()
    blocker = dr.gsub("-n", "8", "-t", "60s", "-N", "blocker", "--wrap", "wait for go", work=None)
    assert dr.running(blocker)
    arr = dr.gsub("-n", "1", "-t", "60s", "-N", "sweep", "-a", "1-5", "--wrap", "true")
    other = dr.gsub("-n", "1", "-t", "60s", "-N", "other", "--wrap", "true")
    tasks = {
        j["array_index"]: j["id"]
        for j in json.loads(dr.command("gstat", "--json", turn=False).stdout)["jobs"]
        if j["array_id"] == arr
    }
    assert sorted(tasks) == [1, 2, 3, 4, 5] and tasks[1] == arr

    r = dr.command("ghold", f"{arr}_[2-3]")
    assert r.exit_code == 0 and r.stdout == f"job {arr}_2: holding\njob {arr}_3: holding\n"
    assert dr.state(tasks[2]) == dr.state(tasks[3]) == "HELD"
    # the first task, which has the array's id, alone
    r = dr.command("ghold", f"{arr}_1")
    assert r.exit_code == 0 and r.stdout == f"job {arr}_1: holding\n"
    assert dr.state(tasks[1]) == "HELD"
    assert dr.state(tasks[4]) == "PENDING" and dr.state(tasks[5]) == "PENDING"

    rows = by_id(dr, "-s", "HELD", "-n", "sweep", "-u", me)  # an array shows as the tasks selected
    assert list(rows) == [f"{arr}_[1-3]"] and rows[f"{arr}_[1-3]"][3] == "HELD"
    assert list(by_id(dr, "-t", "-s", "PD", "-n", "sweep")) == [f"{arr}_4", f"{arr}_5"]
    assert sorted(by_id(dr, "-j", f"{arr}_[4-5],{other}")) == sorted([f"{arr}_4", f"{arr}_5", str(other)])

    r = dr.command("grls", "-s", "HELD", "-n", "sweep")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 3
    assert all(dr.state(tasks[i]) == "PENDING" for i in (1, 2, 3))

    r = dr.command("gdel", "-n", "sweep", "-s", "PD", "-u", me)
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 5
    dr.run_to(1)
    assert all(dr.state(tasks[i]) == "CANCELLED" for i in tasks)
    assert dr.state(other) == "PENDING" and dr.state(blocker) == "RUNNING"

    r = dr.command("gdel", "-u", "nobody-here", "-s", "PENDING", check=False)
    assert r.exit_code == 1 and r.stderr == "gdel: error: no job matches -u nobody-here -s PENDING\n"
    r = dr.command("gdel", check=False)
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("gdel: error: ")
    r = dr.command("gdel", "-s", "R", "-n", "blocker")
    assert r.exit_code == 0 and r.stdout == f"job {blocker}: cancelling\n"
    dr.run_until(lambda: dr.state(blocker) == "CANCELLED", 5)
    dr.run_until(lambda: dr.state(other) == "COMPLETED", 5)
