"""The queue in the daemon, in process (stub executor, driven clock; the commands in process on its spool):
first come first served on a full machine, gdel of a pending job, and SGE's -hold_jid naming jobs by name.

Real jobs (pinning, environment, walltime kills, cancelling a process tree) are in test_execution.py and
test_export_exclusive_run.py."""

from __future__ import annotations

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven


def test_fifo_order_on_a_full_machine(stub_daemon):
    dr = Driven(stub_daemon(DEFAULT_CONFIG))
    ids = [dr.gsub("-n", "8", "--wrap", f"echo {i} >> order", work=0.5) for i in range(4)]
    dr.run_until(lambda: all(dr.state(j) == "COMPLETED" for j in ids), 10)
    assert [s.job_id for s in dr.d.ex.started] == ids
    jobs = [dr.job(j) for j in ids]
    assert all(a["end_time"] <= b["start_time"] for a, b in zip(jobs, jobs[1:]))  # one at a time, in order


def test_gdel_of_a_pending_job(stub_daemon):
    dr = Driven(stub_daemon(DEFAULT_CONFIG))
    blocker = dr.gsub("-n", "8", "--wrap", "sleep 300", work=300)
    assert dr.running(blocker)
    waiting = dr.gsub("-n", "1", "--wrap", "touch ran")
    assert dr.state(waiting) == "PENDING"
    assert dr.command("gdel", str(waiting), str(blocker)).exit_code == 0
    dr.run_until(lambda: dr.state(blocker) == "CANCELLED", 10)
    assert dr.state(waiting) == "CANCELLED"
    assert waiting not in [s.job_id for s in dr.d.ex.started]  # it never ran


def test_hold_jid_by_name_waits_for_the_named_jobs(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(DEFAULT_CONFIG.replace("cores = 8", "cores = 4")))
    post_sh = tmp_path / "post.sh"
    post_sh.write_text("#!/bin/sh\n#$ -N post\n#$ -hold_jid prep\n#$ -cwd\necho posted\n")
    prep = dr.gsub("-N", "prep", "--wrap", "wait for go", work=None)
    post = dr.gsub(str(post_sh))
    assert dr.running(prep)
    # cores are free, but post waits for the job named prep, with a reason
    dr.run_to(2)
    held = dr.job(post)
    assert held["state"] == "PENDING" and held["reason"], held
    dr.finish(prep)
    dr.run_until(lambda: dr.state(post) == "COMPLETED", 10)
    assert dr.job(post)["start_time"] >= dr.job(prep)["end_time"]
