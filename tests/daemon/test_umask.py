"""A job runs with its submitter's umask: its output files and what it creates get the submitter's modes."""

from __future__ import annotations

import shlex
import stat
import subprocess

import pytest

from tests.conftest import BIN


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs: the module's daemon serves them all."""
    return shared_gs


def gsub_with_umask(gs, umask: str, *args: str) -> int:
    cmd = f"umask {umask}; exec {shlex.join([str(BIN / 'gsub'), *args])}"
    r = subprocess.run(["sh", "-c", cmd], env=gs.env, cwd=gs.work, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip().splitlines()[-1])


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run_job(gs, umask: str, name: str) -> dict:
    jid = gsub_with_umask(gs, umask, "-o", f"{name}.out", "--wrap", f"echo hello > {name}.made")
    j = gs.wait_state(jid, "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")
    assert j["state"] == "COMPLETED", j
    return j


def test_umask_077_makes_private_files(gs):
    run_job(gs, "077", "private")
    assert oct(mode(gs.work / "private.out")) == oct(0o600)
    assert oct(mode(gs.work / "private.made")) == oct(0o600)


def test_umask_022_makes_readable_files(gs):
    run_job(gs, "022", "shared")
    assert oct(mode(gs.work / "shared.out")) == oct(0o644)
    assert oct(mode(gs.work / "shared.made")) == oct(0o644)
