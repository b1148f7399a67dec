"""gacct on a real daemon with GPUs: AllocTRES, ReqTRES, AllocGPUS and the GPU time summed over a job's
segments (a machine of 8 cores on 2 boards with 2 declared GPUs)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import wait_for
from tests.daemon.test_devices import WAIT_GO, topo_config


@pytest.fixture
def gpu_gs(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root, gpus=2))
    gs.start()
    return gs


def acct(gs, *args: str) -> dict[str, dict]:
    r = gs.run("gacct", "--json", *args, check=True)
    return {j["jobid"]: j for j in json.loads(r.stdout)["jobs"]}


def segments(gs, jid: int) -> list[tuple[float, float, str]]:
    """The job's run segments as the daemon recorded them: (start, end, devices)."""
    from gridsched.protocol.state import StateDB

    db = StateDB(gs.spool / "state.db")
    try:
        row = db.job(jid)
    finally:
        db.close()
    assert row is not None
    return [(s["start"], s["end"], s.get("devices", "")) for s in row["segments"]]


def test_gpu_time_and_alloc_tres(gpu_gs):
    gs = gpu_gs
    two = gs.gsub("--gpus", "2", "-n", "2", "--mem", "1G", "-t", "1m", "--wrap", "sleep 1")
    cpu = gs.gsub("-n", "1", "-t", "1m", "--wrap", "sleep 0.2")
    # a one-GPU job sent back to the queue while it runs: two segments, its GPU time is their sum
    mark = "started.$GS_JOBID"
    script = f"if [ -e {mark} ]; then sleep 0.5; else touch {mark}; {WAIT_GO}; fi"
    again = gs.gsub("--gpus", "1", "-t", "1m", "--wrap", script)
    gs.wait_state(again, "RUNNING")
    wait_for((gs.work / f"started.{again}").exists, 20, "the first segment to start")
    gs.run("grequeue", str(again), check=True)
    for jid in (two, cpu, again):
        gs.wait_state(jid, "COMPLETED", timeout=60)

    a = acct(gs)
    t, c, g = a[str(two)], a[str(cpu)], a[str(again)]
    (s2,) = segments(gs, two)
    assert s2[2] == "gpu:0,1"
    assert t["gpus"] == 2 and t["gpu_time"] == pytest.approx(2 * (s2[1] - s2[0]), abs=1e-3)
    assert t["gpu_time"] >= 2.0  # 2 GPUs for a job of at least a second
    assert t["alloc_tres"] == "cpu=2,gres/gpu=2,mem=1G,node=1"
    assert (c["gpus"], c["gpu_time"], c["alloc_tres"]) == (0, 0.0, "cpu=1,node=1")
    segs = segments(gs, again)
    print("segments of the requeued GPU job:", segs)
    assert len(segs) == 2 and all(d.startswith("gpu:") for _, _, d in segs)
    assert g["gpus"] == 1 and g["gpu_time"] == pytest.approx(sum(e - s for s, e, _ in segs), abs=1e-3)
    assert g["gpu_time"] == pytest.approx(g["run"], abs=1e-2)

    fmt = "JobID,AllocCPUS,AllocGPUS,AllocTRES,ReqTRES,GPUTime,GPUTimeRAW,CPUTimeRAW"
    r = gs.run("gacct", "-j", f"{two},{cpu}", "-o", fmt, "-P", check=True)
    head, *lines = (ln.split("|") for ln in r.stdout.splitlines())
    assert head == fmt.split(",")
    rows = {ln[0]: ln for ln in lines}
    assert rows[str(two)][1:5] == ["2", "2", "cpu=2,gres/gpu=2,mem=1G,node=1", "cpu=2,gres/gpu=2,mem=1G,node=1"]
    assert rows[str(two)][6] == str(int(round(t["gpu_time"])))
    assert rows[str(cpu)][1:7] == ["1", "0", "cpu=1,node=1", "cpu=1,node=1", "00:00:00", "0"]
    # the table shows the devices beside the cores
    r = gs.run("gacct", "-j", str(two), check=True)
    assert "2 gpu:0,1" in r.stdout
