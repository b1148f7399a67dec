"""Helpers for the simulator tests: tiny SWF traces written into a temporary directory; generated traces and
what two replays of one are compared by."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from gridsched.sim.engine import Result
from gridsched.sim.swf import Trace


@st.composite
def small_traces(draw: st.DrawFn, walls: Sequence[int], users: Sequence[str]) -> Trace:
    """Up to 40 jobs on 1-16 cores, many arriving at once, run times that meet walltimes and shadows."""
    ncores = draw(st.integers(1, 16))
    tr = Trace("<random>", ncores, ncores, None)
    t = 0
    for i in range(draw(st.integers(0, 40))):
        t += draw(st.sampled_from([0, 0, 1, 5, 20, 60, 300]))  # many simultaneous arrivals
        wall = draw(st.sampled_from(walls))
        run = min(wall, draw(st.sampled_from([0, 1, 10, 30, 100, 500, 2000, 4000])))  # ends and shadows meet
        tr.ids.append(i + 1)
        tr.submit.append(float(t))
        tr.size.append(draw(st.integers(1, min(4, ncores)) | st.integers(1, ncores)))
        tr.walltime.append(float(wall))
        tr.run.append(float(run))
        tr.user.append(draw(st.sampled_from(users)))
    return tr


def outcome(res: Result) -> tuple[object, ...]:
    """What two replays of one trace must agree on, job by job and pass by pass."""
    return (
        res.start,
        res.end,
        res.checkpoints,
        res.segments,
        res.passes,
        res.skipped,
        res.series,
        res.overhead_cs,
        res.lost_cs,
        res.split_jobs,
        res.eligible,
        res.killed,
        res.tunings,
    )


def swf_line(
    job: int,
    submit: float,
    run: float,
    procs: int,
    req: float,
    *,
    alloc: int | None = None,
    status: int = 1,
    user: int = 1,
) -> str:
    """One SWF job line: the fields gsim reads, -1 elsewhere."""
    f = [-1] * 18
    f[0], f[1], f[3] = job, submit, run
    f[4] = procs if alloc is None else alloc
    f[7], f[8], f[10], f[11] = procs, req, status, user
    return " ".join(str(x) for x in f)


def swf_text(lines: Sequence[str], max_procs: int | None = 4, max_nodes: int | None = None) -> str:
    head = ["; Version: 2.2", "; Computer: test machine"]
    if max_nodes is not None:
        head.append(f"; MaxNodes: {max_nodes}")
    if max_procs is not None:
        head.append(f"; MaxProcs: {max_procs}")
    return "\n".join(head + list(lines)) + "\n"


# A workload checked by hand in test_metrics.py and test_cli.py (4 cores, FCFS):
#   job 1: submit 0,  run 100, 4 procs, request 200
#   job 2: submit 10, run 50,  2 procs, request 100
#   job 3: submit 20, run 0,   2 procs, request 60
#   job 4: submit 30, run 300, 1 proc,  request 100 -> cut at its request: runs 100
HAND = [
    swf_line(1, 0, 100, 4, 200, user=7),
    swf_line(2, 10, 50, 2, 100, user=8),
    swf_line(3, 20, 0, 2, 60, user=7),
    swf_line(4, 30, 300, 1, 100, user=9),
]
