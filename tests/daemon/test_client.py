"""The Python API and the executor against a real daemon."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gridsched.client import Client, GridschedError
from gridsched.executor import GridschedExecutor
from tests.daemon.calls import cores_seen, fail, square

pytestmark = pytest.mark.daemon
ROOT = Path(__file__).resolve().parents[2]
HOST = len(os.sched_getaffinity(0))


@pytest.fixture(autouse=True)
def in_work_dir(tmp_path, monkeypatch):
    """Jobs write their default output files into the submit directory: a temporary one."""
    monkeypatch.chdir(tmp_path)


def client(gs) -> Client:
    return Client(spool=gs.spool, config=str(gs.cfgfile))


def job_env() -> dict[str, str]:
    """The test process's environment, with the repository importable (for tests.daemon.calls)."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_submit_status_wait_cancel(gs):
    c = client(gs)
    j = c.submit(command="echo hello; exit 4", name="api", walltime="1m", ncpus=2)
    assert (j.name, j.ncpus, j.walltime) == ("api", 2, 60)
    done = c.wait(j.id, timeout=30)
    assert done.state == "FAILED" and done.exit_code == 4 and done.done
    assert open(done.stdout).read() == "hello\n"
    assert done.max_rss is not None and 0 < done.max_rss < 1 << 30 and done.cpu_time is not None
    assert [x.id for x in c.jobs(all=True)] == [j.id] and c.jobs() == []

    blocker = c.submit(command="sleep 30", ncpus=8, walltime="1m")
    waiting = c.submit(command="true")
    gs.wait_state(blocker.id, "RUNNING")
    assert c.status(waiting.id).state == "PENDING"
    c.cancel(waiting.id)
    c.cancel(blocker.id)
    never_ran = c.wait(waiting.id, timeout=30)
    assert never_ran.state == "CANCELLED" and never_ran.max_rss is None and never_ran.cpu_time is None
    assert c.wait(blocker.id, timeout=30).state == "CANCELLED"
    with pytest.raises(GridschedError, match=f"^job {waiting.id}: already CANCELLED$"):
        c.cancel(waiting.id)


def test_refusals_have_the_commands_words(gs):
    c = client(gs)
    with pytest.raises(GridschedError, match="^job can never run: it asks for 9 cores, the machine has 8$"):
        c.submit(command="true", ncpus=9)
    with pytest.raises(GridschedError, match="^job 77: no such job$"):
        c.status(77)
    with pytest.raises(GridschedError, match="'-5': must be positive"):
        c.submit(command="true", walltime="-5")


def test_executor_results_exceptions_and_cores(make_gs):
    # as many declared cores as host CPUs: a job's cores are distinct host CPUs
    gs = make_gs(f"[machine]\ncores = {HOST}\n[daemon]\nautostart = false\n")
    with GridschedExecutor(
        ncpus=min(2, HOST), walltime="2m", spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()
    ) as ex:
        futs = [ex.submit(square, i) for i in range(3)]
        bad = ex.submit(fail, "no good")
        seen = ex.submit(cores_seen)
        assert [f.result(timeout=60) for f in futs] == [0, 1, 4]
        with pytest.raises(ValueError, match="^no good$"):
            bad.result(timeout=60)
        assert seen.result(timeout=60) == (min(2, HOST), str(min(2, HOST)))
    assert not ex.dir.exists()  # its own directory is removed at shutdown


def test_cancelling_a_pending_future_cancels_its_job(gs):
    c = client(gs)
    blocker = c.submit(command="sleep 30", ncpus=8, walltime="1m")
    gs.wait_state(blocker.id, "RUNNING")
    ex = GridschedExecutor(spool=str(gs.spool), config=str(gs.cfgfile), env=job_env())
    try:
        fut = ex.submit(square, 3)
        assert fut.cancel()
        assert fut.cancelled()
        assert c.wait(fut.job_id, timeout=30).state == "CANCELLED"
    finally:
        c.cancel(blocker.id)
        ex.shutdown(wait=True)
