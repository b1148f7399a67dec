"""Running the sub-tasks of a splittable job, inside the job (``python -m gridsched.job.subtasks [ARGS]``).

The daemon starts a splittable job, or a piece of one, with a stub script
that runs this module (see :mod:`gridsched.daemon.split`).  It reads the job's
row from the state db (``GS_SPOOL``, ``GS_JOBID``) and runs each sub-task as
a run of the user's script (``task-script`` in the job's directory) with
``ARGS`` (then the sub-task's own arguments, from a split file), on its own
cores (``GS_CORES``; pinned to the matching host CPUs), with ``GS_TASK_ID``
(its index), ``GS_TASK_COUNT``, ``GS_TASK_TRY`` (0, then 1, 2, ... when it
is run again), ``GS_NCPUS`` = ``OMP_NUM_THREADS`` = its cores and
``GS_CORES`` for them.

* A piece runs the chains the scheduler chose: chain ``i`` on its cores
  (the next ``widths[i]``, or ``C``, of the piece's), its sub-tasks one after
  the other.
* The whole job runs the sub-tasks it has left in order, each as soon as
  enough of the job's cores are free (the lowest-numbered free ones).

Each sub-task runs in a process group of its own and is killed at its own
walltime: SIGTERM to the group, SIGKILL :data:`GRACE` seconds later.  A
sub-task that exits non-zero or is killed at its time is run again, at once
and on the same cores, up to ``retries`` times (``gsub --split-retries``);
in a piece only if the piece's walltime still holds that run and the rest of
its chain.  Every start and end is appended as one JSON line to
:data:`RESULTS` in the job's checkpoint directory (what ``gstat`` counts);
sub-tasks that a run of the job already completed (a job requeued and
started again) are not run again.

Output goes to the job's own files.  The exit status is 0 if every sub-task
ended with 0, else 1 (each failure and timeout is named on standard error).
Walltime, cancel and preemption signals reach the sub-tasks from the daemon,
which signals every process of the job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from gridsched.core import cpuset
from gridsched.protocol.jobs import PRIVATE_FILE

RESULTS = "gridsched-subtasks.jsonl"  # in the job's checkpoint directory
GRACE = 3.0  # seconds between SIGTERM and SIGKILL for a sub-task past its time
POLL = 0.1  # seconds between looks at the running sub-tasks, at most


class Task:
    """One sub-task: its index, cores, time and own arguments."""

    __slots__ = ("index", "ncpus", "time", "args", "tries")

    def __init__(self, index: int, ncpus: int, secs: float, args: list[str]) -> None:
        self.index = index
        self.ncpus = ncpus
        self.time = secs
        self.args = args
        self.tries = 0


def _by_index(raw: Any) -> dict[int, Any]:
    if isinstance(raw, list):
        return dict(enumerate(raw))
    if isinstance(raw, dict):
        return {int(k): v for k, v in raw.items()}
    return {}


def tasks_of(info: dict[str, Any], args: Any, indices: list[int]) -> list[Task]:
    """The sub-tasks ``indices`` of a ``split`` (or a piece's ``split_task``) spec, with their own ``args``
    (the spec's private ``split_args``)."""
    sizes = _by_index(info.get("tasks"))
    own = _by_index(args)
    out = []
    for i in indices:
        t = sizes.get(i)
        a = [str(x) for x in own.get(i) or []]
        if t is None:
            out.append(Task(i, int(info["ncpus"]), float(info["task_time"]), a))
        else:
            out.append(Task(i, int(t[0]), float(t[1]), a))
    return out


def done_before(path: Path) -> dict[int, int]:
    """Sub-task -> tries, for those an earlier run of this job completed (from its results file)."""
    done: dict[int, int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    ev = json.loads(line)
                    if ev.get("event") == "done":
                        done[int(ev["task"])] = int(ev.get("try", 0)) + 1
                except (ValueError, TypeError, KeyError, AttributeError):
                    continue
    except OSError:
        pass
    return done


class Runner:
    """The sub-tasks running now, their deadlines, and what happened to them."""

    def __init__(
        self, cmd: list[str], count: int, retries: int, host: dict[int, int], every: set[int], log: IO[str] | None
    ) -> None:
        self.cmd = cmd
        self.every = every  # the job's host CPUs
        self.count = count
        self.retries = retries
        self.host = host  # job core -> host CPU
        self.log = log
        # pid -> (task, cores, deadline, kill at (0: not signalled yet), timed out)
        self.running: dict[int, list[Any]] = {}
        self.bad = 0

    def note(self, **ev: Any) -> None:
        if self.log is not None:
            try:
                self.log.write(json.dumps({**ev, "time": round(time.time(), 3)}) + "\n")
                self.log.flush()
            except OSError:
                self.log = None

    def start(self, task: Task, cores: list[int]) -> None:
        cpus = {self.host[c] for c in cores if c in self.host} or self.every
        env = dict(
            os.environ,
            GS_TASK_ID=str(task.index),
            GS_TASK_COUNT=str(self.count),
            GS_TASK_TRY=str(task.tries),
            GS_NCPUS=str(task.ncpus),
            OMP_NUM_THREADS=str(task.ncpus),
            GS_CORES=cpuset.format(cores),
        )

        def child() -> None:
            if cpus:
                os.sched_setaffinity(0, cpus)

        p = subprocess.Popen([*self.cmd, *task.args], env=env, start_new_session=True, preexec_fn=child)
        self.running[p.pid] = [task, cores, time.monotonic() + task.time, 0.0, False, p]
        self.note(task=task.index, event="start", **{"try": task.tries})

    def wait(self) -> list[tuple[Task, list[int], str, int]]:
        """Block until some sub-tasks end; ``(task, cores, outcome, status)`` of each (outcome: done, failed,
        timeout).  Kills those past their time on the way."""
        while True:
            ended = []
            while self.running:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                item = self.running.pop(pid, None)
                if item is None:
                    continue
                task, cores, _, _, late, proc = item
                code = proc.returncode = os.waitstatus_to_exitcode(status)
                outcome = "timeout" if late else ("done" if code == 0 else "failed")
                try:
                    os.killpg(pid, signal.SIGKILL)  # what the sub-task left behind in its group
                except OSError:
                    pass
                self.note(task=task.index, event=outcome, code=code, **{"try": task.tries})
                ended.append((task, cores, outcome, code))
            if ended or not self.running:
                return ended
            now = time.monotonic()
            nxt = now + POLL
            for pid, item in self.running.items():
                task, _, deadline, kill_at, late, _ = item
                if not late and now >= deadline:
                    item[4] = True
                    item[3] = now + GRACE
                    print(
                        f"gridsched: sub-task {task.index} ran past its time; stopping it", file=sys.stderr, flush=True
                    )
                    _signal(pid, signal.SIGTERM)
                elif late and now >= kill_at:
                    _signal(pid, signal.SIGKILL)
                    item[3] = now + GRACE
                nxt = min(nxt, item[3] if item[4] else item[2])
            time.sleep(max(0.01, min(POLL, nxt - now)))

    def ended(self, task: Task, outcome: str, code: int, room: bool = True) -> bool:
        """Count the end of ``task``; whether it is to run again (``room``: there is time for it)."""
        if outcome == "done":
            return False
        what = "was killed at its time" if outcome == "timeout" else f"exited with status {code}"
        if task.tries < self.retries and room:
            print(f"gridsched: sub-task {task.index} {what}; running it again", file=sys.stderr, flush=True)
            task.tries += 1
            return True
        print(f"gridsched: sub-task {task.index} {what}", file=sys.stderr, flush=True)
        self.bad += 1
        return False


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    from gridsched.protocol.state import StateDB

    t0 = time.monotonic()
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
    spec = row["spec"].raw  # the spec's JSON object
    jdir = spool / "jobs" / str(jid)
    cores = sorted(cpuset.parse(os.environ.get("GS_CORES", "")))
    host_cpus = sorted(cpuset.parse(os.environ.get("GS_HOST_CPUS", "")))
    # each core's host CPU; if they do not match one to one, every sub-task is pinned to all of them
    host = dict(zip(cores, host_cpus)) if len(host_cpus) == len(cores) else {}
    walltime = float(os.environ.get("GS_WALLTIME") or spec.get("walltime") or 0)
    results = Path(os.environ.get("GS_CHECKPOINT_DIR") or jdir / "checkpoint") / RESULTS
    before = done_before(results)
    try:
        log: IO[str] | None = open(results, "a", encoding="utf-8")
    except OSError:
        log = None
    script = str(jdir / "task-script")
    with open(script, "rb") as f:
        cmd = [script, *argv] if f.read(2) == b"#!" else [str(spec.get("shell") or "/bin/sh"), script, *argv]
    piece = "split_chains" in spec
    try:  # the job's private part: its owner's, readable by the job (0600)
        with open(jdir / PRIVATE_FILE, encoding="utf-8") as f:
            args = json.load(f).get("split_args")
    except (OSError, ValueError, AttributeError):
        args = None
    info = spec["split_task"] if piece else spec["split"]
    run = Runner(cmd, int(info["n"]), int(info.get("retries", 0)), host, set(host_cpus), log)
    try:
        if piece:
            _run_chains(run, info, args, spec, cores, before, t0 + walltime)
        else:
            _run_pool(run, tasks_of(info, args, [i for i in info["left"] if i not in before]), cores)
    finally:
        if log is not None:
            log.close()
    return 1 if run.bad else 0


def _run_chains(
    run: Runner,
    info: dict[str, Any],
    args: Any,
    spec: dict[str, Any],
    cores: list[int],
    before: dict[int, int],
    end: float,
) -> None:
    """A piece: each chain on its own cores, its sub-tasks one after another."""
    chains = spec["split_chains"]
    widths = spec.get("split_widths") or [int(info["ncpus"])] * len(chains)
    queues: list[deque[Task]] = []
    slots: list[list[int]] = []
    at = 0
    for ch, w in zip(chains, widths):
        queues.append(deque(tasks_of(info, args, [i for i in ch if i not in before])))
        slots.append(cores[at : at + w])
        at += w
    busy: dict[int, int] = {}  # task index -> slot

    def launch(k: int) -> None:
        if queues[k]:
            task = queues[k].popleft()
            busy[task.index] = k
            run.start(task, slots[k][: task.ncpus])

    for k in range(len(queues)):
        launch(k)
    while run.running:
        for task, _, outcome, code in run.wait():
            k = busy.pop(task.index)
            fits = time.monotonic() + task.time + sum(t.time for t in queues[k]) <= end
            if run.ended(task, outcome, code, fits):
                queues[k].appendleft(task)
            launch(k)


def _run_pool(run: Runner, todo: list[Task], cores: list[int]) -> None:
    """The whole job: the sub-tasks in order, each as soon as enough of the job's cores are free."""
    queue = deque(todo)
    free = list(cores)
    while queue or run.running:
        while queue and queue[0].ncpus <= len(free):
            task = queue.popleft()
            mine, free = free[: task.ncpus], free[task.ncpus :]
            run.start(task, mine)
        if not run.running:
            if queue:  # a sub-task larger than the job's cores (refused at submission): counted as failed
                task = queue.popleft()
                print(f"gridsched: sub-task {task.index} needs more cores than the job has", file=sys.stderr)
                run.bad += 1
            continue
        for task, mine, outcome, code in run.wait():
            free = sorted(free + mine)
            if run.ended(task, outcome, code):
                queue.appendleft(task)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
