#!/usr/bin/env python3
"""What one job's shepherd path costs, without the daemon: a shepherd forked as the starter forks it, for a
job that runs ``true``, over and over.

Each start makes the job's private directory (as the daemon does before a launch), forks the shepherd with
:func:`gridsched.daemon.launch.spawn` from this small process (as the shepherds' starter does), and waits for
it; the shepherd makes and enters the job's cgroups where the host allows (as a daemon here would: the
host's confinement, ``jobs.max_processes`` = 2048), writes its pid and exit files and removes the private
directory.  Printed per job: the wall time from the fork to the shepherd's end (median), and what the
shepherds and the jobs cost (``RUSAGE_CHILDREN``): CPU time in user space and in the kernel, minor page
faults.  ``--no-cgroups`` runs the same without cgroups, for the part they take.

    python scripts/bench_shepherd.py [--jobs 200] [--rounds 3] [--no-cgroups]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gridsched.daemon import confine, jobtmp, launch  # noqa: E402


def one_round(n: int, work: str) -> dict[str, float]:
    script = os.path.join(work, "script")
    walls = []
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for i in range(n):
        private = jobtmp.create(work, 1, os.getuid(), os.getgid(), "host", 1, 1)
        spec = launch.Launch(
            job_id=1,
            segment=i + 1,
            job_dir=work,
            script=script,
            args=(),
            workdir=work,
            stdout="/dev/null",
            stderr="/dev/null",
            append=False,
            env={"PATH": "/usr/bin:/bin", "TMPDIR": private.tmpdir},
            cpus=frozenset({sorted(os.sched_getaffinity(0))[i % len(os.sched_getaffinity(0))]}),
            uid=os.getuid(),
            gid=os.getgid(),
            user="bench",
            private=private.root,
            mpi_path="/usr/bin:/bin",
            max_processes=2048,
        )
        t0 = time.perf_counter()
        pid = launch.spawn(spec)
        os.waitpid(pid, 0)
        walls.append((time.perf_counter() - t0) * 1000)
        if not os.path.exists(launch.exit_file(work, i + 1)):
            sys.exit(f"job {i + 1}: no exit file")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall": statistics.median(walls),
        "user": (r1.ru_utime - r0.ru_utime) * 1000 / n,
        "sys": (r1.ru_stime - r0.ru_stime) * 1000 / n,
        "faults": (r1.ru_minflt - r0.ru_minflt) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200, help="starts per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-cgroups", action="store_true", help="no cgroups for the jobs")
    args = ap.parse_args()
    if args.no_cgroups:
        confine._found = confine.Setup(None, "off", False, None, "off", None, "off")
    s = confine.setup()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; confinement:")
    for line in s.lines(2048):
        print(f"  {line}")
    work = tempfile.mkdtemp(prefix="bench-shepherd-")
    try:
        with open(os.path.join(work, "script"), "w") as f:
            f.write("#!/bin/sh\ntrue\n")
        os.chmod(os.path.join(work, "script"), 0o755)
        rounds = [one_round(args.jobs, work) for _ in range(args.rounds)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    m = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(f"medians of {args.rounds} rounds of {args.jobs} jobs; load average after: {os.getloadavg()[0]:.2f}")
    print(f"  wall from the fork to the shepherd's end: {m['wall']:.1f} ms")
    print(f"  CPU of shepherd and job: {m['user'] + m['sys']:.1f} ms ({m['user']:.1f} user, {m['sys']:.1f} kernel)")
    print(f"  minor page faults: {m['faults']:.0f}")


if __name__ == "__main__":
    main()
