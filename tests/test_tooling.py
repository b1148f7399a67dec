"""Lint (ruff), format (ruff format) and types (mypy), as configured in pyproject.toml, run by the test suite.

Each test runs the tool the way a person would, from the top of the tree
(``python -m ruff check gridsched tests scripts``, ``python -m ruff format --check ...``,
``python -m mypy gridsched``), and fails with the tool's output on any finding.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ("gridsched", "tests", "scripts")


def run(tool: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.fail(f"{tool} is not installed: pip install '.[test]'")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


# -- the tests ----------------------------------------------------------------------------------


def test_ruff():
    proc = run("ruff", "check", *TREES, "--output-format", "concise", "--no-fix")
    assert proc.returncode == 0, "ruff findings:\n" + proc.stdout + proc.stderr


def test_ruff_format():
    proc = run("ruff", "format", "--check", *TREES)
    assert proc.returncode == 0, "not formatted (run ruff format):\n" + proc.stdout + proc.stderr


def test_mypy():
    proc = run("mypy", "gridsched")
    assert proc.returncode == 0, "mypy errors:\n" + proc.stdout + proc.stderr


_PROBE = """\
from typing import Any


def untyped(x):
    return x


def generic(x: list) -> int:
    y: Any = x
    return y


z: int = 1  # type: ignore[assignment]
"""


def test_mypy_is_strict_on_the_core_only(tmp_path):
    """The same file is an error four ways in gridsched/core and none elsewhere.

    (pyproject.toml lists --strict's flags in the override for gridsched.core.*: `strict = true`
    in an override would make every module strict.)"""
    for d in ("gridsched", "gridsched/core"):
        (tmp_path / d).mkdir(exist_ok=True)
        (tmp_path / d / "__init__.py").write_text("")
    (tmp_path / "gridsched" / "core" / "probe.py").write_text(_PROBE)
    (tmp_path / "gridsched" / "elsewhere.py").write_text(_PROBE)
    proc = run(
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "gridsched",
        cwd=tmp_path,
    )
    codes = {
        (m.group(1), m.group(2))
        for m in re.finditer(r"^gridsched/(\S+?):\d+: error: .*\[([\w-]+)\]$", proc.stdout, re.M)
    }
    assert codes == {("core/probe.py", c) for c in ("no-untyped-def", "type-arg", "no-any-return", "unused-ignore")}, (
        proc.stdout + proc.stderr
    )
