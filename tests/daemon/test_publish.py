"""The copy of the job table a system daemon publishes for the commands, in process (the stub executor).

The live table is in ``private/``; ``state.db`` is a copy renamed into place.
A request leaves ``incoming/`` only once a copy shows what became of it, and
is not read again meanwhile; the tasks of a large array share their script
by hard links in runs below the file system's limit.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from gridsched.daemon import arrays, snapshot
from gridsched.daemon.loop import Daemon
from gridsched.protocol import requests as rq
from gridsched.protocol.spool import Spool
from tests.fuzz.test_requests import valid_job

CONFIG = """
[machine]
cores = 4
[daemon]
autostart = false
"""


@pytest.fixture
def system_layout(stub_daemon):
    """A daemon object on a spool laid out as a system daemon's (``private/``)."""
    return lambda: stub_daemon(CONFIG, system_layout=True)


def submit(d: Daemon, now: float, **fields: object) -> tuple[int, Path]:
    nid = d.spool.next_id()
    p = d.spool.incoming / rq.id_name(nid)
    p.write_text(json.dumps({"type": "submit", "job": {**valid_job(nid), "submit_time": now, **fields}}))
    return nid, p


def copy_ids(spool: Spool) -> set[int]:
    con = sqlite3.connect(f"file:{spool.db}?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute("SELECT id FROM jobs")}
    finally:
        con.close()


def test_the_copy_is_what_the_commands_read_and_the_live_table_is_private(system_layout):
    d = system_layout()
    assert d.spool.live_db == d.spool.private / "state.db" and d.db.path == d.spool.live_db
    assert d.spool.lock == d.spool.private / "gschedd.lock"
    t = time.time()
    jid, _ = submit(d, t)
    d.turn(t + 1, scan=True)  # a second after the copy made at the start: due
    assert jid in copy_ids(d.spool)
    # a rollback-journal file: a reader needs no WAL index beside it, and none is there
    assert d.spool.db.read_bytes()[18:20] == b"\x01\x01"
    assert not Path(f"{d.spool.db}-wal").exists() and not Path(f"{d.spool.db}-shm").exists()
    assert os.stat(d.spool.db).st_mode & 0o777 == 0o644


def test_a_request_leaves_incoming_only_once_a_copy_shows_it(system_layout):
    d = system_layout()
    t = time.time()
    d.publisher.cost = 1000.0  # the next copy is not due for a long while
    d.publisher.last = time.time()
    jid, path = submit(d, t)
    d.turn(t, scan=True)
    assert d.db.job(jid) is not None, "taken into the live table"
    assert jid not in copy_ids(d.spool) and path.exists(), "still a request for the commands, until a copy shows it"
    assert d.spool.next_id() > jid, "so nobody takes its id"
    d.turn(t + 0.1, scan=True)
    d.turn(t + 0.2, scan=True)
    assert [r["id"] for r in d.db.jobs()] == [jid], "not read again meanwhile"
    d.publisher.cost = 0.0
    d.turn(t + 0.3)
    assert jid in copy_ids(d.spool) and not path.exists()


def test_a_refused_request_is_quarantined_once_a_copy_shows_the_refusal(system_layout):
    d = system_layout()
    t = time.time()
    d.publisher.cost, d.publisher.last = 1000.0, time.time()
    jid, path = submit(d, t, ncpus=-3)
    d.turn(t, scan=True)
    assert path.exists() and not (d.spool.quarantine / path.name).exists()
    d.publisher.cost = 0.0
    d.turn(t + 0.1)
    assert not path.exists() and (d.spool.quarantine / path.name).exists()
    con = sqlite3.connect(f"file:{d.spool.db}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT refused FROM ids WHERE id = ?", (jid,)).fetchone()[0]
    finally:
        con.close()


def test_publications_are_spaced_by_their_cost():
    p = snapshot.Publisher.__new__(snapshot.Publisher)
    p.on, p.published, p.cost, p.last = True, 3, 0.02, 100.0
    assert p.due(3) is None, "nothing new"
    assert p.due(4) == pytest.approx(100.0 + snapshot.SPACING * 0.02)


def test_array_tasks_share_their_script_in_runs_below_the_link_limit(system_layout, monkeypatch):
    monkeypatch.setattr(arrays, "LINKS_PER_SCRIPT", 3)
    d = system_layout()
    t = time.time()
    first, _ = submit(d, t, array="0-7", hold=True)
    d.turn(t, scan=True)
    # held, its tasks are made when named on their own (a change of each)
    (d.spool.incoming / "alter-1-1.json").write_text(
        json.dumps({"type": "alter", "jobs": [], "tasks": [[first, "1-7"]], "changes": {"nice": 1}})
    )
    d.turn(t + 1, scan=True)
    tasks = sorted(r["id"] for r in d.db.by_spec("array_id", first))
    assert len(tasks) == 8
    scripts = [d.spool.job_dir(i) / "script" for i in tasks]
    assert len({p.read_bytes() for p in scripts}) == 1
    inodes: dict[int, int] = {}
    for p in scripts:
        inodes[os.stat(p).st_ino] = inodes.get(os.stat(p).st_ino, 0) + 1
    assert sorted(inodes.values()) == [2, 3, 3]
