#!/usr/bin/env python3
"""What this host allows a Python supervisor of jobs: the CPU and rate of starting and reaping `true` jobs.

No daemon, spool or job table: only the process and cgroup work of a job's start and end, made with
gridsched's own functions (`daemon/confine.py` for the job's cgroups, `daemon/birth.py` for a process
born in its cgroup v2), to tell how far the per-job path is from what its design can reach.  Each way
runs ``-n`` jobs with ``--slots`` of them at once (default 2, as the drain of `scripts/bench_peers.py`),
the ways alternating, ``--rounds`` times; printed: the median jobs per second and the median CPU per job
(this process and its children, user + system).

* ``bare``: ``posix_spawn`` of ``/bin/true`` and its reaping: the floor of a job.
* ``cgroups``: the same, with cgroups of its own made before and removed after (the job is not put
  in them: the cost of making and removing them).
* ``shepherd``: a forked copy of this process per job (as gridsched's shepherd) that spawns the job,
  waits for it and writes an exit file; this process reaps the shepherd and removes the cgroups.
* ``born``: ``cgroups`` with each job born in its cgroup v2 (``clone3``), then ``exec`` of ``/bin/true``,
  and an exit file written here on its end: one supervisor for every job, no shepherd.

Run as root (the cgroups); where no cgroup can be made the cgroup ways say so and are left out.

    python scripts/bench_spawn_floor.py [-n 300] [--slots 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gridsched.daemon import birth, confine  # noqa: E402
from gridsched.protocol.spool import atomic_write  # noqa: E402

TRUE = "/bin/true"


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class Way:
    """Start job ``k`` (its pid: what to reap) and finish it once reaped."""

    def __init__(self, work: Path, cores: frozenset[int]) -> None:
        self.work = work
        self.cores = cores
        self.setup = confine.setup()
        self.made: dict[int, list[Path]] = {}

    def cgroups(self, k: int) -> tuple[list[Path], Path | None]:
        paths, _ = confine.create(self.setup, f"gridsched-floor-{os.getpid()}-{k}", self.cores, 0)
        v2 = {p.base for p in (self.setup.track, self.setup.pids, self.setup.cpuset) if p and p.version == 2}
        return paths, next((p for p in paths if p.parent in v2), None)

    def remove(self, k: int) -> None:
        from gridsched.daemon import cgroup

        for p in self.made.pop(k, []):
            cgroup.remove(p, timeout=0.5)

    def start(self, k: int) -> int:
        raise NotImplementedError

    def end(self, k: int, status: int) -> None:
        self.remove(k)


class Bare(Way):
    def start(self, k: int) -> int:
        return os.posix_spawn(TRUE, [TRUE], {})


class Cgroups(Way):
    def start(self, k: int) -> int:
        self.made[k] = self.cgroups(k)[0]  # (made and removed around the job, which is not put in them)
        return os.posix_spawn(TRUE, [TRUE], {})


class Shepherd(Way):
    def start(self, k: int) -> int:
        paths, _ = self.cgroups(k)
        self.made[k] = paths
        pid = os.fork()
        if pid == 0:  # the shepherd: spawn, wait, write the exit file
            code = 70
            try:
                job = os.posix_spawn(TRUE, [TRUE], {})
                _, status = os.waitpid(job, 0)
                atomic_write(self.work / f"{k}.exit", json.dumps({"status": status}).encode(), fsync=False)
                code = 0
            finally:
                os._exit(code)
        return pid


class Born(Way):
    def start(self, k: int) -> int:
        paths, v2 = self.cgroups(k)
        self.made[k] = paths
        pid = birth.fork_into(v2) if v2 is not None else -1
        if pid < 0:
            pid = os.fork()
        if pid == 0:
            try:
                os.execv(TRUE, [TRUE])
            finally:
                os._exit(127)
        return pid

    def end(self, k: int, status: int) -> None:
        atomic_write(self.work / f"{k}.exit", json.dumps({"status": status}).encode(), fsync=False)
        self.remove(k)


def run(make: Callable[[Path], Way], n: int, slots: int) -> tuple[float, float]:
    """Jobs per second and CPU ms per job of ``n`` jobs, ``slots`` at once."""
    with tempfile.TemporaryDirectory(prefix="gs-floor-") as d:
        way = make(Path(d))
        running: dict[int, int] = {}
        c0, t0 = cpu(), time.perf_counter()
        k = 0
        while k < n or running:
            while k < n and len(running) < slots:
                running[way.start(k)] = k
                k += 1
            pid, status = os.waitpid(-1, 0)
            if pid in running:
                way.end(running.pop(pid), status)
        dt, dc = time.perf_counter() - t0, cpu() - c0
    return n / dt, dc / n * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=300, help="jobs per way and round")
    ap.add_argument("--slots", type=int, default=2, help="jobs at once")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the ways alternating")
    opts = ap.parse_args()
    cores = frozenset(range(os.cpu_count() or 1))

    def works(cls: type[Way]) -> bool:
        if cls is Bare:
            return True
        w = cls(Path(tempfile.gettempdir()), cores)
        try:
            paths, _ = w.cgroups(-1)
        except OSError as e:
            print(f"{cls.__name__.lower()}: left out, no cgroup can be made here ({e})")
            return False
        w.made[-1] = paths
        w.remove(-1)
        if not paths:
            print(f"{cls.__name__.lower()}: left out, no cgroup can be made here")
        return bool(paths)

    ways = [cls for cls in (Bare, Cgroups, Shepherd, Born) if works(cls)]
    got: dict[str, list[tuple[float, float]]] = {c.__name__.lower(): [] for c in ways}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(opts.rounds):
        for cls in ways:
            got[cls.__name__.lower()].append(run(lambda d, c=cls: c(d, cores), opts.n, opts.slots))
    print(
        f"{opts.n} `true` jobs, {opts.slots} at once, medians of {opts.rounds} rounds, alternating; "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC"
    )
    print(f"{'way':10} {'jobs/s':>8} {'CPU ms/job':>11}")
    for name, runs in got.items():
        print(f"{name:10} {statistics.median(r[0] for r in runs):8.0f} {statistics.median(r[1] for r in runs):11.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
