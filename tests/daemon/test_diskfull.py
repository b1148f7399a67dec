"""A full or read-only spool: submissions are refused in one line, the state is intact, service resumes.

The spool lives on a small tmpfs mounted for the test (root only); where
mounting is not allowed the tests are skipped with the reason printed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import DEFAULT_CONFIG, Gridsched, fill_disk, wait_for

pytestmark = pytest.mark.daemon


def _mount(where: Path, size: str) -> str | None:
    """Mount a tmpfs at ``where``; None, or why it cannot be done."""
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs"
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    return None if r.returncode == 0 else f"mount -t tmpfs failed: {r.stderr.strip()}"


@pytest.fixture
def small_fs(tmp_path):
    where = Path(tempfile.mkdtemp(prefix="gs-full-"))
    why = _mount(where, "8m")
    if why:
        where.rmdir()
        print(f"disk-full tests skipped: {why}")
        pytest.skip(why)
    gs = Gridsched(where / "gs", DEFAULT_CONFIG)
    gs.spool.mkdir()
    gs.env["TMPDIR"] = str(tmp_path)  # jobs' private directories elsewhere: only the spool fills up
    yield gs
    gs.cleanup()
    subprocess.run(["mount", "-o", "remount,rw", str(where)], capture_output=True)
    subprocess.run(["umount", "-l", str(where)], capture_output=True)
    where.rmdir()


def integrity(gs) -> str:
    con = sqlite3.connect(f"file:{gs.spool / 'state.db'}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def refused(gs, what: str) -> None:
    r = gs.run("gsub", "--wrap", "true")
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gsub: error: cannot submit to "), lines
    assert what in lines[0]


def test_full_spool_refuses_submissions_and_recovers(small_fs):
    gs = small_fs
    gs.start()
    before = gs.gsub("--wrap", "true")
    gs.wait_state(before, "COMPLETED")
    held = gs.gsub("--hold", "--wrap", "true")
    gs.wait_state(held, "HELD")
    filler = gs.root / "filler"
    fill_disk(filler)
    refused(gs, "No space left on device")
    assert gs.job(held)["state"] == "HELD"  # the commands still read the state
    assert gs.alive()
    filler.unlink()
    after = gs.gsub("--wrap", "true")
    gs.wait_state(after, "COMPLETED")
    assert integrity(gs) == "ok"
    assert after == held + 1  # the refused submission took no id


def test_submissions_wait_while_the_daemon_has_no_room(small_fs):
    gs = small_fs
    gs.start()
    first = gs.gsub("--wrap", "true")
    gs.wait_state(first, "COMPLETED")
    gs.proc.send_signal(signal.SIGSTOP)  # the daemon looks away while a request arrives and the disk fills
    try:
        waiting = gs.gsub("--wrap", "true")
        filler = gs.root / "filler"
        fill_disk(filler)
    finally:
        gs.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: "submissions wait in incoming/" in gs.log(), 10, "the daemon to see the full disk")
    assert (gs.spool / "incoming" / f"submit-{waiting:010d}.json").exists()  # nothing lost, nothing quarantined
    assert not list((gs.spool / "quarantine").glob("*.why"))
    assert gs.alive()
    filler.unlink()
    gs.wait_state(waiting, "COMPLETED")
    assert integrity(gs) == "ok"


def test_the_daemon_refuses_to_start_on_a_full_spool_in_one_line(small_fs):
    gs = small_fs
    gs.start()
    gs.stop()
    fill_disk(gs.root / "filler")
    r = gs.run("gschedd", "run")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"gschedd: error: cannot run on {gs.spool}: No space left on device"]


def test_read_only_spool_refuses_submissions_and_recovers(small_fs):
    gs = small_fs
    gs.start()
    jid = gs.gsub("--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
    gs.stop()
    mnt = gs.root.parent
    assert subprocess.run(["mount", "-o", "remount,ro", str(mnt)]).returncode == 0
    try:
        refused(gs, "Read-only file system")
        assert gs.job(jid)["state"] == "COMPLETED"
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)
    gs.start()
    again = gs.gsub("--wrap", "true")
    gs.wait_state(again, "COMPLETED")
    assert integrity(gs) == "ok"


def _running(gs, word: str) -> bool:
    """Whether one of the test's processes runs ``word`` (one that ends while it is looked at does not)."""
    for p in gs.processes():
        try:
            if word in " ".join(p.cmdline()):
                return True
        except (psutil.Error, OSError):
            pass
    return False


def test_a_job_that_ends_while_the_spool_is_full_is_recorded_when_room_returns(small_fs):
    gs = small_fs
    gs.start()
    jid = gs.gsub("-o", "/dev/null", "-e", "/dev/null", "--wrap", "sleep 2; exit 3")
    gs.wait_state(jid, "RUNNING")
    # the job's shepherd is under way (RUNNING is shown from the start's decision on) before the disk fills
    wait_for((gs.spool / "jobs" / str(jid) / "seg-1.pid").exists, 15, "the job's shepherd to be under way")
    filler = gs.root / "filler"
    fill_disk(filler)
    exit_file = gs.spool / "jobs" / str(jid) / "seg-1.exit"
    # the job ends; its shepherd waits for room to write its exit status
    wait_for(lambda: not _running(gs, "sleep"), 15, "the job to end")
    assert not exit_file.exists()
    filler.unlink()
    wait_for(exit_file.exists, 15, "the shepherd to write the exit status")
    if not gs.alive():  # the daemon died on the full disk: a restart still finds the ending
        gs.proc = None
        gs.start()
    j = gs.wait_state(jid, "FAILED")
    assert j["exit_code"] == 3 and j["reason"] == "exit code 3"


def test_the_daemon_survives_a_full_spool_while_jobs_end(small_fs):
    gs = small_fs
    gs.start()
    jid = gs.gsub("-t", "2s", "-o", "/dev/null", "-e", "/dev/null", "--wrap", "sleep 30")
    gs.wait_state(jid, "RUNNING")
    # the job's shepherd is under way (RUNNING is shown from the start's decision on) before the disk fills
    wait_for((gs.spool / "jobs" / str(jid) / "seg-1.pid").exists, 15, "the job's shepherd to be under way")
    filler = gs.root / "filler"
    fill_disk(filler)
    deadline = gs.job(jid)["start_time"] + 2
    # at the walltime the daemon signals the job and records why: a commit on the full disk
    wait_for(lambda: time.time() > deadline + 1.5 or not gs.alive(), 15, "the walltime to pass")
    alive = gs.alive()
    filler.unlink()
    assert alive
    gs.wait_state(jid, "TIMEOUT")
