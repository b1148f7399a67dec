"""Slurm and PBS directives that the daemon schedules by, in process (stub executor, driven clock; gsub in
process on its spool): -t 60 is 60 minutes, --mem-per-cpu makes the job's memory, too much memory is refused
by gsub and by the daemon, #SBATCH --begin keeps the job waiting.

Scripts run as those systems run them (interpreters, output files) are tested with real jobs in
test_compat_run.py."""

from __future__ import annotations

import pytest

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(DEFAULT_CONFIG))


def test_gsub_t_60_is_60_minutes(dr):
    jid = dr.gsub("-t", "60", "--hold", "--wrap", "true")
    short = dr.gsub("-t", "60s", "--hold", "--wrap", "true")
    assert (dr.state(jid), dr.job(jid)["walltime"]) == ("HELD", 3600)
    assert (dr.state(short), dr.job(short)["walltime"]) == ("HELD", 60)


def test_mem_per_cpu_becomes_the_job_memory(dr, tmp_path):
    script = tmp_path / "m.sh"
    script.write_text("#!/bin/sh\n#SBATCH --mem-per-cpu=64M\n#SBATCH -c 3\ntrue\n")
    jid = dr.gsub(str(script))
    assert dr.state(jid) == "COMPLETED"
    j = dr.job(jid)
    assert j["ncpus"] == 3
    assert j["spec"]["mem"] == 3 * 64 << 20


def test_too_much_memory_is_refused_by_gsub_and_by_the_daemon(dr):
    r = dr.command("gsub", "--mem", "300T", "--wrap", "true", check=False)
    assert r.exit_code == 1
    assert r.stderr.startswith("gsub: error: job can never run: it asks for 300T of memory, the machine has ")
    assert len(r.stderr.splitlines()) == 1
    # a request written without gsub's check: the daemon refuses it the same way
    nid = dr.submit(0, mem=300 << 40)
    j = dr.job(nid)
    assert j["state"] == "FAILED" and "asks for 300T of memory, the machine has" in j["reason"]
    assert nid not in [s.job_id for s in dr.d.ex.started]


def test_sbatch_begin_makes_the_job_wait_for_its_time(dr, tmp_path):
    script = tmp_path / "b.sh"
    script.write_text("#!/bin/sh\n#SBATCH --begin=now+1hour\ntrue\n")
    jid = dr.gsub(str(script))
    dr.run_to(1)
    j = dr.job(jid)
    assert j["state"] == "PENDING" and j["reason"].startswith("begin time"), j
