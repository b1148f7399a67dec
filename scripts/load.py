#!/usr/bin/env python3
"""Load: many submissions from concurrent submitters while jobs run.

``--submitters`` processes (default 10) submit ``--jobs`` jobs in all
(default 10,000) through the spool API gsub uses (``build_spec`` and
``Spool.submit``: a job id under the spool's lock, an atomic request file, a
wake-up), as fast as they can, while the daemon takes them in and runs them
(each job runs ``true`` on one core of a declared ``--cores`` machine).
Meanwhile ``gstat`` and ``gstat --json`` are run in turn, about once a second,
and timed, and the daemon's resident memory is sampled.  At the end every job id handed out must be in the job
table and COMPLETED, each id exactly once.

Prints: submission rate, time until every job was taken in and until every
job had ended, gstat latency (median and max over the samples), daemon RSS
(start, max, end), and lost / duplicated counts; exits 1 if a job was lost.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent

CONFIG = """
[scheduler]
policy = "easy"
[machine]
cores = {cores}
[daemon]
autostart = false
"""


def submitter(spool_dir: str, cfg_path: str, work: str, n: int, out: mp.Queue[list[int]]) -> None:
    from gridsched.protocol import config as configmod
    from gridsched.protocol.spool import Spool
    from gridsched.submission.submit import Options, Script, build_spec

    cfg = configmod.load(cfg_path)
    spool = Spool(spool_dir)
    script = Script("#!/bin/sh\ntrue\n", "load", "load")
    opts = Options(ncpus=1, walltime=60, output="/dev/null", error="/dev/null")
    env = {"PATH": "/usr/bin:/bin"}
    ids = []
    for _ in range(n):
        spec = build_spec(spool, cfg, script, opts, env=env, cwd=Path(work))
        spool.submit(spec)
        ids.append(spec["id"])
    out.put(ids)


def counts(db: Path) -> dict[str, int]:
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return dict(con.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
    except sqlite3.Error:
        return {}
    finally:
        con.close()


def machine() -> str:
    from gridsched.host.facts import describe

    return describe()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--submitters", type=int, default=10)
    ap.add_argument("--cores", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    import psutil

    root = Path(tempfile.mkdtemp(prefix="gs-load-"))
    spool_dir = root / "spool"
    cfg_path = root / "gridsched.toml"
    cfg_path.write_text(CONFIG.format(cores=a.cores))
    env = {**os.environ, "GRIDSCHED_SPOOL": str(spool_dir), "GRIDSCHED_CONFIG": str(cfg_path)}
    log = open(root / "daemon.out", "wb")
    daemon = subprocess.Popen(
        [str(BIN / "gschedd"), "run"], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 30
    while not (spool_dir / "gschedd.sock").exists():
        if time.monotonic() > deadline or daemon.poll() is not None:
            raise SystemExit("load: the daemon did not start")
        time.sleep(0.02)
    dproc = psutil.Process(daemon.pid)
    rss = [dproc.memory_info().rss]
    latencies: list[float] = []  # gstat, the table people read
    json_latencies: list[float] = []  # gstat --json, the same data for programs
    failures = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal failures
        while not stop.is_set():
            t = time.monotonic()
            for args, into in (([], latencies), (["--json"], json_latencies)):
                t1 = time.monotonic()
                r = subprocess.run(
                    [str(BIN / "gstat"), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
                into.append(time.monotonic() - t1)
                if r.returncode != 0:
                    failures += 1
            try:
                rss.append(dproc.memory_info().rss)
            except psutil.Error:
                pass
            stop.wait(max(0.0, 1.0 - (time.monotonic() - t)))

    sampler = threading.Thread(target=sample, daemon=True)
    t0 = time.monotonic()
    sampler.start()
    q: mp.Queue[list[int]] = mp.Queue()
    per = [a.jobs // a.submitters + (1 if i < a.jobs % a.submitters else 0) for i in range(a.submitters)]
    procs = [mp.Process(target=submitter, args=(str(spool_dir), str(cfg_path), str(root), n, q)) for n in per]
    for p in procs:
        p.start()
    ids: list[int] = []
    for _ in procs:
        ids += q.get(timeout=a.timeout)
    for p in procs:
        p.join()
    t_submitted = time.monotonic() - t0
    t_taken = t_done = None
    timed_out = False
    while True:
        c = counts(spool_dir / "state.db")
        total = sum(c.values())
        if t_taken is None and total >= len(ids):
            t_taken = time.monotonic() - t0
        if c.get("COMPLETED", 0) + c.get("FAILED", 0) >= len(ids):
            t_done = time.monotonic() - t0
            break
        if time.monotonic() - t0 > a.timeout:
            timed_out = True
            break
        time.sleep(0.2)
    stop.set()
    sampler.join(30)
    try:
        rss.append(dproc.memory_info().rss)
    except psutil.Error:
        pass
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(30)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    log.close()

    con = sqlite3.connect(f"file:{spool_dir / 'state.db'}?mode=ro", uri=True)
    rows = dict(con.execute("SELECT id, state FROM jobs").fetchall())
    con.close()
    lost = [i for i in ids if rows.get(i) != "COMPLETED"]
    duplicated = len(ids) - len(set(ids))
    res = {
        "machine": machine(),
        "jobs": len(ids),
        "submitters": a.submitters,
        "cores": a.cores,
        "submit_seconds": round(t_submitted, 1),
        "submits_per_second": round(len(ids) / t_submitted, 1),
        "all_taken_in_seconds": round(t_taken, 1) if t_taken else None,
        "all_done_seconds": round(t_done, 1) if t_done else None,
        "gstat_samples": len(latencies),
        "gstat_median_seconds": round(statistics.median(latencies), 3) if latencies else None,
        "gstat_max_seconds": round(max(latencies), 3) if latencies else None,
        "gstat_json_median_seconds": round(statistics.median(json_latencies), 3) if json_latencies else None,
        "gstat_json_max_seconds": round(max(json_latencies), 3) if json_latencies else None,
        "gstat_failures": failures,
        "daemon_rss_mib": {
            "start": round(rss[0] / 2**20, 1),
            "max": round(max(rss) / 2**20, 1),
            "end": round(rss[-1] / 2**20, 1),
        },
        "ids_contiguous": sorted(ids) == list(range(1, len(ids) + 1)),
        "lost": len(lost),
        "duplicated": duplicated,
        "timed_out": timed_out,
        "quarantined": len(list((spool_dir / "quarantine").glob("*.why"))),
    }
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")
    bad = lost or duplicated or timed_out or not res["ids_contiguous"]
    if bad:
        print(f"load: kept {root}", file=sys.stderr)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
