"""gschedd and gctl without the real daemon: not running, and a stand-in process holding the spool lock."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from gridsched.cli import gctl, gschedd, gsub

# Holds the spool lock and writes the pid file as the daemon does, then waits for a signal.
HOLDER = r"""
import fcntl, json, os, sys, time
root = sys.argv[1]
os.makedirs(root, exist_ok=True)
fd = os.open(os.path.join(root, "gschedd.lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
with open(os.path.join(root, "gschedd.pid"), "w") as f:
    json.dump({"pid": os.getpid(), "started": time.time() - 65}, f)
print("ready", flush=True)
while True:
    time.sleep(60)
"""


@pytest.fixture
def holder(spool):
    """A process that holds the spool the way a running daemon does."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(spool.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_status_and_stop_when_not_running(env, run):
    r = run(gschedd.cli, ["status"])
    assert r.exit_code == 3
    assert r.stdout == f"gschedd: not running, spool {env / 'spool'}\n"
    r = run(gschedd.cli, ["stop"])
    assert r.exit_code == 3
    assert r.stderr == f"gschedd: not running, spool {env / 'spool'}\n"


def test_status_start_reload_stop_with_a_running_daemon(env, spool, run, holder):
    pid = holder.pid
    r = run(gschedd.cli, ["status"])
    assert r.exit_code == 0
    m = re.fullmatch(rf"gschedd: running, pid {pid}, spool {re.escape(str(spool.root))}, up 00:01:(\d\d)\n", r.stdout)
    assert m and 5 <= int(m.group(1)) < 60
    r = run(gschedd.cli, ["start"])
    assert r.exit_code == 1 and r.stderr == f"gschedd: error: already running with pid {pid}\n"
    r = run(gctl.cli, ["reload"])
    assert r.exit_code == 0 and f"pid {pid}" in r.stdout
    reqs = [json.loads(p.read_text()) for p in spool.incoming.glob("reload-*.json")]
    assert reqs == [{"type": "reload"}]
    # gsub leaves a running daemon alone and says nothing
    (env / "job.sh").write_text("#!/bin/sh\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0 and r.stderr == ""
    r = run(gschedd.cli, ["stop"])
    assert r.exit_code == 0
    assert r.stdout == f"gschedd: stopped, pid {pid}, spool {spool.root}\n"
    assert holder.wait(timeout=10) == -15  # it got SIGTERM
    assert spool.daemon_info() is None


def test_gctl_reload_without_daemon(env, spool, run):
    r = run(gctl.cli, ["reload"])
    assert r.exit_code == 1
    assert r.stderr == f"gctl: error: no daemon runs on {spool.root}\n"
    assert not spool.incoming.exists() or list(spool.incoming.iterdir()) == []


def test_gctl_reload_refuses_a_bad_config(env, spool, run, holder):
    (env / "cfg.toml").write_text("[scheduler]\np = 2.0\n")
    r = run(gctl.cli, ["reload"])
    assert r.exit_code == 1
    assert r.stderr.startswith("gctl: error: config ") and "scheduler.p = 2.0" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert list(spool.incoming.glob("reload-*")) == []


def test_gctl_config(env, run):
    r = run(gctl.cli, ["config"])
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0] == f"# config file: {env / 'cfg.toml'}"
    assert "autostart = false" in r.stdout.splitlines()
    assert "cores = 16" in r.stdout.splitlines()
    assert 'policy = "checkpoint-backfill"' in r.stdout.splitlines()  # a default, filled in
    doc = json.loads(run(gctl.cli, ["config", "--json"]).stdout)
    assert doc["path"] == str(env / "cfg.toml")
    assert doc["spool"] == str(env / "spool")
    assert doc["config"]["daemon"]["autostart"] is False
    assert doc["config"]["machine"]["cores"] == 16
    assert doc["config"]["jobs"]["max_walltime"] == "7d"


def test_gctl_config_explicit_file(env, run, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text("[jobs]\ndefault_ncpus = 3\n")
    doc = json.loads(run(gctl.cli, ["config", "--json", "--config", str(other)]).stdout)
    assert doc["path"] == str(other) and doc["config"]["jobs"]["default_ncpus"] == 3


def test_groups_without_or_with_unknown_command(env, run):
    r = run(gschedd.cli, [])
    assert r.exit_code == 2 and "Usage: gschedd" in r.stderr
    r = run(gctl.cli, ["frobnicate"])
    assert r.exit_code == 2 and r.stderr == "gctl: error: no such command 'frobnicate'\n"


def test_python_m_gschedd(env):
    r = subprocess.run(
        [sys.executable, "-m", "gridsched.cli.gschedd", "status"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith("gschedd: not running")
