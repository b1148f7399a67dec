"""Tree workloads in the simulator: the deadlock with and without yielding, deadlock freedom, the format."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gridsched.core.types import Params, Policy, YieldAffinity
from gridsched.sim.tree import TreeFormatError, TreeJob, parse, simulate

BIN = Path(sys.executable).parent

DEADLOCK = """# two parents filling a 2-core machine, two children each
id,parent,submit,ncpus,walltime,run
1,,0,1,100,10
2,,0,1,100,10
3,1,1,1,50,5
4,1,2,1,50,5
5,2,1,1,50,5
6,2,2,1,50,5
"""


def test_two_parents_deadlock_without_yield_and_finish_with_it():
    jobs = parse(DEADLOCK)
    stuck = simulate(jobs, 2, yielding=False)
    assert stuck.deadlock and stuck.stuck == [1, 2, 3, 4, 5, 6] and not stuck.end
    done = simulate(jobs, 2, yielding=True)
    assert not done.deadlock
    # by hand: parents compute 0-10, children 3 and 5 run 10-15 on their parents' cores, 4 and 6 run 15-20
    assert done.end == {3: 15.0, 5: 15.0, 4: 20.0, 6: 20.0, 1: 20.0, 2: 20.0}
    assert done.cores[3] == done.cores[4] == done.cores[1] and done.cores[5] == done.cores[6] == done.cores[2]
    m = done.metrics()
    assert m["makespan"] == 20.0 and m["utilization"] == 1.0 and m["on_lent"] == 4


@pytest.mark.parametrize(
    "text, msg",
    [
        ("1,,0,1,10\n", "5 fields, expected 6"),
        ("1,,0,x,10,1\n", "not a number"),
        ("1,,0,1,10,1\n1,,0,1,10,1\n", "not positive or not unique"),
        ("2,1,0,1,10,1\n", "parent 1 is not an earlier job"),
        ("1,,0,1,10,5\n2,1,6,1,10,1\n", "after the parent's run"),
        ("1,,0,1,10,5\n2,1,1,2,10,1\n", "asks for 2 cores, its tree (root job 1) has 1"),
        ("# nothing\n", "no jobs"),
    ],
)
def test_bad_workloads_name_the_line(text, msg):
    with pytest.raises(TreeFormatError, match=re.escape(msg)):
        parse(text, "w.csv")


@st.composite
def workloads(draw):
    jobs: list[TreeJob] = []
    for _ in range(draw(st.integers(1, 6))):
        rid = len(jobs) + 1
        rcpus = draw(st.integers(1, 3))
        jobs.append(TreeJob(rid, None, float(draw(st.integers(0, 20))), rcpus, 1000.0, float(draw(st.integers(0, 10)))))
        frontier = [jobs[-1]]
        for _ in range(draw(st.integers(0, 6))):
            parent = draw(st.sampled_from(frontier))
            jid = len(jobs) + 1
            job = TreeJob(
                jid,
                parent.id,
                float(draw(st.integers(0, int(parent.run)))),
                draw(st.integers(1, rcpus)),
                1000.0,
                float(draw(st.integers(0, 10))),
            )
            jobs.append(job)
            frontier.append(job)
    return jobs


# Root 7 of another tree, started (none affinity) on cores lent by root 1 and by its child 2, all at one
# instant: the stack order used to put 2 back above 7 on 2's core, so 7 could never resume and 6 never fit.
TIE = [
    TreeJob(1, None, 0.0, 3, 1000.0, 0.0),
    TreeJob(2, 1, 0.0, 1, 1000.0, 0.0),
    TreeJob(3, 1, 0.0, 1, 1000.0, 0.0),
    TreeJob(4, 1, 0.0, 1, 1000.0, 1.0),
    TreeJob(5, 1, 0.0, 1, 1000.0, 0.0),
    TreeJob(6, 2, 0.0, 3, 1000.0, 0.0),
    TreeJob(7, None, 0.0, 2, 1000.0, 0.0),
    TreeJob(8, 7, 0.0, 1, 1000.0, 0.0),
]
# Root 5 runs on cores lent by root 1; 3, a grandchild of 1, used to be started on 5's lent core 2 and 7, a
# child of 5, on 3's: tree 1 then waited for core 1 under 5, tree 5 for core 2 under 3.
INTERLEAVED = [
    TreeJob(1, None, 0.0, 3, 1000.0, 0.0),
    TreeJob(2, 1, 0.0, 1, 1000.0, 100.0),
    TreeJob(3, 2, 5.0, 1, 1000.0, 0.0),
    TreeJob(4, 3, 0.0, 3, 1000.0, 0.0),
    TreeJob(5, None, 0.0, 2, 1000.0, 1.0),
    TreeJob(6, 5, 1.0, 1, 1000.0, 50.0),
    TreeJob(7, 5, 1.0, 2, 1000.0, 0.0),
]


@settings(max_examples=150, deadline=None)
@given(
    workloads(),
    st.integers(2, 6),
    st.sampled_from(list(YieldAffinity)),
    st.sampled_from([Policy.FCFS, Policy.EASY, Policy.CONSERVATIVE, Policy.CHECKPOINT_BACKFILL]),
)
@example(jobs=TIE, ncores=3, affinity=YieldAffinity.NONE, policy=Policy.FCFS)
@example(jobs=INTERLEAVED, ncores=3, affinity=YieldAffinity.NONE, policy=Policy.FCFS)
@example(jobs=INTERLEAVED, ncores=3, affinity=YieldAffinity.NONE, policy=Policy.EASY)
def test_yielding_trees_never_deadlock(jobs, ncores, affinity, policy):
    if max(j.ncpus for j in jobs) > ncores:
        return
    res = simulate(jobs, ncores, Params(policy=policy, yield_affinity=affinity), yielding=True)
    assert not res.deadlock, res.stuck
    assert len(res.end) == len(jobs)
    for j in jobs:  # a parent ends after its children
        if j.parent is not None:
            assert res.end[j.parent] >= res.end[j.id]


def test_gsim_tree_command(tmp_path):
    w = tmp_path / "w.csv"
    w.write_text(DEADLOCK)
    r = subprocess.run([str(BIN / "gsim"), "tree", str(w), "--cores", "2", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)["results"]
    assert doc["yield"]["deadlock"] is False and doc["yield"]["makespan"] == 20.0
    assert doc["no-yield"]["deadlock"] is True and doc["no-yield"]["makespan"] is None
    w.write_text("1,,0,1\n")
    r = subprocess.run([str(BIN / "gsim"), "tree", str(w), "--cores", "2"], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr == f"gsim: error: {w}:1: 4 fields, expected 6 (id,parent,submit,ncpus,walltime,run)\n"
