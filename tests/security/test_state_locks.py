"""Locks a user can take on what the daemon reads or writes: none of them may stop its writes or its start.

A user who can open a file can lock it.  A read lock on SQLite's write-lock
byte in a WAL index stops every write of the database's writer; a shared
``flock`` on the daemon's lock file wins it at the next restart.  A system
daemon therefore keeps its live job table and its lock in ``private/``
(root's alone) and publishes ``state.db`` as a copy it never opens again.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import struct
import time
from pathlib import Path

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, check_intact, spawn_as

WAL_WRITE_LOCK = 120  # the byte of a WAL index that SQLite's writer locks


def _hold_locks(spool: str, release: str) -> dict:
    """As B: open and read-lock whatever of the job table and the daemon's lock can be opened, hold the locks
    until ``release`` exists (at most 90 s), and say what could be opened."""
    opened: dict[str, str] = {}
    fds = []
    for name in (
        "state.db",
        "state.db-shm",
        "state.db-wal",
        "gschedd.lock",
        "private/state.db",
        "private/state.db-shm",
        "private/state.db-wal",
        "private/gschedd.lock",
    ):
        try:
            fd = os.open(os.path.join(spool, name), os.O_RDONLY)
        except OSError as e:
            opened[name] = type(e).__name__
            continue
        fds.append(fd)
        try:
            # a read lock from byte 0 to the end of every file: the WAL index's lock bytes and the database's
            # lock bytes at 1 GiB included
            fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            opened[name] = "locked"
        except OSError as e:
            opened[name] = f"opened, not locked: {e}"
    deadline = time.monotonic() + 90
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    for fd in fds:
        os.close(fd)
    return opened


def test_b_s_locks_on_the_job_table_stop_no_write(system, targets):
    """B read-locks every file of the job table and the daemon's lock it can open (the published copy only) and
    holds them: A's job is taken in, runs and completes; B's own gstat works; nothing of the live table is
    open to B."""
    release = system.shared / f"release-{time.time_ns()}"
    holder = spawn_as(system.b, _hold_locks, str(system.spool_dir), str(release))
    try:
        # the copy exists and B has it locked before A submits
        wait_for(lambda: _locked_by(holder.pid), 20, "B's lock on the published job table")
        t0 = time.monotonic()
        jid = system.gsub(system.a, "-t", "1m", "--wrap", "echo ran")
        row = system.wait_state(jid, *TERMINAL, timeout=30)
        took = time.monotonic() - t0
        assert row["state"] == "COMPLETED", row
        assert took < 20, f"A's job took {took:.1f} s under B's locks"
        r = system.cmd(system.b, "gstat", "-a", "--json")
        assert r.rc == 0, r
        second = system.gsub(system.a, "-t", "1m", "--wrap", "true")  # a second submission, still under the locks
        assert system.wait_state(second, *TERMINAL, timeout=30)["state"] == "COMPLETED"
    finally:
        release.touch()
        got = holder.result(30)
    opened = got.get("ok") or {}
    assert opened.get("state.db") == "locked", got
    for name in ("private/state.db", "private/state.db-shm", "private/state.db-wal", "private/gschedd.lock"):
        assert opened.get(name) == "PermissionError", (name, got)
    for name in ("state.db-shm", "state.db-wal", "gschedd.lock"):
        assert opened.get(name) == "FileNotFoundError", (name, got)
    mode = stat.S_IMODE(os.stat(system.spool_dir / "private").st_mode)
    assert mode == 0o700 and os.stat(system.spool_dir / "private").st_uid == 0
    check_intact(system, targets)


def _locked_by(pid: int, kind: str = "POSIX") -> bool:
    """Whether process ``pid`` holds a lock of ``kind`` (POSIX: fcntl, FLOCK: flock), as /proc/locks says."""
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return False
    return any(f" {pid} " in line and kind in line for line in text.splitlines())


def _flock_shared(path: str, release: str) -> str:
    """As B: a shared flock on ``path`` held until ``release`` exists (what `flock -s` does)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return type(e).__name__
    fcntl.flock(fd, fcntl.LOCK_SH)
    deadline = time.monotonic() + 90
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.close(fd)
    return "held"


def test_a_shared_flock_does_not_keep_the_daemon_from_restarting(fresh):
    """B cannot open the daemon's lock; a world-readable lock file an earlier release left in the spool root,
    which B holds with a shared flock across the restart, is passed over: the daemon starts, every user's
    commands see it running, and A's job runs."""
    system = fresh()
    release = system.shared / f"release-{time.time_ns()}"
    old = system.spool_dir / "gschedd.lock"
    held = []
    try:
        r = spawn_as(system.b, _flock_shared, str(system.spool_dir / "private" / "gschedd.lock"), str(release))
        assert r.result(30) == {"ok": "PermissionError"}
        system.stop()
        fd = os.open(old, os.O_RDWR | os.O_CREAT, 0o644)  # as an earlier release left it
        os.close(fd)
        os.chmod(old, 0o644)
        holder = spawn_as(system.b, _flock_shared, str(old), str(release))
        held.append(holder)
        wait_for(lambda: _locked_by(holder.pid, "FLOCK"), 20, "B's shared flock on the old lock file")
        system.start()
        for u in (system.a, system.b):
            st = system.cmd(u, "gschedd", "status", "--spool", str(system.spool_dir))
            assert st.rc == 0 and f"pid {system.proc.pid}" in st.stdout, st  # type: ignore[union-attr]
        assert not old.exists()
        check_intact(system)
    finally:
        release.touch()
        for h in held:
            h.result(30)


def test_b_cannot_fake_or_hide_a_running_daemon(fresh):
    """What the commands say of the daemon comes from the pid file root writes and the process it names: a
    stopped daemon is reported stopped even when its pid is reused by B's process, and B can write nothing
    the commands read for it."""
    system = fresh()
    pidfile = system.spool_dir / "gschedd.pid"
    assert os.stat(pidfile).st_uid == 0 and not os.stat(pidfile).st_mode & 0o022
    assert system.cmd(system.b, "gschedd", "status", "--spool", str(system.spool_dir)).rc == 0
    text = pidfile.read_text()
    system.stop()
    # the pid file of a daemon killed without cleaning up, naming a pid that now runs a process of B's
    sleeper = spawn_as(system.b, _sleep_as_pid_holder, str(system.shared / "go"))
    try:
        import json

        info = json.loads(text)
        info["pid"] = sleeper.pid
        pidfile.write_text(json.dumps(info))
        st = system.cmd(system.b, "gschedd", "status", "--spool", str(system.spool_dir))
        assert st.rc == 3 and "not running" in st.stdout, st
        st = system.cmd(system.a, "gstat")
        assert st.rc == 0, st
    finally:
        (system.shared / "go").touch()
        sleeper.result(30)
        pidfile.unlink(missing_ok=True)


def _sleep_as_pid_holder(go: str) -> bool:
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def test_the_table_of_an_earlier_release_is_taken_over_under_b_s_lock(fresh):
    """An earlier release kept the live table as a world-readable state.db with its WAL in the spool root.  A
    daemon of this release starting on such a spool, while B holds a read lock on the old WAL index's
    write-lock byte, takes the table over whole (A's held job is still there and runs when released) and
    leaves nothing of the old table that B could lock."""
    system = fresh()
    jid = system.gsub(system.a, "-t", "1m", "--hold", "--wrap", "echo kept")
    system.wait_state(jid, "HELD", timeout=20)
    system.stop()
    live = system.spool_dir / "private" / "state.db"
    old = system.spool_dir / "state.db"
    # lay the spool out as an earlier release did: the live table (in WAL mode) where the copy is, readable by all
    os.replace(live, old)
    for extra in ("-wal", "-shm"):
        Path(f"{live}{extra}").unlink(missing_ok=True)
    (system.spool_dir / "private" / "gschedd.lock").unlink()
    (system.spool_dir / "private").rmdir()
    os.chmod(old, 0o644)
    con = sqlite3.connect(str(old))
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("UPDATE jobs SET name = 'inwal' WHERE id = ?", (jid,))
    con.commit()
    # keep the WAL (a daemon of that release killed with -9): a second connection keeps the last one from
    # checkpointing it away
    keep = sqlite3.connect(str(old))
    keep.execute("SELECT 1 FROM jobs").fetchone()
    con.close()
    os.chmod(f"{old}-shm", 0o644)
    os.chmod(f"{old}-wal", 0o644)
    release = system.shared / f"release-{time.time_ns()}"
    holder = spawn_as(system.b, _lock_byte, f"{old}-shm", WAL_WRITE_LOCK, str(release))
    try:
        wait_for(lambda: _locked_by(holder.pid), 20, "B's lock on the old WAL index")
        keep.close()
        system.start()
        row = system.job(jid)
        assert row is not None and row["state"] == "HELD" and row["name"] == "inwal", row
        assert not Path(f"{old}-shm").exists() and not Path(f"{old}-wal").exists()
        assert (system.spool_dir / "private" / "state.db").exists()
        r = system.cmd(system.a, "grls", str(jid))
        assert r.rc == 0, r
        assert system.wait_state(jid, *TERMINAL, timeout=30)["state"] == "COMPLETED"
        check_intact(system)
    finally:
        release.touch()
        holder.result(30)


def _lock_byte(path: str, byte: int, release: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, byte, 1, 0))
    deadline = time.monotonic() + 90
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.close(fd)
    return "held"
