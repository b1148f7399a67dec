"""scripts/sizes.py: the lengths it reports and its exit status, on small files made here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sizes.py"

SOURCE = """\
def short():
    return 1


class C:
    @property
    def method(self):
        x = 1

        def inner():
            return x

        return inner
"""


def sizes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_lengths_of_files_and_functions(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(SOURCE)
    r = sizes("--all", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "files over 800 lines: 0"
    assert lines[1].split() == ["13", str(f)]
    funcs = {line.split()[-1]: int(line.split()[0]) for line in lines[3:]}
    # def line to last line; the decorator is not counted
    assert funcs == {"short": 2, "C.method": 7, "C.method.<locals>.inner": 2}


def test_over_the_limits_exits_non_zero(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(SOURCE)
    r = sizes("--max-file", "12", "--max-function", "6", str(tmp_path / "pkg"))
    assert r.returncode == 1
    assert "files over 12 lines: 1" in r.stdout
    assert "functions over 6 lines: 1" in r.stdout
    assert "C.method *" in r.stdout and "short" not in r.stdout
    assert sizes("--max-file", "13", "--max-function", "7", str(tmp_path / "pkg")).returncode == 0
