"""The standard metrics of a simulated schedule (definitions in gsim(1))."""

from __future__ import annotations

import math
from dataclasses import asdict
from itertools import repeat
from operator import mul, sub, truediv

from gridsched.core.record import record
from gridsched.sim.records import Result

BSLD_BOUND = 10.0  # seconds: the bound of the bounded slowdown (Feitelson et al.)


@record
class Metrics:
    """The summary of a replay (``gsim run --json``)."""

    jobs: int  # jobs simulated
    skipped: int  # jobs of the trace left out (by reason in ``skipped_by``)
    skipped_by: dict[str, int]
    makespan: float  # seconds from the first submission to the last end
    utilization: float  # useful core-seconds / (cores * makespan)
    wait_avg: float  # first start - submit (the effective submit of a job that waited for dependencies)
    wait_p95: float
    bsld_avg: float  # max(1, (end - submit) / max(run, 10 s))
    response_avg: float  # end - submit
    checkpoints: int
    preempted_jobs: int
    cancelled: int  # jobs cancelled because their dependencies could never be met (not in the averages)
    overhead_core_hours: float  # spent writing and reading checkpoints
    rerun_core_hours: float  # work thrown away by requeueing

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# Metric names accepted by ``gsim tune --metric``, whether lower is better.
OBJECTIVES: dict[str, tuple[str, bool]] = {
    "bsld": ("bsld_avg", True),
    "wait": ("wait_avg", True),
    "wait95": ("wait_p95", True),
    "response": ("response_avg", True),
    "makespan": ("makespan", True),
    "utilization": ("utilization", False),
}


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ascending values."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def compute(result: Result) -> Metrics:
    tr = result.trace
    run, size = tr.run, tr.size
    submit = result.eligible or tr.submit  # waits count from the effective submit (dependencies met)
    start, end = result.start, result.end
    n = len(tr)
    if result.cancelled:  # jobs cancelled without running are left out
        gone = set(result.cancelled)
        ran = [i for i in range(n) if i not in gone]
        n = len(ran)
        start, end, submit = [start[i] for i in ran], [end[i] for i in ran], [submit[i] for i in ran]
        run, size = [run[i] for i in ran], [size[i] for i in ran]
    # (element by element in C: every job of a trace of hundreds of thousands)
    waits = list(map(sub, start, submit))
    responses = list(map(sub, end, submit))
    bsld = list(map(max, repeat(1.0), map(truediv, responses, map(max, run, repeat(BSLD_BOUND)))))
    makespan = max(result.end) - min(tr.submit)
    useful = math.fsum(map(mul, run, size))
    util = useful / (tr.ncores * makespan) if makespan > 0 else 0.0
    skipped_by = {k: v for k, v in tr.skipped.items() if v}
    return Metrics(
        jobs=n,
        skipped=sum(skipped_by.values()),
        skipped_by=skipped_by,
        makespan=makespan,
        utilization=util,
        wait_avg=math.fsum(waits) / n if n else 0.0,
        wait_p95=percentile(sorted(waits), 95),
        bsld_avg=math.fsum(bsld) / n if n else 0.0,
        response_avg=math.fsum(responses) / n if n else 0.0,
        checkpoints=sum(result.checkpoints),
        preempted_jobs=len(result.segments),
        cancelled=len(result.cancelled),
        overhead_core_hours=result.overhead_cs / 3600.0,
        rerun_core_hours=result.lost_cs / 3600.0,
    )


def gpu_metrics(result: Result) -> dict[str, object] | None:
    """The machine's GPUs and how much they were used, when it has some (None otherwise).

    ``gpu_hours``: the GPUs each job held times the time it held them (its run segments, checkpoint
    overhead included), summed; ``gpu_utilization``: those GPU-seconds over the GPU slots (GPUs times
    their share) times the makespan; ``gpu_jobs``: jobs that asked for GPUs.
    """
    gpus = [d for d in result.devices if d.type == "gpu"]
    if not gpus:
        return None
    tr = result.trace
    per = result.gpus or [0] * len(tr)
    gone = set(result.cancelled)
    used = math.fsum(
        per[i] * math.fsum(b - a for a, b in result.runs(i)) for i in range(len(tr)) if per[i] and i not in gone
    )
    makespan = max(result.end, default=0.0) - min(tr.submit, default=0.0)
    slots = sum(d.share for d in gpus)
    return {
        "gpus": len(gpus),
        "gpu_jobs": sum(1 for i in range(len(tr)) if per[i] and i not in gone),
        "gpu_hours": used / 3600.0,
        "gpu_utilization": used / (slots * makespan) if makespan > 0 else 0.0,
    }


def per_user(result: Result) -> list[dict[str, object]]:
    """Each SWF user's job count and average wait (from the effective submit), by user id as written."""
    tr = result.trace
    submit = result.eligible or tr.submit
    gone = set(result.cancelled)
    waits: dict[str, list[float]] = {}
    for i in range(len(tr)):
        if i not in gone:
            waits.setdefault(tr.user[i], []).append(result.start[i] - submit[i])

    def key(u: str) -> tuple[int, str]:
        return (int(u), "") if u.lstrip("-").isdigit() else (1 << 62, u)

    return [
        {"user": u, "jobs": len(w), "wait_avg": math.fsum(w) / len(w)}
        for u, w in sorted(waits.items(), key=lambda x: key(x[0]))
    ]


def quarters(result: Result) -> list[dict[str, float]]:
    """Average wait and bounded slowdown of the jobs submitted in each quarter of the trace's submit span."""
    tr = result.trace
    submit = result.eligible or tr.submit
    gone = set(result.cancelled)
    lo, hi = min(tr.submit), max(tr.submit)
    span = (hi - lo) or 1.0
    waits: list[list[float]] = [[], [], [], []]
    bslds: list[list[float]] = [[], [], [], []]
    for i in range(len(tr)):
        if i in gone:
            continue
        q = min(3, int(4 * (tr.submit[i] - lo) / span))
        waits[q].append(result.start[i] - submit[i])
        bslds[q].append(max(1.0, (result.end[i] - submit[i]) / max(tr.run[i], BSLD_BOUND)))
    return [
        {
            "jobs": len(w),
            "wait_avg": math.fsum(w) / len(w) if w else 0.0,
            "bsld_avg": math.fsum(b) / len(b) if b else 0.0,
        }
        for w, b in zip(waits, bslds)
    ]
