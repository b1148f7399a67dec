"""The Python API and the executor against a real daemon.

The client's alter and requeue (changes, refusals in galter's and grequeue's words, a job run again) and its
refusals in the commands' words are tested in process, on a driven clock, in test_client_driven.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gridsched.api.client import Client, GridschedError
from gridsched.api.executor import GridschedExecutor
from tests.daemon.calls import cores_seen, fail, span, square

ROOT = Path(__file__).resolve().parents[2]
HOST = len(os.sched_getaffinity(0))


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs (each names its own by their ids, and waits for its
    blockers to end): the module's daemon serves them all."""
    return shared_gs


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
    assert [x.id for x in c.jobs(all=True) if x.id >= j.id] == [j.id] and [x for x in c.jobs() if x.id >= j.id] == []

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


def test_executor_results_exceptions_and_cores(shared_make_gs):
    # as many declared cores as host CPUs: a job's cores are distinct host CPUs
    gs = shared_make_gs(f"[machine]\ncores = {HOST}\n[daemon]\nautostart = false\n")
    with GridschedExecutor(
        ncpus=min(2, HOST), walltime="2m", spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()
    ) as ex:
        futs = [ex.submit(square, i) for i in range(3)]
        bad = ex.submit(fail, "no good")
        seen = ex.submit(cores_seen)
        assert [f.result(timeout=60) for f in futs] == [0, 1, 4]
        with pytest.raises(ValueError, match="^no good$") as err:
            bad.result(timeout=60)
        # the traceback from inside the job comes back as the exception's cause (more: test_executor_backends.py)
        assert err.value.__cause__.tb.rstrip().endswith("ValueError: no good")
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


UNGUARDED = """\
import sys

from gridsched.api.executor import GridschedExecutor


def triple(x):
    return 3 * x


ex = GridschedExecutor(spool=sys.argv[1], config=sys.argv[2])
try:
    print(ex.submit(triple, 1).result(timeout=60))
finally:
    ex.shutdown()
"""


def test_executor_script_without_the_main_guard(gs, tmp_path):
    """A script whose top-level code is not under the __main__ guard (as submitit's examples are written):
    its functions go by value and the job never runs the script again (more: test_executor_backends.py)."""
    import subprocess
    import sys

    env = job_env()
    before = max((x.id for x in client(gs).jobs(all=True)), default=0)
    unguarded = tmp_path / "unguarded.py"
    unguarded.write_text(UNGUARDED)
    r = subprocess.run(
        [sys.executable, str(unguarded), str(gs.spool), str(gs.cfgfile)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "3\n"
    assert len([x for x in client(gs).jobs(all=True) if x.id > before]) == 1  # its one call: no more from the job


GS_SCRIPT = """\
#GS -N fromdirective
#GS -n 2
#GS -t 7m
echo "$GS_NCPUS"
"""


def test_client_reads_directives_and_the_configured_defaults(gs, tmp_path):
    c = client(gs)
    (tmp_path / "job.sh").write_text(GS_SCRIPT)
    j = c.submit(tmp_path / "job.sh")
    assert (j.name, j.ncpus, j.walltime) == ("fromdirective", 2, 420)
    j2 = c.submit(tmp_path / "job.sh", ncpus=1, walltime=30)  # the call wins over a directive
    assert (j2.name, j2.ncpus, j2.walltime) == ("fromdirective", 1, 30)
    j3 = c.submit(command="true")
    assert (j3.ncpus, j3.walltime) == (c.config.default_ncpus, c.config.default_walltime)
    assert c.wait(j.id, timeout=60).state == "COMPLETED" and open(c.status(j.id).stdout).read() == "2\n"
    (tmp_path / "bad.sh").write_text("#GS --bogus\ntrue\n")
    with pytest.raises(GridschedError, match=r"/bad\.sh:1: unknown option --bogus"):
        c.submit(tmp_path / "bad.sh")
    (tmp_path / "slurm.sh").write_text("\n#!/bin/bash\n#SBATCH -t 3\n[[ 1 == 1 ]]\n")
    with pytest.raises(GridschedError, match="does not look like a batch script"):
        c.submit(tmp_path / "slurm.sh")


def test_executor_max_jobs_and_auto_backend(gs, tmp_path, monkeypatch):
    """max_jobs=1 runs the calls one after another; "auto" without sbatch on PATH is the local daemon."""
    (tmp_path / "nobin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    with GridschedExecutor(
        backend="auto", max_jobs=1, walltime="1m", spool=str(gs.spool), config=str(gs.cfgfile), env=job_env()
    ) as ex:
        assert ex.backend.name == "local"
        futs = [ex.submit(span, 0.3) for _ in range(3)]
        spans = sorted(f.result(timeout=90) for f in futs)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans  # never two at once
    with pytest.raises(ValueError, match="max_jobs 0: must be at least 1"):
        GridschedExecutor(max_jobs=0, spool=str(gs.spool), config=str(gs.cfgfile))
    with pytest.raises(ValueError, match="backend 'pbs': one of local, slurm, auto"):
        GridschedExecutor(backend="pbs", spool=str(gs.spool), config=str(gs.cfgfile))


def test_alter_an_array_changes_its_pending_tasks(gs):
    from tests.conftest import wait_for

    c = client(gs)
    blocker = c.submit(command="sleep 60", ncpus=8, walltime="2m")
    gs.wait_state(blocker.id, "RUNNING")
    arr = gs.gsub("-a", "1-3", "--wrap", "true")
    wait_for(lambda: len([j for j in c.jobs() if j.id > blocker.id]) == 3, 15, "the array's tasks")
    c.alter(arr, walltime=120)
    wait_for(lambda: [j.walltime for j in c.jobs() if j.id > blocker.id] == [120] * 3, 15, "every task changed")
    c.cancel(blocker.id)
    c.cancel(arr)
