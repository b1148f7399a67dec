"""The same GPU workload through the daemon and through gsim gives the same schedule.

The daemon runs in process (the stub executor, a driven clock: tests/daemon/driven.py); the stand-in jobs
do the work the trace says they do.

The machine of test_devices: 8 cores on 2 boards, here with 2 GPUs (one a board), under easy:
  A (t=0): 1 core and both GPUs, runs 3 s;  B (t=0): 1 core and 1 GPU, runs 1 s: it waits for A's GPUs;
  C (t=0): 2 cores, no GPU, runs 1 s: it runs at once beside A (it ends long before B's reservation).
The order is A, C, then B once A has ended.
"""

from __future__ import annotations

import csv
import subprocess

from tests.conftest import BIN
from tests.daemon.driven import Driven
from tests.daemon.test_devices import topo_config

SWF = """; MaxProcs: 8
1 0 -1 3 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 1 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1
3 0 -1 1 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
"""
GPUS = "job,gpus\n1,2\n2,1\n"


def test_daemon_and_gsim_agree_on_gpu_jobs(stub_daemon, tmp_path):
    config = topo_config(tmp_path, gpus=2)
    cfgfile = tmp_path / "gridsched.toml"
    cfgfile.write_text(config)
    trace, devices, out = tmp_path / "gpu.swf", tmp_path / "gpus.csv", tmp_path / "jobs.csv"
    trace.write_text(SWF)
    devices.write_text(GPUS)
    args = ["run", str(trace), "--policy", "easy", "--topology", str(tmp_path / "topology.toml")]
    args += ["--devices", str(devices), "--jobs-out", str(out), "--config", str(cfgfile)]
    subprocess.run([str(BIN / "gsim"), *args], check=True, capture_output=True, text=True)
    rows = list(csv.DictReader(out.open()))
    assert [(float(r["start"]), r["gpus"]) for r in rows] == [(0.0, "2"), (3.0, "1"), (0.0, "0")]
    sim_order = ["ABC"[int(r["id"]) - 1] for r in sorted(rows, key=lambda r: (float(r["start"]), int(r["id"])))]
    assert sim_order == ["A", "C", "B"]

    dr = Driven(stub_daemon(config))
    a = dr.gsub("-N", "A", "-n", "1", "--gpus", "2", "-t", "10s", "--wrap", "sleep 3", work=3)
    b = dr.gsub("-N", "B", "-n", "1", "--gpus", "1", "-t", "10s", "--wrap", "sleep 1", work=1)
    c = dr.gsub("-N", "C", "-n", "2", "-t", "10s", "--wrap", "sleep 1", work=1)
    dr.run_until(lambda: all(dr.state(j) == "COMPLETED" for j in (a, b, c)), 60)
    jobs = [dr.job(i) for i in (a, b, c)]
    names = dict(zip((a, b, c), "ABC"))
    assert [names[j["id"]] for j in sorted(jobs, key=lambda j: (j["start_time"], j["id"]))] == sim_order
    ja, jb, jc = jobs
    assert jb["start_time"] >= ja["end_time"]  # B waited for A's GPUs
    assert jc["start_time"] < ja["end_time"]  # C ran beside A
