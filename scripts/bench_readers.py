#!/usr/bin/env python3
"""How fast ``gstat`` and ``gacct`` answer, and how much memory they take, with a large job table.

For each scenario and size, a spool is laid out as a personal daemon's (``state.db`` and
``gridsched.toml`` in a temporary directory, found by the commands through ``GRIDSCHED_SPOOL`` and
``GRIDSCHED_CONFIG``) and its job table is written directly, row by row, through
:class:`gridsched.protocol.state.StateDB` as the daemon writes it (a spec as the daemon stores it,
run segments, usage).  Scenarios:

- ``finished``: SIZE finished jobs (completed, failed, cancelled), which ended over the last 30 days,
  and a short live queue (4 running, 16 pending);
- ``pending``: SIZE pending single jobs (and 4 running);
- ``array``: the ``finished`` table and an array of ``--tasks`` pending tasks (10^6 by default) as the daemon
  keeps one: its first task made (a job row), the others one record of the ``arrays`` table.

Then each command runs as a whole process, the commands alternated, RUNS times each (after one run
each, not timed): ``python -c "import click"`` (the floor of any click command), ``gstat``,
``gstat --json``, ``gstat -t``, ``gacct`` (with no option: every finished job) and ``gacct -S -1d``
(the jobs that ended in the last day), their output thrown away.  Reported per command: the median
wall time and the median CPU time (user and system: less disturbed by other load on the machine),
each with its ratio to ``import click``, and the peak resident memory of the process (the largest of
its runs).

``--against DIR`` runs the same commands of another source tree too (such as a checkout of the
previous release: ``git archive`` it into a folder), alternated with these in the same run.

    python scripts/bench_readers.py [--sizes 10000,100000] [--scenarios finished,pending] [-n 7]
        [--against OTHER_TREE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from gridsched.protocol.jobspec import JobSpec  # noqa: E402
from gridsched.protocol.state import StateDB  # noqa: E402

COMMANDS = ("gstat", "gstat --json", "gstat -t", "gacct", "gacct -S -1d")
FINISHED = ("COMPLETED", "COMPLETED", "COMPLETED", "FAILED", "CANCELLED")
MONTH = 30 * 86400.0


def spec(jid: int, now: float, **more: Any) -> dict[str, Any]:
    """The public part of a job's spec as the daemon stores it (``more``: other keys of the spec)."""
    job = JobSpec.from_spec(
        {
            "id": jid,
            "name": f"bench-{jid % 97}",
            "user": "me",
            "uid": os.getuid(),
            "gid": os.getgid(),
            "ncpus": 1 + jid % 4,
            "walltime": 3600,
            "mem": 1 << 30,
            "checkpoint": "none",
            "hold": False,
            "depend": "",
            "script": "#!/bin/sh\ntrue\n",
            "args": ["--input", f"data/{jid}.csv"],
            "workdir": "/home/me/work",
            "stdout": "/home/me/work/o-%j",
            "stderr": "/home/me/work/e-%j",
            "env": {"PATH": "/usr/bin:/bin", "HOME": "/home/me"},
            "submit_time": now,
            "submit_dir": "/home/me/work",
            "umask": 0o022,
            **more,
        }
    )
    return job.stored()[0]


def put_array(db: StateDB, aid: int, tasks: int, now: float) -> None:
    """An array of ``tasks`` pending tasks, id ``aid``, as the daemon takes one in (gridsched.daemon.arrays): its
    first task a job row, the others one record of the arrays table."""
    first = row(aid, "PENDING", now, 60)
    task = spec(aid, now - 660, array_id=aid, array_index=0, array_range=f"0-{tasks - 1}")
    first.update(spec=task, name=task["name"], ncpus=task["ncpus"])
    db.put(first)
    rest = {"id": aid, "user": "me", "uid": os.getuid(), "name": task["name"], "ncpus": task["ncpus"]}
    rest.update(walltime=task["walltime"], submit_time=now - 660, total=tasks, pending=f"1-{tasks - 1}")
    rest.update(held="", cancelled="", reason="waiting for cores (Resources)", spec=task)
    db.put_array(rest)


def row(jid: int, state: str, now: float, age: float = 3600.0) -> dict[str, Any]:
    """A job row as the daemon writes it: pending, running (one open segment) or finished (one segment), started
    ``age`` seconds ago."""
    sp = spec(jid, now - age - 600)
    r: dict[str, Any] = {
        "id": jid,
        "state": state,
        "user": "me",
        "uid": os.getuid(),
        "name": sp["name"],
        "ncpus": sp["ncpus"],
        "walltime": sp["walltime"],
        "submit_time": now - age - 600,
        "start_time": None,
        "end_time": None,
        "cores": "",
        "exit_code": None,
        "exit_signal": None,
        "reason": "waiting for cores (Resources)" if state == "PENDING" else "",
        "backfilled": 0,
        "restarts": 0,
        "preemptions": 0,
        "checkpoints": 0,
        "elapsed": 0.0,
        "lost": 0.0,
        "predicted_start": now + 600 if state == "PENDING" else None,
        "segments": [],
        "run": {},
        "spec": sp,
    }
    if state != "PENDING":
        start = now - age
        r.update(start_time=start, cores="0-1", run={"pid": 4242, "pgid": 4242, "boards": "0"})
        seg: dict[str, Any] = {"start": start, "cores": "0-1", "boards": "0"}
        if state != "RUNNING":
            end = start + 60
            seg.update(
                end=end, outcome=f"exit {0 if state == 'COMPLETED' else 1}", usage={"max_rss": 1 << 20, "cpu_user": 1.5}
            )
            r.update(end_time=end, exit_code=0 if state == "COMPLETED" else 1, elapsed=60.0)
            r.update(max_rss=1 << 20, cpu_user=1.5, cpu_sys=0.1)
        r["segments"] = [seg]
    return r


def build(root: Path, scenario: str, size: int, tasks: int = 0) -> dict[str, str]:
    """A spool of ``scenario`` with ``size`` jobs under ``root``; the environment that points the commands at it."""
    root.mkdir(parents=True)
    cfg = root / "gridsched.toml"
    cfg.write_text('[scheduler]\npolicy = "easy"\n[machine]\ncores = 8\n[daemon]\nautostart = false\n')
    for d in ("incoming", "quarantine", "jobs"):
        (root / d).mkdir()
    now = time.time()
    states = []
    if scenario in ("finished", "array"):
        states = [FINISHED[i % len(FINISHED)] for i in range(size)] + ["RUNNING"] * 4 + ["PENDING"] * 16
    else:
        states = ["RUNNING"] * 4 + ["PENDING"] * size
    db = StateDB(root / "state.db", write=True)
    for lo in range(0, len(states), 10000):
        db.begin()
        for i, st in enumerate(states[lo : lo + 10000], start=lo + 1):
            # the finished jobs ended over the last 30 days, in id order
            db.put(row(i, st, now, MONTH * (1 - i / len(states)) + 120 if st in FINISHED else 60))
        db.commit()
    if scenario == "array":
        db.begin()
        put_array(db, len(states) + 1, tasks, now)
        db.commit()
    db.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDSCHED_")}
    env.update(GRIDSCHED_SPOOL=str(root), GRIDSCHED_CONFIG=str(cfg))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# Each process reports its own peak resident memory as it exits (the kernel's high-water mark of its
# memory, VmHWM; the ru_maxrss a parent is told also counts the parent's memory at the fork).
HWM = (
    "import atexit, os; atexit.register(lambda: os.write(2, ('\\nVmHWM ' + "
    "[x for x in open('/proc/self/status') if x.startswith('VmHWM')][0].split()[1]).encode())); "
)


def argv(tree: Path, name: str) -> list[str]:
    """The command ``name`` (``gstat --json``, ...) of the source tree ``tree``, as its console script runs it."""
    prog, *args = name.split()
    code = (
        f"{HWM}import sys; sys.path.insert(0, {str(tree)!r}); from gridsched.cli.{prog} import main; "
        f"sys.argv[0] = {prog!r}; sys.exit(main())"
    )
    return [sys.executable, "-c", code, *args]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user and system) and peak RSS (KiB) of one run of ``cmd``; a failed run
    stops the benchmark."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read().decode()
    p.stderr.close()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0 or "VmHWM " not in err:
        raise SystemExit(f"{cmd[-1]}: exit {p.returncode}: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, int(err.rsplit("VmHWM ", 1)[1].split()[0])


def bench(
    env: dict[str, str], trees: dict[str, Path], runs: int, commands: list[str]
) -> dict[str, tuple[float, float, int]]:
    """Per command: the median wall and CPU seconds and the largest peak RSS (KiB) of ``runs`` runs."""
    cmds: dict[str, list[str]] = {"import click": [sys.executable, "-c", HWM + "import click"]}
    for label, tree in trees.items():
        for name in commands:
            cmds[f"{name}{label}"] = argv(tree, name)
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    cpus: dict[str, list[float]] = {k: [] for k in cmds}
    rss: dict[str, int] = dict.fromkeys(cmds, 0)
    for c in cmds.values():  # one run each first: .pyc files written, the db in the page cache
        timed(c, env)
    for _ in range(runs):
        for k, c in cmds.items():
            w, cpu, m = timed(c, env)
            walls[k].append(w)
            cpus[k].append(cpu)
            rss[k] = max(rss[k], m)
    return {k: (statistics.median(walls[k]), statistics.median(cpus[k]), rss[k]) for k in cmds}


def instructions(env: dict[str, str], trees: dict[str, Path], commands: list[str]) -> dict[str, int]:
    """The instructions one run of each command executes in user space, as valgrind's callgrind counts them
    (a measure that other load on the machine does not change)."""
    cmds: dict[str, list[str]] = {"import click": [sys.executable, "-c", HWM + "import click"]}
    for label, tree in trees.items():
        for name in commands:
            cmds[f"{name}{label}"] = argv(tree, name)
    out = {}
    for k, c in cmds.items():
        vg = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *c]
        r = subprocess.run(vg, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        refs = [line.split("refs:")[1] for line in r.stderr.splitlines() if "I   refs:" in line]
        if r.returncode != 0 or not refs:
            raise SystemExit(f"valgrind {k} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        out[k] = int(refs[0].replace(",", ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--scenarios", default="finished,pending")
    ap.add_argument("-n", "--runs", type=int, default=7)
    ap.add_argument("--against", type=Path, help="another source tree whose commands run alternately with these")
    ap.add_argument("--tasks", type=int, default=1_000_000, help="pending tasks of the array scenario's array")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="the commands to time (default: all)")
    ap.add_argument(
        "--instructions", action="store_true", help="also count the instructions of one run of each (valgrind)"
    )
    a = ap.parse_args()
    trees = {"": HERE}
    if a.against is not None:
        trees[" (other)"] = a.against.resolve()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; {a.runs} runs")
    for scenario in a.scenarios.split(","):
        for size in (int(s) for s in a.sizes.split(",")):
            top = Path(tempfile.mkdtemp(prefix="gs-bench-readers-"))
            try:
                t0 = time.perf_counter()
                env = build(top / "spool", scenario, size, a.tasks)
                made = time.perf_counter() - t0
                mib = (top / "spool" / "state.db").stat().st_size / (1 << 20)
                res = bench(env, trees, a.runs, a.commands.split(","))
                what = f"{scenario} {size}" + (
                    f" and an array of {a.tasks} pending tasks" if scenario == "array" else ""
                )
                print(f"\n{what}: db {mib:.0f} MiB (built in {made:.1f} s), load {os.getloadavg()[0]:.2f}")
                base, base_cpu, _ = res["import click"]
                print(f"  {'':<24} {'wall':>8}  {'x click':>7}  {'cpu':>8}  {'x click':>7}  {'peak RSS':>9}")
                for k, (wall, cpu, rss) in res.items():
                    print(
                        f"  {k:<24} {wall * 1000:5.0f} ms  {wall / base:6.2f}x  {cpu * 1000:5.0f} ms  "
                        f"{cpu / base_cpu:6.2f}x  {rss / 1024:5.1f} MiB"
                    )
                if a.instructions:
                    counts = instructions(env, trees, a.commands.split(","))
                    print("  instructions (valgrind, one run each):")
                    for k, n in counts.items():
                        print(f"  {k:<24} {n / 1e6:8.1f} M  {n / counts['import click']:6.2f}x")
            finally:
                shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
