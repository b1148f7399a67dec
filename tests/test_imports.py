"""The import rules of the architecture (docs/ARCHITECTURE.md), checked on the source with ast.

1. ``gridsched/core`` decides: it imports nothing from gridsched outside ``gridsched.core``, and no
   clock, file, process, thread or signal module.  ``tests/core/test_core_purity.py`` checks its
   list of standard-library modules; this file extends that list (threading, signal) and adds the
   rule about the rest of gridsched.
2. The commands (``gridsched/cli``) decide nothing: they load neither the daemon
   (``gridsched.daemon``) nor the scheduling pass (``gridsched.core.policy`` and its modules), whether they
   import them at module level or inside a function, or through a module that imports them at
   module level.  ``gschedd`` starts the daemon; ``gsim`` and ``gsim_tree`` drive the
   simulator, so they reach the pass (not the daemon).
3. No import cycles among gridsched modules at module level.  Imports inside functions (lazy
   ones) and under ``if TYPE_CHECKING:`` run later or never, so they are not edges of that graph.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gridsched"

# -- the rules ----------------------------------------------------------------------------------


def _load_purity() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_core_purity", ROOT / "tests" / "core" / "test_core_purity.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_purity = _load_purity()
# The whole list of what the core may not import from outside gridsched: the list
# test_core_purity.py checks, and these two, checked here (a thread or a signal handler
# belongs to a driver as much as a clock does).
CORE_EXTRA_FORBIDDEN = frozenset({"threading", "signal"}) - frozenset(_purity.FORBIDDEN)
CORE_FORBIDDEN = frozenset(_purity.FORBIDDEN) | CORE_EXTRA_FORBIDDEN

# What a command module may not load: the daemon, the scheduling passes.
FORBIDDEN_TO_COMMANDS = {
    "daemon": lambda m: m == "gridsched.daemon" or m.startswith("gridsched.daemon."),
    "passes": lambda m: m == "gridsched.core.policy" or m.startswith("gridsched.core.policy."),
}
# The command modules that may load some of them.
CLI_ALLOWED: dict[str, set[str]] = {
    "gridsched.cli.gschedd": {"daemon", "passes"},  # starts the daemon (gschedd run / start)
    "gridsched.cli.gsim": {"passes"},  # drives the simulator, which calls the passes
    "gridsched.cli.gsim_inputs": {"passes"},  # gsim's replay, its auto-tuner
    "gridsched.cli.gsim_quick": {"passes"},  # gsim's plain replay, without click
    "gridsched.cli.gsim_tree": {"passes"},  # the same, for job trees (gsim tree)
}

# Command modules that break rule 2 today, with why; each must still break it (when one is
# fixed, take it out).  None does: no command module imports the daemon or the passes, at
# module level or in a function, nor through a module that loads them at module level.
# (`gctl info` does load gridsched.daemon.cgroup at run time, through gridsched.host.facts.facts(),
# a lazy import inside a shared module: that is outside this rule, which follows lazy imports
# only in the command module itself.)
KNOWN_CLI_EXCEPTIONS: dict[str, str] = {}

# Module-level import cycles known today, each as the sorted modules of the cycle; none.
KNOWN_CYCLES: list[tuple[str, ...]] = []


# -- the import graph ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    src: str  # the importing module
    dst: str  # the imported module: a gridsched module as found in the tree, else the dotted name
    line: int
    lazy: bool  # inside a function
    typing_only: bool  # under `if TYPE_CHECKING:`


def module_names(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package's __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, source: str, is_pkg: bool, known: Iterable[str]) -> list[Edge]:
    """The imports of module ``name`` (``source``), resolved against the ``known`` module names.

    ``from P import x`` is an import of ``P.x`` when that is a module, else of ``P``; an import of
    a name that is no module of the tree goes to its longest prefix that is one.
    """
    known = set(known)
    package = name.split(".") if is_pkg else name.split(".")[:-1]
    edges: list[Edge] = []

    def resolve(dotted: str) -> str:
        if dotted.split(".")[0] != name.split(".")[0]:
            return dotted
        parts = dotted.split(".")
        while len(parts) > 1 and ".".join(parts) not in known:
            parts.pop()
        return ".".join(parts)

    def add(dotted: str, node: ast.stmt, lazy: bool, typing_only: bool) -> None:
        edges.append(Edge(name, resolve(dotted), node.lineno, lazy, typing_only))

    def visit(body: Iterable[ast.AST], lazy: bool, typing_only: bool) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node, lazy, typing_only)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                for alias in node.names:
                    sub = f"{mod}.{alias.name}"
                    add(sub if sub in known else mod, node, lazy, typing_only)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, True, typing_only)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, lazy, True)
                visit(node.orelse, lazy, typing_only)
            else:
                visit(ast.iter_child_nodes(node), lazy, typing_only)

    visit(ast.parse(source, name).body, False, False)
    return edges


@cache
def graph() -> dict[str, list[Edge]]:
    """The imports of every gridsched module."""
    mods = module_names()
    return {name: imports_of(name, path.read_text(), is_pkg, mods) for name, (path, is_pkg) in mods.items()}


def _inside(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


def loaded_at_import(start: str, g: Mapping[str, list[Edge]]) -> dict[str, str | None]:
    """The modules importing ``start`` loads (its module-level imports, transitively), each mapped to
    the module that imports it (None for ``start``)."""
    seen: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        m = todo.pop()
        for e in g.get(m, ()):
            if not e.lazy and not e.typing_only and e.dst not in seen:
                seen[e.dst] = m
                todo.append(e.dst)
    return seen


def forbidden_reach(module: str, g: Mapping[str, list[Edge]], forbidden: Iterable[str]) -> dict[str, str]:
    """The modules of the ``forbidden`` kinds (keys of FORBIDDEN_TO_COMMANDS) that ``module``'s imports
    (any: module level, lazy, typing-only) load, each with how, such as
    ``"line 12 (lazy): gridsched.daemon.loop <- gridsched.submission.submit"``."""
    tests = [FORBIDDEN_TO_COMMANDS[k] for k in forbidden]

    def bad(m: str) -> bool:
        return any(t(m) for t in tests)

    found: dict[str, str] = {}
    for e in g.get(module, ()):
        via = loaded_at_import(e.dst, g)
        for m in sorted(x for x in via if bad(x)):
            chain = [m]
            while (up := via[chain[-1]]) is not None:
                chain.append(up)
            found.setdefault(m, f"line {e.line}{' (lazy)' if e.lazy else ''}: {' <- '.join(chain)}")
    return found


def cycles(g: Mapping[str, list[Edge]]) -> list[tuple[str, ...]]:
    """The strongly connected components (sorted) of the module-level graph that hold a cycle."""
    adj = {m: sorted({e.dst for e in es if not e.lazy and not e.typing_only and e.dst in g}) for m, es in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[tuple[str, ...]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in adj[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in adj[v]:
                out.append(tuple(sorted(comp)))

    for v in sorted(adj):
        if v not in index:
            connect(v)
    return sorted(out)


def cycle_path(comp: tuple[str, ...], g: Mapping[str, list[Edge]]) -> str:
    """A shortest cycle through the component's first module, with the line of each import."""
    members = set(comp)
    start = comp[0]
    came: dict[str, Edge] = {}
    todo = [start]
    while todo:  # breadth first, inside the component
        m = todo.pop(0)
        for e in g[m]:
            if e.lazy or e.typing_only or e.dst not in members:
                continue
            if e.dst == start:
                chain = [e]
                while chain[-1].src != start:
                    chain.append(came[chain[-1].src])
                return "; ".join(f"{x.src} -> {x.dst} (line {x.line})" for x in reversed(chain))
            if e.dst not in came:
                came[e.dst] = e
                todo.append(e.dst)
    raise AssertionError(f"no cycle through {start}")


# -- the checker itself -------------------------------------------------------------------------

_FAKE = {
    "pkg": "",
    "pkg.a": "import os\nfrom . import b\nfrom .sub import c as _\nfrom .sub.c import thing\n",
    "pkg.b": "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n    from .a import x\nelse:\n    from pkg import c_missing\n"
    "def f():\n    from pkg.sub import c\n    import pkg.a\n",
    "pkg.sub": "from .. import a\n",
    "pkg.sub.c": "from ..b import y\nclass K:\n    from . import c\n",
}


def _fake_graph() -> dict[str, list[Edge]]:
    return {m: imports_of(m, src, m in ("pkg", "pkg.sub"), _FAKE) for m, src in _FAKE.items()}


def test_checker_resolves_imports():
    g = _fake_graph()
    assert [(e.dst, e.lazy, e.typing_only) for e in g["pkg.a"]] == [
        ("os", False, False),
        ("pkg.b", False, False),
        ("pkg.sub.c", False, False),
        ("pkg.sub.c", False, False),
    ]
    assert [(e.dst, e.lazy, e.typing_only) for e in g["pkg.b"]] == [
        ("__future__", False, False),
        ("typing", False, False),
        ("pkg.a", False, True),
        ("pkg", False, False),
        ("pkg.sub.c", True, False),
        ("pkg.a", True, False),
    ]
    assert [e.dst for e in g["pkg.sub"]] == ["pkg.a"]
    assert [e.dst for e in g["pkg.sub.c"]] == ["pkg.b", "pkg.sub.c"]  # class bodies run at import


def test_checker_finds_cycles_and_reach():
    g = _fake_graph()
    # pkg.a -> pkg.b; pkg.a -> pkg.sub.c -> pkg.b; pkg.sub.c -> itself; pkg.sub -> pkg.a.
    # pkg.b -> pkg.a only under TYPE_CHECKING and lazily: no cycle through it.
    assert cycles(g) == [("pkg.sub.c",)]
    g["pkg.b"].append(Edge("pkg.b", "pkg.sub", 9, False, False))
    assert cycles(g) == [("pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c")]
    assert cycle_path(("pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c"), g) == (
        "pkg.a -> pkg.b (line 2); pkg.b -> pkg.sub (line 9); pkg.sub -> pkg.a (line 1)"
    )
    assert set(loaded_at_import("pkg.b", _fake_graph())) == {"pkg.b", "__future__", "typing", "pkg"}


def test_checker_follows_commands_through_module_level_imports():
    g = {
        "gridsched.cli.x": [Edge("gridsched.cli.x", "gridsched.helper", 3, True, False)],
        "gridsched.helper": [
            Edge("gridsched.helper", "gridsched.core.policy", 1, False, False),
            Edge("gridsched.helper", "gridsched.daemon.loop", 7, True, False),
        ],
    }
    assert forbidden_reach("gridsched.cli.x", g, ["daemon", "passes"]) == {
        "gridsched.core.policy": "line 3 (lazy): gridsched.core.policy <- gridsched.helper"
    }
    assert forbidden_reach("gridsched.cli.x", g, ["daemon"]) == {}


# -- the rules, on gridsched --------------------------------------------------------------------


def test_graph_is_read():
    g = graph()
    assert {"gridsched.core.policy", "gridsched.daemon.loop", "gridsched.cli.gsub", "gridsched.sim.engine"} <= set(g)
    assert any(e.dst == "gridsched.core.policy" for e in g["gridsched.sim.engine"])
    assert any(e.dst == "gridsched.daemon.loop" and e.lazy for e in g["gridsched.cli.gschedd"])


def test_core_imports_only_the_core():
    bad = [
        f"{e.src} imports {e.dst} (line {e.line})"
        for m, es in graph().items()
        if _inside(m, "gridsched.core")
        for e in es
        if e.dst.split(".")[0] == "gridsched" and not _inside(e.dst, "gridsched.core")
    ]
    assert not bad, "gridsched/core imports gridsched outside the core:\n" + "\n".join(bad)


def test_core_imports_no_thread_or_signal_module():
    assert {"threading", "signal"} <= CORE_FORBIDDEN
    bad = {}
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        found = _purity.imported_roots(ast.parse(path.read_text(), str(path))) & CORE_EXTRA_FORBIDDEN
        if found:
            bad[path.name] = sorted(found)
    assert bad == {}


def test_commands_load_neither_the_daemon_nor_the_passes():
    g = graph()
    commands = sorted(m for m in g if m.startswith("gridsched.cli."))
    assert set(CLI_ALLOWED) <= set(commands)
    broken = {}
    for m in commands:
        reach = forbidden_reach(m, g, set(FORBIDDEN_TO_COMMANDS) - CLI_ALLOWED.get(m, set()))
        if reach:
            broken[m] = reach
    new = {m: r for m, r in broken.items() if m not in KNOWN_CLI_EXCEPTIONS}
    assert not new, "command modules that load the daemon or the passes:\n" + "\n".join(
        f"{m}: {how}" for m, r in new.items() for how in r.values()
    )
    fixed = sorted(set(KNOWN_CLI_EXCEPTIONS) - set(broken))
    assert not fixed, f"no longer break the rule, take them out of KNOWN_CLI_EXCEPTIONS: {fixed}"


def test_no_import_cycles_at_module_level():
    g = graph()
    found = cycles(g)
    new = [c for c in found if c not in KNOWN_CYCLES]
    assert not new, "module-level import cycles:\n" + "\n".join(cycle_path(c, g) for c in new)
    gone = [c for c in KNOWN_CYCLES if c not in found]
    assert not gone, f"cycles gone, take them out of KNOWN_CYCLES: {gone}"


def test_nothing_imports_the_daemons_loop():
    """The loop drives the daemon's parts; they never reach back into it when they run (a type hint may
    name the Daemon).  Only the command that starts the daemon imports it."""
    g = graph()
    users = sorted(
        {e.src for edges in g.values() for e in edges if e.dst == "gridsched.daemon.loop" and not e.typing_only}
    )
    assert users == ["gridsched.cli.gschedd"], users


# the daemon's own modules that, as the handlers, see only what they are handed (not the daemon itself)
FREED_OF_DAEMON = {
    "gridsched.daemon.apply",
    "gridsched.daemon.recover",
    "gridsched.daemon.slices",
    "gridsched.daemon.tuner",
    "gridsched.daemon.arrays",
    "gridsched.daemon.mail",
    "gridsched.daemon.reasons",
    "gridsched.daemon.reservations",
    "gridsched.daemon.split",
    "gridsched.daemon.outcome",
    "gridsched.daemon.tree",
}


def test_handlers_see_no_daemon():
    """A request handler sees only its context, the typed request and its envelope: no handler module imports
    the loop (not even for a type hint) or names the ``Daemon``; nor do the daemon's modules that are handed
    only what they need (:data:`FREED_OF_DAEMON`)."""
    g = graph()
    names = module_names()
    handlers = sorted(m for m in names if _inside(m, "gridsched.daemon.handlers"))
    assert "gridsched.daemon.handlers.submit" in handlers
    for m in handlers + sorted(FREED_OF_DAEMON):
        reach = [e for e in g[m] if e.dst == "gridsched.daemon.loop"]
        assert not reach, f"{m} imports the daemon's loop (line {reach[0].line})"
        tree = ast.parse(names[m][0].read_text(), m)
        named = sorted({getattr(n, "lineno", 0) for n in ast.walk(tree) if _names_daemon(n)})
        assert not named, f"{m} names Daemon (lines {named})"


def _names_daemon(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "Daemon"
    if isinstance(node, ast.Attribute):
        return node.attr == "Daemon"
    if isinstance(node, ast.alias):
        return "Daemon" in (node.name.split(".")[-1], node.asname)
    return False


# What gsub and gstat load when imported, besides click and what they use, is kept small (their start is
# timed by scripts/bench_startup.py): none of these is loaded by a module-level import of theirs, directly
# or through another module.  Reading the config needs gridsched.core.params, not the core's record types
# (gridsched.core.types); a request asking for no device needs neither the device model nor the machine map
# under it; the spool wakes the daemon with _socket; array ids are parsed only when met.
NOT_AT_COMMAND_START = {
    "gridsched.core.types",
    "gridsched.core.policy",
    "gridsched.core.devices",
    "gridsched.core.placement",
    "gridsched.core.topology",
    "gridsched.protocol.arrays",
    "socket",
    "sqlite3",
    "signal",
    "rich",
    "psutil",
}
# gstat reads the config and the spool only when it runs (gridsched.cli.common.setup): its --help and a
# usage error load neither, nor pathlib under the spool.
NOT_AT_GSTAT_START = {"gridsched.protocol.config", "gridsched.protocol.spool", "pathlib", "tomllib"}


def _loaded_of(command: str, names: set[str]) -> dict[str, str]:
    """Which of ``names`` (or of rich, psutil) importing ``command`` loads, each with the chain that loads it."""
    via = loaded_at_import(command, graph())
    bad = {}
    for m in sorted(x for x in via if x in names or x.split(".")[0] in {"rich", "psutil"}):
        chain = [m]
        while (up := via[chain[-1]]) is not None:
            chain.append(up)
        bad[m] = " <- ".join(chain)
    return bad


def test_gsub_and_gstat_start_light():
    for command in ("gridsched.cli.gsub", "gridsched.cli.gstat"):
        assert _loaded_of(command, NOT_AT_COMMAND_START) == {}, command
    assert _loaded_of("gridsched.cli.gstat", NOT_AT_GSTAT_START) == {}
    # the graph is followed: gsub loads the request checks at import (the config reader when it runs), gstat
    # the view
    gsub = loaded_at_import("gridsched.cli.gsub", graph())
    assert {"gridsched.core.choices", "gridsched.protocol.requests", "pathlib"} <= set(gsub)
    # no dataclass on gsub's path: the module compiles its records' methods and loads inspect
    assert "dataclasses" not in gsub
    # the commonest command lines are read without click (gsub_quick); gsub_cli is the click command
    assert "click" not in gsub
    assert {"click", "gridsched.cli.gsub", "gridsched.cli.gsub_options"} <= set(
        loaded_at_import("gridsched.cli.gsub_cli", graph())
    )
    assert _loaded_of("gridsched.cli.gsub_cli", NOT_AT_COMMAND_START) == {}
    # gstat alone runs without click: its click command is gstat_cli's, which loads gstat
    gstat = set(loaded_at_import("gridsched.cli.gstat", graph()))
    assert {"gridsched.protocol.view", "gridsched.cli.plain", "json"} <= gstat
    assert not {"click", "gridsched.cli.common"} & gstat
    assert {"click", "gridsched.cli.common", "gridsched.cli.gstat"} <= set(
        loaded_at_import("gridsched.cli.gstat_cli", graph())
    )
    assert _loaded_of("gridsched.cli.gstat_cli", NOT_AT_COMMAND_START | NOT_AT_GSTAT_START) == {}


# -- the folders ----------------------------------------------------------------------------------

# What each folder of the package may import from the others (docs/ARCHITECTURE.md, "The layout"),
# lazily or not; the folders not listed may import any (cli: rule 2 above keeps the daemon out).
FOLDER_MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "protocol": {"core", "host"},
    "host": {"core", "protocol"},
    "submission": {"core", "protocol", "host"},
    "job": {"core", "protocol", "host"},
    "sim": {"core", "protocol", "host"},
    "daemon": {"core", "protocol", "host", "job", "submission", "sim"},
    "api": {"core", "protocol", "host", "submission"},
}
# Imports across folders against those rules today, each with why; each must still be there (when
# one goes, take it out).
KNOWN_FOLDER_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("gridsched.protocol.parse_job", "gridsched.job.env"): "the names a job's environment owns, refused in --export",
    ("gridsched.host.facts", "gridsched.daemon.cgroup"): "gctl info says how the daemon would confine jobs",
    ("gridsched.host.facts", "gridsched.daemon.confine"): "the same",
    ("gridsched.host.facts", "gridsched.daemon.devcgroup"): "the same, for device isolation",
    (
        "gridsched.job.executor_worker",
        "gridsched.api.executor",
    ): "the worker reads the call types and names what cannot be pickled",
}
# The root of the package: its __init__ and the entry points that jobs queued by an earlier release run.
ROOT_MODULES = {"gridsched", "gridsched.subtasks", "gridsched.grunjob", "gridsched.executor_worker"}


def _folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "gridsched" else None


def folder_breaks(g: Mapping[str, list[Edge]]) -> set[tuple[str, str]]:
    out = set()
    for src, edges in g.items():
        allowed = FOLDER_MAY_IMPORT.get(_folder(src) or "")
        if allowed is None:
            continue
        for e in edges:
            dst = _folder(e.dst)
            if dst is not None and dst != _folder(src) and dst not in allowed:
                out.add((src, e.dst))
    return out


def test_folders_import_only_what_they_may():
    breaks = folder_breaks(graph())
    new = {b: "" for b in breaks if b not in KNOWN_FOLDER_EXCEPTIONS}
    assert not new, f"imports across folders against docs/ARCHITECTURE.md's layout: {sorted(new)}"
    gone = set(KNOWN_FOLDER_EXCEPTIONS) - breaks
    assert not gone, f"no longer imported (take them out of KNOWN_FOLDER_EXCEPTIONS): {sorted(gone)}"


def test_checker_finds_a_folder_break():
    fake = {"gridsched.core.a": [Edge("gridsched.core.a", "gridsched.daemon.b", 1, True, False)]}
    assert folder_breaks(fake) == {("gridsched.core.a", "gridsched.daemon.b")}


def test_the_root_holds_only_entry_points():
    root = {m for m in module_names() if m.count(".") <= 1 and not module_names()[m][1]} | {"gridsched"}
    assert root == ROOT_MODULES
    for m in ROOT_MODULES - {"gridsched"}:
        path = module_names()[m][0]
        assert len(path.read_text().splitlines()) <= 10, f"{m} is an entry point only"
