"""The executor's checkpointable calls and arrays on a real Slurm (the single-node one on loopback, where it
answers; skipped with the reason elsewhere).

On Slurm a checkpointable call's job requeues itself (as submitit's do): on its signal (``--signal`` before
the time limit, at preemption where the cluster sends it then, or ``scancel --signal=USR1 --batch`` by hand)
the worker saves the call in the executor's directory and runs ``scontrol requeue`` for its own job; the
next run finds the saved call."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gridsched.api.executor import GridschedExecutor
from tests.conftest import wait_for
from tests.daemon.calls import span
from tests.daemon.test_executor_checkpoint import Units, units_logged

pytestmark = pytest.mark.daemon
ROOT = Path(__file__).resolve().parents[2]


def job_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def job_fields(ref: str) -> list[dict[str, str]]:
    r = subprocess.run(["scontrol", "-o", "show", "job", ref], capture_output=True, text=True, timeout=30)
    return [dict(f.partition("=")[::2] for f in line.split()) for line in r.stdout.splitlines()]


def send_checkpoint_signal(job_id: int) -> None:
    """Send the job its checkpoint signal, as the cluster would before its time limit or at preemption."""
    r = subprocess.run(["scancel", "--signal=USR1", "--batch", str(job_id)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_signalled_calls_requeue_themselves_and_resume(slurm_cluster, tmp_path, monkeypatch):
    """A call and a task of a throttled array, each signalled while it runs, save themselves, requeue their
    jobs and resume.  Slurm holds a requeued job back until the credential of its last run has expired
    (about two minutes by default), so this test takes that long."""
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "units.log"
    logs = [str(tmp_path / f"task{i}.log") for i in range(3)]
    with GridschedExecutor(backend="slurm", walltime="10m", max_jobs=2, env=job_env()) as ex:
        fut = ex.submit(Units(), 25, str(log))
        futs = ex.map_array(Units(), [10, 12, 14], logs)
        aid = futs[0].array_id
        assert aid is not None and {f.array_id for f in futs} == {aid}
        assert job_fields(str(aid))[0].get("ArrayTaskThrottle") == "2"
        wait_for(lambda: len(units_logged(log)) >= 3, 120, "three units of the call")
        send_checkpoint_signal(fut.job_id)
        wait_for(lambda: futs[1].job_id is not None and units_logged(Path(logs[1])), 120, "task 1 under way")
        send_checkpoint_signal(futs[1].job_id)
        assert fut.result(timeout=400) == sum(range(25))
        assert [f.result(timeout=400) for f in futs] == [sum(range(n)) for n in (10, 12, 14)]
        assert fut.restarts == 1 and futs[1].restarts == 1 and futs[0].restarts == 0
        assert not list(ex.dir.glob("*.ckpt"))  # the saved calls go once the calls have ended
        # a plain function over an array: its calls, at most two at once
        spans = list(ex.map(span, [0.5] * 4, timeout=180))
    assert max(sum(1 for b in spans if b[0] <= a[0] < b[1]) for a in spans) <= 2, spans
    assert units_logged(log) == [str(i) for i in range(25)]
    for task_log, n in zip(logs, (10, 12, 14)):
        assert units_logged(Path(task_log)) == [str(i) for i in range(n)]
