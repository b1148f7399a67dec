"""gctl set against the daemon, in process (stub executor; gctl runs in process on its spool): the file is
written, checked first, and the daemon reloads it."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(DEFAULT_CONFIG))


def test_set_writes_checks_and_reloads(dr, caplog):
    caplog.set_level("INFO", logger="gschedd")
    cfgfile = Path(dr.d.config_path)
    cfgfile.write_text("# tuned by hand\n" + cfgfile.read_text())
    before = cfgfile.read_text()
    r = dr.command("gctl", "set", "scheduler.p=0.3", "scheduler.threshold=45m")
    assert r.stdout.splitlines()[0] == (
        f'gctl: set scheduler.p = 0.3, scheduler.threshold = "45m" in {cfgfile} (the previous file: {cfgfile}.bak)'
    )
    assert r.stdout.splitlines()[1] == f"gctl: reload requested from pid {os.getpid()}"
    data = tomllib.loads(cfgfile.read_text())
    assert data["scheduler"]["p"] == 0.3 and data["scheduler"]["threshold"] == "45m"
    assert Path(f"{cfgfile}.bak").read_text() == before  # comments are not kept: the old text is
    # the daemon has reloaded it (at its turn): gctl config reports the settings in force
    assert "reloaded" in caplog.text and dr.d.cfg.params.p == 0.3
    info = json.loads(dr.command("gctl", "config", "--json").stdout)
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
def test_a_bad_setting_refuses_all_and_writes_nothing(dr, setting, words):
    cfgfile = Path(dr.d.config_path)
    before = cfgfile.read_bytes()
    r = dr.command("gctl", "set", "scheduler.threshold=10m", setting, check=False)
    assert r.exit_code == 1 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("gctl: error: set: ")
    assert words in r.stderr and r.stderr.rstrip().endswith("nothing written")
    assert cfgfile.read_bytes() == before and not Path(f"{cfgfile}.bak").exists()
    assert not list(dr.d.spool.incoming.glob("reload-*"))
