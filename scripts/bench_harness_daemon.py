#!/usr/bin/env python3
"""What a real daemon's start and stop cost the test harness: ``gschedd run`` as a process of its own, side by
side with a daemon forked from the harness's fork server (tests/zygote.py), alternating.

Each round starts a daemon each way on a fresh temporary spool (the harness's ``Gridsched``, its default
configuration), waits until it runs (its pid file names it and its socket is there, as the tests wait), submits
one job in process and waits for it to complete, and stops the daemon; the wall clock of the start, and of the
whole, is taken.  The fork server is started (its imports paid) before the first round.  Medians over the
rounds are printed::

    python scripts/bench_harness_daemon.py [-n 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tests.conftest as harness  # noqa: E402


def once(root: Path, fork: bool) -> tuple[float, float]:
    harness.FORK = fork
    gs = harness.Gridsched(root, harness.DEFAULT_CONFIG)
    t0 = time.perf_counter()
    gs.start()
    up = time.perf_counter() - t0
    try:
        jid = gs.gsub("-o", "/dev/null", "--wrap", "true")
        gs.wait_state(jid, "COMPLETED")
    finally:
        gs.cleanup()
    return up, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="rounds (default 15)")
    args = ap.parse_args()
    got: dict[str, list[tuple[float, float]]] = {"process": [], "forked": []}
    with tempfile.TemporaryDirectory() as tmp:
        once(Path(tmp) / "warm-process", False)
        once(Path(tmp) / "warm-forked", True)
        for i in range(args.n):
            for name in ("process", "forked") if i % 2 == 0 else ("forked", "process"):
                got[name].append(once(Path(tmp) / f"{name}{i}", name == "forked"))
    harness.FORK_SERVER.close()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.n} rounds, medians:")
    for name, runs in got.items():
        up = statistics.median(r[0] for r in runs)
        whole = statistics.median(r[1] for r in runs)
        print(f"  {name:8} start {up * 1000:7.1f} ms   start, one job, stop {whole * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
