"""The checkpoint-based backfill scenario, in the real daemon with real jobs.

A declared 8-core machine.  A (2 cores, walltime 12 s, really 11 s) and B
(2 cores, long) run; C, the head, needs 6 cores, which are free only when A
ends: its reservation is A's walltime end.  D and E (2 cores each) have a 30 s
walltime, longer than the hole before C's reservation; D really takes 2 s, E
takes longer than the hole.  With threshold 10 s and p = 0.2 both count as
6 s, which fits.  ``easy`` backfills neither; ``checkpoint-backfill``
backfills both, D ends before C's reservation, E is checkpointed at that
moment, C starts on time, and E resumes later from its checkpoint.

Here the jobs are real processes (E is the Python example checkpointing job,
which saves and resumes its work), on a shorter clock: A's walltime is 8 s (really
7 s), E's 40 units take 10 s, and p = 0.1 counts D and E as 3 s each; the scheduling of the scenario under each
policy and checkpoint mode is tested in process, on a driven clock, in
test_backfill_driven.py.  The shell example checkpointing job is checkpointed
and resumed as a real process in tests/test_examples.py and, through a real
daemon, in test_alter.py (grequeue).
"""

from __future__ import annotations

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "scripts" / "examples"


def config(policy: str, p: float = 0.2) -> str:
    return f"""
[scheduler]
policy = "{policy}"
p = {p}
threshold = "10s"
[jobs]
kill_grace = "2s"
checkpoint_grace = "5s"
[machine]
cores = 8
[daemon]
autostart = false
"""


def submit_scenario(
    gs, e_mode: str = "signal", e_script: str = "checkpoint_counter.sh", a_secs: int = 12, units: int = 40
):
    a = gs.gsub("-N", "A", "-n", "2", "-t", f"{a_secs}s", "--wrap", f"sleep {a_secs - 1}")
    b = gs.gsub("-N", "B", "-n", "2", "-t", "10m", "--wrap", "sleep 600")
    gs.wait_state(a, "RUNNING")
    gs.wait_state(b, "RUNNING")
    c = gs.gsub("-N", "C", "-n", "6", "-t", "1m", "--wrap", "sleep 2")
    d = gs.gsub("-N", "D", "-n", "2", "-t", "30s", "--checkpoint", "signal", "--wrap", "sleep 2")
    e = gs.gsub(
        "-N",
        "E",
        "-n",
        "2",
        "-t",
        f"{max(30, units // 2 + 10)}s",
        "--checkpoint",
        e_mode,
        str(EXAMPLES / e_script),
        str(units),
    )
    return a, b, c, d, e


def test_checkpoint_backfill_scenario(make_gs):
    gs = make_gs(config("checkpoint-backfill", p=0.1))
    # E's 40 units take 10 s: longer than the hole before C's reservation (under 8 s) even on an idle machine
    gs.env["UNIT_SECONDS"] = "0.25"
    a, b, c, d, e = submit_scenario(gs, e_script="checkpoint_counter.py", a_secs=8)
    jd = gs.wait_state(d, "RUNNING", "COMPLETED")
    je = gs.wait_state(e, "RUNNING")
    assert gs.job(c)["state"] == "PENDING"
    assert jd["backfilled"] and je["backfilled"]
    jc = gs.wait_state(c, "RUNNING", "COMPLETED", timeout=40)
    ja = gs.job(a)
    reservation = ja["start_time"] + 8
    jd = gs.wait_state(d, "COMPLETED")
    assert jd["end_time"] < reservation  # D really fit the hole
    assert jc["start_time"] >= reservation - 0.5  # the head was not started early on overrun cores...
    assert jc["start_time"] <= reservation + 4  # ...and it started on time: E checkpointed at once
    je = gs.job(e)
    assert je["preemptions"] == 1 and je["checkpoints"] == 1
    gs.run("gstat", "-f", str(e), "--json")
    je = gs.wait_state(e, "COMPLETED", timeout=60)
    assert je["restarts"] == 1
    units = (gs.work / "units.log").read_text().split("\n")
    units = [u for u in units if u]
    assert units == [f"unit {i}" for i in range(1, 41)]  # all 40 units, each once, in order
    out = open(je["stdout"]).read()
    assert "checkpointed at unit" in out and "done: 40 units" in out
    assert gs.job(c)["state"] == "COMPLETED"
    gs.run("gdel", str(b))
