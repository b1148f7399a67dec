#!/usr/bin/env python3
"""How long a large array takes to be taken in, how long the daemon's turns are meanwhile, and how fast
``gstat`` answers meanwhile.

For each size, a daemon (in this process, with the stub executor: nothing is forked; a spool laid out
as a system daemon's, so the published copy is made as a root daemon makes it) takes in one job, then
an array of that many tasks; its loop is run as ``gschedd`` runs it (a turn, the forecast when due) until
the last task is in.  A thread meanwhile runs ``gstat JOB`` (the command, as a whole process) over and
over.  Reported: the time to take the array in, the number of turns, the median and longest turn, and
the median and longest ``gstat`` answer.

    python scripts/bench_array_intake.py [--sizes 10000,100000] [--cores 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridsched.daemon import loop  # noqa: E402
from gridsched.daemon.spawn import Stub  # noqa: E402
from gridsched.protocol import config as configmod  # noqa: E402
from gridsched.protocol import requests as rq  # noqa: E402
from gridsched.protocol.spool import Spool  # noqa: E402

BIN = Path(sys.executable).parent


def job(jid: int, **extra: object) -> dict[str, object]:
    return {
        "id": jid,
        "name": "bench",
        "user": "me",
        "uid": os.getuid(),
        "gid": os.getgid(),
        "ncpus": 1,
        "walltime": 3600,
        "mem": None,
        "checkpoint": "none",
        "hold": False,
        "depend": "",
        "script": "#!/bin/sh\ntrue\n",
        "args": [],
        "workdir": "/tmp",
        "stdout": "/tmp/o-%j-%a",
        "stderr": "/tmp/e-%j-%a",
        "env": {"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        "submit_time": time.time(),
        "submit_dir": "/tmp",
        "umask": 0o022,
        **extra,
    }


def run(size: int, cores: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="gs-bench-array-"))
    cfgfile = root / "gridsched.toml"
    cfgfile.write_text(f'[scheduler]\npolicy = "easy"\n[machine]\ncores = {cores}\n[daemon]\nautostart = false\n')
    spool = Spool(root / "spool")
    spool.ensure()
    spool.private.mkdir(mode=0o700)
    d = loop.Daemon(spool, configmod.load(str(cfgfile)), str(cfgfile), executor=Stub())
    d.lock()
    d.open()
    one = spool.next_id()
    spool.submit(job(one))
    d.turn(time.time(), scan=True)
    first = spool.next_id()
    (spool.incoming / rq.id_name(first)).write_text(
        json.dumps({"type": "submit", "job": job(first, array=f"0-{size - 1}")})
    )
    env = {**os.environ, "GRIDSCHED_SPOOL": str(spool.root), "GRIDSCHED_CONFIG": str(cfgfile)}
    lat: list[float] = []
    done = threading.Event()

    def ask() -> None:
        while not done.is_set():
            t = time.monotonic()
            subprocess.run([str(BIN / "gstat"), str(one)], env=env, capture_output=True, check=False)
            lat.append(time.monotonic() - t)

    th = threading.Thread(target=ask)
    th.start()
    turns: list[float] = []
    t0 = time.monotonic()
    d.turn(time.time(), scan=True)
    while first in d.intakes:
        t = time.monotonic()
        d.turn(time.time())
        if d.table.forecast_dirty and time.time() - d.last_forecast >= loop.FORECAST_EVERY:
            d.forecast()
            d.table.commit()
        turns.append(time.monotonic() - t)
    total = time.monotonic() - t0
    done.set()
    th.join()
    n = d.db.conn.execute("SELECT COUNT(*) FROM jobs WHERE json_extract(spec, '$.array_id') = ?", (first,)).fetchone()
    assert n[0] == size, n
    d.close()
    subprocess.run(["rm", "-rf", str(root)], check=False)
    return {
        "tasks": size,
        "seconds": total,
        "turns": len(turns),
        "turn_median_ms": 1000 * statistics.median(turns),
        "turn_max_ms": 1000 * max(turns),
        "gstat_median_ms": 1000 * statistics.median(lat) if lat else float("nan"),
        "gstat_max_ms": 1000 * max(lat) if lat else float("nan"),
        "gstat_runs": len(lat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--cores", type=int, default=8)
    a = ap.parse_args()
    for size in (int(s) for s in a.sizes.split(",")):
        r = run(size, a.cores)
        print(
            f"{r['tasks']:>7} tasks: {r['seconds']:.1f} s in {r['turns']} turns "
            f"(turn median {r['turn_median_ms']:.0f} ms, longest {r['turn_max_ms']:.0f} ms); "
            f"gstat JOB meanwhile: median {r['gstat_median_ms']:.0f} ms, longest {r['gstat_max_ms']:.0f} ms "
            f"({r['gstat_runs']} runs)",
            flush=True,
        )


if __name__ == "__main__":
    main()
