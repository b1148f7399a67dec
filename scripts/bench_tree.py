#!/usr/bin/env python3
"""The effect of yielding on parent-child tree workloads, measured with the simulator (gsim tree).

Random tree workloads (seeded) on a 16-core machine: root jobs of 1 to 4
cores arrive over the first ten minutes; each job above the tree's depth
limit has 0 to 3 children of at most its root's cores, submitted during the
first half of its run; run times 1 to 10 minutes.  Two families:

* ``full``: 24 roots, trees up to 3 levels below the root: parents fill the machine;
* ``light``: 4 roots, up to 2 levels below the root: mostly they do not.

For each family and each of ``--seeds`` workloads the replay runs with
yielding (descendant affinity) and without.  Printed: how many replays
deadlock, and over the replays that do not, the median makespan and
utilization (core-seconds of computation over cores times makespan), and
the median ratio of the makespan with yielding to the one without, for the
workloads where both finish.

    python scripts/bench_tree.py [--seeds 20] [--cores 16] [--affinity descendant]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gridsched.core.types import Params, Policy, YieldAffinity  # noqa: E402
from gridsched.sim.tree import TreeJob, simulate  # noqa: E402


def workload(rng: random.Random, roots: int, max_depth: int = 3) -> list[TreeJob]:
    jobs: list[TreeJob] = []
    nid = 1

    def add(parent: TreeJob | None, root_cpus: int, depth: int, submit: float) -> None:
        nonlocal nid
        ncpus = rng.randint(1, 4) if parent is None else rng.randint(1, root_cpus)
        run = float(rng.randint(60, 600))
        job = TreeJob(nid, None if parent is None else parent.id, submit, ncpus, run * 4 + 600, run)
        nid += 1
        jobs.append(job)
        if depth < max_depth:
            for _ in range(rng.randint(0, 3)):
                add(job, root_cpus if parent is not None else ncpus, depth + 1, rng.uniform(0, run / 2))

    for _ in range(roots):
        add(None, 0, 0, rng.uniform(0, 600))
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--cores", type=int, default=16)
    ap.add_argument("--affinity", choices=[a.value for a in YieldAffinity], default="descendant")
    args = ap.parse_args()
    params = Params(policy=Policy.EASY, yield_affinity=YieldAffinity(args.affinity))
    for family, roots, depth in (("full", 24, 3), ("light", 4, 2)):
        stats: dict[bool, dict[str, list[float]]] = {
            y: {"deadlock": [], "makespan": [], "util": []} for y in (True, False)
        }
        ratios = []
        for seed in range(args.seeds):
            jobs = workload(random.Random(seed), roots, depth)
            m = {y: simulate(jobs, args.cores, params, y).metrics() for y in (True, False)}
            for y in (True, False):
                stats[y]["deadlock"].append(1.0 if m[y]["deadlock"] else 0.0)
                if not m[y]["deadlock"]:
                    stats[y]["makespan"].append(float(m[y]["makespan"]))
                    stats[y]["util"].append(float(m[y]["utilization"]))
            if not m[True]["deadlock"] and not m[False]["deadlock"]:
                ratios.append(float(m[True]["makespan"]) / float(m[False]["makespan"]))
        print(
            f"{family} ({roots} roots, depth {depth}, {args.cores} cores, {args.seeds} workloads, "
            f"affinity {args.affinity}):"
        )
        for y in (True, False):
            s = stats[y]
            dl = int(sum(s["deadlock"]))
            med = (
                (
                    f"median makespan {statistics.median(s['makespan']):.0f} s, median utilization "
                    f"{100 * statistics.median(s['util']):.1f} %"
                )
                if s["makespan"]
                else "no replay finished"
            )
            print(f"  {'yield   ' if y else 'no yield'}: {dl}/{args.seeds} deadlocked; {med}")
        if ratios:
            print(
                f"  makespan with / without yielding, where both finish ({len(ratios)}): "
                f"median {statistics.median(ratios):.3f}"
            )


if __name__ == "__main__":
    main()
