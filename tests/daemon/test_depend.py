"""Dependencies between jobs and the Slurm/PBS environment, in the real daemon."""

from __future__ import annotations

import socket

from tests.conftest import DEFAULT_CONFIG, wait_for


def test_afterok_and_afterany_wait_for_their_job(gs):
    # a runs until the test lets it end, so b is seen waiting for it however loaded the machine
    a = gs.gsub("--wrap", "while [ ! -e go ]; do sleep 0.1; done; echo a >> order")
    b = gs.gsub("-d", f"afterok:{a}", "--wrap", "echo b >> order")
    c = gs.gsub("-d", f"afterany:{b}", "--wrap", "echo c >> order")
    gs.wait_state(a, "RUNNING")
    wait_for(lambda: str(a) in gs.job(b)["reason"], 10, "b's reason to name a")
    assert gs.job(b)["state"] == "PENDING" and gs.job(c)["state"] == "PENDING"
    (gs.work / "go").touch()
    gs.wait_state(c, "COMPLETED")
    assert (gs.work / "order").read_text().split() == ["a", "b", "c"]
    assert gs.job(b)["start_time"] >= gs.job(a)["end_time"]


def test_a_dependency_that_can_never_be_met_stays_pending_with_the_reason(gs):
    a = gs.gsub("--wrap", "exit 0")
    b = gs.gsub("-d", f"afternotok:{a}", "--wrap", "touch never")
    gs.wait_state(a, "COMPLETED")
    wait_for(lambda: "never satisfied" in gs.job(b)["reason"], 10, "the reason to show")
    assert gs.job(b)["state"] == "PENDING"
    after = gs.gsub("--wrap", "true")  # it blocks nobody
    gs.wait_state(after, "COMPLETED")
    assert not (gs.work / "never").exists()


def test_never_satisfied_is_cancelled_when_configured(make_gs):
    gs = make_gs(DEFAULT_CONFIG.replace("[jobs]", "[jobs]\ncancel_never_satisfied = true"))
    a = gs.gsub("--wrap", "exit 1")
    b = gs.gsub("-d", f"afterok:{a}", "--wrap", "touch never")
    j = gs.wait_state(b, "CANCELLED")
    assert "never satisfied" in j["reason"]
    assert not (gs.work / "never").exists()


def test_singleton_runs_one_at_a_time(gs):
    ids = [
        gs.gsub("-N", "one", "-d", "singleton", "--wrap", "echo start >> log; sleep 0.5; echo end >> log")
        for _ in range(3)
    ]
    for jid in ids:
        gs.wait_state(jid, "COMPLETED")
    assert (gs.work / "log").read_text().split() == ["start", "end"] * 3


def test_jobs_see_slurm_and_pbs_variables(gs):
    jid = gs.gsub(
        "-n",
        "2",
        "-N",
        "compat",
        "--wrap",
        "echo $SLURM_JOB_ID $SLURM_CPUS_ON_NODE $PBS_JOBID $NSLOTS $PBS_O_WORKDIR > env.out",
    )
    gs.wait_state(jid, "COMPLETED")
    host = socket.gethostname().split(".")[0]
    assert (gs.work / "env.out").read_text().split() == [str(jid), "2", f"{jid}.{host}", "2", str(gs.work)]
