#!/usr/bin/env python3
"""gridsched and Slurm side by side, on the same machine in the same run.

Needs a running single-node Slurm that ``sinfo`` and ``sbatch`` reach (with
``SLURM_CONF`` set as that installation needs); without one it says so and
exits 2.  gridsched runs a private daemon on a temporary spool, declared with
as many cores as the Slurm node has.  For each figure it prints the Slurm
value, the gridsched value and their ratio:

* submit rate: N one-core ``true`` jobs submitted one after another;
* dispatch latency on an idle system: from just before the submit command to
  the job's first instruction (median of several);
* drain: N trivial jobs submitted as one array, until the queue is empty;
* a backfill scenario with overestimated walltimes: A holds half the cores for
  20 s (walltime 2 min); C, the head, needs every core; D (half the cores,
  walltime 5 min, really 10 s) and E (a quarter, walltime 2 min, really 5 s)
  would fit the hole before A's walltime ends if their walltimes were honest.
  Slurm's backfill judges the declared walltime; gridsched's
  checkpoint-backfill (p = 0.2, threshold 1 min, the jobs in requeue mode)
  starts them early.  Reported: the mean wait of C, D and E, and the makespan.

    python scripts/bench_vs_slurm.py [--submit 200] [--lat 15] [--drain 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def sh(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> str:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=timeout).stdout


class Slurm:
    name = "slurm"

    def __init__(self, work: Path) -> None:
        self.work = work
        self.env = dict(os.environ)
        self.env["PATH"] += ":/usr/sbin"

    def cores(self) -> int:
        return int(sh(["sinfo", "-h", "-o", "%c"], self.env).split()[0])

    def submit(self, wrap: str, ncpus: int = 1, walltime_min: int = 1, array: str | None = None) -> str:
        cmd = [
            "sbatch",
            "-Q",
            "--parsable",
            "-o",
            "/dev/null",
            "-D",
            str(self.work),
            "-N1",
            "-n1",
            "-c",
            str(ncpus),
            "-t",
            str(walltime_min),
            f"--wrap={wrap}",
        ]
        if array:
            cmd.insert(1, f"--array={array}")
        return sh(cmd, self.env).strip()

    def queue_len(self) -> int:
        return len(sh(["squeue", "-h", "-o", "%i"], self.env).split())

    def close(self) -> None:
        subprocess.run(["scancel", "-u", os.environ.get("USER", "root")], env=self.env, capture_output=True)


class Gridsched:
    name = "gridsched"

    def __init__(self, work: Path, cores: int) -> None:
        self.work = work
        cfg = work / "gridsched.toml"
        cfg.write_text(
            f'[scheduler]\npolicy = "checkpoint-backfill"\np = 0.2\nthreshold = "1m"\n'
            f"[machine]\ncores = {cores}\n[daemon]\nautostart = false\n"
        )
        self.env = {**os.environ, "GRIDSCHED_SPOOL": str(work / "spool"), "GRIDSCHED_CONFIG": str(cfg)}
        self.proc = subprocess.Popen(
            [str(BIN / "gschedd"), "run"],
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not (work / "spool" / "gschedd.sock").exists():
            if time.monotonic() > deadline:
                raise SystemExit("bench_vs_slurm: the gridsched daemon did not start")
            time.sleep(0.02)

    def submit(self, wrap: str, ncpus: int = 1, walltime_min: int = 1, array: str | None = None) -> str:
        cmd = [
            str(BIN / "gsub"),
            "-o",
            "/dev/null",
            "-e",
            "/dev/null",
            "-D",
            str(self.work),
            "-n",
            str(ncpus),
            "-t",
            f"{walltime_min}m",
            "--checkpoint",
            "requeue",
            "--wrap",
            wrap,
        ]
        if array:
            cmd[1:1] = ["--array", array]
        return sh(cmd, self.env).strip()

    def queue_len(self) -> int:
        out = sh([str(BIN / "gstat")], self.env)
        return max(0, len(out.splitlines()) - 1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        subprocess.run(["pkill", "-f", f"GS_SPOOL={self.env['GRIDSCHED_SPOOL']}"], capture_output=True)


def wait_empty(s, cap: float) -> float:
    end = time.monotonic() + cap
    while s.queue_len() > 0:
        if time.monotonic() > end:
            raise SystemExit(f"bench_vs_slurm: {s.name}: queue not empty after {cap:.0f} s")
        time.sleep(0.2)
    return time.time()


def submit_rate(s, n: int) -> float:
    t0 = time.time()
    for _ in range(n):
        s.submit("true")
    rate = n / (time.time() - t0)
    wait_empty(s, 600)
    return rate


def latency(s, n: int) -> float:
    out = []
    for i in range(n):
        f = s.work / f"lat.{s.name}.{i}"
        t0 = time.time()
        s.submit(f"date +%s.%N > {f}")
        end = time.monotonic() + 30
        while not (f.exists() and f.read_text().strip()):
            if time.monotonic() > end:
                raise SystemExit(f"bench_vs_slurm: {s.name}: a job did not start in 30 s")
            time.sleep(0.005)
        out.append(float(f.read_text()) - t0)
        wait_empty(s, 30)
    return statistics.median(out)


def drain(s, n: int) -> float:
    t0 = time.time()
    s.submit("true", array=f"1-{n}")
    return n / (wait_empty(s, 900) - t0)


def scenario(s, nc: int) -> tuple[float, float]:
    h, q = max(1, nc // 2), max(1, nc // 4)
    t0 = time.time()
    jobs = {"A": (h, 2, 20), "C": (nc, 1, 5), "D": (h, 5, 10), "E": (q, 2, 5)}
    submitted = {}
    for name, (c, wall, secs) in jobs.items():
        stamp = s.work / f"{s.name}.{name}"
        submitted[name] = time.time()
        s.submit(f"date +%s.%N > {stamp}.start; sleep {secs}; date +%s.%N > {stamp}.end", c, wall)
        if name == "A":  # the others queue behind a running A
            while not Path(f"{stamp}.start").exists():
                time.sleep(0.05)
    end = time.monotonic() + 180
    while not all(Path(f"{s.work}/{s.name}.{n}.end").exists() for n in jobs):
        if time.monotonic() > end:
            raise SystemExit(f"bench_vs_slurm: {s.name}: the scenario did not finish in 180 s")
        time.sleep(0.1)
    starts = {n: float(Path(f"{s.work}/{s.name}.{n}.start").read_text()) for n in jobs}
    ends = {n: float(Path(f"{s.work}/{s.name}.{n}.end").read_text()) for n in jobs}
    wait = statistics.mean(starts[n] - submitted[n] for n in "CDE")
    return wait, max(ends.values()) - t0


def main() -> int:
    ap = argparse.ArgumentParser(description="gridsched and Slurm side by side")
    ap.add_argument("--submit", type=int, default=200)
    ap.add_argument("--lat", type=int, default=15)
    ap.add_argument("--drain", type=int, default=1000)
    args = ap.parse_args()
    if (
        shutil.which("sinfo") is None
        or subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.find("idle") < 0
    ):
        print(
            "bench_vs_slurm: no idle local Slurm node answers sinfo; start a single-node Slurm first", file=sys.stderr
        )
        return 2
    work = Path(tempfile.mkdtemp(prefix="gs-vs-slurm-"))
    slurm = Slurm(work)
    nc = slurm.cores()
    gs = Gridsched(work, nc)
    print(f"machine: {os.cpu_count()} CPUs; Slurm node and gridsched: {nc} cores")
    try:
        rows = []
        for label, fn, better in (
            ("submit rate (jobs/s)", lambda x: submit_rate(x, args.submit), "higher"),
            ("dispatch latency, median (s)", lambda x: latency(x, args.lat), "lower"),
            (f"drain of {args.drain} trivial jobs (jobs/s)", lambda x: drain(x, args.drain), "higher"),
        ):
            a, b = fn(slurm), fn(gs)
            rows.append((label, a, b, better))
        (sw, sm), (gw, gm) = scenario(slurm, nc), scenario(gs, nc)
        rows.append(("backfill scenario: mean wait of C, D, E (s)", sw, gw, "lower"))
        rows.append(("backfill scenario: makespan (s)", sm, gm, "lower"))
        for label, a, b, better in rows:
            print(f"{label}: slurm {a:.3f}, gridsched {b:.3f}, gridsched/slurm {b / a:.2f} ({better} is better)")
    finally:
        gs.close()
        slurm.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
