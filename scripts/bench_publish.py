#!/usr/bin/env python3
"""What the published copy of the job table costs a system daemon, and what it changes for ``gstat``.

A system daemon keeps its live job table where no user can open it and publishes a copy
(``state.db``) for the commands (gridsched/daemon/snapshot.py).  This script builds job tables of
the sizes given (each job row with a spec of about 1 KiB, as a script's environment makes it), then:

- publishes the copy R times after one changed row each, and reports the median time of one
  publication (the daemon spaces publications by 4x this, so it spends at most a fifth of its loop
  copying);
- times ``gstat -a`` (the command, as a whole process) R times on each size, alternating between
  reading the published copy (a system spool's layout) and reading the live table in WAL mode (a
  personal spool's layout, what the commands read before), and reports the medians.

    python scripts/bench_publish.py [--jobs 1000,10000] [--runs 7]

No daemon runs: ``gstat`` reads the table as it would while the daemon is down or busy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridsched.daemon import snapshot  # noqa: E402
from gridsched.protocol.spool import Spool  # noqa: E402
from gridsched.protocol.state import StateDB  # noqa: E402


def row(jid: int, now: float) -> dict:
    spec = {
        "id": jid,
        "ncpus": 1,
        "walltime": 600,
        "name": f"job{jid}",
        "args": [],
        "cwd": "/home/user/work",
        "env_keys": [f"VAR_{i}" for i in range(40)],
        "note": "x" * 400,
    }
    return {
        "id": jid,
        "state": "COMPLETED" if jid % 3 else "PENDING",
        "user": "user",
        "uid": 1000,
        "name": f"job{jid}",
        "ncpus": 1,
        "walltime": 600,
        "submit_time": now - 3600,
        "start_time": None,
        "end_time": None,
        "cores": "",
        "exit_code": None,
        "exit_signal": None,
        "reason": "",
        "backfilled": 0,
        "restarts": 0,
        "preemptions": 0,
        "checkpoints": 0,
        "elapsed": 0.0,
        "lost": 0.0,
        "predicted_start": None,
        "segments": [],
        "run": {},
        "spec": spec,
    }


def build(root: Path, njobs: int, system: bool) -> tuple[Spool, StateDB]:
    spool = Spool(root)
    spool.ensure()
    if system:
        spool.private.mkdir(mode=0o700)
    db = StateDB(spool.live_db, write=True)
    now = time.time()
    db.begin()
    for j in range(1, njobs + 1):
        db.put(row(j, now))
    db.set_meta("machine", json.dumps({"ncores": 64}))
    assert db.commit()
    return spool, db


def gstat_once(gstat: str, spool: Spool) -> float:
    env = {**os.environ, "GRIDSCHED_SPOOL": str(spool.root), "GRIDSCHED_CONFIG": os.devnull}
    t0 = time.perf_counter()
    subprocess.run([gstat, "-a"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="1000,10000", help="job table sizes, comma-separated")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    gstat = shutil.which("gstat", path=str(Path(sys.executable).parent)) or "gstat"
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}"
    )
    print(f"# {'jobs':>7} {'table MB':>9} {'publish ms':>11} {'gstat copy ms':>14} {'gstat live ms':>14}")
    for n in (int(x) for x in a.jobs.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            sys_spool, sys_db = build(Path(tmp) / "system", n, True)
            usr_spool, usr_db = build(Path(tmp) / "personal", n, False)
            costs = []
            for k in range(a.runs):
                sys_db.begin()
                sys_db.update(1 + k % n, reason=f"changed {k}")
                assert sys_db.commit()
                t0 = time.perf_counter()
                snapshot.publish(sys_db.conn, sys_spool)
                costs.append(time.perf_counter() - t0)
            copy, live = [], []
            gstat_once(gstat, sys_spool)
            gstat_once(gstat, usr_spool)
            for _ in range(a.runs):
                copy.append(gstat_once(gstat, sys_spool))
                live.append(gstat_once(gstat, usr_spool))
            size = os.path.getsize(sys_spool.live_db) / 1e6
            print(
                f"  {n:>7} {size:>9.1f} {statistics.median(costs) * 1e3:>11.1f} "
                f"{statistics.median(copy) * 1e3:>14.0f} {statistics.median(live) * 1e3:>14.0f}"
            )
            sys_db.close()
            usr_db.close()


if __name__ == "__main__":
    main()
