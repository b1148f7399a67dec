#!/usr/bin/env python3
"""gsim against a lean reference simulator, whole process, side by side.

For every trace in ``../shared/traces`` (next to the repository), runs

* ``refsim.py TRACE --policy easy --requested-procs --json`` (the lean
  single-file EASY simulator of ``../shared/tools/refsim``, which reads job
  sizes as gsim does), and
* ``gsim run TRACE --policy easy --json``,

alternately, ``--runs`` times each (default 3), and prints the median wall
time of each, their ratio (target: gsim at most 1.2x), the ratio of their
median CPU times (user + system: steadier than wall time on a busy machine),
and the two average waits, which must agree within 0.1 % (refsim leaves out the few jobs whose
run time is 0, which gsim replays, so they may differ by a few seconds).
Exit status 1 if they do not; the ratio is reported, not enforced.
Skips with a message where refsim or the traces are absent.

``--instructions`` also counts the instructions of one run of each under
valgrind's callgrind (user space, the same on a loaded machine as on an idle
one; a run takes about a hundred times as long).

The children run with ``PYTHONDONTWRITEBYTECODE`` unset, and each command runs once before it is
measured: gsim's modules are read from their ``.pyc`` files, as an installed gsim's are (refsim, a
script, is compiled on every run, as it would be).  The load average is printed before and after.

    python scripts/bench_refsim.py [--runs 3] [--limit N] [--instructions] [--only KTH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REFSIM = SHARED / "tools" / "refsim" / "refsim.py"
TRACES = SHARED / "traces"
GSIM = Path(sys.executable).parent / "gsim"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str]) -> tuple[float, float, dict]:
    """The wall time and the CPU time (user + system) of ``cmd``, and the JSON it prints."""
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=True, env=ENV)
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime, json.loads(r.stdout)


def instructions(cmd: list[str]) -> int:
    """The instructions one run of ``cmd`` executes in user space, as valgrind's callgrind counts them."""
    vg = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    r = subprocess.run(vg + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    counts = [line.split("refs:")[1] for line in r.stderr.splitlines() if "I   refs:" in line]
    if r.returncode != 0 or not counts:
        sys.exit(f"valgrind {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return int(counts[0].replace(",", ""))


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each simulator per trace (median reported)")
    ap.add_argument("--limit", type=int, default=0, help="replay only the first N jobs of each trace")
    ap.add_argument("--instructions", action="store_true", help="also count instructions under valgrind")
    ap.add_argument("--only", metavar="TEXT", default="", help="only the traces whose file name holds TEXT")
    args = ap.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind")
    if not REFSIM.exists():
        print(f"bench_refsim: skipped: no reference simulator at {REFSIM}")
        return 0
    traces = sorted(p for p in TRACES.glob("*.swf*") if p.suffix in (".swf", ".gz") and args.only in p.name)
    if not traces:
        print(f"bench_refsim: skipped: no traces in {TRACES}")
        return 0
    limit = ["--limit", str(args.limit)] if args.limit else []
    load = _load()
    print(
        f"EASY, whole process, median of {args.runs} alternating runs each; {time.strftime('%Y-%m-%d %H:%M')}, {load}"
    )
    print(
        f"{'trace':<34}{'jobs':>8}{'refsim s':>10}{'gsim s':>9}{'ratio':>7}{'cpu ratio':>10}"
        f"{'wait refsim':>13}{'wait gsim':>11}"
    )
    status = 0
    for trace in traces:
        ref_t, gs_t, ref_c, gs_c = [], [], [], []
        ref = gs = {}
        ref_cmd = [sys.executable, str(REFSIM), str(trace), "--policy", "easy", "--requested-procs", "--json", *limit]
        gs_cmd = [str(GSIM), "run", str(trace), "--policy", "easy", "--json", *limit]
        timed(ref_cmd)  # once before measuring: the .pyc files written, the files in the page cache
        timed(gs_cmd)
        for _ in range(args.runs):
            t, c, ref = timed(ref_cmd)
            ref_t.append(t)
            ref_c.append(c)
            t, c, gs = timed(gs_cmd)
            gs_t.append(t)
            gs_c.append(c)
        r, g = statistics.median(ref_t), statistics.median(gs_t)
        cpu = statistics.median(gs_c) / statistics.median(ref_c)
        wr, wg = ref["avg_wait_s"], gs["wait_avg"]
        print(
            f"{trace.name:<34}{ref['jobs_simulated']:>8,}{r:>10.2f}{g:>9.2f}{g / r:>7.2f}{cpu:>10.2f}"
            f"{wr:>13.1f}{wg:>11.1f}" + ("" if abs(wr - wg) <= 0.001 * wr else "  (averages differ)")
        )
        if args.instructions:
            ri, gi = instructions(ref_cmd), instructions(gs_cmd)
            print(f"{'':<34}instructions: refsim {ri / 1e6:,.0f} M, gsim {gi / 1e6:,.0f} M, ratio {gi / ri:.2f}")
        if abs(wr - wg) > 0.001 * wr:
            status = 1
    print(f"after: {_load()}")
    return status


if __name__ == "__main__":
    sys.exit(main())
