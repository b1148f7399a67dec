"""Whole-process checks: what gsub imports, and click's own errors as one line from the real entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = {"rich", "psutil", "gridsched.daemon"}
# What the commands' start leaves out besides (each costs milliseconds there): the core's record types
# (reading the config needs only gridsched.core.params), the scheduling pass, the socket module (a
# command sends its one datagram with _socket), the SQLite module (read only when there is a state
# db), and array ids (parsed only when a command meets one).
LIGHT = {"gridsched.core.types", "gridsched.core.policy", "socket", "sqlite3", "gridsched.protocol.arrays"}
# A job that asks for no device is checked without the device model and the placement under it (the
# machine map is read when no daemon has recorded the machine's size yet, as on this test's new spool).
DEVICE_MODEL = {"gridsched.core.devices", "gridsched.core.placement"}


def python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def test_importing_gsub_loads_nothing_heavy():
    code = (
        "import sys; from gridsched.cli import gsub, gdel, gstat; "
        f"print(sorted(m for m in sys.modules if m in {sorted(HEAVY | LIGHT)!r}))"
    )
    r = python("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def imported(stderr: str) -> set[str]:
    """Module names in a ``-X importtime`` report."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("args", [["--help"], ["--wrap", "true", "--spool", "SPOOL"]])
def test_gsub_run_loads_nothing_heavy(tmp_path, args):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[daemon]\nautostart = false\n")
    args = [a.replace("SPOOL", str(tmp_path / "spool")) for a in args]
    r = python("-X", "importtime", "-m", "gridsched.cli.gsub", *args, env={"GRIDSCHED_CONFIG": str(cfg)})
    assert r.returncode == 0, r.stderr[-2000:]
    mods = imported(r.stderr)
    assert "gridsched.cli.gsub_quick" in mods  # the report is real
    assert ("click" in mods) == (args == ["--help"])  # the commonest command lines are read without click
    assert not {m for m in mods if m.split(".")[0] in {"rich", "psutil"} or m.startswith("gridsched.daemon")}
    assert sorted(mods & (LIGHT - {"sqlite3"})) == []  # sqlite3 reads the state db, when there is one
    assert sorted(mods & DEVICE_MODEL) == []
    if args != ["--help"]:  # the configuration is read as PlainSettings: neither Config nor Params is built
        assert sorted(mods & {"gridsched.protocol.config_record", "gridsched.core.params"}) == []
    # no other system's rules and values (a script is scanned for their directives, --wrap is not)
    assert sorted(m for m in mods if m.startswith("gridsched.submission.compat.")) == []


def test_compat_names_load_from_their_modules():
    """Every name of gridsched.submission.compat is its module's, loaded on first use; the header's prefixes
    are those the rules know."""
    code = (
        "import sys; from gridsched.submission import compat; "
        "before = sorted(m for m in sys.modules if m.startswith('gridsched.submission.compat.')); "
        "from gridsched.submission.compat import header, rules; "
        "import importlib; "
        "same = all(getattr(compat, n) is getattr(importlib.import_module('gridsched.submission.compat.' + m), n) "
        "for n, m in compat._WHERE.items()); "
        "print(before, same, sorted(compat.__all__) == sorted(compat._WHERE), "
        "set(header.FOREIGN) == set(rules.PREFIXES))"
    )
    r = python("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[]", "True", "True", "True"]


def test_gstat_help_reads_neither_config_nor_spool(tmp_path):
    """--help (and a usage error) come before gridsched.cli.common.setup: the config reader, TOML, the spool
    and pathlib stay out."""
    for args in (["--help"], ["--xyzzy"]):
        r = python("-X", "importtime", "-m", "gridsched.cli.gstat", *args)
        assert r.returncode == (0 if args == ["--help"] else 2), r.stderr[-2000:]
        # what the interpreter itself loads at start (a site .pth file may load pathlib) is not gstat's
        mods = imported(r.stderr) - imported(python("-X", "importtime", "-c", "pass").stderr)
        assert {"click", "gridsched.cli.common"} <= mods  # the report is real
        assert sorted(mods & {"gridsched.protocol.config", "gridsched.protocol.spool", "tomllib", "pathlib"}) == []


def test_gstat_run_loads_only_what_it_uses(tmp_path):
    """gstat on a queue, piped: no colours (rich), no record types, no socket, no arrays."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[daemon]\nautostart = false\n")
    env = {"GRIDSCHED_CONFIG": str(cfg), "GRIDSCHED_SPOOL": str(tmp_path / "spool")}
    for name in ("a", "b"):
        assert python("-m", "gridsched.cli.gsub", "--hold", "--name", name, "--wrap", "true", env=env).returncode == 0
    r = python("-X", "importtime", "-m", "gridsched.cli.gstat", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "HELD" in r.stdout.split("\n", 1)[1]
    mods = imported(r.stderr)
    assert {"gridsched.cli.plain", "gridsched.core.params"} <= mods  # the report is real
    assert not {m for m in mods if m.split(".")[0] == "click"}  # gstat alone needs no click
    assert not {m for m in mods if m.split(".")[0] in {"rich", "psutil"} or m.startswith("gridsched.daemon")}
    assert sorted(mods & (LIGHT - {"sqlite3"})) == []


@pytest.mark.parametrize(
    "module, args, line",
    [
        ("gsub", ["--nmae", "x"], "gsub: error: unknown option --nmae (did you mean --name or --mem or --time?)"),
        ("gstat", ["--xyzzy"], "gstat: error: unknown option --xyzzy"),
        ("gsub", ["-t"], "gsub: error: option '-t' requires an argument"),
    ],
)
def test_click_errors_are_one_line(module, args, line):
    r = python("-m", f"gridsched.cli.{module}", *args)
    assert r.returncode == 2
    assert r.stderr == line + "\n"
    assert r.stdout == ""


def run_on_a_terminal(argv: list[str], env: dict[str, str]) -> bytes:
    """The output of ``argv`` run with a pseudo-terminal as its stdout."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # child
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out


def test_gstat_colours_only_on_a_terminal(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[daemon]\nautostart = false\n")
    env = {**os.environ, "GRIDSCHED_CONFIG": str(cfg), "GRIDSCHED_SPOOL": str(tmp_path / "spool"), "TERM": "xterm"}
    for var in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(var, None)
    assert python("-m", "gridsched.cli.gsub", "--wrap", "true", env=env).returncode == 0
    piped = python("-m", "gridsched.cli.gstat", env=env)
    assert piped.returncode == 0 and "PENDING" in piped.stdout and "\x1b[" not in piped.stdout
    tty = run_on_a_terminal([sys.executable, "-m", "gridsched.cli.gstat"], env)
    assert b"PENDING" in tty and b"\x1b[" in tty


def test_wake_sends_its_datagram_and_needs_no_daemon(tmp_path):
    """Spool.wake (through _socket) reaches a socket bound where the daemon's is, and is quiet without one."""
    import socket

    from gridsched.protocol.spool import Spool

    spool = Spool(tmp_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as daemon:
        daemon.bind(str(spool.sock))
        daemon.settimeout(10)
        spool.wake()
        assert daemon.recv(16) == b"!"
    spool.sock.unlink()
    spool.wake()  # nobody listens: no error


def test_the_compiled_defaults_are_the_packaged_file():
    """gridsched.protocol.config_defaults holds the packaged gridsched.toml, parsed (scripts/gen_man.py
    writes it)."""
    from gridsched.protocol.config import defaults_current

    assert defaults_current(), "stale gridsched/protocol/config_defaults.py: run python scripts/gen_man.py"


def test_a_changed_packaged_file_is_parsed(tmp_path, monkeypatch):
    """The compiled form is used only for the very file it was made from: an edited packaged file is read."""
    from gridsched.protocol import config

    edited = tmp_path / "gridsched.toml"
    edited.write_text(config.PACKAGED.read_text().replace('default_walltime = "1h"', 'default_walltime = "2h"', 1))
    assert config.load(str(config.PACKAGED)).default_walltime == 3600
    monkeypatch.setattr(config, "PACKAGED", edited)
    assert config.load(str(edited)).default_walltime == 7200  # the defaults themselves, from the edited file
    other = tmp_path / "mine.toml"
    other.write_text("[jobs]\ndefault_ncpus = 2\n")
    cfg = config.load(str(other))
    assert (cfg.default_walltime, cfg.default_ncpus) == (7200, 2)


@pytest.mark.parametrize("config_file", [False, True])
def test_toml_is_parsed_only_for_a_config_file(tmp_path, config_file):
    """Without a configuration file of the user's or the admin's, the packaged defaults need no TOML parser
    (nor the signal module, for the checkpoint signal)."""
    env = {"GRIDSCHED_SPOOL": str(tmp_path / "spool")}
    if config_file:
        cfg = tmp_path / "cfg.toml"
        cfg.write_text("[daemon]\nautostart = false\n")
        env["GRIDSCHED_CONFIG"] = str(cfg)
    code = (
        "import os, sys, pathlib; "
        "from gridsched.protocol import config; "
        "config.SYSTEM = pathlib.Path(os.environ['GRIDSCHED_SPOOL'], 'no-system.toml'); "
        "cfg = config.load(None, os.environ['GRIDSCHED_SPOOL']); "
        "print(cfg.path == str(config.PACKAGED), 'tomllib' in sys.modules, 'signal' in sys.modules)"
    )
    r = python("-c", code, env=env if config_file else {**env, "GRIDSCHED_CONFIG": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == (["False", "True", "False"] if config_file else ["True", "False", "False"])


def test_gstat_alone_is_gstat_through_click_with_no_option():
    """``gstat`` alone calls show() with its defaults, without click: they are click's defaults of the options."""
    import inspect

    from gridsched.cli import gstat
    from gridsched.cli.gstat_cli import cli

    ctx = cli.make_context("gstat", [])
    defaults = {k: p.default for k, p in inspect.signature(gstat.show).parameters.items()}
    assert ctx.params == defaults
    assert gstat.cli is cli


def test_gstat_alone_answers_as_through_click(tmp_path):
    """The same table, and the same one-line error for a bad configuration, with or without click."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[daemon]\nautostart = false\n")
    env = {"GRIDSCHED_CONFIG": str(cfg), "GRIDSCHED_SPOOL": str(tmp_path / "spool")}
    for name in ("a", "b"):
        assert python("-m", "gridsched.cli.gsub", "--hold", "--name", name, "--wrap", "true", env=env).returncode == 0
    through_click = "import sys; from gridsched.cli.gstat_cli import cli; cli.main(args=[], prog_name='gstat')"
    alone, clicked = python("-m", "gridsched.cli.gstat", env=env), python("-c", through_click, env=env)
    assert alone.returncode == clicked.returncode == 0, alone.stderr + clicked.stderr
    assert alone.stdout == clicked.stdout and "HELD" in alone.stdout
    cfg.write_text("[jobs]\nnope = 1\n")
    alone, clicked = python("-m", "gridsched.cli.gstat", env=env), python("-c", through_click, env=env)
    assert alone.returncode == clicked.returncode == 1
    assert alone.stderr == clicked.stderr == f"gstat: error: config {cfg}: unknown key jobs.nope\n"
    assert alone.stdout == clicked.stdout == ""


QUICK = [
    [],
    ["--wrap", "true"],
    ["-n", "4", "-t", "60", "job.sh", "a", "-n", "b"],
    ["--name=x", "--hold", "--json", "-"],
    ["-o", "o.txt", "-e", "e.txt", "-D", "/tmp", "s.sh"],
    ["--spool", "/x", "--config", "/y", "--wrap=echo hi"],
    ["--ncpus", "2", "--walltime", "1-00:00", "--output=%x.out", "s.sh"],
    ["-t", "90s", "--wrap", ""],
    ["-N", "", "s.sh", "--", "--help"],
    ["-J", "x", "--time", "10", "s.sh"],
    ["--job-name=x", "--time=1:00:00", "--wrap", "true"],
]
NOT_QUICK = [
    ["--help"],
    ["-h"],
    ["-n", "0", "x"],
    ["-n", "+4", "x"],
    ["-n4", "x"],
    ["-t", "abc", "x"],
    ["-t", "-5", "x"],
    ["--hold=1", "x"],
    ["-N"],
    ["-N", "-x", "s.sh"],
    ["--", "s.sh"],
    ["-n", "1", "-n", "2", "x"],
    ["--mem", "1G", "x"],
    ["--emit", "slurm", "x"],
    ["--nmae", "x"],
    ["-N", "a", "-J", "b", "x"],
    ["--mem-per-gpu", "1G", "x"],
]


@pytest.mark.parametrize("argv", QUICK)
def test_quick_command_lines_are_read_as_click_reads_them(argv):
    """gsub_quick's parameters, and where each came from, are click's for the same command line."""
    from click.core import ParameterSource

    from gridsched.cli.gsub_cli import cli
    from gridsched.cli.gsub_quick import given_on

    given = given_on(list(argv))
    assert given is not None
    ctx = cli.make_context("gsub", list(argv))
    assert given.params == ctx.params
    for name in ctx.params:
        assert (given.get_parameter_source(name).name == "COMMANDLINE") == (
            ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE
        ), name
    assert given.command is cli


@pytest.mark.parametrize("argv", NOT_QUICK)
def test_other_command_lines_go_to_click(argv):
    from gridsched.cli.gsub_quick import given_on

    assert given_on(list(argv)) is None


def test_quick_defaults_are_clicks():
    """gsub_quick.DEFAULTS names every parameter of gsub, with click's default."""
    from gridsched.cli.gsub_cli import cli
    from gridsched.cli.gsub_quick import DEFAULTS

    assert cli.make_context("gsub", []).params == DEFAULTS


def test_quick_submissions_answer_as_through_click(tmp_path):
    """Read without click or with it, a submission prints the same, refuses with the same line, and a
    script's directives are read (with click's definitions, loaded then)."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[daemon]\nautostart = false\n")
    env = {"GRIDSCHED_CONFIG": str(cfg), "GRIDSCHED_SPOOL": str(tmp_path / "spool")}
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#GS -N fromgs -t 5\ntrue\n")
    through_click = "import sys; from gridsched.cli.gsub_cli import cli; cli.main(args=sys.argv[1:], prog_name='gsub')"

    def both(*argv: str) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
        quick = python("-X", "importtime", "-m", "gridsched.cli.gsub", *argv, env=env)
        clicked = python("-c", through_click, *argv, env=env)
        return quick, clicked

    quick, clicked = both("--json", "-n", "1", "-o", str(tmp_path / "o.txt"), "--hold", str(script), "arg")
    assert quick.returncode == clicked.returncode == 0, quick.stderr[-2000:] + clicked.stderr
    jobs = [json.loads(r.stdout) for r in (quick, clicked)]
    assert jobs[1]["id"] == jobs[0]["id"] + 1
    for job in jobs:
        del job["id"], job["submit_time"]
        job["stderr"] = job["stderr"].rsplit(".e", 1)[0]
    assert jobs[0] == jobs[1]
    assert (jobs[0]["name"], jobs[0]["walltime"], jobs[0]["hold"]) == ("fromgs", 300, True)
    assert "click" in imported(quick.stderr)  # the directives were read with click's definitions
    quick, clicked = both("-D", str(tmp_path / "nowhere"), "--wrap", "true")
    assert quick.returncode == clicked.returncode == 1
    assert (
        quick.stderr.splitlines()[-1]
        == clicked.stderr.strip()
        == f"gsub: error: chdir '{tmp_path / 'nowhere'}': no such directory"
    )
    assert "click" not in imported(quick.stderr)


def test_gsub_to_a_running_daemon_builds_no_dataclass(gs):
    """To a daemon that has recorded the machine (every submission but a spool's first), gsub reads the
    configuration as PlainSettings and its options as a plain record: dataclasses (and inspect under it), the
    Config record and the policy settings stay out."""
    first = gs.gsub("--hold", "--wrap", "true")
    gs.wait_state(first, "HELD")  # taken in: the daemon has recorded the machine's size
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gridsched.cli.gsub", "--hold", "--wrap", "true"],
        env=gs.env,
        cwd=gs.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout) == first + 1
    mods = imported(r.stderr)
    assert {"gridsched.protocol.config", "gridsched.submission.options"} <= mods  # the report is real
    heavy = {"dataclasses", "inspect", "gridsched.protocol.config_record", "gridsched.core.params"}
    assert sorted(mods & heavy) == []
