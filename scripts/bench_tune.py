#!/usr/bin/env python3
"""The cost of one tuning run, and whether it delays the daemon's loop.

1. CPU time of one tuning run (``gridsched.sim.tune.choose``) over a synthetic 14-day history of a 256-core
   machine (``--jobs``, default 20,000 jobs: uniform arrivals, 1-64 cores, log-normal run times up to a
   day, about 70 % of the machine offered, walltimes 1-10 times the run time), after a warm-up of
   ``--warmup-days`` (default 7; the shipped tune_warmup is 1 day; as many jobs a day, replayed and not
   scored), once with the grid the daemon uses when every setting is "auto" (EASY, EASY-SJF and 15 settings) and
   once with a grid of 24
   checkpoint-backfill settings (EASY + 24); the median of ``--runs`` runs each.  Target: under 60 s of one core.
2. ``--latency``: dispatch latency of a personal daemon (the time from the job's submission to its
   start, as recorded) for ``--submits`` one-core jobs submitted one after the other, with
   no tuning under way and while the daemon's tuner runs over the same history (``gctl tune``),
   alternating; medians and 95th percentiles.

    python scripts/bench_tune.py [--jobs 20000] [--warmup-days 7] [--runs 3] [--latency] [--submits 30]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gridsched import tune  # noqa: E402
from gridsched.core.params import Params, Policy, Predictor  # noqa: E402

NCORES = 256
DAY = 86400.0


def history(n: int, seed: int = 1, days: float = 14.0) -> list[tune.Job]:
    """``n`` jobs in 14 days offering about 70 % of the machine (jobs that ended in a window cannot offer
    more than the machine had), over ``days`` days (as many a day): mean size 16 cores, run times log-normal
    with a mean of about 12 minutes for 20,000 jobs, scaled so that fewer jobs run longer."""
    r = random.Random(seed)
    span = days * DAY
    scale = 20000 / n
    out = []
    for _ in range(round(n * days / 14)):
        t = r.uniform(0, span)
        run = min(DAY, scale * 60 * r.lognormvariate(1.5, 1.4))
        out.append(
            tune.Job(t, run * r.uniform(1, 10), run, r.choice([1, 1, 2, 4, 8, 16, 32, 64]), f"u{r.randrange(40)}")
        )
    return out


def grid24(base: Params) -> list[Params]:
    """EASY and 24 checkpoint-backfill settings: 7 values of p x 3 thresholds, and the user-history predictor."""
    import dataclasses

    out = [dataclasses.replace(base, policy=Policy.EASY)]
    for p in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7):
        for th in tune.DEFAULT_THRESHOLDS:
            out.append(dataclasses.replace(base, policy=Policy.CHECKPOINT_BACKFILL, p=p, threshold=th))
    for th in tune.DEFAULT_THRESHOLDS:
        out.append(
            dataclasses.replace(base, policy=Policy.CHECKPOINT_BACKFILL, threshold=th, predictor=Predictor.USER_HISTORY)
        )
    return out


def cpu_of(fn) -> float:  # type: ignore[no-untyped-def]
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def tuning_cost(jobs: int, runs: int, warmup_days: float) -> None:
    hist = history(jobs, days=14 + warmup_days)
    frm = warmup_days * DAY if warmup_days > 0 else None
    import dataclasses

    from gridsched.protocol.config import PACKAGED, load

    # the shipped settings (their backfill order: shortest first)
    base = dataclasses.replace(load(str(PACKAGED)).params, policy=Policy.CHECKPOINT_BACKFILL)
    grids = (
        ("auto grid", tune.grid_for(base)),
        ("auto grid, backfill order auto too", tune.grid_for(base, order=True)),
        ("24-setting grid", grid24(base)),
    )
    for name, settings in grids:
        times = [cpu_of(lambda s=settings: tune.choose(hist, NCORES, base, s, score_from=frm)) for _ in range(runs)]
        print(
            f"{name}: {len(settings)} settings (EASY included), {jobs} jobs on {NCORES} cores after a "
            f"{warmup_days:g}-day warm-up of {len(hist) - jobs} jobs: "
            f"median {statistics.median(times):.1f} s of CPU (runs: {', '.join(f'{t:.1f}' for t in times)})",
            flush=True,
        )


CONFIG = """
[scheduler]
policy = "checkpoint-backfill"
tune_every = "1h"
[machine]
cores = 2
[daemon]
autostart = false
"""


def latency(jobs: int, submits: int) -> None:
    from gridsched.protocol.spool import Spool
    from gridsched.protocol.state import StateDB

    bin_ = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "cfg.toml").write_text(CONFIG)
        env = {**os.environ, "GRIDSCHED_SPOOL": str(root / "spool"), "GRIDSCHED_CONFIG": str(root / "cfg.toml")}
        spool = Spool(root / "spool")
        spool.ensure()
        now = time.time()
        db = StateDB(spool.db, write=True)
        db.begin()
        for k, j in enumerate(history(jobs), 1):
            start = now - 14 * DAY + j.submit + 1
            db.put(_row(k, j, start, min(now - 1, start + j.run)))
        db.commit()
        db.close()
        subprocess.run([str(bin_ / "gschedd"), "start"], env=env, check=True, capture_output=True)
        try:
            quiet, busy = [], []
            for rnd in range(2 * ((submits + 9) // 10)):
                tuning = rnd % 2 == 1
                tuner = None
                if tuning:
                    tuner = subprocess.Popen(
                        [str(bin_ / "gctl"), "tune", "--wait", "900"], env=env, stdout=subprocess.DEVNULL
                    )
                    time.sleep(1.0)  # the request taken in and the tuner started
                (busy if tuning else quiet).extend(_dispatch(bin_, env, 10))
                if tuner is not None:
                    tuner.wait()
            for name, vals in (("no tuning", quiet), ("while tuning", busy)):
                vals.sort()
                p95 = vals[min(len(vals) - 1, int(0.95 * len(vals)))]
                print(
                    f"dispatch latency {name}: median {statistics.median(vals) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"
                )
        finally:
            subprocess.run([str(bin_ / "gschedd"), "stop"], env=env, capture_output=True)


def _row(k: int, j: tune.Job, start: float, end: float) -> dict:  # type: ignore[type-arg]
    sys.path.insert(0, str(ROOT / "tests" / "cli"))
    from tests.cli.conftest import job_row

    return job_row(
        k,
        state="COMPLETED",
        ncpus=min(j.ncpus, 2),
        walltime=int(max(j.walltime, 1)),
        submit_time=start - 1,
        start_time=start,
        end_time=end,
        elapsed=max(0.0, end - start),
    )


def _dispatch(bin_: Path, env: dict, n: int) -> list[float]:  # type: ignore[type-arg]
    out = []
    for _ in range(n):
        r = subprocess.run(
            [str(bin_ / "gsub"), "-o", "/dev/null", "-e", "/dev/null", "--wrap", "true"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        jid = int(r.stdout.split()[-1])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            j = json.loads(
                subprocess.run(
                    [str(bin_ / "gstat"), "-a", "-j", str(jid), "--json"], env=env, capture_output=True, text=True
                ).stdout
            )["jobs"]
            if j and j[0].get("start_time"):
                out.append(max(0.0, j[0]["start_time"] - j[0]["submit_time"]))
                break
            time.sleep(0.02)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--warmup-days", type=float, default=7.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--submits", type=int, default=30)
    opts = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    tuning_cost(opts.jobs, opts.runs, opts.warmup_days)
    if opts.latency:
        latency(opts.jobs, opts.submits)
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
