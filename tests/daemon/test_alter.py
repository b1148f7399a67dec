"""grequeue against a real daemon, with real jobs: a running checkpointable job resumes from its checkpoint, a
finished one runs again.

The rest of galter and grequeue (changing pending jobs and a running job's walltime, refusals, a running job
sent back to the queue) is tested in process, on a driven clock, in test_alter_driven.py."""

from __future__ import annotations

from tests.conftest import wait_for

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
