#!/usr/bin/env python3
"""Benchmark of gsim as a whole process (trace reading included).

Runs ``gsim TRACE --policy P --json`` as a subprocess, three times per case,
and reports the median wall time, jobs simulated per second and the peak
resident set size of the child (from ``os.wait4``), against the targets:

* SDSC-SP2 under easy: at most 3 s; under checkpoint-backfill: at most 5 s;
* SDSC-BLUE under checkpoint-backfill: at most 20 s and under 500 MB;

then the growth of the run time with the trace length (``--limit`` at 10 %,
50 % and 100 % of SDSC-SP2 under checkpoint-backfill).  The traces are read
from ``../shared/traces`` next to the repository.  Exit status 1 if a target
is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
SP2 = "SDSC-SP2-1998-4.2-cln.swf"
BLUE = "SDSC-BLUE-2000-4.2-cln.swf.gz"
SP2_LINES = 59715  # job lines of SDSC-SP2 (see the traces' README)
# gsim reads its modules' .pyc files, as an installed gsim does (written by the first run if need be)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# (trace, policy, target seconds, target peak RSS in MB or None)
CASES = [
    (SP2, "easy", 3.0, None),
    (SP2, "checkpoint-backfill", 5.0, None),
    (BLUE, "checkpoint-backfill", 20.0, 500.0),
]


def gsim_command() -> list[str]:
    exe = Path(sys.executable).with_name("gsim")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "gridsched.cli.gsim"]


def run_once(args: list[str]) -> tuple[float, float, dict]:
    """Wall seconds, peak RSS in MB and the JSON record of one gsim run."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(gsim_command() + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    out = proc.stdout.read()  # type: ignore[union-attr]
    err = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench_gsim: gsim {' '.join(args)} failed ({proc.returncode}): {err.decode().strip()}")
    return wall, usage.ru_maxrss / 1024.0, json.loads(out)


def measure(args: list[str], repeat: int) -> tuple[float, float, dict]:
    runs = [run_once(args) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs), runs[0][2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per case (median reported)")
    ap.add_argument("--no-growth", action="store_true", help="skip the growth series")
    opts = ap.parse_args()
    missing = [t for t in (SP2, BLUE) if not (TRACES / t).exists()]
    if missing:
        sys.exit(f"bench_gsim: missing traces in {TRACES}: {', '.join(missing)}")
    ok = True
    print(f"gsim whole-process benchmark, median of {opts.repeat} runs ({os.cpu_count()} CPUs)")
    print(f"{'trace':32} {'policy':20} {'jobs':>7} {'median s':>9} {'jobs/s':>8} {'peak MB':>8}  target")
    for trace, policy, target_s, target_mb in CASES:
        secs, mb, rec = measure([str(TRACES / trace), "--policy", policy, "--json"], opts.repeat)
        hit = secs <= target_s and (target_mb is None or mb < target_mb)
        ok &= hit
        target = f"<= {target_s:g} s" + (f", < {target_mb:g} MB" if target_mb else "")
        print(
            f"{trace:32} {policy:20} {rec['jobs']:7d} {secs:9.2f} {rec['jobs'] / secs:8.0f} {mb:8.0f}  "
            f"{target} {'ok' if hit else 'MISSED'}"
        )
    if not opts.no_growth:
        print(f"\ngrowth with the trace length: {SP2}, checkpoint-backfill")
        first: tuple[float, int] | None = None
        for frac in (0.1, 0.5, 1.0):
            n = int(SP2_LINES * frac)
            secs, _, rec = measure(
                [str(TRACES / SP2), "--policy", "checkpoint-backfill", "--limit", str(n), "--json"], opts.repeat
            )
            first = first or (secs, rec["jobs"])
            print(
                f"  {int(frac * 100):3d} % ({rec['jobs']:6d} jobs): {secs:6.2f} s, {rec['jobs'] / secs:7.0f} jobs/s; "
                f"x{rec['jobs'] / first[1]:4.1f} jobs take x{secs / first[0]:4.1f} time"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
