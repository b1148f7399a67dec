"""gacct's GPU fields in-process, on rows written with the daemon's own StateDB class: GPU time over
segments (a continued suspended segment names no devices), AllocTRES and ReqTRES forms."""

from __future__ import annotations

import json

import pytest

from gridsched.cli import gacct
from gridsched.cli.gacct_format import tres_memory

T0 = 1_800_000_000.0


def test_gpu_time_over_segments(env, run, put_rows, make_row):
    put_rows(
        make_row(
            1,
            state="COMPLETED",
            ncpus=4,
            submit_time=T0,
            start_time=T0 + 10,
            end_time=T0 + 200,
            devices="gpu:2,3",
            # 2 GPUs over 40 s; suspended, continued (no devices named: the same 2) over 50 s; preempted
            # and restarted on 2 others over 60 s: 2 x 150 = 300 GPU-seconds
            segments=[
                {"start": T0 + 10, "end": T0 + 50, "devices": "gpu:0,1"},
                {"start": T0 + 60, "end": T0 + 110, "resumed": True},
                {"start": T0 + 140, "end": T0 + 200, "devices": "gpu:2,3"},
            ],
            spec={"mem": 3 << 30, "devices": [{"type": "gpu", "count": 2, "model": "", "bind": "closest"}]},
        ),
        make_row(
            2,
            state="COMPLETED",
            ncpus=1,
            submit_time=T0,
            start_time=T0,
            end_time=T0 + 30,
            devices="gpu:0;fpga:1",
            segments=[{"start": T0, "end": T0 + 30, "devices": "gpu:0;fpga:1"}],
            spec={"mem": 1500 << 20},
        ),
        make_row(3, state="CANCELLED", ncpus=2, submit_time=T0, end_time=T0 + 5, spec={}),
    )
    r = run(gacct.cli, ["--json"])
    assert r.exit_code == 0
    a = {j["id"]: j for j in json.loads(r.stdout)["jobs"]}
    assert (a[1]["gpus"], a[1]["gpu_time"], a[1]["alloc_tres"]) == (2, 300.0, "cpu=4,gres/gpu=2,mem=3G,node=1")
    assert (a[2]["gpus"], a[2]["gpu_time"]) == (1, 30.0)
    assert a[2]["alloc_tres"] == "cpu=1,gres/fpga=1,gres/gpu=1,mem=1500M,node=1"
    assert (a[3]["gpus"], a[3]["gpu_time"], a[3]["alloc_tres"]) == (0, 0.0, "")  # never started
    r = run(gacct.cli, ["-o", "JobID,AllocGPUS,GPUTime,GPUTimeRAW,ReqTRES", "-P", "-n"])
    assert r.stdout.splitlines() == [
        "1|2|00:05:00|300|cpu=4,gres/gpu=2,mem=3G,node=1",
        "2|1|00:00:30|30|cpu=1,mem=1500M,node=1",
        "3|0|00:00:00|0|cpu=2,node=1",
    ]


@pytest.mark.parametrize(
    "nbytes, text", [(1, "1M"), (1 << 20, "1M"), (1000 << 20, "1000M"), (16 << 30, "16G"), (2 << 40, "2T")]
)
def test_tres_memory(nbytes, text):
    assert tres_memory(nbytes) == text
