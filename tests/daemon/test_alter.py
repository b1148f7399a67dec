"""galter and grequeue against a real daemon: change pending jobs and a running job's walltime, refuse what
cannot be changed, send running and finished jobs back to the queue."""

from __future__ import annotations

import json

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.daemon

ONE_CORE = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
checkpoint_grace = "5s"
[machine]
cores = 2
[daemon]
autostart = false
"""

WAIT_GO = "i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"


def blocker(gs) -> int:
    """A job on both cores until the file ``go`` appears: what it blocks stays pending."""
    jid = gs.gsub("-n", "2", "--wrap", WAIT_GO)
    gs.wait_state(jid, "RUNNING")
    return jid


def test_pending_job_starts_with_the_new_values(make_gs):
    gs = make_gs(ONE_CORE)
    b = blocker(gs)
    first = gs.gsub("-n", "1", "--wrap", "true")
    jid = gs.gsub("-n", "1", "-t", "10", "-N", "old", "--wrap", 'echo "$GS_NCPUS $GS_WALLTIME $GS_JOBNAME"')
    r = gs.run("galter", str(jid), "-n", "2", "-t", "5:00", "-N", "new", "-d", f"afterok:{first}")
    assert r.returncode == 0 and r.stdout == f"job {jid}: changing\n", r.stderr
    j = wait_for(lambda: (x := gs.job(jid))["name"] == "new" and x, what="the change")
    assert (j["ncpus"], j["walltime"]) == (2, 300)
    (gs.work / "go").touch()
    gs.wait_state(b, "COMPLETED")
    gs.wait_state(first, "COMPLETED")
    j = gs.wait_state(jid, "COMPLETED")
    assert open(j["stdout"]).read().split()[:2] == ["2", "300"]


def test_dependency_added_keeps_the_job_waiting(make_gs):
    gs = make_gs(ONE_CORE)
    b = blocker(gs)
    jid = gs.gsub("-n", "1", "--wrap", "true")
    later = gs.gsub("-n", "1", "--hold", "--wrap", "true")
    assert gs.run("galter", str(jid), "-d", f"afterok:{later}").returncode == 0
    (gs.work / "go").touch()
    gs.wait_state(b, "COMPLETED")
    j = wait_for(lambda: (x := gs.job(jid))["reason"] and x, what="the dependency's reason")
    assert j["state"] == "PENDING" and str(later) in j["reason"], j
    gs.kill9()  # the change is in the state db: a restarted daemon keeps it
    gs.start()
    j = gs.job(jid)
    assert j["state"] == "PENDING" and str(later) in j["reason"], j
    # a cycle, the job on itself too, is refused and nothing changes
    r = gs.run("galter", str(later), "-d", f"afterok:{jid}")
    assert (
        r.returncode == 1 and r.stderr == f"galter: error: job {later}: depend: a cycle ({later} -> {jid} -> {later})\n"
    )
    r = gs.run("galter", str(jid), "-d", f"afterany:{jid}")
    assert r.returncode == 1 and "depend: a cycle" in r.stderr
    assert gs.run("galter", str(jid), "-d", "").returncode == 0
    gs.wait_state(jid, "COMPLETED")


def test_running_walltime_shortened_times_out_at_the_new_limit(make_gs):
    gs = make_gs(ONE_CORE)
    jid = gs.gsub("-n", "1", "-t", "10:00", "--wrap", "sleep 120")
    gs.wait_state(jid, "RUNNING")
    r = gs.run("galter", str(jid), "-t", "0:03")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: gs.job(jid)["walltime"] == 3, what="the new walltime in gstat")
    j = gs.wait_state(jid, "TIMEOUT", timeout=20)
    assert j["reason"] == "reached its walltime"
    # anything but the walltime of a running job is refused; so is a finished job
    r = gs.run("galter", str(jid), "-t", "1:00")
    assert r.returncode == 1 and r.stderr == (
        f"galter: error: job {jid}: is TIMEOUT: only pending, held or running jobs can be changed\n"
    )


def test_running_job_only_its_walltime(make_gs):
    gs = make_gs(ONE_CORE)
    jid = gs.gsub("-n", "1", "-t", "10:00", "--wrap", WAIT_GO)
    gs.wait_state(jid, "RUNNING")
    r = gs.run("galter", str(jid), "-n", "2")
    assert r.returncode == 1 and r.stderr == f"galter: error: job {jid}: is RUNNING: only its walltime can change\n"
    # the daemon's owner is its admin in personal mode: it may lengthen
    assert gs.run("galter", str(jid), "-t", "20:00").returncode == 0
    wait_for(lambda: gs.job(jid)["walltime"] == 1200, what="the longer walltime")
    (gs.work / "go").touch()
    gs.wait_state(jid, "COMPLETED")


def test_sizes_the_machine_cannot_hold_and_bad_values_are_refused(make_gs):
    gs = make_gs(ONE_CORE)
    b = blocker(gs)
    jid = gs.gsub("-n", "1", "--wrap", "true")
    r = gs.run("galter", str(jid), "-n", "3")
    assert r.returncode == 1 and r.stderr.startswith(f"galter: error: job {jid}: ") and "2" in r.stderr
    for args in (("--gpus", "1"), ("--mem", "100T")):
        r = gs.run("galter", str(jid), *args)
        assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("galter: error:"), (
            args,
            r.stderr,
        )
    r = gs.run("galter", str(jid), "-t", "-5")
    assert r.returncode == 2 and r.stderr.startswith("galter: error:")
    r = gs.run("galter", str(jid))
    assert r.returncode == 2 and "nothing to change" in r.stderr
    r = gs.run("galter", "999", "-t", "5")
    assert r.returncode == 1 and r.stderr == "galter: error: job 999: no such job\n"
    assert gs.job(jid)["ncpus"] == 1
    (gs.work / "go").touch()
    gs.wait_state(b, "COMPLETED")
    gs.wait_state(jid, "COMPLETED")


def test_raw_request_refused_by_the_daemon_which_keeps_running(make_gs):
    gs = make_gs(ONE_CORE)
    b = blocker(gs)
    jid = gs.gsub("-n", "1", "--wrap", "true")
    incoming = gs.spool / "incoming"
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
    gs.run("gstat")  # wakes nothing; the daemon scans incoming/
    why = {key: wait_for(lambda k=key: _why(gs, f"{k}.json"), what=f"the refusal of {key}") for key in bad}
    assert "can never run" in why["too-big"] or "cores" in why["too-big"]
    assert "cycle" in why["self-dep"]
    assert "only its walltime can change" in why["running"]
    assert "unknown field" in why["unknown"]
    assert "nothing to change" in why["empty"]
    assert "is PENDING: only running or finished jobs can be requeued" in why["requeue-pending"]
    assert gs.alive()
    assert gs.job(jid)["ncpus"] == 1
    (gs.work / "go").touch()
    gs.wait_state(jid, "COMPLETED")


def _why(gs, name: str) -> str | None:
    p = gs.spool / "quarantine" / (name + ".why")
    return p.read_text() if p.exists() else None


def test_array_pending_tasks_change(make_gs):
    gs = make_gs(ONE_CORE)
    b = blocker(gs)
    arr = gs.gsub("-n", "1", "-a", "1-3", "-t", "10", "--wrap", "true")
    wait_for(lambda: len([j for j in _all(gs) if j.get("array_id") == arr or j["id"] == arr]) >= 3)
    assert gs.run("galter", f"{arr}_2", "-t", "7").returncode == 0
    wait_for(lambda: sorted(j["walltime"] for j in _tasks(gs, arr)) == [420, 600, 600], what="one task changed")
    assert gs.run("galter", str(arr), "-t", "8").returncode == 0
    wait_for(lambda: [j["walltime"] for j in _tasks(gs, arr)] == [480] * 3, what="every task changed")
    (gs.work / "go").touch()
    gs.wait_state(b, "COMPLETED")


def _all(gs) -> list[dict]:
    return json.loads(gs.run("gstat", "-a", "--json", check=True).stdout)["jobs"]


def _tasks(gs, arr: int) -> list[dict]:
    return [j for j in _all(gs) if str(j.get("array_id")) == str(arr)]


CKPT = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
checkpoint_grace = "10s"
[machine]
cores = 2
[daemon]
autostart = false
"""


def test_requeue_running_checkpointable_resumes_from_its_checkpoint(make_gs):
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "examples" / "checkpoint_counter.sh"
    gs = make_gs(CKPT)
    jid = gs.gsub("--checkpoint", "signal", "-t", "5:00", str(script), "30")
    gs.wait_state(jid, "RUNNING")
    ledger = gs.work / "units.log"
    wait_for(lambda: ledger.exists() and len(ledger.read_text().split("\n")) > 4, what="some units done")
    r = gs.run("grequeue", str(jid))
    assert r.returncode == 0 and r.stdout == f"job {jid}: requeueing\n", r.stderr
    j = gs.wait_state(jid, "COMPLETED", timeout=60)
    units = ledger.read_text().splitlines()
    assert units == [f"unit {k}" for k in range(1, 31)]  # every unit once: resumed, not started over
    assert j["restarts"] >= 1 and j["checkpoints"] >= 1
    out = open(j["stdout"]).read()
    assert "checkpointed at unit" in out and "(restart 1)" in out


def test_requeue_finished_runs_again_and_pending_refused(make_gs):
    gs = make_gs(ONE_CORE)
    jid = gs.gsub("-n", "1", "-o", "out.%j", "--open-mode", "append", "--wrap", "echo run $GS_RESTART_COUNT")
    gs.wait_state(jid, "COMPLETED")
    b = blocker(gs)
    r = gs.run("grequeue", str(jid))
    assert r.returncode == 0, r.stderr
    gs.wait_state(jid, "PENDING")
    r = gs.run("grequeue", str(jid))
    assert r.returncode == 1 and r.stderr == (
        f"grequeue: error: job {jid}: is PENDING: only running or finished jobs can be requeued\n"
    )
    r = gs.run("grequeue", "999")
    assert r.returncode == 1 and r.stderr == "grequeue: error: job 999: no such job\n"
    (gs.work / "go").touch()
    gs.wait_state(b, "COMPLETED")
    j = gs.wait_state(jid, "COMPLETED")
    assert j["restarts"] == 1
    assert (gs.work / f"out.{jid}").read_text() == "run 0\nrun 1\n"


def test_requeue_running_plain_job_starts_again(make_gs):
    gs = make_gs(ONE_CORE)
    jid = gs.gsub("-n", "1", "--wrap", 'echo "start $GS_RESTART_COUNT" >> log; ' + WAIT_GO)
    gs.wait_state(jid, "RUNNING")
    wait_for(lambda: (gs.work / "log").exists(), what="the first start")
    assert gs.run("grequeue", str(jid)).returncode == 0
    wait_for(lambda: (gs.work / "log").read_text() == "start 0\nstart 1\n", what="the second start")
    (gs.work / "go").touch()
    j = gs.wait_state(jid, "COMPLETED")
    assert j["restarts"] == 1


def test_place_board_larger_than_a_board_is_refused(make_gs, tmp_path):
    from tests.daemon.test_topology import topo_config

    gs = make_gs("", start=False)
    gs.cfgfile.write_text(topo_config(gs.root))
    gs.start()
    jid = gs.gsub("--hold", "-n", "2", "--wrap", "true")
    gs.wait_state(jid, "HELD")
    r = gs.run("galter", str(jid), "-n", "6", "--place", "board")
    assert r.returncode == 1 and r.stderr.startswith(f"galter: error: job {jid}: can never run:"), r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert gs.run("galter", str(jid), "-n", "4", "--place", "board").returncode == 0
    wait_for(lambda: gs.job(jid)["ncpus"] == 4, what="the change")
    assert gs.run("grls", str(jid)).returncode == 0
    j = gs.wait_state(jid, "COMPLETED")
    assert len({c // 4 for c in cpuset_of(j)}) == 1


def cpuset_of(j: dict) -> list[int]:
    from gridsched.core import cpuset

    return sorted(cpuset.parse(j["cores"]))


def test_an_exclusive_job_keeps_every_core(make_gs):
    """An --exclusive job takes the whole machine: galter refuses to change its cores, and so does the daemon for
    the same request written by hand; its walltime still changes."""
    gs = make_gs(ONE_CORE)
    b = blocker(gs)
    jid = gs.gsub("--exclusive", "-t", "10", "--wrap", "true")
    r = gs.run("galter", str(jid), "-n", "1")
    why = "an --exclusive job takes every core (2): its cores cannot change"
    assert (r.returncode, r.stderr) == (1, f"galter: error: job {jid}: {why}\n")
    req = {"type": "alter", "jobs": [jid], "changes": {"ncpus": 1}}
    (gs.spool / "incoming" / "exclusive-ncpus.json").write_text(json.dumps(req))
    assert why in wait_for(lambda: _why(gs, "exclusive-ncpus.json"), what="the refusal")
    assert gs.run("galter", str(jid), "-t", "20").returncode == 0
    wait_for(lambda: gs.job(jid)["walltime"] == 1200, what="the new walltime")
    (gs.work / "go").touch()
    gs.wait_state(b, "COMPLETED")
    assert gs.wait_state(jid, "COMPLETED")["ncpus"] == 2
