#!/usr/bin/env python3
"""Time ``place`` (and ``free_map``) on a 256-core machine map.

The map: 8 boards x 16 physical cores x 2 SMT threads, numbered as Linux does
(the siblings of core c are c and c+128).  For each occupancy (0 %, 25 %, 50 %,
90 % of the cores held by random jobs) and each request kind (pack, spread,
board, one thread per core, exclusive boards; 1 to 64 cores) the script
builds 200 random free maps and times one ``place`` call on each.  It prints
the median time per call of several runs.  Target: well under a millisecond
per call, so that placing every job started in a pass costs little.

    python scripts/bench_placement.py [--runs 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from gridsched.core.placement import Reason, Request, StatusMap, free_map, place
from gridsched.core.topology import board, make

BOARDS, PHYS = 8, 16
NCORES = BOARDS * PHYS * 2


def machine():
    boards = []
    half = NCORES // 2
    for b in range(BOARDS):
        first = [b * PHYS + k for k in range(PHYS)]
        boards.append(board(b, first + [c + half for c in first], [(c, c + half) for c in first]))
    return make(boards, range(NCORES))


REQUESTS = {
    "pack": [Request(n) for n in (1, 4, 16, 64)],
    "spread": [Request(n, "spread") for n in (1, 4, 16, 64)],
    "board": [Request(n, "board") for n in (1, 4, 16)],
    "threads-per-core 1": [Request(n, threads_per_core=1) for n in (1, 4, 16, 64)],
    "exclusive board": [Request(n, exclusive_board=True) for n in (1, 16, 40)],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    m = machine()
    rng = random.Random(1)
    print(f"machine: {m.summary()}")
    print(f"{'occupancy':>9}  {'request':<20} {'median us/call':>14}  {'placed':>6}")
    for occ in (0.0, 0.25, 0.5, 0.9):
        # status maps of random jobs of 1-8 cores holding about occ of the machine
        cases = []
        for _ in range(200):
            cores = list(range(NCORES))
            rng.shuffle(cores)
            held = cores[: int(occ * NCORES)]
            maps, i, job = [], 0, 1
            while i < len(held):
                k = rng.randint(1, 8)
                maps.append(StatusMap(Reason.ALLOCATED, job, frozenset(held[i : i + k])))
                i, job = i + k, job + 1
            cases.append(maps)
        t0 = time.perf_counter()
        frees = [free_map(m, maps) for maps in cases]
        fm_us = (time.perf_counter() - t0) / len(cases) * 1e6
        print(f"{int(occ * 100):>8}%  {'free_map':<20} {fm_us:>14.1f}")
        for name, reqs in REQUESTS.items():
            times = []
            placed = 0
            for _ in range(args.runs):
                t0 = time.perf_counter()
                ok = 0
                for free in frees:
                    for r in reqs:
                        ok += place(m, free, r) is not None
                times.append((time.perf_counter() - t0) / (len(frees) * len(reqs)) * 1e6)
                placed = ok
            print(
                f"{int(occ * 100):>8}%  {name:<20} {statistics.median(times):>14.1f}  "
                f"{placed / (len(frees) * len(reqs)):>6.0%}"
            )


if __name__ == "__main__":
    main()
