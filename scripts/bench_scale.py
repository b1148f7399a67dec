#!/usr/bin/env python3
"""Large arrays with a real daemon: taking them in, reading the queue, holding, releasing and cancelling them,
the daemon's memory and the length of its turns, and how soon it stops.

For each size, a fresh local daemon (``gschedd run`` on a temporary spool, a machine of ``--cores`` cores, its
tasks ``sleep 600`` so that the machine stays full) is given one array of that many tasks.  Measured as a user
sees it, each a whole process: ``gsub --array``; the time until the daemon has taken the array in (its first
tasks run); ``gstat`` (the default view) and ``python -c "import click"`` alternately, medians; ``ghold``,
``grls`` and ``gdel`` of the whole array, each until the state db shows it done; the daemon's resident memory
with the array queued; the turns of its loop (its log's timing, ``--debug``); and ``gschedd stop``.

    python scripts/bench_scale.py [--sizes 10000,100000,1000000] [--cores 2] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def until(cond, limit: float, what: str) -> float:
    t = time.perf_counter()
    while not cond():
        if time.perf_counter() - t > limit:
            raise SystemExit(f"{what}: not done after {limit:.0f}s")
        time.sleep(0.005)
    return time.perf_counter() - t


def rest(db: Path, aid: int) -> tuple[str, str, str]:
    try:
        got = query(db, f"SELECT pending, held, cancelled FROM arrays WHERE id = {aid}")
    except sqlite3.Error:
        return ("", "", "")
    return got[0] if got else ("", "", "")


def run(size: int, cores: int, runs: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="gs-bench-scale-"))
    cfg = root / "gridsched.toml"
    cfg.write_text(f'[scheduler]\npolicy = "easy"\n[machine]\ncores = {cores}\n[daemon]\nautostart = false\n')
    env = {**os.environ, "GRIDSCHED_SPOOL": str(root / "spool"), "GRIDSCHED_CONFIG": str(cfg)}
    db = root / "spool" / "state.db"
    proc = subprocess.Popen([BIN / "gschedd", "run"], env=env, start_new_session=True, stderr=subprocess.DEVNULL)
    out: dict[str, float] = {}
    try:
        until(lambda: (root / "spool" / "gschedd.sock").exists(), 30, "daemon start")
        t = time.perf_counter()
        sub = subprocess.run(
            [BIN / "gsub", "--array", f"0-{size - 1}", "-t", "1:00:00", "--wrap", "sleep 600"],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        out["gsub"] = time.perf_counter() - t
        aid = int(sub.stdout.split()[-1])
        running = f"SELECT COUNT(*) FROM jobs WHERE state = 'RUNNING' AND json_extract(spec, '$.array_id') = {aid}"
        out["taken in and started"] = out["gsub"] + until(
            lambda: db.exists() and query(db, running)[0][0] == cores, 120, "intake"
        )
        g, c = [], []
        for _ in range(runs):
            g.append(wall([str(BIN / "gstat")], env))
            c.append(wall([sys.executable, "-c", "import click"], env))
        out["gstat"], out["import click"] = statistics.median(g), statistics.median(c)
        out["daemon RSS MiB"] = rss_mib(proc.pid)
        for cmd, cond in (
            ("ghold", lambda: rest(db, aid)[0] == "" and rest(db, aid)[1] != ""),
            ("grls", lambda: rest(db, aid)[1] == "" and rest(db, aid)[0] != ""),
            ("gdel", lambda: rest(db, aid)[0] == "" and rest(db, aid)[2] != ""),
        ):
            t = time.perf_counter()
            subprocess.run([BIN / cmd, str(aid)], env=env, stdout=subprocess.DEVNULL, check=True)
            out[cmd] = time.perf_counter() - t + until(cond, 120, cmd)
        t = time.perf_counter()
        subprocess.run([BIN / "gschedd", "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc.wait(timeout=60)
        out["gschedd stop"] = time.perf_counter() - t
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        subprocess.run(["pkill", "-f", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    from gridsched.host.facts import describe

    print(f"machine: {describe()}; load average {os.getloadavg()[0]:.2f}")
    for size in (int(s) for s in a.sizes.split(",")):
        got = run(size, a.cores, a.runs)
        parts = [f"{k} {v:.3f}s" if "MiB" not in k else f"{k} {v:.0f}" for k, v in got.items()]
        print(f"{size:>9} tasks: " + "; ".join(parts), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
