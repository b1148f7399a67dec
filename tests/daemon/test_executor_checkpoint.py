"""Checkpointable calls of the executor against a real daemon: preempted, requeued, warned of their
walltime, they save their progress and go on from it in the next run of their job."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from gridsched.api.executor import Checkpointable, DelayedSubmission, GridschedExecutor, RemoteTraceback
from tests.conftest import wait_for

pytestmark = pytest.mark.daemon
ROOT = Path(__file__).resolve().parents[2]


def job_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Units(Checkpointable):
    """Do ``n`` units of work of ``pause`` seconds each, each recorded once in ``log``; the progress is in
    ``self`` (the default checkpoint resubmits this object as it is then)."""

    def __init__(self) -> None:
        self.done = 0

    def __call__(self, n: int, log: str, pause: float = 0.2) -> int:
        while self.done < n:
            time.sleep(pause)  # the work, where the checkpoint signal comes
            # the record and the progress change together: no checkpoint between them
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGUSR2})
            try:
                with open(log, "a") as f:
                    f.write(f"{self.done}\n")
                self.done += 1
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return sum(range(n))


class BadCheckpoint(Units):
    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        raise OSError("no room to save the model")


class NotACall(Units):
    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        return 42


def units_logged(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


PREEMPT = """
[scheduler]
policy = "checkpoint-backfill"
p = 0.1
threshold = "2s"
[jobs]
kill_grace = "1s"
checkpoint_grace = "5s"
[machine]
cores = 4
[daemon]
autostart = false
"""


def test_a_preempted_call_resumes_from_its_checkpoint(make_gs, tmp_path):
    """A (2 cores) runs until its walltime; the head H wants all 4 cores at A's end; the checkpointable
    call (30 s, counted as 3 s) is backfilled on the 2 free cores and preempted when H's time comes,
    then resumes where it stopped once H is done."""
    gs = make_gs(PREEMPT)
    a = gs.gsub("-n", "2", "-t", "6s", "--wrap", "sleep 5")
    gs.wait_state(a, "RUNNING")
    h = gs.gsub("-n", "4", "-t", "1m", "--wrap", "sleep 1")
    log = tmp_path / "units.log"
    with GridschedExecutor(ncpus=2, walltime="30s", spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()) as ex:
        fut = ex.submit(Units(), 40, str(log))
        assert fut.result(timeout=90) == sum(range(40))
        assert fut.restarts >= 1
    assert units_logged(log) == [str(i) for i in range(40)]  # each unit once, none redone
    row = gs.job(fut.job_id)
    assert row["preemptions"] >= 1 and row["checkpoints"] >= 1, row
    assert gs.job(h)["state"] == "COMPLETED"


FCFS = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
checkpoint_grace = "5s"
[machine]
cores = 4
[daemon]
autostart = false
"""


def test_a_requeued_call_resumes_from_its_checkpoint(shared_make_gs, tmp_path):
    gs = shared_make_gs(FCFS)
    log = tmp_path / "units.log"
    with GridschedExecutor(walltime="1m", spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()) as ex:
        fut = ex.submit(Units(), 25, str(log))
        wait_for(lambda: len(units_logged(log)) >= 5, 30, "five units done")
        ex.client.requeue(fut.job_id)  # as grequeue
        assert fut.result(timeout=60) == sum(range(25))
        assert fut.restarts == 1
    assert units_logged(log) == [str(i) for i in range(25)]


def test_a_checkpoint_that_fails_fails_the_call(shared_make_gs, tmp_path):
    gs = shared_make_gs(FCFS)
    with GridschedExecutor(walltime="1m", spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()) as ex:
        bad = ex.submit(BadCheckpoint(), 1000, str(tmp_path / "bad.log"))
        odd = ex.submit(NotACall(), 1000, str(tmp_path / "odd.log"))
        for fut, log in ((bad, "bad.log"), (odd, "odd.log")):
            wait_for(lambda log=log: units_logged(tmp_path / log), 30, "a unit done")
            ex.client.requeue(fut.job_id)
        with pytest.raises(RuntimeError, match="^the call could not be checkpointed: OSError: no room") as err:
            bad.result(timeout=60)
        cause = err.value.__cause__
        assert isinstance(cause, RemoteTraceback) and "in checkpoint\n" in cause.tb and "no room" in cause.tb
        with pytest.raises(RuntimeError, match="returned a int, not a call to run again"):
            odd.result(timeout=60)


def test_a_call_warned_before_its_walltime_checkpoints(shared_make_gs, tmp_path):
    """``signal_delay_s``: the call is told to checkpoint that many seconds before its walltime ends (gsub
    --signal), and goes on in a new run of its job: more work than one walltime holds gets done."""
    gs = shared_make_gs(FCFS)
    log = tmp_path / "units.log"
    with GridschedExecutor(
        walltime="4s", signal_delay_s=2, spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()
    ) as ex:
        fut = ex.submit(Units(), 30, str(log))  # 6 s of work, 2 s a run
        assert fut.result(timeout=90) == sum(range(30))
        assert fut.restarts >= 2
    assert units_logged(log) == [str(i) for i in range(30)]


def test_checkpointable_calls_in_an_array(shared_make_gs, tmp_path):
    """map_array of a checkpointable callable: each task keeps its own checkpoint."""
    gs = shared_make_gs(FCFS)
    with GridschedExecutor(walltime="1m", spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()) as ex:
        logs = [str(tmp_path / f"task{i}.log") for i in range(3)]
        futs = ex.map_array(Units(), [10, 12, 14], logs)
        assert len({f.array_id for f in futs}) == 1
        wait_for(lambda: all(f.job_id is not None for f in futs) and units_logged(Path(logs[1])), 30, "task 1")
        ex.client.requeue(futs[1].job_id)
        assert [f.result(timeout=60) for f in futs] == [sum(range(n)) for n in (10, 12, 14)]
        assert futs[1].restarts == 1
    for log, n in zip(logs, (10, 12, 14)):
        assert units_logged(Path(log)) == [str(i) for i in range(n)]
