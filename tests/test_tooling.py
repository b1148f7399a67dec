"""Lint (ruff), format (ruff format) and types (mypy), as configured in pyproject.toml, run by the test suite.

Each check runs the tool the way a person would, from the top of the tree
(``python -m ruff check gridsched tests scripts``, ``python -m ruff format --check ...``,
``python -m mypy gridsched``), and fails with the tool's output on any finding.

The checks are defined once, in :data:`CHECKS`: the test suite runs them, and so do
``.ci/run`` (before the tests, so that CI fails fast) and the pre-commit hooks in
``.pre-commit-config.yaml``, through this file run as a script::

    python tests/test_tooling.py            # every check
    python tests/test_tooling.py mypy       # the named ones (ruff, format, mypy)
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

# name -> (tool, its arguments, what a failure means)
CHECKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "ruff": ("ruff", ("check", *TREES, "--output-format", "concise", "--no-fix"), "ruff findings"),
    "format": ("ruff", ("format", "--check", *TREES), "not formatted (run ruff format)"),
    "mypy": ("mypy", ("gridsched",), "mypy errors"),
}


def run(tool: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.fail(f"{tool} is not installed: pip install '.[test]'")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def check(name: str) -> None:
    tool, args, meaning = CHECKS[name]
    proc = run(tool, *args)
    assert proc.returncode == 0, f"{meaning}:\n" + proc.stdout + proc.stderr


# -- the tests ----------------------------------------------------------------------------------


def test_ruff():
    check("ruff")


def test_ruff_format():
    check("format")


def test_mypy():
    check("mypy")


_PROBE = """\
from typing import Any


def untyped(x):
    return x


def generic(x: list) -> int:
    y: Any = x
    return y


z: int = 1  # type: ignore[assignment]
"""


STRICT = (
    "core/probe.py",
    "protocol/requests.py",
    "protocol/fields.py",
    "protocol/jobspec.py",
    "protocol/parse_job.py",
    "protocol/jobs.py",
)


def test_mypy_is_strict_on_the_core_and_the_boundary_only(tmp_path):
    """The same file is an error four ways in gridsched/core and the request boundary, and none elsewhere.

    (pyproject.toml lists --strict's flags in the override for those modules: `strict = true`
    in an override would make every module strict.)"""
    for d in ("gridsched", "gridsched/core", "gridsched/protocol"):
        (tmp_path / d).mkdir(exist_ok=True)
        (tmp_path / d / "__init__.py").write_text("")
    for path in (*STRICT, "elsewhere.py", "protocol/other.py"):
        (tmp_path / "gridsched" / path).write_text(_PROBE)
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
    assert codes == {
        (path, c) for path in STRICT for c in ("no-untyped-def", "type-arg", "no-any-return", "unused-ignore")
    }, proc.stdout + proc.stderr


def main(names: list[str]) -> int:
    """Run the named checks (all without names), each tool's output shown as it comes; 1 if any failed."""
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print(f"unknown check {', '.join(unknown)}; the checks: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    failed = []
    for name in names or list(CHECKS):
        tool, args, meaning = CHECKS[name]
        print(f"+ python -m {tool} {' '.join(args)}", flush=True)
        if importlib.util.find_spec(tool) is None:
            print(f"{tool} is not installed: pip install '.[test]'", file=sys.stderr)
            failed.append(name)
        elif subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT).returncode != 0:
            print(f"{name}: {meaning}", file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
