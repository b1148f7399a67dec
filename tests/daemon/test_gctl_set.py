"""gctl set against a real daemon: the file is written, checked first, and the daemon reloads it."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import wait_for

BIN = Path(sys.executable).parent


def gctl(gs, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "gctl"), *args], env=gs.env, capture_output=True, text=True, timeout=60)


def test_set_writes_checks_and_reloads(gs):
    gs.cfgfile.write_text("# tuned by hand\n" + gs.cfgfile.read_text())
    before = gs.cfgfile.read_text()
    r = gctl(gs, "set", "scheduler.p=0.3", "scheduler.threshold=45m")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == (
        f'gctl: set scheduler.p = 0.3, scheduler.threshold = "45m" in {gs.cfgfile} '
        f"(the previous file: {gs.cfgfile}.bak)"
    )
    assert r.stdout.splitlines()[1].startswith("gctl: reload requested from pid ")
    data = tomllib.loads(gs.cfgfile.read_text())
    assert data["scheduler"]["p"] == 0.3 and data["scheduler"]["threshold"] == "45m"
    assert Path(f"{gs.cfgfile}.bak").read_text() == before  # comments are not kept: the old text is
    # the daemon has reloaded it: gctl info reports the settings in force
    wait_for(lambda: "reload" in (gs.spool / "gschedd.log").read_text(), timeout=30, what="the reload in the log")
    info = json.loads(gctl(gs, "config", "--json").stdout)
    assert info["config"]["scheduler"]["p"] == 0.3


@pytest.mark.parametrize(
    "setting, words",
    [
        ("scheduler.p=1.5", "scheduler.p = 1.5: must be between 0 and 1"),
        ("scheduler.threshold=soon", "scheduler.threshold = 'soon'"),
        ("scheduler.nosuch=1", "unknown key scheduler.nosuch"),
        ("nosuch.key=1", "unknown table [nosuch]"),
        ("scheduler.p", "'scheduler.p': not KEY=VALUE"),
        ("p=0.3", "'p': not TABLE.KEY"),
        ("scheduler.p=true", "scheduler.p = True: must be a float"),
        ("machine.cores=2", "machine"),
        ("scheduler.tune_every=30s", "scheduler.tune_every = '30s': must be from a minute to a year"),
        ("scheduler.tune_every=400d", "scheduler.tune_every = '400d': longer than a year"),
        ("scheduler.tune_window=0", "scheduler.tune_window = 0: must be positive"),
        ("scheduler.tune_objective=best", "must be one of bsld, wait, mix"),
        ("scheduler.tune_margin=1.5", "scheduler.tune_margin = 1.5: must be from 0 to 1"),
        ("scheduler.p=often", "scheduler.p = 'often': must be a float"),
        ("scheduler.backfill_order=longest", 'must be one of queue, shortest, or "auto"'),
    ],
)
def test_a_bad_setting_refuses_all_and_writes_nothing(gs, setting, words):
    before = gs.cfgfile.read_bytes()
    r = gctl(gs, "set", "scheduler.threshold=10m", setting)
    assert r.returncode == 1 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("gctl: error: set: ")
    assert words in r.stderr and r.stderr.rstrip().endswith("nothing written")
    assert gs.cfgfile.read_bytes() == before and not Path(f"{gs.cfgfile}.bak").exists()
