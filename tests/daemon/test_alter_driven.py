"""galter and grequeue against the daemon, in process (stub executor, driven clock): change pending jobs and a
running job's walltime, refuse what cannot be changed, send a running job back to the queue.

The commands run in process on the daemon's spool; the daemon takes what they wrote at its next turn.  A
running checkpointable job requeued (resuming from its checkpoint) and a finished one run again, as real
processes, stay in test_alter.py.
"""

from __future__ import annotations

import json

import pytest

from gridsched.core import cpuset
from tests.daemon.driven import Driven
from tests.daemon.test_alter import ONE_CORE


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(ONE_CORE))


def blocker(dr: Driven) -> int:
    """A job on both cores until the test ends it: what it blocks stays pending."""
    jid = dr.gsub("-n", "2", "--wrap", "wait for go", work=None)
    assert dr.running(jid)
    return jid


def launches(dr: Driven, jid: int) -> list:
    return [s for s in dr.d.ex.started if s.job_id == jid]


def why(dr: Driven, name: str) -> str | None:
    p = dr.d.spool.quarantine / (name + ".why")
    return p.read_text() if p.exists() else None


def test_pending_job_starts_with_the_new_values(dr):
    b = blocker(dr)
    first = dr.gsub("-n", "1", "--wrap", "true")
    jid = dr.gsub("-n", "1", "-t", "10", "-N", "old", "--wrap", 'echo "$GS_NCPUS $GS_WALLTIME $GS_JOBNAME"')
    r = dr.command("galter", str(jid), "-n", "2", "-t", "5:00", "-N", "new", "-d", f"afterok:{first}")
    assert r.exit_code == 0 and r.stdout == f"job {jid}: changing\n", r.stderr
    j = dr.job(jid)
    assert j["name"] == "new"
    assert (j["ncpus"], j["walltime"]) == (2, 300)
    dr.finish(b)
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)
    assert dr.state(first) == "COMPLETED"
    (spec,) = launches(dr, jid)
    assert (spec.env["GS_NCPUS"], spec.env["GS_WALLTIME"]) == ("2", "300")


def test_cores_per_task_and_account_as_scontrol_update_changes_them(dr):
    """galter -c C makes a pending job's cores its tasks times C (as scontrol update's cores per task), galter -A
    names its account; the job starts with them (SLURM_CPUS_PER_TASK, SLURM_JOB_ACCOUNT)."""
    b = blocker(dr)
    jid = dr.gsub("--ntasks", "1", "-c", "1", "--wrap", "true")
    assert dr.job(jid)["ncpus"] == 1
    r = dr.command("galter", str(jid), "-c", "2", "-A", "projx")
    assert r.exit_code == 0, r.stderr
    j = dr.job(jid)
    assert (j["ncpus"], j["spec"].get("cpus_per_task"), j["spec"].get("account")) == (2, 2, "projx")
    r = dr.command("galter", str(jid), "-c", "3", check=False)  # more cores than the machine has
    assert r.exit_code != 0 and dr.job(jid)["ncpus"] == 2
    r = dr.command("galter", str(jid), "-A", " ", check=False)
    assert r.exit_code == 2 and r.stderr.startswith("galter: error: -A: an account name must not be empty")
    dr.finish(b)
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)
    (spec,) = launches(dr, jid)
    assert (spec.env["SLURM_CPUS_PER_TASK"], spec.env["SLURM_JOB_ACCOUNT"], spec.env["GS_NCPUS"]) == ("2", "projx", "2")


def test_dependency_added_keeps_the_job_waiting(dr, stub_daemon):
    b = blocker(dr)
    jid = dr.gsub("-n", "1", "--wrap", "true")
    later = dr.gsub("-n", "1", "--hold", "--wrap", "true")
    assert dr.command("galter", str(jid), "-d", f"afterok:{later}").exit_code == 0
    dr.finish(b)
    dr.run_to(1)
    assert dr.state(b) == "COMPLETED"
    dr.d.forecast()
    j = dr.job(jid)
    assert j["state"] == "PENDING" and str(later) in j["reason"], j
    dr.restart(stub_daemon)  # the change is in the state db: a restarted daemon keeps it
    dr.d.forecast()
    j = dr.job(jid)
    assert j["state"] == "PENDING" and str(later) in j["reason"], j
    # a cycle, the job on itself too, is refused and nothing changes
    r = dr.command("galter", str(later), "-d", f"afterok:{jid}", check=False)
    assert (
        r.exit_code == 1 and r.stderr == f"galter: error: job {later}: depend: a cycle ({later} -> {jid} -> {later})\n"
    )
    r = dr.command("galter", str(jid), "-d", f"afterany:{jid}", check=False)
    assert r.exit_code == 1 and "depend: a cycle" in r.stderr
    assert dr.command("galter", str(jid), "-d", "").exit_code == 0
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)


def test_running_walltime_shortened_times_out_at_the_new_limit(dr):
    jid = dr.gsub("-n", "1", "-t", "10:00", "--wrap", "sleep 120", work=120)
    assert dr.running(jid)
    r = dr.command("galter", str(jid), "-t", "0:03")
    assert r.exit_code == 0, r.stderr
    assert dr.job(jid)["walltime"] == 3
    dr.run_until(lambda: dr.state(jid) == "TIMEOUT", 20)
    j = dr.job(jid)
    assert j["reason"] == "reached its walltime"
    assert j["end_time"] - j["start_time"] < 3 + 1.5  # at the new limit (and the kill grace), not the old
    # anything but the walltime of a running job is refused; so is a finished job
    r = dr.command("galter", str(jid), "-t", "1:00", check=False)
    assert r.exit_code == 1 and r.stderr == (
        f"galter: error: job {jid}: is TIMEOUT: only pending, held or running jobs can be changed\n"
    )


def test_running_job_only_its_walltime(dr):
    jid = dr.gsub("-n", "1", "-t", "10:00", "--wrap", "wait for go", work=None)
    assert dr.running(jid)
    r = dr.command("galter", str(jid), "-n", "2", check=False)
    assert r.exit_code == 1 and r.stderr == f"galter: error: job {jid}: is RUNNING: only its walltime can change\n"
    # the daemon's owner is its admin in personal mode: it may lengthen
    assert dr.command("galter", str(jid), "-t", "20:00").exit_code == 0
    assert dr.job(jid)["walltime"] == 1200
    dr.run_to(700)  # past the first walltime: it still runs
    assert dr.running(jid)
    dr.finish(jid)
    assert dr.state(jid) == "COMPLETED"


def test_sizes_the_machine_cannot_hold_and_bad_values_are_refused(dr):
    b = blocker(dr)
    jid = dr.gsub("-n", "1", "--wrap", "true")
    r = dr.command("galter", str(jid), "-n", "3", check=False)
    assert r.exit_code == 1 and r.stderr.startswith(f"galter: error: job {jid}: ") and "2" in r.stderr
    for args in (("--gpus", "1"), ("--mem", "100T")):
        r = dr.command("galter", str(jid), *args, check=False)
        assert r.exit_code == 1 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("galter: error:"), (
            args,
            r.stderr,
        )
    r = dr.command("galter", str(jid), "-t", "-5", check=False)
    assert r.exit_code == 2 and r.stderr.startswith("galter: error:")
    r = dr.command("galter", str(jid), check=False)
    assert r.exit_code == 2 and "nothing to change" in r.stderr
    r = dr.command("galter", "999", "-t", "5", check=False)
    assert r.exit_code == 1 and r.stderr == "galter: error: job 999: no such job\n"
    assert dr.job(jid)["ncpus"] == 1
    dr.finish(b)
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)


def test_raw_request_refused_by_the_daemon_which_keeps_running(dr):
    b = blocker(dr)
    jid = dr.gsub("-n", "1", "--wrap", "true")
    incoming = dr.d.spool.incoming
    bad = {
        "too-big": {"type": "alter", "jobs": [jid], "changes": {"ncpus": 64}},
        "self-dep": {"type": "alter", "jobs": [jid], "changes": {"depend": f"afterok:{jid}"}},
        "running": {"type": "alter", "jobs": [b], "changes": {"ncpus": 1}},
        "unknown": {"type": "alter", "jobs": [jid], "changes": {"script": "rm -rf /"}},
        "empty": {"type": "alter", "jobs": [jid], "changes": {}},
        "requeue-pending": {"type": "requeue", "jobs": [jid]},
    }
    for key, req in bad.items():
        (incoming / f"{key}.json").write_text(json.dumps(req))
    dr.turn()
    said = {key: why(dr, f"{key}.json") or "" for key in bad}
    assert "can never run" in said["too-big"] or "cores" in said["too-big"]
    assert "cycle" in said["self-dep"]
    assert "only its walltime can change" in said["running"]
    assert "unknown field" in said["unknown"]
    assert "nothing to change" in said["empty"]
    assert "is PENDING: only running or finished jobs can be requeued" in said["requeue-pending"]
    assert dr.job(jid)["ncpus"] == 1
    dr.finish(b)
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)


def test_array_pending_tasks_change(dr):
    b = blocker(dr)
    arr = dr.gsub("-n", "1", "-a", "1-3", "-t", "10", "--wrap", "true")

    def tasks() -> list[dict]:
        dr.d.table.commit()
        return [j for j in dr.d.db.jobs() if j["spec"].get("array_id") == arr or j["id"] == arr]

    dr.run_until(lambda: len(tasks()) >= 3, 5)
    assert dr.command("galter", f"{arr}_2", "-t", "7").exit_code == 0
    assert sorted(j["walltime"] for j in tasks()) == [420, 600, 600]  # one task changed
    assert dr.command("galter", str(arr), "-t", "8").exit_code == 0
    assert [j["walltime"] for j in tasks()] == [480] * 3  # every task changed
    dr.finish(b)


def test_requeue_running_plain_job_starts_again(dr):
    jid = dr.gsub("-n", "1", "--wrap", 'echo "start $GS_RESTART_COUNT" >> log; wait for go', work=None)
    assert dr.running(jid)
    assert dr.command("grequeue", str(jid)).exit_code == 0
    dr.run_until(lambda: len(launches(dr, jid)) == 2, 10)
    assert [s.env["GS_RESTART_COUNT"] for s in launches(dr, jid)] == ["0", "1"]  # the second start
    dr.finish(jid)
    j = dr.job(jid)
    assert j["state"] == "COMPLETED" and j["restarts"] == 1


def test_place_board_larger_than_a_board_is_refused(stub_daemon, tmp_path):
    from tests.daemon.test_topology import topo_config

    dr = Driven(stub_daemon(topo_config(tmp_path)))
    jid = dr.gsub("--hold", "-n", "2", "--wrap", "true")
    assert dr.state(jid) == "HELD"
    r = dr.command("galter", str(jid), "-n", "6", "--place", "board", check=False)
    assert r.exit_code == 1 and r.stderr.startswith(f"galter: error: job {jid}: can never run:"), r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert dr.command("galter", str(jid), "-n", "4", "--place", "board").exit_code == 0
    assert dr.job(jid)["ncpus"] == 4
    assert dr.command("grls", str(jid)).exit_code == 0
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)
    assert len({c // 4 for c in cpuset.parse(dr.job(jid)["cores"])}) == 1


def test_an_exclusive_job_keeps_every_core(dr):
    """An --exclusive job takes the whole machine: galter refuses to change its cores, and so does the daemon for
    the same request written by hand; its walltime still changes."""
    b = blocker(dr)
    jid = dr.gsub("--exclusive", "-t", "10", "--wrap", "true")
    r = dr.command("galter", str(jid), "-n", "1", check=False)
    reason = "an --exclusive job takes every core (2): its cores cannot change"
    assert (r.exit_code, r.stderr) == (1, f"galter: error: job {jid}: {reason}\n")
    req = {"type": "alter", "jobs": [jid], "changes": {"ncpus": 1}}
    (dr.d.spool.incoming / "exclusive-ncpus.json").write_text(json.dumps(req))
    dr.turn()
    assert reason in (why(dr, "exclusive-ncpus.json") or "")
    assert dr.command("galter", str(jid), "-t", "20").exit_code == 0
    assert dr.job(jid)["walltime"] == 1200
    dr.finish(b)
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)
    assert dr.job(jid)["ncpus"] == 2
