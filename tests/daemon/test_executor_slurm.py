"""The executor's Slurm backend against a real Slurm (the single-node one on loopback, where it runs).

Skipped, with the reason, where no Slurm answers: start one with
``../shared/tools/slurm-localhost/start.sh`` (or any cluster ``sbatch`` reaches).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gridsched import slurm
from gridsched.executor import GridschedExecutor, JobFailed, RemoteTraceback
from tests.daemon.calls import die, env_of, fail, square

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(slurm_cluster, monkeypatch, tmp_path):
    assert slurm.available()  # what backend="auto" asks
    monkeypatch.chdir(tmp_path)  # the executor's directory goes in the working directory for Slurm


def job_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_results_exceptions_and_logs_come_back_from_slurm(cluster, tmp_path):
    with GridschedExecutor(ncpus=2, walltime="5m", backend="slurm", env=job_env(), mem="100M") as ex:
        assert ex.backend.name == "slurm" and ex.dir.parent == tmp_path
        futs = [ex.submit(square, i) for i in range(3)]
        bad = ex.submit(fail, "no good")
        dead = ex.submit(die, "last words from slurm")
        seen = ex.submit(env_of, "SLURM_CPUS_PER_TASK")
        assert [f.result(timeout=120) for f in futs] == [0, 1, 4]
        with pytest.raises(ValueError, match="^no good$") as err:
            bad.result(timeout=120)
        assert isinstance(err.value.__cause__, RemoteTraceback) and "in fail" in err.value.__cause__.tb
        with pytest.raises(JobFailed, match=r"ended FAILED \(exit code 3\) without a result") as err2:
            dead.result(timeout=120)
        assert str(err2.value).endswith("\nlast words from slurm")
        assert seen.result(timeout=120) == "2"  # a Slurm job of 2 CPUs per task
    assert not ex.dir.exists()


def test_auto_picks_slurm_and_refusals(cluster):
    with GridschedExecutor(backend="auto", walltime=60, env=job_env()) as ex:
        assert ex.backend.name == "slurm"
        assert ex.submit(square, 7).result(timeout=120) == 49
    with pytest.raises(TypeError, match="the slurm backend takes no option checkpoint"):
        GridschedExecutor(backend="slurm", checkpoint="signal")
    with GridschedExecutor(backend="slurm", env=job_env(), partition="nosuchpartition") as ex:
        with pytest.raises(Exception, match="^sbatch: .*[Pp]artition"):
            ex.submit(square, 1)


def test_cancelling_a_pending_future_cancels_the_slurm_job(cluster):
    with GridschedExecutor(backend="slurm", env=job_env(), sbatch_args=["--hold"]) as ex:
        fut = ex.submit(square, 3)
        assert fut.cancel() and fut.cancelled()
        st = ex.backend.status([fut.job_id])
        assert fut.job_id is not None and (not st or st[fut.job_id].state in ("CANCELLED", "PENDING"))
