"""A short crash soak: 40 jobs of every kind while the daemon is killed with SIGKILL six times.

``scripts/soak.py`` checks every job against a ledger the jobs write (see its
docstring); here it runs in a short form (fewer jobs, half as long each, than
its documented short form) and must find nothing lost, duplicated or
mismatched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.daemon  # scripts/soak.py starts and kills real daemons

SOAK = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_short_soak_loses_nothing_and_runs_nothing_twice():
    r = subprocess.run(
        [
            sys.executable,
            str(SOAK),
            "--jobs",
            "40",
            "--kills",
            "6",
            "--seed",
            "1",
            "--scale",
            "0.5",
            "--timeout",
            "100",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=160,
    )
    assert r.stdout, r.stderr
    res = json.loads(r.stdout)
    print(json.dumps(res, indent=1))
    assert not res["timed_out"]
    # every kind of job is in the mix (plain, wide, checkpointing, requeue-mode, overrunning, failing), and
    # some are cancelled on the way
    assert set(res["kinds"]) == {"short", "wide", "ckpt", "requeue", "timeout", "fail"}, res["kinds"]
    assert res["cancels_sent"] > 0
    assert res["kills"] == 6
    assert res["unexpected_daemon_exits"] == 0
    assert (res["lost"], res["duplicated"], res["mismatched"]) == (0, 0, 0), res["problems"]
    assert sum(res["states"].values()) == 40
    assert res["recovered"]["adopted"] > 0  # the kills really hit running jobs
    assert r.returncode == 0
