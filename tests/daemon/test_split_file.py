"""Splittable jobs of sub-tasks of their own sizes (gsub --split-file) in the real daemon, with real jobs."""

from __future__ import annotations

import json

import pytest

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


def test_sub_tasks_run_on_their_own_cores_with_their_own_arguments(make_gs):
    gs = make_gs(EASY)
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


def test_a_sub_task_past_its_own_time_is_killed_and_counted_as_timed_out(make_gs):
    gs = make_gs(EASY)
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


def test_failed_sub_tasks_are_run_again_as_many_times_as_asked(make_gs):
    gs = make_gs(EASY)
    log, script, tasks = setup_job(gs, "1 10 fail\n1 10 flaky\n1 10 ok\n")
    jid = gs.gsub("--split-file", str(tasks), "--split-retries", "2", str(script))
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=40)
    tries = sorted((i, t) for i, t, *_ in runs(log))
    assert tries == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]  # 1 + 2 runs; 1 + 1; one
    assert job["state"] == "FAILED"
    counts = {k: job["split"][k] for k in ("done", "failed", "timeout", "left", "retried")}
    assert counts == {"done": 2, "failed": 1, "timeout": 0, "left": 0, "retried": 3}


def test_without_retries_a_failed_sub_task_runs_once(make_gs):
    gs = make_gs(EASY)
    log, script, _ = setup_job(gs, "")
    jid = gs.gsub("--split", "3", "--task-time", "10", "-n", "1", str(script), "fail")
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=40)
    assert job["state"] == "FAILED"
    assert sorted((i, t) for i, t, *_ in runs(log)) == [(0, 0), (1, 0), (2, 0)]
    assert job["split"]["failed"] == 3 and job["split"]["retried"] == 0


def test_the_windows_before_a_blocked_head_take_sub_tasks_of_their_sizes(make_gs):
    gs = make_gs(EASY)
    log, script, tasks = setup_job(gs, "2 2 a\n1 1 b\n1 1 c\n4 20 d\n", sleep=0.3)
    a = gs.gsub("-N", "A", "-n", "4", "-t", "6s", "--wrap", "sleep 4")
    gs.wait_state(a, "RUNNING")
    b = gs.gsub("-N", "B", "-n", "8", "-t", "10s", "--wrap", "sleep 0.5")  # the head: needs all 8 cores
    s = gs.gsub("-N", "S", "--split-file", str(tasks), str(script))
    gs.wait_state(s, "COMPLETED", "FAILED", timeout=60)
    gs.wait_state(b, "COMPLETED", timeout=30)
    rows = {j["id"]: j for j in jobs(gs)}
    assert rows[s]["state"] == "COMPLETED"
    pieces = [j for j in rows.values() if j["split"] and j["split"].get("of") == s]
    early = [p for p in pieces if p["start_time"] < rows[b]["start_time"]]
    assert early, "no sub-task ran in the window before the head"
    assert sorted(i for p in early for i in p["split"]["tasks"]) == [0, 1, 2]  # d (20 s) fits no window
    assert all(p["end_time"] <= rows[b]["start_time"] + 0.5 for p in early)
    got = sorted(runs(log))
    assert [(i, n) for i, _, n, _, _ in got] == [(0, 2), (1, 1), (2, 1), (3, 4)]  # each on its own cores, once
    assert rows[s]["split"]["done"] == 4


BAD = [
    ("1 10\nx 10\n", "tasks.txt:2: cores 'x': not a whole number from 1"),
    ("0 10\n", "tasks.txt:1: cores '0': not a whole number from 1"),
    ("1 10\n-2 10\n", "tasks.txt:2: cores '-2': not a whole number from 1"),
    ("1 -5\n", "tasks.txt:1: walltime"),
    ("1 0\n", "tasks.txt:1: walltime"),
    ("# only a comment\n1 10\n9 10 big\n", "tasks.txt:3: 9 cores, more than the machine has (8)"),
    ("1\n", "tasks.txt:1: expected NCPUS WALLTIME [ARGS...]"),
    ("1 10 'open\n", "tasks.txt:1: no closing quotation"),
    ("", "split file tasks.txt: no sub-tasks"),
    ("# nothing\n\n", "split file tasks.txt: no sub-tasks"),
    ("1 10 " + "a" * 5000 + "\n", "tasks.txt:1: line longer than 4096 bytes"),
]


@pytest.mark.parametrize(("text", "why"), BAD)
def test_bad_split_files_are_refused_with_one_line(make_gs, text, why):
    gs = make_gs(EASY, start=False)
    _, script, tasks = setup_job(gs, text)
    r = gs.run("gsub", "--split-file", "tasks.txt", str(script))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gsub: error: ") and why in lines[0], r.stderr
    assert not list((gs.spool / "incoming").glob("*")) if (gs.spool / "incoming").exists() else True


def test_options_that_exclude_a_split_file_and_a_directive_that_gives_one(make_gs):
    gs = make_gs(EASY, start=False)
    log, script, tasks = setup_job(gs, "1 10 a\n2 10 b\n")
    for extra in (["--split", "2"], ["--task-time", "10"], ["-n", "2"], ["--array", "0-1"]):
        r = gs.run("gsub", "--split-file", str(tasks), *extra, str(script))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = gs.run("gsub", "--split-retries", "1", str(script))
    assert r.returncode == 2 and "--split-retries goes with --split or --split-file" in r.stderr
    r = gs.run("gsub", "--split-file", str(tasks), "-t", "5s", str(script))
    assert r.returncode != 0 and "longer than the walltime" in r.stderr
    directive = gs.work / "d.sh"
    directive.write_text("#!/bin/sh\n#GS --split-file tasks.txt\n#GS --split-retries 1\necho $GS_TASK_ID\n")
    doc = json.loads(gs.run("gsub", "--json", str(directive), check=True).stdout)
    assert doc["split"]["n"] == 2 and doc["split"]["tasks"] == [[1, 10, ["a"]], [2, 10, ["b"]]]
    assert doc["split"]["retries"] == 1 and doc["ncpus"] == 3 and doc["walltime"] == 10
