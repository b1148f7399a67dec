"""The same sbatch command lines given to a real Slurm 22.05 (``sbatch --test-only``, on slurm-localhost with two
GRES GPUs) and to gsub: each accepts or refuses alike, and what gsub accepts asks the memory Slurm counts.

Where no Slurm answers and none can be started here (as in CI), the test is skipped with the reason printed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.compat.slurm_local import Slurm
from tests.conftest import BIN

MiB = 1 << 20
TOPOLOGY = '[[board]]\ncores = "0-15"\nhost_cpus = "0-1"\n' + "".join(
    f'[[device]]\ntype = "gpu"\nindex = {i}\nboard = 0\n' for i in range(2)
)
# (command line, the job's memory in MiB where both accept it)
CASES = [
    (["--mem-per-gpu=2G", "--gres=gpu:2"], 4096),
    (["--mem-per-gpu=512M", "--gres=gpu:1"], 512),
    (["--mem-per-gpu=2G"], None),  # no GPUs
    (["--mem-per-gpu=2G", "--mem=1G", "--gres=gpu:1"], None),
    (["--mem-per-gpu=2G", "--mem-per-cpu=1G", "--gres=gpu:1"], None),
    (["--mem-per-gpu=lots", "--gres=gpu:1"], None),
    (["-J", "named", "--time=5", "-c", "2"], None),
]


@pytest.mark.parametrize("args, mem", CASES)
def test_sbatch_and_gsub_take_the_same_command_lines(slurm: Slurm, tmp_path: Path, args: list[str], mem: int | None):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    r = subprocess.run(
        ["sbatch", "--test-only", *args, str(script)], env=slurm.env, capture_output=True, text=True, timeout=60
    )
    slurm_ok = r.returncode == 0
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    (tmp_path / "gs.toml").write_text(
        f'[machine]\ncores = 16\ntopology = "{tmp_path / "topology.toml"}"\n[daemon]\nautostart = false\n'
    )
    env = {**slurm.env, "GRIDSCHED_SPOOL": str(tmp_path / "spool"), "GRIDSCHED_CONFIG": str(tmp_path / "gs.toml")}
    g = subprocess.run([str(BIN / "gsub"), *args, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert (g.returncode == 0) == slurm_ok, (r.stderr, g.stderr)
    if not slurm_ok:
        assert g.returncode == 2 and len(g.stderr.splitlines()) == 1, g.stderr
    elif mem is not None:
        (req,) = (tmp_path / "spool" / "incoming").glob("submit-*.json")
        assert json.loads(req.read_text())["job"]["mem"] == mem * MiB
