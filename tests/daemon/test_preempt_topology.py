"""Preemption on the machine map, in the daemon (in process: stub executor, driven clock): the job preempted
is the one that frees a placement.

Two boards of four cores.  B1 (2 cores) and B2 (3 cores) run on boards 0 and
1; the head H wants 4 cores on one board; X (2 cores, board 0) and Y (1 core,
board 1) are checkpointable jobs backfilled meanwhile.  When B2 ends, H's
reservation has come: preempting X (most cores) would leave no board with four
free cores, so only Y is preempted and H starts on board 1 at once.
"""

from __future__ import annotations

import os

from tests.daemon.driven import Driven

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


def test_only_the_job_that_frees_a_board_is_preempted(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path)))
    b1 = dr.submit(60, ncpus=2, walltime=120)
    assert dr.running(b1)
    # B2 runs to its walltime, so the head's reservation is B2's end, as the scheduler counts it
    b2 = dr.submit(60, ncpus=3, walltime=16)
    assert dr.running(b2)
    dr.run_to(0.2)
    h = dr.submit(1, ncpus=4, place="board", walltime=60)
    # 40 s walltimes, counted as 10 s (p = 0.25): they end by the reservation, so they are backfilled
    x = dr.submit(100, ncpus=2, walltime=40, checkpoint="requeue")
    y = dr.submit(100, ncpus=1, walltime=40, checkpoint="requeue")
    assert dr.running(x) and dr.running(y)
    assert dr.state(h) == "PENDING"
    assert dr.job(x)["cores"] in ("2-3", "2,3") and dr.job(y)["cores"] == "7", (dr.job(x), dr.job(y))
    dr.run_until(lambda: dr.state(b2) == "TIMEOUT", 30)
    b2_end = dr.job(b2)["end_time"]
    dr.run_until(lambda: dr.state(h) in ("RUNNING", "COMPLETED"), 50)
    row = dr.job(h)
    assert row["start_time"] - b2_end < 2.0, row["start_time"] - b2_end
    launched = [s for s in dr.d.ex.started if s.job_id == h]
    assert len(launched) == 1 and launched[0].env["GS_CORES"] == "4-7"  # the cores H is told it has
    assert dr.job(y)["preemptions"] == 1 and dr.job(x)["preemptions"] == 0
    assert dr.state(x) == "RUNNING"
