"""Job arrays and splittable jobs in the real daemon, with real jobs."""

from __future__ import annotations

import json
from collections import Counter

from tests.conftest import wait_for

EASY = """
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
[machine]
cores = 8
[daemon]
autostart = false
"""

LOGGER = """#!/bin/sh
echo "$ID start $(date +%s.%N) $GS_JOBID $GS_ARRAY_JOB_ID" >> {log}
sleep {sleep}
echo "$ID end $(date +%s.%N) $GS_JOBID $GS_ARRAY_JOB_ID" >> {log}
"""


def jobs(gs) -> list[dict]:
    return json.loads(gs.run("gstat", "-a", "--json", check=True).stdout)["jobs"]


def events(path) -> list[tuple[float, str, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        idx, what, t, jid, *rest = line.split() + [""]
        out.append((float(t), what, idx, jid if not rest else f"{jid} {rest[0]}"))
    return sorted(out)


def most_at_once(evs) -> int:
    n = best = 0
    for _, what, _, _ in evs:  # at equal times an end sorts before a start
        n += 1 if what == "start" else -1
        best = max(best, n)
    return best


def test_array_with_throttle_never_runs_more_than_max(make_gs):
    gs = make_gs(EASY)
    log = gs.work / "log"
    script = gs.work / "task.sh"
    script.write_text(LOGGER.format(log=log, sleep=0.3).replace("$ID", "$GS_ARRAY_TASK_ID"))
    (gs.work / "out").mkdir()
    aid = gs.gsub("--array", "0-19%4", "-o", "out/%x-%A_%a.out", str(script))
    done = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}

    def finished():
        tasks = [j for j in jobs(gs) if j["array_id"] == aid]
        return len(tasks) == 20 and all(j["state"] in done for j in tasks) and tasks

    tasks = wait_for(finished, 60, "the 20 tasks to end")
    assert all(j["state"] == "COMPLETED" for j in tasks)
    assert sorted(j["array_index"] for j in tasks) == list(range(20))
    evs = events(log)
    starts = Counter(idx for _, what, idx, _ in evs if what == "start")
    assert starts == Counter(str(i) for i in range(20))  # every index once
    assert all(e[3].split()[-1] == str(aid) for e in evs)  # GS_ARRAY_JOB_ID
    assert most_at_once(evs) <= 4
    assert sorted(p.name for p in (gs.work / "out").iterdir()) == sorted(f"task.sh-{aid}_{i}.out" for i in range(20))


def test_split_job_fills_the_window_before_a_blocked_head(make_gs):
    gs = make_gs(EASY)
    log = gs.work / "log"
    script = gs.work / "sub.sh"
    script.write_text(LOGGER.format(log=log, sleep=0.2).replace("$ID", "$GS_TASK_ID"))
    a = gs.gsub("-N", "A", "-n", "6", "-t", "5s", "--wrap", "sleep 4")
    gs.wait_state(a, "RUNNING")
    b = gs.gsub("-N", "B", "-n", "8", "-t", "10s", "--wrap", "sleep 0.5")  # blocked head: needs all 8 cores
    s = gs.gsub("-N", "S", "--split", "16", "--task-time", "1", "-n", "1", str(script))
    gs.wait_state(s, "COMPLETED", timeout=40)
    gs.wait_state(b, "COMPLETED", timeout=20)
    rows = {j["id"]: j for j in jobs(gs)}
    pieces = [j for j in rows.values() if j["split"] and j["split"].get("of") == s]
    assert pieces and all(p["state"] == "COMPLETED" and p["backfilled"] for p in pieces)
    first = min(pieces, key=lambda p: p["start_time"])
    assert first["start_time"] < rows[b]["start_time"]  # sub-tasks ran around the blocked head
    assert first["end_time"] <= rows[b]["start_time"] + 0.5  # ... and were out of its way in time
    assert rows[b]["start_time"] < rows[a]["start_time"] + 5 + 2  # the head started at its reservation
    starts = Counter(idx for _, what, idx, _ in events(log) if what == "start")
    assert starts == Counter(str(i) for i in range(16))  # every sub-task exactly once
    assert rows[s]["split"]["done"] == 16 and rows[s]["split"]["left"] == 0
    # the job table (which every user reads) never gets the owner's environment, arguments or paths of the
    # job its pieces were taken from
    import sqlite3

    from gridsched.protocol.jobs import PRIVATE_KEYS

    con = sqlite3.connect(gs.spool / "state.db")
    try:
        spec = json.loads(con.execute("SELECT spec FROM jobs WHERE id = ?", (s,)).fetchone()[0])
    finally:
        con.close()
    assert not set(spec) & set(PRIVATE_KEYS)
