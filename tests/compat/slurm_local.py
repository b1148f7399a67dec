"""A real Slurm 22.05 for the oracles of this folder: ``../shared/tools/slurm-localhost`` (one node on
loopback, two GRES GPUs), or one already running (its ``SLURM_CONF``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT.parent / "shared" / "tools" / "slurm-localhost"
CONF = Path("/tmp/gridsched-slurm/slurm.conf")


def ping(env: dict[str, str]) -> str | None:
    """None when a Slurm controller answers, else why not."""
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH"
    try:
        r = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"scontrol ping failed: {e}"
    if r.returncode != 0 or "UP" not in r.stdout:
        return f"no controller answers: {(r.stdout.strip() or r.stderr.strip() or 'no answer').splitlines()[0][:200]}"
    return None


class Slurm:
    def __init__(self, env: dict[str, str], gpus: int) -> None:
        self.env = env
        self.gpus = gpus

    def sbatch(self, work: Path, script: str, *args: str) -> int:
        r = subprocess.run(
            ["sbatch", "--parsable", *args, script], cwd=work, env=self.env, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stderr
        return int(r.stdout.strip().split(";")[0])

    def state(self, jid: int) -> tuple[str, int] | None:
        """(state, exit code) once job ``jid`` has ended, else None."""
        r = subprocess.run(
            ["scontrol", "show", "job", str(jid)], env=self.env, capture_output=True, text=True, timeout=30
        )
        m = re.search(r"JobState=(\S+)", r.stdout)
        code = re.search(r"ExitCode=(\d+):", r.stdout)
        if not m or m.group(1) in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
            return None
        return m.group(1), int(code.group(1)) if code else -1
