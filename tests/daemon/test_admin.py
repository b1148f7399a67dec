"""Administering a real daemon: start/stop/status, autostart, reload, graceful stop."""

from __future__ import annotations

import json
import os
import signal
import stat

import psutil

from tests.conftest import DEFAULT_CONFIG, wait_for


def test_gschedd_start_status_stop(make_gs):
    gs = make_gs(start=False)
    r = gs.run("gschedd", "status")
    assert r.returncode == 3 and "not running" in (r.stdout + r.stderr)
    gs.spool.mkdir(parents=True, exist_ok=True)
    (gs.spool / "gschedd.sock").touch()  # what a killed daemon leaves: not taken for the new daemon's
    r = gs.run("gschedd", "start", check=True)
    pid = json.loads((gs.spool / "gschedd.pid").read_text())["pid"]
    assert str(pid) in r.stdout
    sock = os.lstat(gs.spool / "gschedd.sock")  # started: its own socket is bound
    assert stat.S_ISSOCK(sock.st_mode)  # the file left there was a plain one
    r = gs.run("gschedd", "status")
    assert r.returncode == 0 and str(pid) in r.stdout
    again = gs.run("gschedd", "start")
    assert again.returncode != 0 and str(pid) in again.stderr
    jid = gs.gsub("--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
    r = gs.run("gschedd", "stop", check=True)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert gs.run("gschedd", "status").returncode == 3
    assert not (gs.spool / "gschedd.sock").exists(), "a stopped daemon removes its socket"


def test_first_gsub_starts_a_daemon_and_wait_returns_the_exit_code(make_gs):
    gs = make_gs(DEFAULT_CONFIG.replace("autostart = false", "autostart = true"), start=False)
    r = gs.run("gsub", "--wait", "--wrap", "echo hi; exit 5")
    assert r.returncode == 5, r.stderr
    info = json.loads((gs.spool / "gschedd.pid").read_text())
    assert psutil.pid_exists(info["pid"])
    jid = int(r.stdout.split()[0])
    assert gs.job(jid)["state"] == "FAILED"
    gs.run("gschedd", "stop", check=True)


def test_submissions_made_together_on_a_spool_without_a_daemon_start_one(make_gs):
    """Six gsubs started at once where no daemon runs: one of them starts a daemon and says so, the others
    find it (no second daemon is started only to find the spool taken), and every job runs."""
    import subprocess

    from tests.conftest import BIN

    gs = make_gs(DEFAULT_CONFIG.replace("autostart = false", "autostart = true"), start=False)
    procs = [
        subprocess.Popen(
            [str(BIN / "gsub"), "--wrap", f"echo {k}"],
            env=gs.env,
            cwd=gs.work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(6)
    ]
    try:
        outs = [p.communicate(timeout=60) for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, outs
        notes = [err for _, err in outs if "started a personal daemon" in err]
        assert len(notes) == 1, outs
        for out, _ in outs:
            gs.wait_state(int(out.split()[0]), "COMPLETED")
        assert "already running" not in (gs.spool / "gschedd.log").read_text()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        gs.run("gschedd", "stop")


def test_reload_changes_policy_and_refuses_bad_values(gs):
    good = gs.cfgfile.read_text()
    gs.cfgfile.write_text(good.replace('policy = "fcfs"', 'policy = "easy"') + "\n")
    gs.run("gctl", "reload", check=True)
    wait_for(lambda: "policy easy" in gs.log(), 10, "the reload to be logged")
    gs.cfgfile.write_text(good.replace('policy = "fcfs"', 'policy = "easy"\np = 1.5'))
    r = gs.run("gctl", "reload")
    assert r.returncode != 0
    assert "scheduler.p" in r.stderr and "1.5" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    os.kill(gs.proc.pid, signal.SIGHUP)  # bypassing gctl: the daemon itself refuses
    wait_for(lambda: "reload refused" in gs.log(), 10, "the refusal to be logged")
    assert gs.alive()
    gs.cfgfile.write_text(good)
    jid = gs.gsub("--wrap", "true")
    gs.wait_state(jid, "COMPLETED")


def test_sigterm_leaves_jobs_running_and_a_restart_collects_them(gs):
    ledger = gs.work / "ledger"
    long = gs.gsub("--wrap", f"echo start >> {ledger}; sleep 2; echo end >> {ledger}")
    gs.wait_state(long, "RUNNING")
    wait_for(ledger.exists, 15, "the job to be under way")  # RUNNING is shown from the start's decision on
    gs.stop()
    wait_for(lambda: ledger.exists() and "end" in ledger.read_text(), 15, "the job to finish without the daemon")
    gs.start()
    j = gs.wait_state(long, "COMPLETED")
    assert j["exit_code"] == 0
    assert ledger.read_text().split() == ["start", "end"]
