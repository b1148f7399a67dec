"""Splittable jobs of sub-tasks of their own sizes (gsub --split-file) in the daemon, in process (stub
executor, driven clock): the windows before a blocked head take sub-tasks that fit them, as pieces.

How a piece or a job runs its sub-tasks (their cores, arguments, times and retries) is tested with real jobs
in test_split_file.py; bad split files in tests/cli/test_split_file.py."""

from __future__ import annotations

import json

from tests.daemon.driven import Driven
from tests.daemon.test_arrays_split import EASY  # the same 8-core easy daemon


def test_the_windows_before_a_blocked_head_take_sub_tasks_of_their_sizes(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(EASY))
    dr.default_work = 0.3  # each piece: its sub-tasks take 0.3 s
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("2 2 a\n1 1 b\n1 1 c\n4 20 d\n")
    script = tmp_path / "task.sh"
    script.write_text("#!/bin/sh\nsleep 0.3\n")
    a = dr.gsub("-N", "A", "-n", "4", "-t", "6s", "--wrap", "sleep 4", work=4)
    assert dr.running(a)
    b = dr.gsub("-N", "B", "-n", "8", "-t", "10s", "--wrap", "sleep 0.5", work=0.5)  # the head: all 8 cores
    s = dr.gsub("-N", "S", "--split-file", str(tasks), str(script), work=0.3)
    dr.run_until(lambda: dr.state(s) in ("COMPLETED", "FAILED") and dr.state(b) == "COMPLETED", 60)
    rows = {j["id"]: j for j in json.loads(dr.command("gstat", "-a", "--json").stdout)["jobs"]}
    assert rows[s]["state"] == "COMPLETED"
    pieces = [j for j in rows.values() if j["split"] and j["split"].get("of") == s]
    early = [p for p in pieces if p["start_time"] < rows[b]["start_time"]]
    assert early, "no sub-task ran in the window before the head"
    assert sorted(i for p in early for i in p["split"]["tasks"]) == [0, 1, 2]  # d (20 s) fits no window
    assert all(p["end_time"] <= rows[b]["start_time"] + 0.5 for p in early)
    assert sum(p["ncpus"] for p in early) == 3  # a on 2 cores, b then c on one
    assert rows[s]["ncpus"] == 4 and rows[s]["start_time"] >= rows[b]["end_time"]  # d, after the head
    assert sorted(i for p in pieces for i in p["split"]["tasks"]) == [0, 1, 2]  # each once: d ran in S
    assert rows[s]["split"]["done"] == 4
