"""Splittable jobs of sub-tasks of their own sizes (gsub --split-file) in the real daemon, with real jobs: each
sub-task on its own cores with its own arguments, killed at its own time, run again as often as asked.

The windows before a blocked head taking sub-tasks of their sizes are tested in process, on a driven clock,
in test_split_file_driven.py; bad split files and excluded options in tests/cli/test_split_file.py.  The tests
here are independent of each other's jobs: one daemon serves them all."""

from __future__ import annotations

import json

from tests.daemon.test_arrays_split import EASY  # the same 8-core easy daemon

# one line per run of a sub-task: index, try, its cores (GS_NCPUS and GS_CORES), its arguments
RECORDER = """#!/bin/sh
echo "$GS_TASK_ID $GS_TASK_TRY $GS_NCPUS $GS_CORES $#:$*" >> {log}
case "$1" in
  slow) sleep 30 ;;
  fail) exit 3 ;;
  flaky) if [ "$GS_TASK_TRY" = 0 ]; then exit 4; fi ;;
  *) sleep {sleep} ;;
esac
"""


def jobs(gs) -> list[dict]:
    return json.loads(gs.run("gstat", "-a", "--json", check=True).stdout)["jobs"]


def runs(path) -> list[tuple[int, int, int, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        idx, tr, n, cores, args = line.split(" ", 4)
        out.append((int(idx), int(tr), int(n), cores, args))
    return out


def ncores(cpulist: str) -> int:
    n = 0
    for part in cpulist.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def setup_job(gs, lines: str, sleep: float = 0.2):
    log = gs.work / "log"
    script = gs.work / "task.sh"
    script.write_text(RECORDER.format(log=log, sleep=sleep))
    tasks = gs.work / "tasks.txt"
    tasks.write_text(lines)
    return log, script, tasks


def test_sub_tasks_run_on_their_own_cores_with_their_own_arguments(shared_make_gs):
    gs = shared_make_gs(EASY)
    log, script, tasks = setup_job(
        gs,
        "# cores  time  arguments\n1 10 alpha\n\n2 0:10 'two words' x   # a comment\n4 10s gamma\n1 10\n",
    )
    jid = gs.gsub("--split-file", str(tasks), str(script), "first")
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=40)
    assert job["state"] == "COMPLETED"
    got = sorted(runs(log))
    assert [(i, t, n) for i, t, n, _, _ in got] == [(0, 0, 1), (1, 0, 2), (2, 0, 4), (3, 0, 1)]
    assert all(ncores(c) == n for _, _, n, c, _ in got)  # GS_CORES: exactly its own cores
    assert [a for *_, a in got] == ["2:first alpha", "3:first two words x", "2:first gamma", "1:first"]
    assert job["split"]["n"] == 4 and job["ncpus"] == 8  # one wave: all four at once on 8 cores
    counts = {k: job["split"][k] for k in ("done", "failed", "timeout", "running", "left", "retried")}
    assert counts == {"done": 4, "failed": 0, "timeout": 0, "running": 0, "left": 0, "retried": 0}


def test_a_sub_task_past_its_own_time_is_killed_and_counted_as_timed_out(shared_make_gs):
    gs = shared_make_gs(EASY)
    log, script, tasks = setup_job(gs, "1 2 slow\n1 30 a\n1 30 b\n")
    jid = gs.gsub("--split-file", str(tasks), str(script))
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=40)
    assert job["state"] == "FAILED"  # not every sub-task succeeded
    assert job["end_time"] - job["start_time"] < 2 + 3 + 5  # its time, the grace, a margin: not the 30 s it asked
    assert sorted(i for i, *_ in runs(log)) == [0, 1, 2]
    counts = {k: job["split"][k] for k in ("done", "failed", "timeout", "running", "left")}
    assert counts == {"done": 2, "failed": 0, "timeout": 1, "running": 0, "left": 0}
    assert "1 timed out" in gs.run("gstat", "-a", check=True).stdout
    err = (gs.work / f"task.sh.e{jid}").read_text()
    assert "sub-task 0 ran past its time" in err


def test_failed_sub_tasks_are_run_again_as_many_times_as_asked(shared_make_gs):
    gs = shared_make_gs(EASY)
    log, script, tasks = setup_job(gs, "1 10 fail\n1 10 flaky\n1 10 ok\n")
    jid = gs.gsub("--split-file", str(tasks), "--split-retries", "2", str(script))
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=40)
    tries = sorted((i, t) for i, t, *_ in runs(log))
    assert tries == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]  # 1 + 2 runs; 1 + 1; one
    assert job["state"] == "FAILED"
    counts = {k: job["split"][k] for k in ("done", "failed", "timeout", "left", "retried")}
    assert counts == {"done": 2, "failed": 1, "timeout": 0, "left": 0, "retried": 3}


def test_without_retries_a_failed_sub_task_runs_once(shared_make_gs):
    gs = shared_make_gs(EASY)
    log, script, _ = setup_job(gs, "")
    jid = gs.gsub("--split", "3", "--task-time", "10", "-n", "1", str(script), "fail")
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=40)
    assert job["state"] == "FAILED"
    assert sorted((i, t) for i, t, *_ in runs(log)) == [(0, 0), (1, 0), (2, 0)]
    assert job["split"]["failed"] == 3 and job["split"]["retried"] == 0
