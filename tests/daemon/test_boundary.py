"""The daemon's trust boundary, in process: a daemon with the stub executor takes requests in, runs nothing.

Any JSON value in any field of a request is either taken in or refused; a
refused request changes nothing in the daemon's state (its job table, queue,
reservations, drained cores) but the record of the refusal, and the daemon
serves the next request as before.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridsched.daemon.loop import Daemon
from gridsched.protocol import requests as rq
from tests.fuzz.test_requests import json_values, valid_job

CONFIG = '[scheduler]\npolicy = "fcfs"\n[machine]\ncores = 4\n[daemon]\nautostart = false\n'


@pytest.fixture
def daemon(stub_daemon) -> Daemon:
    return stub_daemon(CONFIG)


def state(d: Daemon) -> tuple:
    con = sqlite3.connect(d.spool.db)
    try:
        jobs = con.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        resvs = con.execute("SELECT * FROM reservations ORDER BY id").fetchall()
        meta = con.execute("SELECT * FROM meta WHERE key = 'drained'").fetchall()
    finally:
        con.close()
    return jobs, resvs, meta, sorted(d.table.jobs), list(d.table.queue), d.drained


def put(d: Daemon, name: str, data: object) -> None:
    (d.spool.incoming / name).write_text(json.dumps(data))


def submit(d: Daemon, **fields: object) -> int:
    nid = d.id_high + 1
    put(d, rq.id_name(nid), {"type": "submit", "job": {**valid_job(nid), **fields}})
    d.ingest()
    return nid


FIELDS = list(valid_job(1))


# Which values of which fields are refused is explored at the parse itself (150 examples in
# tests/fuzz/test_requests.py::test_any_value_in_any_field_is_accepted_or_refused); what is tried here is the
# daemon's one way of refusing, whatever the field: fewer examples do.
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(FIELDS), value=json_values)
def test_a_refused_submission_changes_nothing(daemon, key, value):
    before = state(daemon)
    nid = submit(daemon, **{key: value})
    after = state(daemon)
    if nid in daemon.table.jobs or daemon.db.job(nid) is not None:
        return  # taken in: a value the boundary accepts
    assert after == before
    rec = daemon.db.id_record(nid)
    assert rec is not None and rec["refused"], "a refused submission is recorded for its submitter"
    assert (daemon.spool.quarantine / rq.id_name(nid)).exists()
    assert not (daemon.spool.incoming / rq.id_name(nid)).exists()
    good = submit(daemon)
    assert good in daemon.table.jobs, "the daemon goes on serving"


def test_an_id_is_taken_once_and_never_far_beyond_those_in_use(daemon):
    first = submit(daemon)
    assert first in daemon.table.jobs
    put(daemon, rq.id_name(first), {"type": "submit", "job": {**valid_job(first), "name": "again"}})
    daemon.ingest()
    assert daemon.db.job(first)["name"] == "j", "a second request for a taken id does not replace the job"
    assert "is taken" in (daemon.spool.quarantine / (rq.id_name(first) + ".why")).read_text()
    far = daemon.id_high + rq.ID_WINDOW + 1
    put(daemon, rq.id_name(far), {"type": "submit", "job": valid_job(far)})
    daemon.ingest()
    assert far not in daemon.table.jobs and daemon.id_high < far
    assert "beyond the ids in use" in (daemon.spool.quarantine / (rq.id_name(far) + ".why")).read_text()
    assert submit(daemon) == first + 1


def test_a_request_read_again_after_a_crash_is_not_taken_twice(daemon):
    nid = daemon.id_high + 1
    name = rq.id_name(nid)
    put(daemon, name, {"type": "submit", "job": valid_job(nid)})
    raw = (daemon.spool.incoming / name).read_bytes()
    daemon.ingest()
    assert nid in daemon.table.jobs
    (daemon.spool.incoming / name).write_bytes(raw)  # as if the daemon died before removing it
    daemon.ingest()
    assert not (daemon.spool.incoming / name).exists()
    assert not (daemon.spool.quarantine / name).exists()
    assert daemon.db.id_record(nid)["refused"] is None


def test_the_daemons_own_ids_skip_those_taken_by_waiting_requests(daemon):
    nid = daemon.id_high + 1
    (daemon.spool.incoming / rq.id_name(nid + 1)).write_text("{}")  # someone's request, not yet read
    ids = daemon.new_ids(3)
    assert nid + 1 not in ids and len(set(ids)) == 3
    daemon.table.begin()
    assert daemon.table.commit()
    assert all((daemon.spool.incoming / rq.id_name(i)).exists() for i in ids), "kept until the table is published"
    daemon.settle(time.time())
    assert not any((daemon.spool.incoming / rq.id_name(i)).exists() for i in ids), "claims released"


def test_a_placement_no_board_can_hold_is_refused_naming_the_largest_board(stub_daemon, tmp_path):
    """What gsub refuses (``--place board`` larger than every board), the daemon refuses too."""
    topo = tmp_path / "topo.toml"
    cpu = min(os.sched_getaffinity(0))
    topo.write_text(f'[[board]]\ncores = "0-3"\nhost_cpus = "{cpu}"\n[[board]]\ncores = "4-7"\nhost_cpus = "{cpu}"\n')
    d = stub_daemon(CONFIG.replace("cores = 4", f'topology = "{topo}"'))
    nid = submit(d, ncpus=5, place="board")
    job = d.db.job(nid)
    assert job["state"] == "FAILED"
    assert job["reason"] == "can never run: --place board: no board has 5 cores (largest: 4)"
    ok = submit(d, ncpus=4, place="board")
    assert d.db.job(ok)["state"] == "PENDING"


def test_a_requirement_without_place_is_the_jobs_in_its_record_at_once(daemon):
    """--threads-per-core or --exclusive-board without --place is a pack requirement, as it is read again."""
    nid = submit(daemon, threads_per_core=1, exclusive_board=True)
    req = daemon.table.jobs[nid].place
    assert req is not None and (req.place, req.threads_per_core, req.exclusive_board) == ("pack", 1, True)
    assert daemon.db.job(nid)["spec"]["place"] == "pack"


def test_a_served_request_leaves_incoming_only_once_the_table_is_synced(daemon, monkeypatch):
    """The job's row is put on disk (its write-ahead log fsynced) before its request is removed: while the
    sync fails the request stays, and goes once a sync succeeds."""
    synced: list[str] = []
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    nid = submit(daemon)
    name = daemon.spool.incoming / rq.id_name(nid)
    assert nid in daemon.table.jobs and name.exists(), "taken in, kept while the table is not synced"
    assert synced and synced[-1].endswith("-wal")
    monkeypatch.setattr(os, "fsync", real_fsync)
    daemon.settle(time.time())
    assert not name.exists()


def test_the_record_of_an_id_is_the_typed_record_of_the_ids_table(daemon):
    """What the state db says of an id (``StateDB.id_record``) has the keys of ``IdRecord``: its sender, its
    request's digest, when, and why it was refused (None: taken in)."""
    from gridsched.protocol.view import IdRecord

    t0 = time.time()
    nid = submit(daemon)
    rec = daemon.db.id_record(nid)
    assert rec is not None and set(rec) == set(IdRecord.__annotations__)
    assert rec["uid"] == os.getuid() and rec["refused"] is None and rec["time"] >= t0 - 1.0 and rec["digest"]
    bad = submit(daemon, ncpus=-1)
    refused = daemon.db.id_record(bad)
    assert refused is not None and set(refused) == set(IdRecord.__annotations__) and refused["refused"]
