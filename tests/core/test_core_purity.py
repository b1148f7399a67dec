"""The core reads no clock, file, environment or process: checked on its source."""

from __future__ import annotations

import ast
from pathlib import Path

import gridsched.core

FORBIDDEN = {"os", "time", "random", "pathlib", "subprocess", "sqlite3", "socket", "datetime", "psutil"}
CORE = Path(gridsched.core.__file__).parent


def imported_roots(tree: ast.AST) -> set[str]:
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            roots.add("__import__")
    return roots


def test_core_files_are_found():
    names = {p.relative_to(CORE).as_posix() for p in CORE.rglob("*.py")}
    assert {"policy/__init__.py", "profile.py", "predict.py", "types.py"} <= names


def test_core_imports_nothing_impure():
    bad = {}
    for path in sorted(CORE.rglob("*.py")):
        found = imported_roots(ast.parse(path.read_text(), str(path))) & (FORBIDDEN | {"__import__"})
        if found:
            bad[path.name] = sorted(found)
    assert bad == {}


def test_checker_catches_forbidden_imports():
    assert imported_roots(ast.parse("import os.path\nfrom time import monotonic\n")) == {"os", "time"}
    assert imported_roots(ast.parse("def f():\n    import random\n")) == {"random"}
