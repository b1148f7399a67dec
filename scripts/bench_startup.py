#!/usr/bin/env python3
"""Start-up cost of the commands, whole process: ``gsub`` of one job and ``gstat``.

Runs into a temporary spool with a config that never starts a daemon, and
times ``python -c pass`` in the same run as the baseline.  Prints the median
(and min/max) of N runs each, in milliseconds.

    python scripts/bench_startup.py [-n 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_GSUB_MS = 80.0


def command(name: str) -> list[str]:
    """The installed console script beside this interpreter, else ``python -m``."""
    exe = Path(sys.executable).with_name(name)
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", f"gridsched.cli.{name}"]


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode(errors='replace').strip()}")
    return dt * 1000.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=15, help="runs per command (default 15)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gs-bench-")
    try:
        cfg = Path(tmp) / "cfg.toml"
        cfg.write_text("[daemon]\nautostart = false\n")
        script = Path(tmp) / "job.sh"
        script.write_text("#!/bin/sh\n#GS -n 1 -t 10:00\necho hello\n")
        env = {**os.environ, "GRIDSCHED_CONFIG": str(cfg), "GRIDSCHED_SPOOL": str(Path(tmp) / "spool")}
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "gsub job.sh": command("gsub") + [str(script)],
            "gstat": command("gstat"),
        }
        for argv in cases.values():  # warm the page cache and the bytecode cache
            timed(argv, env, tmp)
        results: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.runs):  # interleaved, so a burst of load hits every case alike
            for name, argv in cases.items():
                results[name].append(timed(argv, env, tmp))
        jobs = len(list((Path(tmp) / "spool" / "incoming").glob("submit-*.json")))
        print(
            f"{args.runs} runs each, {os.cpu_count()} CPUs, python {sys.version.split()[0]}; "
            f"gstat lists up to {jobs} pending jobs"
        )
        base = statistics.median(results["python -c pass"])
        for name, ts in results.items():
            med = statistics.median(ts)
            extra = "" if name == "python -c pass" else f"  (+{med - base:.1f} ms over python)"
            print(f"  {name:<16} median {med:6.1f} ms  min {min(ts):6.1f}  max {max(ts):6.1f}{extra}")
        gsub_med = statistics.median(results["gsub job.sh"])
        verdict = "meets" if gsub_med <= TARGET_GSUB_MS else "misses"
        print(f"gsub {verdict} the target of {TARGET_GSUB_MS:.0f} ms")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
