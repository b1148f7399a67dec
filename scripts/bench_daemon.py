#!/usr/bin/env python3
"""Benchmarks of the daemon with real processes: dispatch latency, drain rate, memory.

Run from the repository root after installing gridsched:

    python scripts/bench_daemon.py            # all three, a few runs each
    python scripts/bench_daemon.py --quick    # smaller sizes

Prints one ``name: value`` line per figure, with the machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

BIN = Path(sys.executable).parent


def machine() -> str:
    from gridsched.host.facts import describe

    return describe()


class Spool:
    def __init__(self, cores: int, policy: str = "checkpoint-backfill") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="gs-bench-"))
        self.cfg = self.dir / "gridsched.toml"
        self.cfg.write_text(
            f'[scheduler]\npolicy = "{policy}"\n[machine]\ncores = {cores}\n[daemon]\nautostart = false\n'
        )
        self.env = {**os.environ, "GRIDSCHED_SPOOL": str(self.dir / "spool"), "GRIDSCHED_CONFIG": str(self.cfg)}
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [BIN / "gschedd", "run"],
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not (self.dir / "spool" / "gschedd.sock").exists():
            if time.monotonic() > deadline:
                raise SystemExit("daemon did not start")
            time.sleep(0.01)

    def gsub(self, *args: str) -> int:
        out = subprocess.run([BIN / "gsub", *args], env=self.env, cwd=self.dir, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"gsub {' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
        return int(out.stdout.split()[-1])

    def states(self) -> dict[str, int]:
        out = subprocess.run([BIN / "gstat", "-a", "--json"], env=self.env, capture_output=True, text=True, check=True)
        counts: dict[str, int] = {}
        for j in json.loads(out.stdout)["jobs"]:
            counts[j["state"]] = counts.get(j["state"], 0) + 1
        return counts

    def done_count(self) -> int:
        import sqlite3

        db = self.dir / "spool" / "state.db"
        if not db.exists():
            return 0
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return con.execute("SELECT COUNT(*) FROM jobs WHERE state IN ('COMPLETED','FAILED')").fetchone()[0]
        except sqlite3.Error:
            return 0
        finally:
            con.close()

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        for p in psutil.process_iter():
            try:
                if p.environ().get("GRIDSCHED_SPOOL") == self.env["GRIDSCHED_SPOOL"]:
                    p.kill()
            except (psutil.Error, OSError):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def dispatch_latency(runs: int) -> list[float]:
    """From just before gsub starts to the job's first instruction, on an idle daemon."""
    sp = Spool(cores=os.cpu_count() or 2)
    try:
        sp.start()
        out = []
        for i in range(runs):
            mark = sp.dir / f"t{i}"
            t0 = time.time()
            sp.gsub("--wrap", f"date +%s.%N > {mark}")
            while not mark.exists() or not mark.read_text().strip():
                time.sleep(0.001)
            out.append(float(mark.read_text()) - t0)
            time.sleep(0.05)
        return out
    finally:
        sp.close()


def drain(n: int, cores: int) -> float:
    """Jobs per second: n one-core `true` jobs queued while the daemon is down, then started."""
    sp = Spool(cores=cores)
    try:
        for _ in range(n):
            sp.gsub("-n", "1", "--wrap", "true")
        t0 = time.monotonic()
        sp.start()
        while sp.done_count() < n:
            time.sleep(0.05)
            if time.monotonic() - t0 > 600:
                raise SystemExit("drain did not finish in 10 minutes")
        return n / (time.monotonic() - t0)
    finally:
        sp.close()


def memory(n: int) -> float:
    """Daemon RSS in MB with n jobs queued behind a job that holds every core."""
    sp = Spool(cores=16)
    try:
        sp.start()
        sp.gsub("-n", "16", "-t", "1h", "--wrap", "sleep 3600")
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from gridsched.protocol.spool import Spool as GSpool

        gsp = GSpool(sp.dir / "spool")
        env = dict(os.environ)
        for _ in range(n):
            jid = gsp.next_id()
            gsp.put_request(
                f"submit-{jid:010d}.json",
                {
                    "type": "submit",
                    "job": {
                        "id": jid,
                        "name": "q",
                        "user": "bench",
                        "uid": os.getuid(),
                        "gid": os.getgid(),
                        "ncpus": 1,
                        "walltime": 600,
                        "mem": None,
                        "checkpoint": "none",
                        "hold": False,
                        "script": "#!/bin/sh\ntrue\n",
                        "args": [],
                        "workdir": str(sp.dir),
                        "stdout": str(sp.dir / "o"),
                        "stderr": str(sp.dir / "e"),
                        "env": env,
                        "submit_time": time.time(),
                        "submit_dir": str(sp.dir),
                    },
                },
            )
        deadline = time.monotonic() + 600
        while sp.states().get("PENDING", 0) < n:
            if time.monotonic() > deadline:
                raise SystemExit("jobs were not taken in")
            time.sleep(0.5)
        time.sleep(3)  # let a forecast pass run
        return psutil.Process(sp.proc.pid).memory_info().rss / 1e6
    finally:
        sp.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    lat = dispatch_latency(10 if args.quick else 30)
    print(
        f"dispatch latency median: {statistics.median(lat) * 1000:.0f} ms (n={len(lat)}, "
        f"min {min(lat) * 1000:.0f}, max {max(lat) * 1000:.0f})"
    )
    n = 200 if args.quick else 1000
    for cores in (2, 16):
        rates = [drain(n, cores) for _ in range(1 if args.quick else args.runs)]
        print(
            f"drain {n} one-core true jobs on {cores} cores: median {statistics.median(rates):.0f} jobs/s "
            f"(runs: {', '.join(f'{r:.0f}' for r in rates)})"
        )
    q = 1000 if args.quick else 10000
    rss = memory(q)
    print(f"daemon RSS with {q} jobs queued: {rss:.0f} MB")


if __name__ == "__main__":
    main()
