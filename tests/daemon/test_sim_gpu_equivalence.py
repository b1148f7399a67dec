"""The same GPU workload through the daemon (real sleep jobs) and through gsim gives the same schedule.

The machine of test_devices: 8 cores on 2 boards, here with 2 GPUs (one a board), under easy:
  A (t=0): 1 core and both GPUs, runs 3 s;  B (t=0): 1 core and 1 GPU, runs 1 s: it waits for A's GPUs;
  C (t=0): 2 cores, no GPU, runs 1 s: it runs at once beside A (it ends long before B's reservation).
The order is A, C, then B once A has ended.
"""

from __future__ import annotations

import csv
import subprocess

from tests.conftest import BIN
from tests.daemon.test_devices import topo_config

SWF = """; MaxProcs: 8
1 0 -1 3 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 1 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1
3 0 -1 1 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
"""
GPUS = "job,gpus\n1,2\n2,1\n"


def test_daemon_and_gsim_agree_on_gpu_jobs(make_gs, tmp_path):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root, gpus=2))
    trace, devices, out = tmp_path / "gpu.swf", tmp_path / "gpus.csv", tmp_path / "jobs.csv"
    trace.write_text(SWF)
    devices.write_text(GPUS)
    args = ["run", str(trace), "--policy", "easy", "--topology", str(gs.root / "topology.toml")]
    args += ["--devices", str(devices), "--jobs-out", str(out), "--config", str(gs.cfgfile)]
    subprocess.run([str(BIN / "gsim"), *args], check=True, capture_output=True, text=True, env=gs.env)
    rows = list(csv.DictReader(out.open()))
    assert [(float(r["start"]), r["gpus"]) for r in rows] == [(0.0, "2"), (3.0, "1"), (0.0, "0")]
    sim_order = ["ABC"[int(r["id"]) - 1] for r in sorted(rows, key=lambda r: (float(r["start"]), int(r["id"])))]
    assert sim_order == ["A", "C", "B"]

    gs.start()
    a = gs.gsub("-N", "A", "-n", "1", "--gpus", "2", "-t", "10s", "--wrap", "sleep 3")
    b = gs.gsub("-N", "B", "-n", "1", "--gpus", "1", "-t", "10s", "--wrap", "sleep 1")
    c = gs.gsub("-N", "C", "-n", "2", "-t", "10s", "--wrap", "sleep 1")
    for jid in (a, b, c):
        gs.wait_state(jid, "COMPLETED", timeout=60)
    jobs = [gs.job(i) for i in (a, b, c)]
    names = dict(zip((a, b, c), "ABC"))
    assert [names[j["id"]] for j in sorted(jobs, key=lambda j: (j["start_time"], j["id"]))] == sim_order
    ja, jb, jc = jobs
    assert jb["start_time"] >= ja["end_time"]  # B waited for A's GPUs
    assert jc["start_time"] < ja["end_time"]  # C ran beside A
