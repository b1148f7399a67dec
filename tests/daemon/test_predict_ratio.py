"""The user-ratio predictor in the real daemon: a user's ratio of run time to walltime, learned from
their completed jobs (and kept across a restart), lets their long-walltime job backfill a hole."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.daemon

CONFIG = """
[scheduler]
policy = "checkpoint-backfill"
predictor = "user-ratio"
threshold = "10s"
[jobs]
kill_grace = "2s"
checkpoint_grace = "5s"
[machine]
cores = 8
[daemon]
autostart = false
"""


def test_a_users_learned_ratio_backfills_their_job(make_gs):
    gs = make_gs(CONFIG)
    # two jobs that use about 1 s of the 100 s they ask for: the user's ratio is about 0.01
    for j in [gs.gsub("-t", "100s", "--wrap", "sleep 1") for _ in range(2)]:
        gs.wait_state(j, "COMPLETED")
    gs.stop()
    gs.start()  # the ratios are read back from the job history
    # A (2 cores, walltime 12 s) and B (2 cores, long) run; C, the head, needs 6 cores: its
    # reservation is A's walltime end, and no core is left over beside it.  D asks for 5 minutes on
    # 2 cores: by its walltime it cannot start before C, by the user's ratio (about 3 s) it fits.
    a = gs.gsub("-N", "A", "-n", "2", "-t", "12s", "--wrap", "sleep 11")
    b = gs.gsub("-N", "B", "-n", "2", "-t", "10m", "--wrap", "sleep 600")
    gs.wait_state(a, "RUNNING")
    gs.wait_state(b, "RUNNING")
    c = gs.gsub("-N", "C", "-n", "6", "-t", "1m", "--wrap", "sleep 1")
    d = gs.gsub("-N", "D", "-n", "2", "-t", "5m", "--checkpoint", "signal", "--wrap", "sleep 2")
    jd = gs.wait_state(d, "RUNNING", "COMPLETED")
    assert jd["backfilled"]
    assert gs.job(c)["state"] == "PENDING"
    jc = gs.wait_state(c, "RUNNING", "COMPLETED", timeout=40)
    jd = gs.wait_state(d, "COMPLETED")
    assert jd["start_time"] < jc["start_time"] and jd["preemptions"] == 0
    gs.run("gdel", str(b))
