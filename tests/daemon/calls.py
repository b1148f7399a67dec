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


def die(msg: str) -> None:
    """Say ``msg`` on standard error and end the process at once: no result is written."""
    import sys

    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
    os._exit(3)


def span(seconds: float) -> tuple[float, float]:
    """Sleep ``seconds``; when this call began and ended (wall clock)."""
    import time

    t0 = time.time()
    time.sleep(seconds)
    return t0, time.time()


def env_of(name: str) -> str | None:
    """The value of ``name`` in the job's environment."""
    return os.environ.get(name)
