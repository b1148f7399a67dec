"""Lint (ruff) and types (mypy), as configured in pyproject.toml, run by the test suite.

Each test runs the tool the way a person would, from the top of the tree
(``python -m ruff check gridsched tests scripts``, ``python -m mypy gridsched``), and fails
with the tool's output for the files it covers.  The covered set is the files that were
clean when the checks were added; a finding in one of them fails the suite.  The other
files are named, with their findings counted by kind, in a warning (the warnings summary
of ``python -m pytest``): when one of them is clean, add it to the covered set here.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# -- the covered sets -------------------------------------------------------------------------
# A path ending in "/" covers every file under it, files added later included; any other
# path covers that one file.  Everything else is reported as not yet covered.

_GRIDSCHED_CLEAN = (
    "gridsched/__init__.py",
    "gridsched/admin.py",
    "gridsched/arrays.py",
    "gridsched/client.py",
    "gridsched/config.py",
    "gridsched/executor.py",
    "gridsched/executor_worker.py",
    "gridsched/host.py",
    "gridsched/jobenv.py",
    "gridsched/jobs.py",
    "gridsched/reservations.py",
    "gridsched/state.py",
    "gridsched/subtasks.py",
    "gridsched/topology.py",
    "gridsched/tree.py",
)

RUFF_COVERED = (
    "gridsched/core/",
    "gridsched/sim/",
    "scripts/",
    *_GRIDSCHED_CLEAN,
    "gridsched/view.py",
    # not yet: gridsched/spool.py, submit.py
    "gridsched/cli/__init__.py",
    "gridsched/cli/compat.py",
    "gridsched/cli/gacct.py",
    "gridsched/cli/gctl.py",
    "gridsched/cli/gdel.py",
    "gridsched/cli/ghold.py",
    "gridsched/cli/gresv.py",
    "gridsched/cli/grls.py",
    "gridsched/cli/gsim_tree.py",
    "gridsched/cli/gstat.py",
    "gridsched/cli/gstat_live.py",
    "gridsched/cli/gstat_tasks.py",
    "gridsched/cli/gstat_tree.py",
    "gridsched/cli/gsub.py",
    "gridsched/cli/gwait.py",
    "gridsched/cli/jobctl.py",
    "gridsched/text.py",
    "gridsched/cli/topoview.py",
    # not yet: gridsched/cli/common.py, gschedd.py, gsim.py
    "gridsched/daemon/__init__.py",
    "gridsched/daemon/cgroup.py",
    "gridsched/daemon/launch.py",
    "gridsched/daemon/procs.py",
    # not yet: gridsched/daemon/arrays.py, main.py, recover.py, requests.py, reserve.py, split.py, tree.py
    "tests/test_imports.py",
    "tests/test_tooling.py",
    "tests/cli/test_compat.py",
    "tests/cli/test_completion.py",
    "tests/cli/test_gacct.py",
    "tests/cli/test_gctl_admin.py",
    "tests/cli/test_gresv.py",
    "tests/cli/test_gsub.py",
    "tests/cli/test_hostile_text.py",
    "tests/cli/test_jobctl_full_spool.py",
    "tests/cli/test_startup.py",
    "tests/cli/test_topology.py",
    "tests/core/test_core_policy.py",
    "tests/core/test_core_profile.py",
    "tests/core/test_core_purity.py",
    "tests/core/test_core_reservations.py",
    "tests/core/test_depend.py",
    "tests/core/test_placement.py",
    "tests/core/test_topology_map.py",
    "tests/daemon/calls.py",
    "tests/daemon/test_admin.py",
    "tests/daemon/test_arrays_split.py",
    "tests/daemon/test_client.py",
    "tests/daemon/test_crash_windows.py",
    "tests/daemon/test_depend.py",
    "tests/daemon/test_diskfull.py",
    "tests/daemon/test_gacct_swf.py",
    "tests/daemon/test_hostile.py",
    "tests/daemon/test_reservations.py",
    "tests/daemon/test_sim_equivalence.py",
    "tests/daemon/test_soak.py",
    "tests/daemon/test_topology.py",
    "tests/fuzz/test_parsers.py",
    "tests/sim/test_sim_cli.py",
    "tests/sim/test_sim_engine.py",
    "tests/sim/test_sim_fastpath.py",
    "tests/sim/test_sim_split.py",
    "tests/sim/test_sim_swf.py",
    "tests/sim/test_sim_topology.py",
    # not yet: the other files in tests/
)

MYPY_COVERED = (
    "gridsched/core/",  # strict (see [tool.mypy] in pyproject.toml)
    "gridsched/sim/",
    *_GRIDSCHED_CLEAN,
    "gridsched/view.py",
    "gridsched/submit.py",
    # not yet: gridsched/spool.py
    "gridsched/cli/__init__.py",
    "gridsched/cli/compat.py",
    "gridsched/cli/gacct.py",
    "gridsched/cli/gctl.py",
    "gridsched/cli/gdel.py",
    "gridsched/cli/ghold.py",
    "gridsched/cli/gresv.py",
    "gridsched/cli/grls.py",
    "gridsched/cli/gschedd.py",
    "gridsched/cli/gsim_tree.py",
    "gridsched/cli/gstat.py",
    "gridsched/cli/gstat_live.py",
    "gridsched/cli/gstat_tree.py",
    "gridsched/cli/gsub.py",
    "gridsched/cli/gwait.py",
    "gridsched/cli/jobctl.py",
    "gridsched/text.py",
    "gridsched/cli/topoview.py",
    # not yet: gridsched/cli/common.py, gsim.py, gstat_tasks.py
    "gridsched/daemon/__init__.py",
    "gridsched/daemon/arrays.py",
    "gridsched/daemon/cgroup.py",
    "gridsched/daemon/procs.py",
    "gridsched/daemon/recover.py",
    "gridsched/daemon/reservations.py",
    "gridsched/daemon/split.py",
    "gridsched/daemon/tree.py",
    # not yet: gridsched/daemon/launch.py, main.py, requests.py
)


def covered(path: str, covered_set: tuple[str, ...]) -> bool:
    return any(path.startswith(c) if c.endswith("/") else path == c for c in covered_set)


def python_files(*tops: str) -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for top in tops for p in (ROOT / top).rglob("*.py"))


# -- running the tools ------------------------------------------------------------------------


def run(tool: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.fail(f"{tool} is not installed: pip install '.[test]'")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def by_file(lines: list[str], pattern: str) -> dict[str, list[str]]:
    """The tool's output lines that name a file (``pattern`` takes the path), grouped by file."""
    out: dict[str, list[str]] = {}
    for line in lines:
        m = re.match(pattern, line)
        if m:
            path = Path(m.group(1))
            rel = (path.relative_to(ROOT) if path.is_absolute() else path).as_posix()
            out.setdefault(rel, []).append(line)
    return out


def report_uncovered(tool: str, findings: dict[str, Counter[str]], files: list[str],
                     covered_set: tuple[str, ...]) -> None:
    """Name the files out of the covered set: those with findings (counted by kind), and clean ones."""
    dirty = {f: c for f, c in sorted(findings.items()) if not covered(f, covered_set)}
    clean = [f for f in files if not covered(f, covered_set) and f not in findings]
    lines = [f"{tool}: not yet covered, {sum(sum(c.values()) for c in dirty.values())} findings "
             f"in {len(dirty)} files:"]
    lines += [f"  {f}: {sum(c.values())} ({', '.join(f'{k} {n}' for k, n in sorted(c.items()))})"
              for f, c in dirty.items()]
    if clean:
        lines.append(f"{tool}: clean but not covered (add them to the covered set): {', '.join(clean)}")
    text = "\n".join(lines)
    print(text)
    if dirty or clean:
        warnings.warn(text, stacklevel=2)


# -- the tests ----------------------------------------------------------------------------------


def test_ruff():
    proc = run("ruff", "check", "gridsched", "tests", "scripts", "--output-format", "concise", "--no-fix")
    out = proc.stdout.splitlines()
    assert proc.returncode in (0, 1) and (
        proc.returncode == 0 or any(line.startswith("Found ") for line in out)), proc.stdout + proc.stderr
    lines = by_file(out, r"^(.+?\.pyi?):\d+:\d+: ")
    bad = {f: ls for f, ls in lines.items() if covered(f, RUFF_COVERED)}
    kinds = {f: Counter(ln.split(": ", 1)[1].split()[0] for ln in ls) for f, ls in lines.items()}
    report_uncovered("ruff", kinds, python_files("gridsched", "tests", "scripts"), RUFF_COVERED)
    assert not bad, "ruff findings in covered files:\n" + "\n".join(ln for ls in bad.values() for ln in ls)


def test_mypy():
    proc = run("mypy", "gridsched")
    out = proc.stdout.splitlines()
    # 0: no errors, 1: errors; 2 is a crash or an error that stopped the check (a syntax error)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    lines = by_file(out, r"^(.+?\.pyi?):\d+: (?:error|note): ")
    bad = {f: ls for f, ls in lines.items() if covered(f, MYPY_COVERED)}
    errors = {f: Counter(m.group(1) for ln in ls if (m := re.search(r": error: .*\[([\w-]+)\]$", ln)))
              for f, ls in lines.items()}
    report_uncovered("mypy", {f: c for f, c in errors.items() if c}, python_files("gridsched"), MYPY_COVERED)
    assert not bad, "mypy errors in covered files:\n" + "\n".join(ln for ls in bad.values() for ln in ls)


def test_covered_sets_name_real_files():
    files = set(python_files("gridsched", "tests", "scripts"))
    for c in RUFF_COVERED + MYPY_COVERED:
        assert (c.endswith("/") and (ROOT / c).is_dir()) or c in files, f"covered path {c} does not exist"


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
    proc = run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
               "gridsched", cwd=tmp_path)
    codes = {(m.group(1), m.group(2)) for m in re.finditer(r"^gridsched/(\S+?):\d+: error: .*\[([\w-]+)\]$",
                                                           proc.stdout, re.M)}
    assert codes == {("core/probe.py", c) for c in ("no-untyped-def", "type-arg", "no-any-return", "unused-ignore")}, \
        proc.stdout + proc.stderr
