"""Running the sub-tasks of a splittable job, inside the job (``python -m gridsched.subtasks [ARGS]``).

The daemon starts a splittable job, or a piece of one, with a stub script
that runs this module (see :mod:`gridsched.daemon.split`).  It reads the job's
row from the state db (``GS_SPOOL``, ``GS_JOBID``) and runs each sub-task as
a run of the user's script (``task-script`` in the job's directory) with
``ARGS``, on ``C`` of the job's cores (``GS_CORES``; pinned to the matching
host CPUs), with ``GS_TASK_ID`` (its index), ``GS_TASK_COUNT``,
``GS_NCPUS`` = ``OMP_NUM_THREADS`` = ``C`` and ``GS_CORES`` for its cores.

* A piece runs the chains the scheduler chose: chain ``i`` on the ``i``-th
  ``C`` cores, its sub-tasks one after the other.
* The whole job runs the sub-tasks it has left on ``GS_NCPUS / C`` slots:
  whenever a slot is free the next sub-task starts on it.

Output goes to the job's own files.  The exit status is 0 if every sub-task
exited with 0, else 1 (each failure is named on standard error).  Walltime,
cancel and preemption signals reach the sub-tasks through the job's process
group.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import deque
from pathlib import Path

from .core import cpuset


def _slots(cores: list[int], host: list[int], c: int, k: int) -> list[tuple[list[int], set[int]]]:
    """``k`` slots of ``c`` cores each, with the host CPUs to pin them to."""
    out = []
    for i in range(k):
        mine = cores[i * c : (i + 1) * c]
        cpus = set(host[i * c : (i + 1) * c]) if len(host) == len(cores) else set(host)
        out.append((mine, cpus or set(host)))
    return out


def main(argv: list[str]) -> int:
    from .state import StateDB

    spool = Path(os.environ["GS_SPOOL"])
    jid = int(os.environ["GS_JOBID"])
    db = StateDB(spool / "state.db")
    try:
        row = db.job(jid)
    finally:
        db.close()
    if row is None:
        print(f"gridsched: job {jid} is not in the job table", file=sys.stderr)
        return 1
    spec = row["spec"]
    jdir = spool / "jobs" / str(jid)
    cores = sorted(cpuset.parse(os.environ.get("GS_CORES", "")))
    host = sorted(cpuset.parse(os.environ.get("GS_HOST_CPUS", "")))
    if "split_chains" in spec:
        info = spec["split_task"]
        queues = [deque(ch) for ch in spec["split_chains"]]
    else:
        info = spec["split"]
        shared = deque(info["left"])
        queues = [shared] * max(1, len(cores) // int(info["ncpus"]))
    c = int(info["ncpus"])
    slots = _slots(cores, host, c, len(queues))
    script = str(jdir / "task-script")
    with open(script, "rb") as f:
        cmd = [script, *argv] if f.read(2) == b"#!" else ["/bin/sh", script, *argv]
    running: dict[int, tuple[int, int, subprocess.Popen[bytes]]] = {}  # pid -> (slot, task, process)
    failed: list[tuple[int, int]] = []

    def launch(slot: int) -> None:
        q = queues[slot]
        if not q:
            return
        task = q.popleft()
        mine, cpus = slots[slot]
        env = dict(
            os.environ,
            GS_TASK_ID=str(task),
            GS_TASK_COUNT=str(info["n"]),
            GS_NCPUS=str(c),
            OMP_NUM_THREADS=str(c),
            GS_CORES=cpuset.format(mine),
        )
        p = subprocess.Popen(cmd, env=env, preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        running[p.pid] = (slot, task, p)  # kept: a Popen dropped unwaited is reaped behind our back

    for s in range(len(queues)):
        launch(s)
    while running:
        pid, status = os.wait()
        if pid not in running:
            continue
        slot, task, proc = running.pop(pid)
        code = proc.returncode = os.waitstatus_to_exitcode(status)
        if code != 0:
            failed.append((task, code))
            print(f"gridsched: sub-task {task} exited with status {code}", file=sys.stderr, flush=True)
        launch(slot)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
