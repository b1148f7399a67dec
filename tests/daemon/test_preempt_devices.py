"""Preemption for a head asking for GPUs, in the daemon (in process: stub executor, driven clock): the victims
free distinct GPUs.

Two GPUs of two slots each (``[devices.gpu] share = 2``), one per board of
four cores.  B holds four cores until its walltime; the head H asks for five
cores and two GPUs.  Meanwhile three checkpointable one-GPU jobs are
backfilled (``--gpu-bind none``: the lowest-indexed GPU with a free slot):
X1 and X2 share GPU 0, Y (two cores) holds a slot of GPU 1.  When B ends,
H's reservation has come and one core and one slot are missing.  Preempting
Y (the most cores, the choice by count) would free a second slot of GPU 1,
not two GPUs; so one of X1 and X2 is preempted, and H starts at once on both
GPUs.  A GPU job preempted and resumed with real processes is in test_devices.py.
"""

from __future__ import annotations

from tests.daemon.driven import Driven
from tests.daemon.test_devices import topo_config


def config(root) -> str:
    text = topo_config(root, gpus=2, share=2, policy="checkpoint-backfill")
    return text.replace(
        '[scheduler]\npolicy = "checkpoint-backfill"\n',
        '[scheduler]\npolicy = "checkpoint-backfill"\np = 0.25\nthreshold = "5s"\n',
    ).replace('checkpoint_grace = "5s"', 'checkpoint_grace = "1s"')


def gpus(dr: Driven, jid: int) -> str:
    """The GPUs the job's last start was given (its GS_GPUS)."""
    return [s for s in dr.d.ex.started if s.job_id == jid][-1].env["GS_GPUS"]


def test_the_victims_free_two_distinct_gpus_not_two_slots_of_one(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path)))
    # B runs to its walltime, so the head's reservation is B's end, as the scheduler counts it
    b = dr.gsub("-n", "4", "-t", "30s", "--wrap", "sleep 100", work=100)
    assert dr.running(b)
    dr.run_to(0.2)
    h = dr.gsub("-n", "5", "--gpus", "2", "-t", "1m", "--wrap", "sleep 30", work=30)
    # 60 s walltimes, counted as 15 s (p = 0.25): they end by the reservation, so they are backfilled
    backfill = ("-t", "60s", "--checkpoint", "requeue", "--gpus", "1", "--gpu-bind", "none")
    x1 = dr.gsub("-n", "1", *backfill, "--wrap", "sleep 100", work=100)
    x2 = dr.gsub("-n", "1", *backfill, "--wrap", "sleep 100", work=100)
    y = dr.gsub("-n", "2", *backfill, "--wrap", "sleep 100", work=100)
    assert dr.running(x1) and dr.running(x2) and dr.running(y)
    assert dr.state(h) == "PENDING"
    assert (gpus(dr, x1), gpus(dr, x2), gpus(dr, y)) == ("0", "0", "1")
    dr.run_until(lambda: dr.state(b) == "TIMEOUT", 60)
    dr.run_until(lambda: dr.state(h) == "RUNNING", dr.now - dr.t0 + 20)
    assert gpus(dr, h) == "0,1"
    states = {j: dr.state(j) for j in (x1, x2, y)}
    assert states[y] == "RUNNING", states
    assert sorted((states[x1], states[x2])) == ["PENDING", "RUNNING"], states
    assert dr.job(y).get("restarts", 0) == 0
