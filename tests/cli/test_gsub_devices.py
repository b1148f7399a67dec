"""gsub's device options, in #GS lines, and the #SBATCH / #PBS directives that become them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gridsched.cli import gsub
from gridsched.protocol.spool import Spool
from tests.cli.conftest import submitted

CPU = min(os.sched_getaffinity(0))


@pytest.fixture
def genv(env: Path) -> Path:
    """``env`` with a declared machine: 8 cores on 2 boards, 4 H100 GPUs (2 per board)."""
    topo = env / "topo.toml"
    text = f'[[board]]\ncores = "0-3"\nhost_cpus = "{CPU}"\n[[board]]\ncores = "4-7"\nhost_cpus = "{CPU}"\n'
    for i in range(4):
        text += f'[[device]]\ntype = "gpu"\nindex = {i}\nboard = {i // 2}\nmodel = "H100"\n'
    topo.write_text(text)
    (env / "cfg.toml").write_text(f'[daemon]\nautostart = false\n[machine]\ntopology = "{topo}"\n')
    return env


def devices_of(env: Path, run, script: str, *args: str) -> tuple[list[dict], int]:
    (env / "job.sh").write_text(script)
    r = run(gsub.cli, [*args, "job.sh"])
    assert r.exit_code == 0, r.stderr
    spec = submitted(Spool(env / "spool"))[-1]
    return spec.get("devices", []), spec["ncpus"]


@pytest.mark.parametrize(
    "lines, count, model, ncpus",
    [
        ("#SBATCH --gres=gpu:2", 2, "", 1),
        ("#SBATCH --gres=gpu:H100:1", 1, "H100", 1),
        ("#SBATCH --gres=gpu", 1, "", 1),
        ("#SBATCH --gpus=3", 3, "", 1),
        ("#SBATCH -G H100:2", 2, "H100", 1),
        ("#SBATCH --gpus-per-node=2", 2, "", 1),
        ("#SBATCH -n 3\n#SBATCH --gpus-per-task=1", 3, "", 3),
        ("#PBS -l select=2:ncpus=2:ngpus=1", 2, "", 4),
        ("#PBS -l ngpus=2", 2, "", 1),
        ("#GS --gpus 2 --gpu-bind strict", 2, "", 1),
        ("#GS --gres gpu:H100:4", 4, "H100", 1),
    ],
)
def test_directives_become_device_requests(genv, run, lines, count, model, ncpus):
    devs, n = devices_of(genv, run, f"#!/bin/sh\n{lines}\ntrue\n")
    assert [(d["type"], d["count"], d["model"]) for d in devs] == [("gpu", count, model)]
    assert n == ncpus
    assert devs[0]["bind"] == ("strict" if "strict" in lines else "closest")


def test_gpus_per_task_with_ntasks_and_the_exclusive_default_of_the_config(genv, run):
    cfg = genv / "cfg.toml"
    cfg.write_text(cfg.read_text() + "[devices.gpu]\nexclusive = true\nshare = 2\n")
    devs, n = devices_of(genv, run, "#!/bin/sh\ntrue\n", "--gpus-per-task", "2", "--ntasks", "2")
    assert devs == [
        {"type": "gpu", "count": 4, "model": "", "bind": "closest", "exclusive": True, "per_task": 2, "tasks": 2}
    ]
    assert n == 2  # one core per task without -n


@pytest.mark.parametrize(
    "args, error",
    [
        (["--gpus", "5"], "--gpus 5: the machine has 4 GPUs"),
        (["--gpus", "0"], "--gpus 0: at least 1 device is needed"),
        (["--gpus", "x"], "--gpus x: 'x' is not a count of devices"),
        (["--gpus", "A100:1"], "--gpus A100:1: the machine has no gpu of model A100 (models: H100)"),
        (["--gres", "npu:1"], "--gres npu:1: the machine has no NPUs"),
        (["--gres", "gpu:a:b:c"], "--gres gpu:a:b:c: expected NAME[:MODEL][:COUNT] such as gpu:2 or gpu:a100:2"),
        (["--gpus-per-task", "1"], "--gpus-per-task 1: needs a task count (--ntasks)"),
        (["--gpus-per-task", "0", "--ntasks", "2"], "--gpus-per-task 0: at least 1 device is needed"),
        (["--gpus", "1", "--gpus-per-task", "1", "--ntasks", "1"], "--gpus and --gpus-per-task exclude each other"),
        (["--exclusive-gpu"], "--exclusive-gpu needs --gpus or --gres"),
    ],
)
def test_bad_device_options_are_one_line_errors(genv, run, args, error):
    (genv / "job.sh").write_text("#!/bin/sh\ntrue\n")
    r = run(gsub.cli, [*args, "job.sh"])
    assert r.exit_code != 0
    assert r.stderr.strip() == f"gsub: error: {error}"


def test_gres_in_an_sbatch_script_on_a_machine_without_gpus_is_refused(env, run):
    (env / "job.sh").write_text("#!/bin/sh\n#SBATCH --gres=gpu:1\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code != 0
    assert r.stderr.strip().endswith("gsub: error: --gpus 1: the machine has no GPUs")
