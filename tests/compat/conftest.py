"""What the oracles of this folder share: the real Slurm, started once for them all."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.compat.slurm_local import CONF, TOOL, Slurm, ping


@pytest.fixture(scope="package")
def slurm() -> Iterator[Slurm]:
    """A Slurm that answers: one running already (its SLURM_CONF, or slurm-localhost's), else slurm-localhost
    started here with two GRES GPUs (as root), once for this folder's tests, and stopped after the last of
    them (before the rest of the suite, whose Slurm executor tests run only beside a Slurm left running);
    else the tests are skipped with the reason printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMP_"))}
    if "SLURM_CONF" in os.environ:
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    elif CONF.exists():
        env["SLURM_CONF"] = str(CONF)
    started = False
    why = ping(env)
    if why and shutil.which("sbatch") is not None and (TOOL / "start.sh").exists() and os.geteuid() == 0:
        r = subprocess.run(
            [str(TOOL / "start.sh")], env={**env, "GS_SLURM_GPUS": "2"}, capture_output=True, text=True, timeout=180
        )
        started = True
        env["SLURM_CONF"] = str(CONF)
        why = ping(env) if r.returncode == 0 else f"slurm-localhost did not start: {(r.stderr or r.stdout)[-300:]}"
    try:
        if why:
            print(f"no local Slurm: {why}")
            pytest.skip(f"no local Slurm: {why}")
        node = subprocess.run(["scontrol", "show", "node"], env=env, capture_output=True, text=True, timeout=30).stdout
        m = re.search(r"Gres=gpu(?::[a-z0-9]+)?:(\d+)", node)
        yield Slurm(env, int(m.group(1)) if m else 0)
    finally:
        if started:
            subprocess.run([str(TOOL / "stop.sh")], env=env, capture_output=True, timeout=120)
