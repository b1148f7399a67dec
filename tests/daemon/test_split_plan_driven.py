"""The planned starts of a splittable job's sub-tasks in the daemon, in process (stub executor, driven clock):
the forecast plans the window that opens when a running job ends before the head's reservation, gstat --start
and gstat -f show it, and the pass takes those sub-tasks out when the window opens."""

from __future__ import annotations

import json
import time

from tests.daemon.driven import Driven
from tests.daemon.test_arrays_split import EASY  # the same 8-core easy daemon


def _start(line: str) -> float:
    """The START_TIME of a gstat --start row, in seconds."""
    field = next(f for f in line.split() if f.count("T") == 1 and f.count(":") == 2)
    return time.mktime(time.strptime(field, "%Y-%m-%dT%H:%M:%S"))


def test_gstat_start_shows_the_sub_tasks_planned_into_a_window_that_opens_later(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(EASY))
    dr.default_work = 40.0  # a piece: its sub-task of 40 s
    script = tmp_path / "sub.sh"
    script.write_text("#!/bin/sh\nsleep 40\n")
    a = dr.gsub("-N", "A", "-n", "4", "-t", "100s", "--wrap", "sleep 100", work=None)
    b = dr.gsub("-N", "B", "-n", "4", "-t", "50s", "--wrap", "sleep 49", work=49.0)
    assert dr.running(a) and dr.running(b)
    h = dr.gsub("-N", "H", "-n", "8", "-t", "100s", "--wrap", "sleep 1", work=1.0)  # the head, at A's end
    s = dr.gsub("-N", "S", "--split", "8", "--task-time", "40s", "-n", "1", "-t", "400s", str(script), work=40.0)
    assert dr.state(s) == "PENDING"  # no window is open now
    t0 = dr.t0

    out = dr.command("gstat", "--start").stdout
    lines = out.splitlines()[1:]
    early = next(ln for ln in lines if ln.startswith(f"{s} sub-tasks 0-3 "))
    late = next(ln for ln in lines if ln.startswith(f"{s} sub-tasks 4-7 "))
    head = next(ln for ln in lines if ln.split()[0] == str(h))
    # 0-3 in the 4 cores B leaves at its walltime (50 s) until the head's reservation (100 s); 4-7 after the head
    assert abs(_start(early) - (t0 + 50)) <= 1  # gstat shows whole seconds
    assert abs(_start(late) - (t0 + 200)) <= 1
    assert lines.index(early) < lines.index(head) < lines.index(late)  # by start
    assert len(lines) == 3  # the job's own row is its sub-tasks' rows
    full = dr.command("gstat", "-f", str(s)).stdout
    [planned] = [ln for ln in full.splitlines() if ln.startswith("planned")]
    assert "0-3 " in planned and "4-7 " in planned
    row = json.loads(dr.command("gstat", "--json").stdout)["jobs"]
    mine = next(j for j in row if j["id"] == s)
    assert mine["predicted_start"] <= t0 + 50.001  # its first sub-task's start
    assert [p["tasks"] for p in mine["planned"]] == ["0-3", "4-7"]  # the rows of gstat --start, in --json
    assert (
        abs(mine["planned"][0]["start"] - (t0 + 50)) <= 0.001 and abs(mine["planned"][1]["start"] - (t0 + 200)) <= 0.001
    )

    # B ends (before its walltime): the window opens, and the pass takes out the sub-tasks planned into it
    dr.run_to(49.5, step=5)
    assert dr.state(b) == "COMPLETED" and dr.state(h) == "PENDING"
    jobs = json.loads(dr.command("gstat", "--json").stdout)["jobs"]
    pieces = [j for j in jobs if j["split"] and j["split"].get("of") == s]
    assert [p["split"]["tasks"] for p in pieces] == [[0, 1, 2, 3]]
