"""Fixtures of the simulator tests."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test modules import the helpers in simtraces.py

from simtraces import swf_text  # noqa: E402


@pytest.fixture
def write_trace(tmp_path: Path):
    """Write a trace (lines of jobs, header keys) and return its path as a string."""

    def write(lines: Sequence[str], name: str = "t.swf", **header: int | None) -> str:
        p = tmp_path / name
        p.write_text(swf_text(lines, **header))
        return str(p)

    return write
