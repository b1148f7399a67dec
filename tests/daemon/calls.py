"""Functions the executor tests send into jobs (importable by the job's interpreter)."""

from __future__ import annotations

import os


def cores_seen() -> tuple[int, str]:
    """The number of CPUs this process may run on, and GS_NCPUS."""
    return len(os.sched_getaffinity(0)), os.environ.get("GS_NCPUS", "")


def square(x: int) -> int:
    return x * x


def fail(msg: str) -> None:
    raise ValueError(msg)
