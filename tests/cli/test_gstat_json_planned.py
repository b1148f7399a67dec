"""gstat --json's ``planned`` key: a pending splittable job's sub-tasks by planned start, as the daemon keeps
them in the state db (the forecast that plans them: tests/core/test_split_plan.py; in the daemon:
tests/daemon/test_split_plan_driven.py)."""

from __future__ import annotations

import json
import time

from gridsched.cli import gstat
from gridsched.protocol.state import planned_text

SPLIT = {"stdout": "/w/s.o", "stderr": "/w/s.e", "workdir": "/w", "split": {"n": 9, "ncpus": 1, "task_time": 40.0}}


def test_json_lists_the_planned_sub_tasks_of_a_pending_splittable_job(env, run, make_row, put_rows):
    t0 = float(int(time.time()) + 1000)
    # sub-tasks 0-3 and 8 in a window, 4-7 in the job's own start, as the forecast plans them
    plan = [(i, t0 + 50, t0 + 90) for i in range(4)] + [(i, t0 + 200, t0 + 240) for i in range(4, 8)]
    plan.append((8, t0 + 90, t0 + 130))
    plan.sort()
    put_rows(
        make_row(1, state="PENDING", ncpus=8, spec=SPLIT, predicted_start=t0 + 50, planned=planned_text(plan)),
        make_row(2, state="PENDING", predicted_start=t0 + 100),  # not splittable
        make_row(3, state="RUNNING", cores="0", start_time=t0 - 1000, spec=SPLIT, planned=planned_text(plan)),
    )
    r = run(gstat.cli, ["--json"])
    assert r.exit_code == 0
    jobs = {j["id"]: j for j in json.loads(r.stdout)["jobs"]}
    assert jobs[1]["planned"] == [
        {"start": t0 + 50, "end": t0 + 90, "tasks": "0-3"},
        {"start": t0 + 90, "end": t0 + 130, "tasks": "8"},
        {"start": t0 + 200, "end": t0 + 240, "tasks": "4-7"},
    ]
    assert jobs[1]["predicted_start"] == jobs[1]["planned"][0]["start"]  # its first sub-task's
    assert jobs[2]["planned"] is None and jobs[3]["planned"] is None  # nothing planned; no longer pending
    # the same starts as gstat --start's rows of the job's sub-tasks
    rows = [ln.split() for ln in run(gstat.cli, ["--start"]).stdout.splitlines()[1:]]
    assert [" ".join(x[:3]) for x in rows if x[0] == "1"] == ["1 sub-tasks 0-3", "1 sub-tasks 8", "1 sub-tasks 4-7"]
    # and gstat -f ID --json has it too
    [one] = json.loads(run(gstat.cli, ["-f", "1", "--json"]).stdout)["jobs"]
    assert one["planned"] == jobs[1]["planned"]
