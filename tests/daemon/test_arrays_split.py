"""Job arrays in the real daemon, with real jobs.  A splittable job filling the window before a blocked head
runs in the daemon in process in test_split_driven.py."""

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
