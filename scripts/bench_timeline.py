#!/usr/bin/env python3
"""Where a slot's time goes in a drain: the marks each part of the per-job path writes with ``GRIDSCHED_TRACE``.

Runs one gridsched installation (the ``bin`` directory of its virtual environment; default the one beside
this interpreter) as ``scripts/bench_peers.py`` does, with ``GRIDSCHED_TRACE`` naming a file: the daemon,
the shepherds' starter and each shepherd append one line a mark (``MONOTONIC WHAT JOB PID``,
:func:`gridsched.daemon.launch.mark`).  Drains ``--drain`` ``true`` jobs through 2 slots and prints, for
the jobs in the middle of the drain, the median and 90th percentile of each step of a job's life, from the
start sent to the starter to the end recorded by the daemon, and the wait from one job's end recorded to
the next start sent.

With ``--dispatch N``: N idle dispatches one after another instead, each from its request published in
``incoming/`` (seen with inotify, as ``scripts/bench_peers.py`` does) to the job's first instruction (the
job writes the clock's time): the median time of each mark after the publication.

With ``--gpus N`` (as root) the machine declares N GPUs on its 2 cores, as a GPU machine does, that the jobs
do not hold: each job is then refused their nodes by a device cgroup of its own.

    python scripts/bench_timeline.py [--drain 200] [--dispatch N] [--gpus N] [--gridsched BINDIR] [--keep FILE]
"""

from __future__ import annotations

import argparse
import bisect
import os
import stat
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_peers  # noqa: E402

ORDER = (
    "d_spawn_send",
    "st_recv",
    "st_cg_made",
    "sh_first",
    "sh_session",
    "sh_closed",
    "st_forked",
    "d_spawn_reply",
    "sh_armed",
    "sh_cg_made",
    "sh_cg_joined",
    "sh_pinned",
    "sh_go",
    "sh_pidfile",
    "sh_opened",
    "sh_mpi",
    "sh_spawned",
    "sh_left",
    "sh_pidfile2",
    "sh_job_exited",
    "sh_reaped",
    "sh_cg_removed",
    "sh_exit_written",
    "sh_told",
    "d_end_seen",
    "d_end_recorded",
    "sh_private_removed",
)


def summary(path: Path) -> list[str]:
    marks: dict[int, dict[str, float]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        t, what, job, _pid = line.split()
        if int(job):
            marks[int(job)].setdefault(what, float(t))
    jobs = sorted(marks)[3:-3]  # the slots' first and last jobs wait on the drain's start and end
    out = []
    for a, b in zip(ORDER, ORDER[1:]):
        ds = sorted((marks[j][b] - marks[j][a]) * 1000 for j in jobs if a in marks[j] and b in marks[j])
        if ds:
            out.append(f"{a:>20} -> {b:<20} {statistics.median(ds):7.2f} ms  p90 {ds[int(len(ds) * 0.9)]:7.2f}")
    ends = [marks[j]["d_end_recorded"] for j in jobs if "d_end_recorded" in marks[j]]
    sends = sorted(m["d_spawn_send"] for m in marks.values() if "d_spawn_send" in m)
    gaps = sorted((sends[i] - t) * 1000 for t in ends if (i := bisect.bisect_left(sends, t)) < len(sends))
    held = sorted(
        (marks[j]["d_end_recorded"] - marks[j]["d_spawn_send"]) * 1000
        for j in jobs
        if "d_end_recorded" in marks[j] and "d_spawn_send" in marks[j]
    )
    if gaps:
        out.append(f"{'an end recorded':>20} -> {'the next start sent':<20} {statistics.median(gaps):7.2f} ms")
    if held:
        out.append(f"{'start sent':>20} -> {'end recorded':<20} {statistics.median(held):7.2f} ms (the slot held)")
    return out


def dispatches(peer: bench_peers.Gridsched, trace: Path, n: int) -> list[str]:
    """``n`` idle dispatches: for each mark, the median of its time since the request's publication over the
    dispatches (milliseconds; its first occurrence in each), in the order of those medians, ending with the job's
    first instruction."""
    since: dict[str, list[float]] = defaultdict(list)
    for i in range(n):
        trace.write_text("")
        offset = time.time() - time.monotonic()  # the job and inotify tell the wall clock's time, marks monotonic
        bench_peers.dispatch(peer, i)
        ran = float((peer.dir / f"mark-{i}").read_text()) - offset
        published = max(peer.published.times.values()) - offset
        seen: set[str] = set()
        for line in trace.read_text().splitlines():
            t, what, _job, _pid = line.split()
            if what not in seen and published - 0.005 <= float(t) <= ran + 0.05:
                seen.add(what)
                since[what].append((float(t) - published) * 1000)
        since["job_first_instruction"].append((ran - published) * 1000)
    rows = sorted((statistics.median(v), k, len(v)) for k, v in since.items())
    return [f"{k:>24} {m:7.2f} ms after the publication ({c} of {n})" for m, k, c in rows]


def with_gpus(peer: bench_peers.Gridsched, n: int) -> None:
    """Give ``peer``'s machine ``n`` GPUs on its 2 cores, whose nodes are char devices 195:0.. made in its
    directory (no driver behind them): each job, holding none, gets a device cgroup refusing them all."""
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))[:2]))
    topo = peer.dir / "topology.toml"
    text = f'[[board]]\ncores = "0-1"\nhost_cpus = "{cpus}"\n'
    for i in range(n):
        node = peer.dir / f"nvidia{i}"
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(195, i))
        text += f'[[device]]\ntype = "gpu"\nindex = {i}\nboard = 0\npath = "{node}"\n'
    topo.write_text(text)
    cfg = peer.dir / "gridsched.toml"
    cfg.write_text(cfg.read_text().replace("[machine]\ncores = 2\n", f'[machine]\ntopology = "{topo}"\n'))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drain", type=int, default=200)
    ap.add_argument("--dispatch", type=int, default=0, help="N idle dispatches instead of a drain")
    ap.add_argument("--gridsched", default=str(Path(sys.executable).parent), help="bin directory of an installation")
    ap.add_argument("--keep", default="", help="keep the marks in this file")
    ap.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="declare N GPUs (char nodes 195:N made here: root) that the jobs do not hold",
    )
    args = ap.parse_args()
    trace = Path(args.keep) if args.keep else Path(tempfile.mkstemp(prefix="gridsched-trace-")[1])
    trace.unlink(missing_ok=True)
    os.environ["GRIDSCHED_TRACE"] = str(trace)
    peer = bench_peers.Gridsched(2, "gridsched", Path(args.gridsched))
    if args.gpus:
        with_gpus(peer, args.gpus)
    peer.start()
    try:
        if args.dispatch:
            lines = dispatches(peer, trace, args.dispatch)
            print(f"{args.dispatch} idle dispatches; load average {bench_peers.load()}")
            print("\n".join(lines))
            return
        rate, _cpu = bench_peers.drain(peer, args.drain)
    finally:
        peer.close()
        if args.dispatch and not args.keep:
            trace.unlink(missing_ok=True)  # after the daemon's stop: the shepherds' last marks are written
    print(f"drain of {args.drain} `true`, 2 slots: {rate:.1f} jobs/s; load average {bench_peers.load()}")
    if not trace.exists():
        sys.exit("no marks: this installation writes none (GRIDSCHED_TRACE)")
    print("\n".join(summary(trace)))
    if not args.keep:
        trace.unlink()


if __name__ == "__main__":
    main()
