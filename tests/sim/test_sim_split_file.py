"""Splittable jobs of sub-tasks of their own sizes in the simulator (gsim run --split-file)."""

from __future__ import annotations

import csv
import json
import random

import pytest
from click.testing import CliRunner
from simtraces import swf_line

from gridsched.cli.gsim import main
from gridsched.core.types import Params, Policy
from gridsched.sim import splits, swf
from gridsched.sim.engine import simulate
from gridsched.sim.records import SimulationError

# 8 cores.  A (4 cores) runs 10 s of 11; B (4 cores) 4 s of 5; H, the head, needs all 8 for 5 s (6 asked);
# S is four sub-tasks: 0 (2 cores, 3 s), 1 (2, 5 s), 2 (1, 2 s), 3 (4, 6 s).
SCENE = [
    swf_line(1, 0, 10, 4, 11),
    swf_line(2, 0, 4, 4, 5),
    swf_line(3, 0, 5, 8, 6),
    swf_line(4, 0, 9, 8, 9),
]
TASKS = "# JOB NCPUS WALLTIME [RUNTIME]\n4 2 3\n4 2 5\n4 1 2\n4 4 6\n"


def test_sub_tasks_of_their_sizes_fill_the_window_that_opens_and_the_rest_run_whole(write_trace, tmp_path):
    tr = swf.read(write_trace(SCENE, max_procs=8))
    (tmp_path / "s.txt").write_text(TASKS)
    tasks = splits.read(str(tmp_path / "s.txt"), tr)
    splits.apply(tr, tasks)
    # S as gsub --split-file makes it: the cores its sub-tasks need at once (9, at most 8), for the time
    # they take in order there: 0, 1, 2 at once, 3 when 2 ends (2 s) until 8 s
    assert (tr.size[3], tr.walltime[3], tr.run[3]) == (8, 8.0, 8.0)
    res = simulate(tr, Params(policy=Policy.EASY), split_tasks=tasks)
    # B ends at 4: a window of 4 cores until the head's reservation at 11 (A's walltime).  Sub-task 0 opens
    # a chain of 2 cores; 1 does not fit after it (3 + 5 > 7) and opens another; 2 and 3 find no cores.
    # The piece holds its 4 cores until its longest chain ends (9); then the window [9, 11) takes 2.  H
    # starts when that piece ends (11), then S runs 3 on the 4 cores it needs, for 6 s.
    assert (res.split_jobs, res.pieces, res.split_tasks) == (1, 2, 3)
    assert res.start == [0, 0, 11, 4] and res.end == [10, 4, 16, 22]


def test_run_times_differ_from_walltimes(write_trace, tmp_path):
    tr = swf.read(write_trace(SCENE, max_procs=8))
    (tmp_path / "s.txt").write_text("4 2 3 1\n4 2 5 2\n4 1 2\n4 4 6 3\n")
    tasks = splits.read(str(tmp_path / "s.txt"), tr)
    splits.apply(tr, tasks)
    res = simulate(tr, Params(policy=Policy.EASY), split_tasks=tasks)
    # the same first piece (chains are chosen on walltimes) ends with its longest run, at 6; the window
    # [6, 11) takes 2 (2 s, to 8); 3 (6 s) fits no window and runs whole after H, for its 3 s
    assert res.start == [0, 0, 10, 4] and res.end == [10, 4, 15, 18]


@pytest.mark.parametrize("policy", [Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE])
def test_every_sub_task_runs_once_and_skipping_passes_changes_nothing(write_trace, tmp_path, policy):
    rng = random.Random(11)
    lines, t, rows = [], 0, []
    for j in range(1, 121):
        t += rng.randint(0, 30)
        run = rng.randint(1, 400)
        lines.append(swf_line(j, t, run, rng.choice([1, 2, 4, 8, 16]), run + rng.randint(0, 600)))
        if j % 5 == 0:
            rows += [f"{j} {rng.choice([1, 2, 3, 4])} {rng.randint(20, 300)} {rng.randint(1, 20)}" for _ in range(6)]
    path = write_trace(lines, max_procs=16)
    (tmp_path / "s.txt").write_text("\n".join(rows) + "\n")
    fast = slow = None
    for skip in (True, False):
        tr = swf.read(path)
        tasks = splits.read(str(tmp_path / "s.txt"), tr)
        splits.apply(tr, tasks)
        res = simulate(tr, Params(policy=policy), split_tasks=tasks, fast=skip)
        if skip:
            fast = res
        else:
            slow = res
    assert fast is not None and slow is not None
    assert fast.start == slow.start and fast.end == slow.end
    assert fast.split_jobs == 24 and fast.pieces > 0
    assert all(0 <= s <= e for s, e in zip(fast.start, fast.end))


def test_gsim_run_split_file_and_its_bad_lines(write_trace, tmp_path):
    path = write_trace(SCENE, max_procs=8)
    good = tmp_path / "s.txt"
    good.write_text(TASKS)
    out = tmp_path / "jobs.csv"
    args = ["run", path, "--policy", "easy", "--split-file", str(good), "--jobs-out", str(out), "--json"]
    res = CliRunner().invoke(main, args, prog_name="gsim")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["split"] == {"jobs": 1, "pieces": 2, "sub_tasks": 3}
    rows = list(csv.DictReader(out.open()))
    assert [(r["start"], r["end"]) for r in rows] == [("0", "10"), ("0", "4"), ("11", "16"), ("4", "22")]
    for text, why in [
        ("9 2 3\n", "job '9' is not a job of the trace"),
        ("4 9 3\n", "cores '9': not a whole number from 1 to 8"),
        ("4 2\n", "expected JOB NCPUS WALLTIME [RUNTIME]"),
        ("4 2 -5\n", "-5"),
    ]:
        good.write_text("4 1 1\n" + text)
        res = CliRunner().invoke(main, args, prog_name="gsim")
        assert res.exit_code == 2
        assert res.stderr.startswith(f"gsim: error: {good}:2: ") and why in res.stderr
        assert res.stderr.count("\n") == 1
    good.write_text("# nothing\n")
    res = CliRunner().invoke(main, args, prog_name="gsim")
    assert res.exit_code == 2 and "no sub-tasks" in res.stderr
    with pytest.raises(SimulationError, match="no such file"):
        splits.read(str(tmp_path / "missing"), swf.read(path))


@pytest.mark.parametrize("policy", ["easy", "checkpoint-backfill", "conservative"])
def test_on_a_map_pieces_take_their_own_cores_and_the_schedule_is_the_counted_one(write_trace, tmp_path, policy):
    path = write_trace(SCENE, max_procs=8)
    (tmp_path / "s.txt").write_text(TASKS)
    (tmp_path / "topo.toml").write_text('[[board]]\ncores = "0-3"\n[[board]]\ncores = "4-7"\n')
    starts = []
    for extra in ([], ["--topology", str(tmp_path / "topo.toml")]):
        out = tmp_path / f"jobs{len(extra)}.csv"
        args = ["run", path, "--policy", policy, "--split-file", str(tmp_path / "s.txt"), "--jobs-out", str(out)]
        res = CliRunner().invoke(main, [*args, *extra], prog_name="gsim")
        assert res.exit_code == 0, res.output
        starts.append([(r["start"], r["end"]) for r in csv.DictReader(out.open())])
    assert starts[0] == starts[1] == [("0", "10"), ("0", "4"), ("11", "16"), ("4", "22")]


def test_gsim_compare_split_file_replays_every_policy_as_gsim_run_does(write_trace, tmp_path):
    path = write_trace(SCENE, max_procs=8)
    tasks = tmp_path / "s.txt"
    tasks.write_text(TASKS)
    policies = ["easy", "conservative", "fcfs"]
    res = CliRunner().invoke(
        main,
        ["compare", path, "--policies", ",".join(policies), "--split-file", str(tasks), "--json"],
        prog_name="gsim",
    )
    assert res.exit_code == 0, res.output
    got = {r["policy"]: r for r in json.loads(res.stdout)["results"]}
    for policy in policies:  # each row is that policy's own replay of the same sub-tasks
        one = CliRunner().invoke(main, ["run", path, "--policy", policy, "--split-file", str(tasks), "--json"])
        assert one.exit_code == 0, one.output
        alone = json.loads(one.stdout)
        for key in ("wait_avg", "makespan", "utilization", "split"):
            assert got[policy].get(key) == alone.get(key), (policy, key)
    assert got["easy"]["split"] == {"jobs": 1, "pieces": 2, "sub_tasks": 3}
    assert got["fcfs"]["split"] == {"jobs": 1, "pieces": 0, "sub_tasks": 0}  # fcfs never backfills: it runs whole
    # without the file, the job runs whole under every policy
    res = CliRunner().invoke(main, ["compare", path, "--policies", "easy", "--json"], prog_name="gsim")
    assert "split" not in json.loads(res.stdout)["results"][0]
    tasks.write_text("9 2 3\n")  # a bad line: one line, exit status 2
    res = CliRunner().invoke(main, ["compare", path, "--split-file", str(tasks)], prog_name="gsim")
    assert res.exit_code == 2 and res.stderr.startswith(f"gsim: error: {tasks}:1: ")
    assert res.stderr.count("\n") == 1
