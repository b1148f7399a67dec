"""Preemption for a head asking for GPUs, in the real daemon: the victims free distinct GPUs.

Two GPUs of two slots each (``[devices.gpu] share = 2``), one per board of
four cores.  B holds four cores until its walltime; the head H asks for five
cores and two GPUs.  Meanwhile three checkpointable one-GPU jobs are
backfilled (``--gpu-bind none``: the lowest-indexed GPU with a free slot):
X1 and X2 share GPU 0, Y (two cores) holds a slot of GPU 1.  When B ends,
H's reservation has come and one core and one slot are missing.  Preempting
Y (the most cores, the choice by count) would free a second slot of GPU 1,
not two GPUs; so one of X1 and X2 is preempted, and H starts at once on both
GPUs.
"""

from __future__ import annotations

from tests.conftest import wait_for
from tests.daemon.test_devices import topo_config

REPORT = 'echo "$GS_GPUS" > gpus.$GS_JOBID; '


def config(root) -> str:
    text = topo_config(root, gpus=2, share=2, policy="checkpoint-backfill")
    return text.replace(
        '[scheduler]\npolicy = "checkpoint-backfill"\n',
        '[scheduler]\npolicy = "checkpoint-backfill"\np = 0.25\nthreshold = "5s"\n',
    ).replace('checkpoint_grace = "5s"', 'checkpoint_grace = "1s"')


def gpus(gs, jid: int) -> str:
    path = gs.work / f"gpus.{jid}"
    return wait_for(lambda: path.exists() and path.read_text().strip() or None, 20, f"job {jid}'s GPUs")


def test_the_victims_free_two_distinct_gpus_not_two_slots_of_one(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(config(gs.root))
    gs.start()
    # B runs to its walltime, so the head's reservation is B's end, as the scheduler counts it
    b = gs.gsub("-n", "4", "-t", "30s", "--wrap", "sleep 100")
    gs.wait_state(b, "RUNNING")
    h = gs.gsub("-n", "5", "--gpus", "2", "-t", "1m", "--wrap", REPORT + "sleep 30")
    # 60 s walltimes, counted as 15 s (p = 0.25): they end by the reservation, so they are backfilled
    backfill = ("-t", "60s", "--checkpoint", "requeue", "--gpus", "1", "--gpu-bind", "none")
    x1 = gs.gsub("-n", "1", *backfill, "--wrap", REPORT + "sleep 100")
    gs.wait_state(x1, "RUNNING")
    x2 = gs.gsub("-n", "1", *backfill, "--wrap", REPORT + "sleep 100")
    gs.wait_state(x2, "RUNNING")
    y = gs.gsub("-n", "2", *backfill, "--wrap", REPORT + "sleep 100")
    gs.wait_state(y, "RUNNING")
    assert gs.job(h)["state"] == "PENDING"
    assert (gpus(gs, x1), gpus(gs, x2), gpus(gs, y)) == ("0", "0", "1"), gs.log()
    gs.wait_state(b, "TIMEOUT", timeout=60)
    gs.wait_state(h, "RUNNING", timeout=20)
    assert gpus(gs, h) == "0,1"
    states = {j: gs.job(j)["state"] for j in (x1, x2, y)}
    assert states[y] == "RUNNING", (states, gs.log())
    assert sorted((states[x1], states[x2])) == ["PENDING", "RUNNING"], (states, gs.log())
    assert gs.job(y).get("restarts", 0) == 0
    for jid in (x1, x2, y, h):
        gs.run("gdel", str(jid))
    for jid in (x1, x2, y, h):
        gs.wait_state(jid, "CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", timeout=30)
