#!/usr/bin/env python3
"""Two installations of gridsched side by side: dispatch latency and drain rates, alternating.

Each installation is a Python interpreter with gridsched installed and the
``scripts/`` directory of the same version (for ``bench_daemon.py``).  Every
round measures, for each installation in turn, the median dispatch latency of
30 submissions and the drain rate of 1,000 one-core jobs on 2 and on 16
declared cores; the medians over the rounds are printed.  Alternating keeps a
noisy machine's changes from favouring one side::

    python -m venv /tmp/old && /tmp/old/bin/pip install ./checkout-of-the-old-version
    python scripts/bench_compare.py --a /tmp/old/bin/python:OLD_CHECKOUT/scripts \\
                                    --b "$(which python)":scripts --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess

MEASURE = r"""
import json, statistics, sys
sys.path.insert(0, sys.argv[1])
import bench_daemon as b
what = sys.argv[2]
print(json.dumps(statistics.median(b.dispatch_latency(30)) * 1000 if what == "lat" else b.drain(1000, int(what))))
"""
WHAT = {"lat": "dispatch latency (ms)", "2": "drain on 2 cores (jobs/s)", "16": "drain on 16 cores (jobs/s)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, metavar="PYTHON:SCRIPTS", help="the first installation")
    ap.add_argument("--b", required=True, metavar="PYTHON:SCRIPTS", help="the second installation")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sides = {"a": args.a.split(":", 1), "b": args.b.split(":", 1)}
    got: dict[str, dict[str, list[float]]] = {k: {w: [] for w in WHAT} for k in sides}
    for rnd in range(args.rounds):
        for what in WHAT:
            for k, (py, scripts) in sides.items():
                out = subprocess.run([py, "-c", MEASURE, scripts, what], capture_output=True, text=True, cwd="/tmp")
                if out.returncode != 0:
                    raise SystemExit(f"{k} {what}: {out.stderr.strip()[-500:]}")
                got[k][what].append(json.loads(out.stdout))
                print(f"round {rnd}: {k} {WHAT[what]}: {got[k][what][-1]:.1f}", flush=True)
    from gridsched.host.facts import describe

    print(f"machine: {describe()}")
    for what, label in WHAT.items():
        a, b = statistics.median(got["a"][what]), statistics.median(got["b"][what])
        print(f"{label}: a {a:.1f}, b {b:.1f} (b/a {b / a:.2f}; medians of {args.rounds})")


if __name__ == "__main__":
    main()
