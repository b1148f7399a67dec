"""Shell completion through click's mechanism, for every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
COMMANDS = ["gsub", "gstat", "gdel", "gctl", "gschedd", "gsim", "ghold", "grls", "gacct"]


def complete_var(cmd: str) -> str:
    return f"_{cmd.upper()}_COMPLETE"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
@pytest.mark.parametrize("cmd", COMMANDS)
def test_completion_source_is_produced(cmd, shell):
    r = subprocess.run(
        [str(BIN / cmd)],
        env={**os.environ, complete_var(cmd): f"{shell}_source"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert f"_{cmd}_completion" in r.stdout or f"__fish_{cmd}_complete" in r.stdout
    assert complete_var(cmd) in r.stdout


def complete(cmd: str, words: str, env: dict[str, str]) -> list[str]:
    cword = len(words.split()) if words.endswith(" ") else len(words.split()) - 1
    r = subprocess.run(
        [str(BIN / cmd)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env, complete_var(cmd): "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)},
    )
    assert r.returncode == 0, r.stderr
    return [ln.split(",", 1)[1] for ln in r.stdout.splitlines()]


def test_options_and_job_ids_complete(env):
    assert "--walltime" in complete("gsub", "gsub --wall", {})
    e = {"GRIDSCHED_CONFIG": os.environ["GRIDSCHED_CONFIG"], "GRIDSCHED_SPOOL": os.environ["GRIDSCHED_SPOOL"]}
    for _ in range(2):
        assert (
            subprocess.run(
                [str(BIN / "gsub"), "--wrap", "true"], env={**os.environ, **e}, capture_output=True, timeout=60
            ).returncode
            == 0
        )
    assert complete("gdel", "gdel ", e) == ["1", "2"]
    assert complete("ghold", "ghold 2", e) == ["2"]
