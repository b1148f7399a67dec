"""Administration of a system daemon: only root may reload it or drain and resume cores, and the
configuration it was started with is the one it keeps."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, System, Targets, check_intact, toml

SYSTEM_SPOOL = Path("/var/spool/gridsched")
SYSTEM_CONFIG = Path("/etc/gridsched/gridsched.toml")


def drained(system: System) -> str:
    try:
        return json.loads(system.meta().get("drained") or "{}").get("cores", "")
    except ValueError:
        return "unreadable"


def over_walltime(system: System, u, seconds: int) -> str:
    """The state a hand-written job of ``u``'s with walltime ``seconds`` comes to (FAILED when the daemon's
    jobs.max_walltime is shorter)."""
    jid = system.submit_as(u, walltime=seconds, script="#!/bin/sh\ntrue\n")
    row = system.wait_state(jid, *TERMINAL, timeout=15)
    return f"{row['state']} {row['reason']}".strip()


def test_b_cannot_reload_drain_resume_or_undrain(fresh):
    system = fresh()
    a, b = system.a, system.b
    targets = Targets(system.base, a).snapshot()
    r = system.cmd(None, "gctl", "drain", "3", "--reason", "maintenance")
    assert r.rc == 0, r
    wait_for(lambda: drained(system) == "3", 15, "root's drain of core 3")
    # root edits the configuration without reloading it yet: only a reload would make it count
    cfg = system.cfg.read_text()
    text = cfg.replace("[jobs]\n", '[jobs]\nmax_walltime = "2m"\ndefault_walltime = "1m"\n')
    assert text != cfg
    system.cfg.write_text(text)
    for payload in (
        {"type": "reload"},
        {"type": "tune"},
        {"type": "drain", "cores": "0-3", "reason": "B was here"},
        {"type": "resume", "cores": "0-3"},
        {"type": "undrain", "cores": "0-3"},
    ):
        system.put(b, f"{payload['type']}-{time.time_ns()}-{os.getpid()}.json", payload)
    system.settle()
    after_drain = drained(system)
    state = over_walltime(system, a, 300)
    reloaded = [line for line in system.log().splitlines() if "reloaded" in line]
    system.cfg.write_text(cfg)  # back as it was (and reloaded by root if B's reload went through)
    if reloaded:
        system.hup()
    assert after_drain == "3", f"B changed the drained cores: root drained 3, now {after_drain!r}"
    assert not state.startswith("FAILED"), f"B made the daemon reload its configuration: a 5-minute job is {state}"
    assert not reloaded, f"B made the daemon reload its configuration: {reloaded}"
    assert "tuning: started" not in system.log(), "B made the daemon tune its settings"
    topo = system.cmd(a, "gctl", "topology", "--json")
    assert topo.rc == 0, topo
    assert system.cmd(None, "gctl", "resume", "3").rc == 0
    wait_for(lambda: drained(system) == "", 15, "root's resume of core 3")
    check_intact(system, targets)


def test_a_non_admin_gctl_drain_is_refused_in_one_line(system, targets):
    """gctl drain by a user who does not administer the spool: refused by the command itself (non-zero exit,
    one line), not written as a request the daemon then ignores."""
    a = system.a
    for args in (("drain", "0-1"), ("resume", "0-1"), ("reload",), ("tune",)):
        r = system.cmd(a, "gctl", *args)
        why = r.one_line_error("gctl")
        assert why is None, why
    system.settle()
    assert drained(system) == ""
    check_intact(system, targets)


def start_with_config_only(env, system: System, spool_in_config: bool) -> str | None:
    """Start ``gschedd run --system --config X`` (and ``--spool S`` unless the config names it), with no
    GRIDSCHED_* variable in the daemon's environment; where it runs (a spool path, or "exited")."""
    cfg = {
        "scheduler": {"policy": "fcfs"},
        "jobs": {"kill_grace": "1s", "max_walltime": "10m", "default_walltime": "5m"},
        "machine": {"cores": 4},
        "daemon": {"autostart": False, "system": True},
    }
    if spool_in_config:
        cfg["daemon"]["spool"] = str(system.spool_dir)
    system.cfg.write_text(toml(cfg))
    argv = [str(env.bindir / "gschedd"), "run", "--system", "--config", str(system.cfg)]
    if not spool_in_config:
        argv[3:3] = ["--spool", str(system.spool_dir)]
    out = open(system.base / "daemon.out", "ab")
    daemon_env = {
        "PATH": f"{env.bindir}:/usr/bin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PYTHONPATH": env.pythonpath,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    system.proc = subprocess.Popen(
        argv, env=daemon_env, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True, cwd="/"
    )
    out.close()

    def where() -> str | None:
        if system.proc.poll() is not None:
            return "exited"
        for root in (system.spool_dir, SYSTEM_SPOOL):
            try:
                if json.loads((root / "gschedd.pid").read_text()).get("pid") == system.proc.pid:
                    return str(root)
            except (OSError, ValueError):
                pass
        return None

    return wait_for(where, 20, "the daemon to take a spool")


def test_a_system_daemon_runs_on_the_spool_its_config_names(env):
    """``gschedd run --system --config X`` where X says ``[daemon] spool = S``: the daemon runs on S."""
    if SYSTEM_SPOOL.exists():
        print(
            f"skipped: {SYSTEM_SPOOL} exists (a real system spool): a daemon that ignores spool = S would start there"
        )
        pytest.skip(f"{SYSTEM_SPOOL} exists; not disturbing it")
    system = System(env, tag="cfg")
    try:
        at = start_with_config_only(env, system, spool_in_config=True)
        assert at == str(system.spool_dir), (
            f"the daemon runs on {at}, not on the spool its config names ({system.spool_dir}): {system.why_dead()}"
        )
        assert over_walltime(system, system.a, 3600).startswith("FAILED"), "X's max_walltime (10m) does not hold"
        check_intact(system)
    finally:
        system.cleanup()
        if SYSTEM_SPOOL.exists():  # made by a daemon that went there: it did not exist before
            shutil.rmtree(SYSTEM_SPOOL, ignore_errors=True)


def test_a_reload_keeps_the_config_the_daemon_was_started_with(env):
    """After a reload (SIGHUP, then ``gctl reload`` by root) the settings of the ``--config`` file still hold:
    the daemon does not fall back to another file (the spool's, /etc's, the packaged defaults)."""
    system = System(env, tag="cfg")
    try:
        at = start_with_config_only(env, system, spool_in_config=False)
        assert at == str(system.spool_dir), f"the daemon runs on {at}: {system.why_dead()}"
        a = system.a
        assert over_walltime(system, a, 3600).startswith("FAILED"), "X's max_walltime (10m) does not hold at start"
        for how in ("SIGHUP", "gctl reload"):
            mark = len(system.log().splitlines())
            if how == "SIGHUP":
                system.proc.send_signal(signal.SIGHUP)
            else:
                r = system.cmd(None, "gctl", "reload", "--spool", str(system.spool_dir), "--config", str(system.cfg))
                assert r.rc == 0, r
            try:
                wait_for(
                    lambda m=mark: any("reload" in line for line in system.log().splitlines()[m:]),
                    10,
                    f"the daemon to log the reload ({how})",
                )
            except AssertionError:
                pass
            lines = [line for line in system.log().splitlines()[mark:] if "reload" in line]
            print(how, "->", lines)
            assert system.alive(), system.why_dead()
            state = over_walltime(system, a, 3600)
            assert state.startswith("FAILED"), (
                f"after {how} the settings of {system.cfg} no longer hold: a 1-hour job is {state} (max_walltime "
                f"is 10m there); the reload said: {lines}"
            )
            assert not [line for line in lines if "reloaded" in line and "fcfs" not in line], (
                f"after {how} the daemon runs another policy than X's fcfs: {lines}"
            )
        check_intact(system)
    finally:
        system.cleanup()
