#!/usr/bin/env python3
"""What the in-job commands and BASH_ENV cost a job.

1. The private directory made at each start (``jobtmp.create`` then ``jobtmp.remove``, as the daemon
   and the shepherd do): with today's ``bin/`` (srun, mpirun, mpiexec and the seven in-job commands, and
   ``bash_env``) and with the three launchers alone, made alternately in the same run.
2. Starting bash to run a one-line script, with the job's ``BASH_ENV`` and without it, alternately.
3. One in-job command, ``scontrol show hostnames``, run as a job runs it (the daemon's Python, ``-I``).

Each figure is the median of ``--rounds`` rounds of ``--n`` runs (per run, in milliseconds).

    python scripts/bench_injob.py [--rounds 5] [--n 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridsched.daemon import jobtmp  # noqa: E402


def per_run(fn: Callable[[], None], n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1000


def private_dir(base: str, names: tuple[str, ...]) -> Callable[[], None]:
    def once() -> None:
        saved = jobtmp.BIN_NAMES
        jobtmp.BIN_NAMES = names
        try:
            p = jobtmp.create(base, 1, os.getuid(), os.getgid(), "node1", 4, 4)
        finally:
            jobtmp.BIN_NAMES = saved
        jobtmp.remove(p.root, os.getuid())

    return once


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="bench-injob.")
    now = jobtmp.BIN_NAMES
    launchers = tuple(f"bin/{n}" for n in ("srun", *jobtmp.MPI_NAMES))
    p = jobtmp.create(base, 2, os.getuid(), os.getgid(), "node1", 4, 4)
    script = Path(base) / "one.sh"
    script.write_text("true\n")
    plain = {k: v for k, v in os.environ.items() if k != "BASH_ENV"}
    with_env = {**plain, "BASH_ENV": p.bash_env, "PATH": f"{p.bin}:{plain.get('PATH', '')}"}
    cmd = [f"{p.bin}/scontrol", "show", "hostnames", "node[1-2]"]
    peers: dict[str, list[float]] = {k: [] for k in ("dir_now", "dir_launchers", "bash_env", "bash_plain", "cmd")}
    for _ in range(a.rounds):
        peers["dir_now"].append(per_run(private_dir(base, now), a.n))
        peers["dir_launchers"].append(per_run(private_dir(base, launchers), a.n))
        peers["bash_env"].append(per_run(lambda: subprocess.run(["bash", str(script)], env=with_env, check=True), a.n))
        peers["bash_plain"].append(per_run(lambda: subprocess.run(["bash", str(script)], env=plain, check=True), a.n))
        peers["cmd"].append(per_run(lambda: subprocess.run(cmd, check=True, capture_output=True), max(1, a.n // 10)))
    jobtmp.remove(p.root, os.getuid())
    script.unlink()
    os.rmdir(base)
    print(f"load average: {os.getloadavg()[0]:.2f}; rounds {a.rounds}, {a.n} runs each (ms per run, median)")
    for k, v in peers.items():
        print(f"{k}: {statistics.median(v):.3f} ms  (rounds: {', '.join(f'{x:.3f}' for x in v)})")


if __name__ == "__main__":
    main()
