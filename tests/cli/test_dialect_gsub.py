"""gsub records whose directives a script has (the spec's dialect), which chooses the job's environment."""

from __future__ import annotations

import os

import pytest

from gridsched.cli import gsub
from gridsched.protocol import requests as rq
from gridsched.protocol.jobspec import JobSpec
from tests.fuzz.test_requests import valid_job


@pytest.mark.parametrize(
    "header, dialect",
    [("#SBATCH -n 2", "slurm"), ("#PBS -l ncpus=2", "pbs"), ("#$ -pe smp 2", "sge"), ("#GS -n 2", None), ("", None)],
)
def test_gsub_records_the_dialect(env, run, submits, header, dialect):
    (env / "job.sh").write_text(f"#!/bin/sh\n{header}\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0, r.output
    [spec] = submits()
    assert spec.get("dialect") == dialect
    assert JobSpec.from_spec(spec).dialect == dialect


def test_gsub_records_memory_per_core_and_gpus_per_task(env, run, submits):
    (env / "job.sh").write_text("#!/bin/sh\n#SBATCH -n 2 --mem-per-cpu=100M\ntrue\n")
    assert run(gsub.cli, ["job.sh"]).exit_code == 0
    [spec] = submits()
    assert (spec["mem_per_cpu"], spec["mem"], spec.get("gpus_per_task")) == (100 << 20, 200 << 20, None)
    assert JobSpec.from_spec(spec).mem_per_cpu == 100 << 20


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"dialect": "lsf"}, "'dialect' must be one of slurm, pbs, sge"),
        ({"mem_per_cpu": 0}, "mem_per_cpu"),
        ({"gpus_per_task": -1}, "gpus_per_task"),
    ],
)
def test_the_boundary_checks_the_dialect_and_per_task_counts(fields, why):
    sender = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), False)
    with pytest.raises(rq.Refused, match=why):
        rq.parse({"type": "submit", "job": {**valid_job(5), **fields}}, rq.id_name(5), sender)
    ok = rq.parse(
        {"type": "submit", "job": {**valid_job(5), "dialect": "sge", "mem_per_cpu": 1 << 20}}, rq.id_name(5), sender
    )
    assert ok.job.dialect == "sge" and ok.job.mem_per_cpu == 1 << 20  # type: ignore[union-attr]
