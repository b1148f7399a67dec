"""gsub --split-file refusing what it cannot take, in process: bad split files and options that exclude one
are refused in one line and nothing is submitted; a directive gives the file.

Splittable jobs of sub-tasks of their own sizes running in the daemon are tested in
tests/daemon/test_split_file.py (real jobs) and test_split_file_driven.py (scheduling, driven clock)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridsched.cli import gsub
from tests.daemon.test_arrays_split import EASY  # the same 8-core machine
from tests.daemon.test_split_file import RECORDER


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with an 8-core configuration, its spool selected by the environment."""
    cfg = tmp_path / "gridsched.toml"
    cfg.write_text(EASY)
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(cfg))
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(tmp_path / "spool"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "task.sh").write_text(RECORDER.format(log=tmp_path / "log", sleep=0.2))
    return tmp_path


def incoming(work: Path) -> list[Path]:
    d = work / "spool" / "incoming"
    return list(d.glob("*")) if d.exists() else []


BAD = [
    ("1 10\nx 10\n", "tasks.txt:2: cores 'x': not a whole number from 1"),
    ("0 10\n", "tasks.txt:1: cores '0': not a whole number from 1"),
    ("1 10\n-2 10\n", "tasks.txt:2: cores '-2': not a whole number from 1"),
    ("1 -5\n", "tasks.txt:1: walltime"),
    ("1 0\n", "tasks.txt:1: walltime"),
    ("# only a comment\n1 10\n9 10 big\n", "tasks.txt:3: 9 cores, more than the machine has (8)"),
    ("1\n", "tasks.txt:1: expected NCPUS WALLTIME [ARGS...]"),
    ("1 10 'open\n", "tasks.txt:1: no closing quotation"),
    ("", "split file tasks.txt: no sub-tasks"),
    ("# nothing\n\n", "split file tasks.txt: no sub-tasks"),
    ("1 10 " + "a" * 5000 + "\n", "tasks.txt:1: line longer than 4096 bytes"),
]


@pytest.mark.parametrize(("text", "why"), BAD)
def test_bad_split_files_are_refused_with_one_line(work, run, text, why):
    (work / "tasks.txt").write_text(text)
    r = run(gsub.cli, ["--split-file", "tasks.txt", str(work / "task.sh")])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gsub: error: ") and why in lines[0], r.stderr
    assert not incoming(work)


def test_options_that_exclude_a_split_file_and_a_directive_that_gives_one(work, run):
    tasks, script = work / "tasks.txt", str(work / "task.sh")
    tasks.write_text("1 10 a\n2 10 b\n")
    for extra in (["--split", "2"], ["--task-time", "10"], ["-n", "2"], ["--array", "0-1"]):
        r = run(gsub.cli, ["--split-file", str(tasks), *extra, script])
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run(gsub.cli, ["--split-retries", "1", script])
    assert r.exit_code == 2 and "--split-retries goes with --split or --split-file" in r.stderr
    r = run(gsub.cli, ["--split-file", str(tasks), "-t", "5s", script])
    assert r.exit_code != 0 and "longer than the walltime" in r.stderr
    assert not incoming(work)
    directive = work / "d.sh"
    directive.write_text("#!/bin/sh\n#GS --split-file tasks.txt\n#GS --split-retries 1\necho $GS_TASK_ID\n")
    r = run(gsub.cli, ["--json", str(directive)])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["split"]["n"] == 2 and doc["split"]["tasks"] == [[1, 10, ["a"]], [2, 10, ["b"]]]
    assert doc["split"]["retries"] == 1 and doc["ncpus"] == 3 and doc["walltime"] == 10
