"""Selecting jobs (gdel, ghold, grls -u/-n/-s and array ranges) and gstat's REASON, --start and --format
against the real daemon.

The default test machine: 8 declared cores, fcfs.
"""

from __future__ import annotations

import getpass
import json
import time

from tests.conftest import wait_for
from tests.daemon.test_topology import WAIT_GO


def by_id(gs, *args: str) -> dict[str, list[str]]:
    """gstat's output lines (after the header) by their first field."""
    out = gs.run("gstat", *args, check=True).stdout
    return {ln.split()[0]: ln.split() for ln in out.splitlines()[1:] if ln.split()}


def test_reason_codes_and_start(gs):
    blocker = gs.gsub("-n", "6", "-t", "60s", "-N", "blocker", "--wrap", WAIT_GO)
    gs.wait_state(blocker, "RUNNING")
    nxt = gs.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    after = gs.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    dep = gs.gsub("-n", "1", "-t", "60s", "-d", f"afterok:{blocker}", "--wrap", "true")
    held = gs.gsub("-n", "1", "-t", "60s", "--hold", "--wrap", "true")
    later = gs.gsub("-n", "1", "-t", "60s", "--begin", "now+7days", "--wrap", "true")
    want = {
        nxt: "Resources",
        after: "Priority",
        dep: "Dependency",
        held: "JobHeldUser",
        later: "BeginTime",
        blocker: "",
    }

    def told() -> dict[str, list[str]] | None:
        rows = by_id(gs, "--format", "%i %T %R")
        return rows if all(rows[str(j)][2:] == ([w] if w else []) for j, w in want.items()) else None

    wait_for(told, 20, "the REASON of each job")
    # the table's REASON column (before NOTE) says the same
    table = by_id(gs)
    assert "Resources" in table[str(nxt)] and "Priority" in table[str(after)]
    assert "JobHeldUser" in table[str(held)] and "BeginTime" in table[str(later)]
    # --start: pending and held jobs with a full date; the begin time a week away shows its date
    begin = time.time() + 7 * 86400  # --begin now+7days: within the seconds the submission took
    start = by_id(gs, "--start")
    assert str(blocker) not in start
    shown = time.mktime(time.strptime(start[str(later)][4], "%Y-%m-%dT%H:%M:%S"))
    assert begin - 60 < shown <= begin
    assert start[str(later)][5] == "BeginTime" and start[str(held)][4:] == ["N/A", "JobHeldUser"]
    assert start[str(nxt)][4] != "N/A"
    (gs.work / "go").touch()
    gs.wait_state(nxt, "COMPLETED")


def test_gdel_ghold_grls_by_filters_and_ranges(gs):
    me = getpass.getuser()
    blocker = gs.gsub("-n", "8", "-t", "60s", "-N", "blocker", "--wrap", WAIT_GO)
    gs.wait_state(blocker, "RUNNING")
    arr = gs.gsub("-n", "1", "-t", "60s", "-N", "sweep", "-a", "1-5", "--wrap", "true")
    other = gs.gsub("-n", "1", "-t", "60s", "-N", "other", "--wrap", "true")
    tasks = {
        j["array_index"]: j["id"]
        for j in json.loads(gs.run("gstat", "--json", check=True).stdout)["jobs"]
        if j["array_id"] == arr
    }
    assert sorted(tasks) == [1, 2, 3, 4, 5] and tasks[1] == arr

    r = gs.run("ghold", f"{arr}_[2-3]")
    assert r.returncode == 0 and r.stdout == f"job {arr}_2: holding\njob {arr}_3: holding\n"
    gs.wait_state(tasks[2], "HELD")
    gs.wait_state(tasks[3], "HELD")
    # the first task, which has the array's id, alone
    r = gs.run("ghold", f"{arr}_1")
    assert r.returncode == 0 and r.stdout == f"job {arr}_1: holding\n"
    gs.wait_state(tasks[1], "HELD")
    assert gs.job(tasks[4])["state"] == "PENDING" and gs.job(tasks[5])["state"] == "PENDING"

    rows = by_id(gs, "-s", "HELD", "-n", "sweep", "-u", me)  # an array shows as the tasks selected
    assert list(rows) == [f"{arr}_[1-3]"] and rows[f"{arr}_[1-3]"][3] == "HELD"
    assert list(by_id(gs, "-t", "-s", "PD", "-n", "sweep")) == [f"{arr}_4", f"{arr}_5"]
    assert sorted(by_id(gs, "-j", f"{arr}_[4-5],{other}")) == sorted([f"{arr}_4", f"{arr}_5", str(other)])

    r = gs.run("grls", "-s", "HELD", "-n", "sweep")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 3
    for i in (1, 2, 3):
        gs.wait_state(tasks[i], "PENDING")

    r = gs.run("gdel", "-n", "sweep", "-s", "PD", "-u", me)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 5
    for i in tasks:
        gs.wait_state(tasks[i], "CANCELLED")
    assert gs.job(other)["state"] == "PENDING" and gs.job(blocker)["state"] == "RUNNING"

    r = gs.run("gdel", "-u", "nobody-here", "-s", "PENDING")
    assert r.returncode == 1 and r.stderr == "gdel: error: no job matches -u nobody-here -s PENDING\n"
    r = gs.run("gdel")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("gdel: error: ")
    r = gs.run("gdel", "-s", "R", "-n", "blocker")
    assert r.returncode == 0 and r.stdout == f"job {blocker}: cancelling\n"
    gs.wait_state(blocker, "CANCELLED")
    gs.wait_state(other, "COMPLETED")


def test_every_reason_the_daemon_words_has_its_code():
    """The REASON code gstat shows is the one the table gives for the kind the core said, for every kind."""
    from types import SimpleNamespace

    from gridsched.core import eligible
    from gridsched.core.placement import Request
    from gridsched.core.types import Wait, WaitKind
    from gridsched.daemon import reasons
    from gridsched.protocol.reason_codes import CODES, code

    t = time.time() + 3600
    rec = SimpleNamespace(place=Request(5, "board"), begin=t)
    waits = [
        Wait(WaitKind.RESOURCES),
        Wait(WaitKind.RESOURCES, resv=9),
        Wait(WaitKind.RESOURCES, what="cores", asks=4, has=8, free=2),
        Wait(WaitKind.RESOURCES, what="device:gpu:H100", asks=2, has=4, free=0),
        Wait(WaitKind.LICENSES, what="matlab", asks=1, has=2, free=0),
        Wait(WaitKind.PRIORITY),
        Wait(WaitKind.DRAINED, cores=frozenset({4, 5})),
        Wait(WaitKind.DRAINED, cores=frozenset({4, 5}), never=True),
        Wait(WaitKind.NEVER_FITS, what="cores", asks=12, has=8),
        Wait(WaitKind.NEVER_FITS, what="placement", asks=5, has=4),
        Wait(WaitKind.NEVER_FITS, what="matlab", asks=3, has=2),
        Wait(WaitKind.NEVER_FITS, what="unknown", text="nope"),
        Wait(WaitKind.BOUND_NEVER, resv=9, what="time"),
        Wait(WaitKind.BOUND_NEVER, resv=9, what="resv"),
        Wait(WaitKind.RESERVATION, resv=9),
        Wait(WaitKind.BEGIN_TIME, eligible.not_before(t)),
        Wait(WaitKind.DEPENDENCY, "waiting for dependency afterok:3: job 3 is RUNNING"),
        Wait(WaitKind.DEPENDENCY, "singleton: another job named 'x' is queued or running"),
        Wait(WaitKind.DEPENDENCY_NEVER, "dependency never satisfied: afterok:3: job 3 ended FAILED"),
        Wait(WaitKind.ARRAY_LIMIT, "array 7: 2 tasks already running (%2)"),
        Wait(
            WaitKind.CPU_LIMIT,
            "user core limit: alice's jobs hold 8 cores; 4 more would be over the 10 a user may hold",
        ),
    ]
    assert {w.kind for w in waits} == set(WaitKind) - {WaitKind.HELD}
    assert set(CODES) == {k.value for k in WaitKind}  # every kind has its row
    for w in waits:
        text = reasons.text(None, rec, w)  # type: ignore[arg-type]
        assert code("PENDING", text) == CODES[w.kind.value][0], text
    # a held job's reason is its hold's (gridsched.daemon.handlers.hold)
    from gridsched.daemon.handlers.hold import BY_ADMIN, BY_OWNER

    assert code("HELD", BY_OWNER) == "JobHeldUser" and code("HELD", BY_ADMIN) == "JobHeldAdmin"
