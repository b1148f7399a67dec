"""The user-ratio predictor in the daemon (in process: stub executor, driven clock): a user's ratio of run
time to walltime, learned from their completed jobs (and kept across a restart), lets their long-walltime
job backfill a hole."""

from __future__ import annotations

from tests.daemon.driven import Driven

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


def test_a_users_learned_ratio_backfills_their_job(stub_daemon):
    dr = Driven(stub_daemon(CONFIG))
    # two jobs that use about 1 s of the 100 s they ask for: the user's ratio is about 0.01
    first = [dr.submit(1, walltime=100) for _ in range(2)]
    dr.run_until(lambda: all(dr.state(j) == "COMPLETED" for j in first), 10)
    dr.restart(stub_daemon)  # the ratios are read back from the job history
    # A (2 cores, walltime 12 s) and B (2 cores, long) run; C, the head, needs 6 cores: its
    # reservation is A's walltime end, and no core is left over beside it.  D asks for 5 minutes on
    # 2 cores: by its walltime it cannot start before C, by the user's ratio (about 3 s) it fits.
    a = dr.submit(11, name="A", ncpus=2, walltime=12)
    b = dr.submit(None, name="B", ncpus=2, walltime=600)
    assert dr.running(a) and dr.running(b)
    c = dr.submit(1, name="C", ncpus=6, walltime=60)
    d = dr.submit(2, name="D", ncpus=2, walltime=300, checkpoint="signal")
    jd = dr.job(d)
    assert jd["state"] in ("RUNNING", "COMPLETED")
    assert jd["backfilled"]
    assert dr.state(c) == "PENDING"
    dr.run_until(lambda: dr.state(c) in ("RUNNING", "COMPLETED"), 60)
    jc = dr.job(c)
    dr.run_until(lambda: dr.state(d) == "COMPLETED", 60)
    jd = dr.job(d)
    assert jd["start_time"] < jc["start_time"] and jd["preemptions"] == 0
