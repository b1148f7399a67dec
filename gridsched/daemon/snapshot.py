"""What a system daemon shows the commands: a copy of its job table, published by ``rename``.

A user who can open a file can lock it, and SQLite's readers and writer meet
in locks: a read lock taken by hand on the shared-memory index of a database
in WAL mode stops every write of its writer.  So a system daemon keeps its
live job table in ``private/`` (root's alone, ``0700``), where no user can
open it, and publishes ``state.db`` for the commands: a whole copy, made in
``private/`` and renamed into place.  The daemon never opens a published copy
again; a reader (or an attacker) holding one open holds an unlinked file,
which stops nothing.

The copy is made from the database file itself after a checkpoint has moved
every committed page into it (one ``copy_file_range`` of the file, its header
marked as a rollback-journal database so readers need no WAL index), or with
SQLite's backup API where the checkpoint could not finish.  Its cost grows
with the table (about 30 ms for 10,000 jobs on a 2-core VM:
``scripts/bench_publish.py``), so
publications are spaced: after one that took ``c`` seconds the next waits
``SPACING * c`` (the loop spends at most a fifth of its time copying), and
everything a command must not see before the copy shows it (a request file
leaving ``incoming/``, a claimed id being released) waits for the copy.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import time
from pathlib import Path

from gridsched.protocol.spool import Spool

log = logging.getLogger("gschedd")

SPACING = 4.0  # the next publication waits this many times the last one's cost
HEADER_VERSIONS = 18  # offset of the file format's write and read versions (2, 2: WAL; 1, 1: rollback journal)


def adopt_old_table(spool: Spool) -> None:
    """Bring the job table of an earlier release (``state.db`` in the spool root, world-readable, perhaps
    with a WAL beside it) into ``private/``: the first start of this release in system mode loses no job.

    The old file is read through SQLite (its WAL included) and copied by the backup API; then the old
    WAL and index are removed (a reader would take the copy published in its place for a WAL database).
    """
    live = spool.live_db
    old = spool.db
    if live.exists():
        return
    try:
        st = os.lstat(old)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        log.warning("%s is not a file of the daemon's: a new job table is started", old)
        return
    if st.st_size == 0:
        return
    tmp = spool.private / "state.db.adopt"
    tmp.unlink(missing_ok=True)
    src = sqlite3.connect(f"file:{old}?mode=ro", uri=True, isolation_level=None, timeout=30.0)
    try:
        dst = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    os.chmod(tmp, 0o600)
    os.rename(tmp, live)
    # the first copy for the commands, in place of the old table, before its WAL goes (a reader of the old file
    # without its WAL would see an older table)
    _publish_file(spool)
    for extra in ("-wal", "-shm", "-journal"):
        Path(f"{old}{extra}").unlink(missing_ok=True)
    log.info("the job table of %s is now kept in %s; %s is the copy the commands read", old, live, old)


def clear_old_index(spool: Spool) -> None:
    """Remove a WAL or index beside the published copy (an earlier release's, or planted): with one there a
    reader would take the copy for a WAL database."""
    for extra in ("-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{spool.db}{extra}")
        except FileNotFoundError:
            pass


def publish(conn: sqlite3.Connection, spool: Spool) -> None:
    """Publish a copy of the job table open as ``conn`` (the daemon's live connection) as ``state.db``."""
    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    if row is not None and row[0] == 0 and row[1] >= 0 and row[1] == row[2]:
        _publish_file(spool)
        return
    # frames a checkpoint could not move (a reader of the live table): the backup API reads through them
    tmp = spool.private / "state.db.publish"
    tmp.unlink(missing_ok=True)
    dst = sqlite3.connect(str(tmp), isolation_level=None)
    try:
        conn.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    finally:
        dst.close()
    os.chmod(tmp, 0o644)
    os.rename(tmp, spool.db)


def _publish_file(spool: Spool) -> None:
    """Publish a copy of the live table's file as it is (every committed page in it) as ``state.db``."""
    tmp = spool.private / "state.db.publish"
    tmp.unlink(missing_ok=True)
    _copy_file(spool.live_db, tmp)
    os.chmod(tmp, 0o644)
    os.rename(tmp, spool.db)


def _copy_file(src_path: Path, dst_path: Path) -> None:
    src = os.open(src_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst = os.open(dst_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(src).st_size
            off = 0
            while off < size:
                try:
                    n = os.copy_file_range(src, dst, size - off, off, off)
                except OSError:
                    n = 0
                if n <= 0:  # a file system that cannot: read and write
                    data = os.pread(src, min(size - off, 1 << 20), off)
                    if not data:
                        break
                    n = os.pwrite(dst, data, off)
                off += n
            os.pwrite(dst, b"\x01\x01", HEADER_VERSIONS)  # a rollback-journal database: readers need no WAL
        finally:
            os.close(dst)
    finally:
        os.close(src)


class Publisher:
    """When the job table is published: after a change, spaced by the cost of the last copy."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self.on = spool.system
        self.published = -1  # the table's version the copy shows
        self.cost = 0.0
        self.last = 0.0
        self.failed_logged = False

    def due(self, version: int) -> float | None:
        """When the next copy should be made (None: the copy is up to date, or there is none to make)."""
        if not self.on or version == self.published:
            return None
        return self.last + SPACING * self.cost

    def run(self, conn: sqlite3.Connection, version: int, now: float, force: bool = False) -> bool:
        """Publish if due (or ``force``); whether the copy now shows ``version``."""
        if not self.on:
            return True
        if version == self.published:
            return True
        if conn.in_transaction:  # only what is committed is shown
            return False
        if not force and now < self.last + SPACING * self.cost:
            return False
        t0 = time.monotonic()
        try:
            publish(conn, self.spool)
        except (OSError, sqlite3.Error) as e:
            if not self.failed_logged:
                log.error("cannot publish the job table for the commands (%s): gstat shows the last copy", e)
                self.failed_logged = True
            self.last, self.cost = now, max(self.cost, 0.05)
            return False
        if self.failed_logged:
            log.info("the job table is published again")
            self.failed_logged = False
        self.cost = time.monotonic() - t0
        self.last = now
        self.published = version
        return True
