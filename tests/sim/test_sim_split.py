"""Splittable jobs in the simulator (gsim --split-jobs-above)."""

from __future__ import annotations

import random

import pytest
from simtraces import swf_line

from gridsched.core.types import Params, Policy
from gridsched.sim import swf
from gridsched.sim.engine import simulate
from gridsched.sim.metrics import compute

# 4 cores.  Job 1 holds 2 until 100; job 2, the head, needs 4 (shadow time 100);
# job 3 (3 procs, 20 s each, estimated 40 s) cannot backfill whole on 2 cores.
HEAD_BLOCKED = [
    swf_line(1, 0, 100, 2, 100),
    swf_line(2, 1, 10, 4, 10),
    swf_line(3, 2, 20, 3, 40),
]


def test_sub_tasks_fill_the_window_before_the_head(write_trace):
    tr = swf.read(write_trace(HEAD_BLOCKED, max_procs=4))
    plain = simulate(tr, Params(policy=Policy.EASY))
    assert plain.start == [0, 100, 110] and plain.end == [100, 110, 130]
    split = simulate(tr, Params(policy=Policy.EASY), split_above=1)
    # window: 2 cores for 98 s -> 2 chains of at most 2 sub-tasks of 40 s: (0, 1) and (2);
    # they run 20 s each: the longest chain ends at 2 + 40.  Nothing is left for the job.
    assert split.split_jobs == 3 and split.pieces == 1 and split.split_tasks == 3  # every job is above 1 proc
    assert split.start == [0, 100, 2] and split.end == [100, 110, 42]
    assert compute(split).utilization == pytest.approx(compute(plain).utilization * 130 / 110)  # same work, sooner
    same = simulate(tr, Params(policy=Policy.EASY), split_above=3)  # 3 procs is not above 3
    assert same.start == plain.start and same.pieces == 0


def test_fcfs_never_splits_conservative_does(write_trace):
    tr = swf.read(write_trace(HEAD_BLOCKED, max_procs=4))
    assert simulate(tr, Params(policy=Policy.FCFS), split_above=1).pieces == 0
    assert simulate(tr, Params(policy=Policy.CONSERVATIVE), split_above=1).pieces > 0


@pytest.mark.parametrize("policy", [Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE])
def test_skipping_passes_changes_nothing_and_every_job_ends(write_trace, policy):
    rng = random.Random(7)
    lines, t = [], 0
    for j in range(1, 301):
        t += rng.randint(0, 40)
        run = rng.randint(1, 600)
        lines.append(
            swf_line(j, t, run, rng.choice([1, 1, 2, 4, 8, 12, 16]), run + rng.randint(0, 900), user=rng.randint(1, 5))
        )
    tr = swf.read(write_trace(lines, max_procs=16))
    fast = simulate(tr, Params(policy=policy), split_above=4)
    slow = simulate(tr, Params(policy=policy), split_above=4, fast=False)
    assert fast.start == slow.start and fast.end == slow.end
    assert fast.pieces > 0
    assert all(0 <= s <= e for s, e in zip(fast.start, fast.end))
    assert all(fast.start[i] >= tr.submit[i] for i in range(len(tr)))
