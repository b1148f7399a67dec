"""Splittable jobs (gsub --split) in the daemon, in process (stub executor, driven clock): pieces fill the
window before a blocked head.  Sub-tasks run by real pieces: test_split_file.py and test_split_devices.py."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

from gridsched.protocol.jobs import PRIVATE_KEYS
from tests.daemon.driven import Driven
from tests.daemon.test_arrays_split import EASY


def test_split_job_fills_the_window_before_a_blocked_head(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(EASY))
    dr.default_work = 1.0  # a piece: its sub-tasks of 0.2 s each, on its cores
    script = tmp_path / "sub.sh"
    script.write_text("#!/bin/sh\nsleep 0.2\n")
    a = dr.gsub("-N", "A", "-n", "6", "-t", "5s", "--wrap", "sleep 4", work=4)
    assert dr.running(a)
    b = dr.gsub("-N", "B", "-n", "8", "-t", "10s", "--wrap", "sleep 0.5", work=0.5)  # blocked head: all 8 cores
    s = dr.gsub("-N", "S", "--split", "16", "--task-time", "1", "-n", "1", str(script), work=1.0)
    dr.run_until(lambda: dr.state(s) in ("COMPLETED", "FAILED") and dr.state(b) == "COMPLETED", 60)
    rows = {j["id"]: j for j in json.loads(dr.command("gstat", "-a", "--json").stdout)["jobs"]}
    assert rows[s]["state"] == rows[b]["state"] == "COMPLETED"
    pieces = [j for j in rows.values() if j["split"] and j["split"].get("of") == s]
    assert pieces and all(p["state"] == "COMPLETED" and p["backfilled"] for p in pieces)
    first = min(pieces, key=lambda p: p["start_time"])
    assert first["start_time"] < rows[b]["start_time"]  # sub-tasks ran around the blocked head
    assert first["end_time"] <= rows[b]["start_time"] + 0.5  # ... and were out of its way in time
    assert rows[b]["start_time"] < rows[a]["start_time"] + 5 + 2  # the head started at its reservation
    starts = Counter(i for p in pieces for i in p["split"]["tasks"])
    assert starts == Counter(range(16))  # every sub-task given to exactly one piece
    assert rows[s]["split"]["done"] == 16 and rows[s]["split"]["left"] == 0
    # the job table (which every user reads) never gets the owner's environment, arguments or paths of the
    # job its pieces were taken from
    dr.d.table.commit()
    con = sqlite3.connect(dr.d.spool.db)
    try:
        spec = json.loads(con.execute("SELECT spec FROM jobs WHERE id = ?", (s,)).fetchone()[0])
    finally:
        con.close()
    assert not set(spec) & set(PRIVATE_KEYS)
