#!/usr/bin/env python3
"""Time one scheduling pass of the policy core.

A 256-core machine in count-only mode with 200 running jobs and N pending jobs
(1,000 / 10,000 / 100,000).  Two queues:

* ``worst``: the head job needs 64 cores; every other pending job fits in the
  free cores now but neither ends by the shadow time (even shortened) nor fits
  in the extra cores, so the backfill step examines every job and starts none.
* ``mixed``: sizes and walltimes drawn like a parallel workload (powers of two,
  minutes to a day, half of the jobs checkpointable); the pass stops once the
  free cores are used up.

Prints the median of several runs of ``schedule`` (checkpoint-backfill unless
``--policy`` says otherwise) and of ``forecast``.  Target: one pass with 10,000
pending jobs in at most 100 ms.

    python scripts/bench_schedule.py [--runs 7] [--policy checkpoint-backfill]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from gridsched.core.policy import forecast, schedule
from gridsched.core.types import Params, Policy, Running, Snapshot, Waiting

NCORES = 256
NRUNNING = 200


def running_jobs(rng: random.Random, used: int) -> tuple[Running, ...]:
    """``NRUNNING`` jobs holding ``used`` cores in all, ending over the next day."""
    sizes = [1] * NRUNNING
    for _ in range(used - NRUNNING):
        sizes[rng.randrange(NRUNNING)] += 1
    out = []
    for i, n in enumerate(sizes):
        start = -rng.uniform(0, 3600)
        est = rng.uniform(600, 86400)
        if est + start <= 0:
            est = -start + 60
        out.append(Running(100_000_000 + i, n, start, est, backfilled=i % 3 == 0, preemptable=i % 2 == 0))
    return tuple(out)


def worst_queue(npending: int) -> tuple[Waiting, ...]:
    head = Waiting(1, 64, 3600.0)
    rest = tuple(Waiting(2 + i, 8, 10 * 86400.0, preemptable=i % 2 == 0) for i in range(npending - 1))
    return (head,) + rest


def mixed_queue(rng: random.Random, npending: int) -> tuple[Waiting, ...]:
    out = []
    for i in range(npending):
        n = min(NCORES, 2 ** rng.choice([0, 0, 1, 2, 3, 4, 5, 6, 7]))
        est = rng.choice([300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0])
        out.append(Waiting(1 + i, n, est, preemptable=rng.random() < 0.5, user=f"u{i % 50}"))
    return tuple(out)


def median_ms(fn, snap: Snapshot, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(snap)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per measurement (median reported)")
    ap.add_argument("--policy", default="checkpoint-backfill", choices=[p.value for p in Policy])
    ap.add_argument("--no-forecast", action="store_true", help="skip timing forecast()")
    args = ap.parse_args()
    rng = random.Random(20240601)
    params = Params(policy=Policy(args.policy))
    running = running_jobs(rng, NCORES - 16)  # 16 cores free
    print(f"policy {params.policy.value}, {NCORES} cores (count-only), {NRUNNING} running, median of {args.runs} runs")
    print(f"{'queue':<7}{'pending':>9}{'schedule ms':>14}{'starts':>8}{'forecast ms':>14}")
    for npending in (1_000, 10_000, 100_000):
        runs = args.runs if npending <= 10_000 else max(3, args.runs // 2)
        for name, queue in (("worst", worst_queue(npending)), ("mixed", mixed_queue(rng, npending))):
            snap = Snapshot(now=0.0, ncores=NCORES, running=running, pending=queue, params=params)
            ms = median_ms(schedule, snap, runs)
            nstart = len(schedule(snap).starts)
            if args.no_forecast:
                fc = "-"
            else:
                fc = f"{median_ms(forecast, snap, max(1, runs // 2)):.1f}"
            print(f"{name:<7}{npending:>9,}{ms:>14.2f}{nstart:>8}{fc:>14}")


if __name__ == "__main__":
    main()
