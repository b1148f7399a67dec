#!/usr/bin/env python3
"""List the product's files and functions that are longer than the limits.

A file's length is its number of lines; a function's (or method's) is
``end_lineno - lineno + 1`` of its ``def`` as ``ast`` reads it (decorators not
counted).  Prints each file over ``--max-file`` lines (default 800) and each
function over ``--max-function`` lines (default 150), longest first, and exits
with status 1 when there is any, 0 when there is none, so it can run as a check.
``--all`` lists every file and every function with its length (the exit status
still says whether any is over).

    python scripts/sizes.py [--max-file 800] [--max-function 150] [--all] [PATH ...]

PATH (default: the ``gridsched`` package beside this script) is a file or a folder
searched for ``*.py``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Size:
    path: str  # relative to the top of the tree where possible
    name: str  # "" for the file itself, else the function's qualified name
    line: int
    lines: int


def python_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        out.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    return out


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function in ``tree`` with its qualified name (Class.method, outer.<locals>.inner)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                yield name, child
                yield from walk(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def measure(path: Path) -> list[Size]:
    """The file's length and the length of each function in it."""
    source = path.read_text(encoding="utf-8")
    shown = _shown(path)
    out = [Size(shown, "", 1, len(source.splitlines()))]
    for name, fn in functions(ast.parse(source, str(path))):
        end = fn.end_lineno if fn.end_lineno is not None else fn.lineno
        out.append(Size(shown, name, fn.lineno, end - fn.lineno + 1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the gridsched package)")
    ap.add_argument("--max-file", type=int, default=800, metavar="N", help="longest file allowed, in lines")
    ap.add_argument("--max-function", type=int, default=150, metavar="M", help="longest function allowed, in lines")
    ap.add_argument("--all", action="store_true", help="list every file and function, not only those over")
    args = ap.parse_args(argv)

    sizes = [s for f in python_files(args.paths or [ROOT / "gridsched"]) for s in measure(f)]
    files = sorted((s for s in sizes if not s.name), key=lambda s: (-s.lines, s.path))
    funcs = sorted((s for s in sizes if s.name), key=lambda s: (-s.lines, s.path, s.line))
    big_files = [s for s in files if s.lines > args.max_file]
    big_funcs = [s for s in funcs if s.lines > args.max_function]

    shown_files = files if args.all else big_files
    shown_funcs = funcs if args.all else big_funcs
    print(f"files over {args.max_file} lines: {len(big_files)}")
    for s in shown_files:
        mark = " *" if s.lines > args.max_file else ""
        print(f"  {s.lines:6d}  {s.path}{mark}")
    print(f"functions over {args.max_function} lines: {len(big_funcs)}")
    for s in shown_funcs:
        mark = " *" if s.lines > args.max_function else ""
        print(f"  {s.lines:6d}  {s.path}:{s.line}  {s.name}{mark}")
    return 1 if big_files or big_funcs else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader stopped early (| head): no traceback
        sys.stderr.close()
        sys.exit(1)
