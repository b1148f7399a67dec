"""gsim's entry point: a plain replay without click, as the click command replays it (whole processes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from simtraces import HAND, swf_line

from gridsched.cli.gsim_quick import COMMANDS, Quick, parse

# The installed script's entry point, and the click group, each as a whole process.
QUICK = "import sys; from gridsched.cli.gsim_quick import main; sys.argv[0] = 'gsim'; main()"
CLICK = "import sys; from gridsched.cli.gsim import main; sys.argv[0] = 'gsim'; main()"
# As QUICK, reporting on stderr whether click was loaded.
QUICK_LOADS = "import sys, atexit; atexit.register(lambda: print('click' in sys.modules, file=sys.stderr)); " + QUICK


def gsim(entry: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", entry, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> None:
    """The two processes printed and exited alike (the JSON's run time aside)."""
    assert (a.returncode, a.stderr) == (b.returncode, b.stderr)
    if a.stdout.startswith("{"):
        ja, jb = json.loads(a.stdout), json.loads(b.stdout)
        ja.pop("seconds")
        jb.pop("seconds")
        assert ja == jb
    else:  # the summary's run time aside
        assert re.sub(r"\d+\.\d+ s,", "", a.stdout) == re.sub(r"\d+\.\d+ s,", "", b.stdout)


def test_parse_takes_a_plain_replay():
    assert parse(["run", "t.swf"]) == Quick("t.swf", None, None, None, None, False)
    assert parse(["run", "--json", "--policy", "easy", "t.swf", "--limit", "30", "--procs", "8"]) == Quick(
        "t.swf", "easy", 30, 8, None, True
    )
    assert parse(["run", "t.swf", "--jobs-out", "j.csv"]) == Quick("t.swf", None, None, None, "j.csv", False)
    # gsim TRACE is gsim run TRACE
    assert parse(["t.swf", "--policy", "fcfs", "--json"]) == Quick("t.swf", "fcfs", None, None, None, True)


def test_the_commands_are_the_groups():
    from gridsched.cli.gsim import main

    assert sorted(COMMANDS) == sorted(main.commands)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--json", "t.swf"],  # run, for the group
        ["compare", "t.swf"],
        ["tune", "t.swf"],
        ["run"],
        ["run", "--help"],
        ["run", "t.swf", "u.swf"],
        ["run", "t.swf", "--per-user"],
        ["run", "t.swf", "--policy", "EASY"],  # click takes it lower-cased
        ["run", "t.swf", "--policy", "nope"],
        ["run", "t.swf", "--policy"],
        ["run", "t.swf", "--policy=easy"],
        ["run", "t.swf", "--json", "--json"],
        ["run", "t.swf", "--limit", "0"],
        ["run", "t.swf", "--limit", " 5"],
        ["run", "t.swf", "--limit", "-5"],
        ["run", "t.swf", "--procs", "x"],
        ["run", "t.swf", "--jobs-out", "-"],
        ["run", "-", "--json"],
    ],
)
def test_parse_leaves_the_rest_to_click(args):
    assert parse(args) is None


def test_a_plain_replay_loads_no_click_and_prints_what_the_command_prints(write_trace, tmp_path):
    after_1 = swf_line(5, 40, 30, 2, 60).rsplit(" ", 2)[0] + " 1 5"  # fields 17 and 18: job 1, think time 5 s
    path = write_trace(HAND + [after_1], max_procs=4)
    for policy in ("fcfs", "easy", "conservative", "checkpoint-backfill"):
        args = ("run", path, "--policy", policy, "--json", "--jobs-out", str(tmp_path / f"{policy}.csv"))
        a = gsim(QUICK_LOADS, *args)
        assert a.returncode == 0, a.stderr
        # the note on SWF field 17, then whether click was loaded
        assert a.stderr.splitlines()[-1] == "False"
        quick_csv = (tmp_path / f"{policy}.csv").read_text()
        b = gsim(CLICK, *args)
        a.stderr = a.stderr.rsplit("False\n", 1)[0]
        same(a, b)
        assert "jobs name a preceding job" in b.stderr
        assert (tmp_path / f"{policy}.csv").read_text() == quick_csv
    # the human summary, the default policy, --limit and --procs, without run
    same(
        gsim(QUICK, path, "--limit", "3", "--procs", "8"),
        gsim(CLICK, path, "--limit", "3", "--procs", "8"),
    )


@pytest.mark.parametrize(
    "args",
    [
        ("run", "/nonexistent/trace.swf", "--json"),
        ("run", "{dir}"),
        ("run", "{trace}", "--jobs-out", "/nonexistent/dir/jobs.csv"),
        ("run", "{trace}", "--procs", "2", "--json"),  # jobs larger than the machine: skipped, with a warning
        ("run", "{trace}", "--policy", "nope"),  # click's refusal
        ("run", "{trace}", "--per-user", "--json"),  # click's replay
    ],
)
def test_errors_and_other_calls_as_the_command(write_trace, tmp_path, args):
    trace = write_trace(HAND, max_procs=4)
    args = tuple(a.format(dir=tmp_path, trace=trace) for a in args)
    a, b = gsim(QUICK, *args), gsim(CLICK, *args)
    same(a, b)
    if "--per-user" not in args:
        assert a.returncode != 0 or "warning" in a.stderr
