"""A shepherd ignores the signals sent to the daemon's process group and leaves SIGCHLD at its default, whether
its starter forked it (it inherits the starter's dispositions, set once) or the daemon did (it sets them)."""

from __future__ import annotations

import json
import os
import selectors
import signal
from pathlib import Path

import pytest

from gridsched.daemon import launch
from gridsched.daemon.spawn import Processes
from tests.conftest import wait_for
from tests.daemon.launches import job_launch, spawn_now

JOB = """#!/bin/sh
touch started
while [ ! -e go ]; do sleep 0.01; done
"""


def _mask(field: str, pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _bit(sig: int) -> int:
    return 1 << (sig - 1)


@pytest.mark.parametrize("by_starter", [True, False], ids=["starter", "daemon"])
def test_a_shepherd_ignores_the_process_group_s_signals_whoever_forked_it(tmp_path, by_starter):
    spec = job_launch(tmp_path, JOB, job_id=5)
    work = Path(spec.workdir)
    ex = Processes(selectors.DefaultSelector())
    if not by_starter:
        ex.starter = None  # where no starter can run, the daemon (here: this process) forks the shepherd
    shepherd = 0
    try:
        shepherd, _ticks = spawn_now(ex, spec)
        assert (_parent(shepherd) == os.getpid()) is not by_starter  # the starter's child, or this process's
        wait_for(lambda: (work / "started").exists(), 20, "the job to start")
        ignored, caught = _mask("SigIgn", shepherd), _mask("SigCgt", shepherd)
        for sig in launch.IGNORED:
            assert ignored & _bit(sig), (signal.Signals(sig).name, hex(ignored))
        assert not (ignored | caught) & _bit(signal.SIGCHLD), (hex(ignored), hex(caught))
        (work / "go").touch()
        end = wait_for(lambda: _exit(tmp_path), 20, "the job's exit file")
        assert end["exit_code"] == 0
    finally:
        (work / "go").touch()
        for fd in ex.fds.values():
            os.close(fd)
        if ex.starter is not None:
            ex.starter.stop()
        elif shepherd:
            os.waitpid(shepherd, 0)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _exit(job_dir: Path) -> dict | None:
    try:
        return json.loads(launch.exit_file(job_dir, 1).read_text())
    except FileNotFoundError:
        return None
