"""A job's launch for the tests that start shepherds themselves (without a daemon)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gridsched.daemon import launch
from gridsched.daemon.spawn import Processes


def job_launch(tmp_path: Path, script: str, **fields: Any) -> launch.Launch:
    """The launch of ``script`` (written to ``tmp_path/job.sh``) run in ``tmp_path/wd``, its output to
    ``tmp_path/out``, on this process's cores, as this process's user; ``fields`` replace any of these."""
    work = tmp_path / "wd"
    work.mkdir(exist_ok=True)
    job = tmp_path / "job.sh"
    job.write_text(script)
    job.chmod(0o755)
    given: dict[str, Any] = {
        "job_id": 1, "segment": 1, "job_dir": str(tmp_path), "script": str(job), "args": (), "workdir": str(work),
        "stdout": str(tmp_path / "out"), "stderr": str(tmp_path / "out"), "append": False,
        "env": {"PATH": "/usr/bin:/bin"}, "cpus": frozenset(os.sched_getaffinity(0)), "uid": os.getuid(),
        "gid": os.getgid(), "user": "u",
    }  # fmt: skip
    return launch.Launch(**{**given, **fields})


def spawn_now(ex: Processes, spec: launch.Launch) -> tuple[int, int | None]:
    """Start ``spec``'s shepherd through ``ex`` (with no other launch owed) and wait for the starter's answer:
    the shepherd's pid and start time; OSError if it was not started."""
    found = ex.begin(spec)
    if found is not None:
        return found
    got = ex.replies(block=True)
    assert [s for s, _ in got] == [spec], got
    answer = got[0][1]
    if isinstance(answer, OSError):
        raise answer
    return answer
