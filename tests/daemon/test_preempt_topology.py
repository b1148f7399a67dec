"""Preemption on the machine map, in the real daemon: the job preempted is the one that frees a placement.

Two boards of four cores.  B1 (2 cores) and B2 (3 cores) run on boards 0 and
1; the head H wants 4 cores on one board; X (2 cores, board 0) and Y (1 core,
board 1) are checkpointable jobs backfilled meanwhile.  When B2 ends, H's
reservation has come: preempting X (most cores) would leave no board with four
free cores, so only Y is preempted and H starts on board 1 at once.
"""

from __future__ import annotations

import os

from tests.conftest import wait_for

HOST = sorted(os.sched_getaffinity(0))


def config(root) -> str:
    topo = root / "topology.toml"
    topo.write_text(
        f'[[board]]\ncores = "0-3"\nhost_cpus = "{HOST[0]}"\n[[board]]\ncores = "4-7"\nhost_cpus = "{HOST[-1]}"\n'
    )
    return f"""
[scheduler]
policy = "checkpoint-backfill"
p = 0.25
threshold = "5s"
[jobs]
kill_grace = "1s"
checkpoint_grace = "1s"
[machine]
topology = "{topo}"
[daemon]
autostart = false
"""


def test_only_the_job_that_frees_a_board_is_preempted(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(config(gs.root))
    gs.start()
    b1 = gs.gsub("-n", "2", "-t", "2m", "--wrap", "sleep 60")
    gs.wait_state(b1, "RUNNING")
    # B2 runs to its walltime, so the head's reservation is B2's end, as the scheduler counts it
    b2 = gs.gsub("-n", "3", "-t", "16s", "--wrap", "sleep 60")
    gs.wait_state(b2, "RUNNING")
    h = gs.gsub("-n", "4", "--place", "board", "-t", "1m", "--wrap", "echo $GS_CORES > h.cores")
    # 40 s walltimes, counted as 10 s (p = 0.25): they end by the reservation, so they are backfilled
    x = gs.gsub("-n", "2", "-t", "40s", "--checkpoint", "requeue", "--wrap", "sleep 100")
    y = gs.gsub("-n", "1", "-t", "40s", "--checkpoint", "requeue", "--wrap", "sleep 100")
    gs.wait_state(x, "RUNNING")
    gs.wait_state(y, "RUNNING")
    assert gs.job(h)["state"] == "PENDING"
    assert gs.job(x)["cores"] in ("2-3", "2,3") and gs.job(y)["cores"] == "7", (gs.job(x), gs.job(y))
    b2_end = gs.wait_state(b2, "TIMEOUT", timeout=30)["end_time"]
    row = gs.wait_state(h, "RUNNING", "COMPLETED", timeout=20)
    assert row["start_time"] - b2_end < 2.0, (row["start_time"] - b2_end, gs.log())
    assert (gs.work / "h.cores").exists() or wait_for(lambda: (gs.work / "h.cores").exists(), 10, "H's output")
    assert (gs.work / "h.cores").read_text().split() == ["4-7"]
    assert gs.job(y)["preemptions"] == 1 and gs.job(x)["preemptions"] == 0
    assert gs.job(x)["state"] == "RUNNING"
    for j in (b1, x, y):
        gs.run("gdel", str(j))
