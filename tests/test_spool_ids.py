"""A new id is taken by publishing the request that brings it: the writer learns whether the id is its own."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time

import pytest

from gridsched.protocol import requests as rq
from gridsched.protocol import state
from gridsched.protocol.spool import IdTaken, Spool
from gridsched.protocol.state import StateDB
from tests.cli.conftest import job_row
from tests.fuzz.test_requests import valid_job


def _recorded(spool: Spool, nid: int, digest: str) -> None:
    """The daemon's record of taking id ``nid`` in from a request whose bytes have ``digest``."""
    db = StateDB(spool.db, write=True)
    db.begin()
    db.put_id(nid, os.getuid(), digest, time.time())
    db.commit()
    db.close()


def _request(nid: int) -> bytes:
    return rq.encode({"type": "submit", "job": valid_job(nid)})


def test_a_request_the_daemon_took_in_at_once_keeps_its_id(tmp_path):
    """The daemon may take a request in between its publication and the writer's check that nobody took
    its id meanwhile; the id recorded is then the writer's own (same bytes), not someone else's. (Taken for
    someone else's, the submission was tried again under the next id: the job was submitted twice.)"""
    spool = Spool(tmp_path / "spool")
    spool.ensure()
    data = _request(7)
    _recorded(spool, 7, hashlib.sha256(data).hexdigest())
    path = spool.publish_new(rq.id_name(7), data)
    assert path.read_bytes() == data  # published, not withdrawn


def test_the_daemon_committing_the_id_while_the_writer_reads_the_table_leaves_it_the_writers(tmp_path, monkeypatch):
    """The writer reads whether its id was taken (the ids table, then the jobs table for ids recorded without
    a digest) while the daemon may commit that very request's job and id.  Read at two moments, the job
    showed without its id's row, the id was taken for someone else's and the request withdrawn: the job
    the daemon had just taken in was reported as not submitted."""
    spool = Spool(tmp_path / "spool")
    spool.ensure()
    _recorded(spool, 3, "0" * 64)  # a table with its tables made
    data = _request(7)
    real = state.connect_ro
    commits: list[int] = []

    class Reader:
        """The writer's connection, with the daemon's commit of job 7 just after its first read of ids."""

        def __init__(self, path: object) -> None:
            self.con = real(path)  # type: ignore[arg-type]

        def execute(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
            cur = self.con.execute(sql, args)
            if "FROM ids" in sql and not commits:
                db = StateDB(spool.db, write=True)
                db.begin()
                db.put_id(7, os.getuid(), hashlib.sha256(data).hexdigest(), time.time())
                db.put(job_row(7))
                db.commit()
                db.close()
                commits.append(7)
            return cur

        def close(self) -> None:
            self.con.close()

    monkeypatch.setattr(state, "connect_ro", Reader)
    path = spool.publish_new(rq.id_name(7), data)
    assert commits == [7], "the daemon's commit came between the reads"
    assert path.read_bytes() == data  # published, not withdrawn
    assert spool.id_digest(7) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("digest", ["0" * 64, ""])
def test_an_id_taken_from_another_request_is_refused_and_the_request_withdrawn(tmp_path, digest):
    spool = Spool(tmp_path / "spool")
    spool.ensure()
    _recorded(spool, 7, digest)
    with pytest.raises(IdTaken):
        spool.publish_new(rq.id_name(7), _request(7))
    assert not (spool.incoming / rq.id_name(7)).exists()
    assert [n for n in os.listdir(spool.incoming)] == []  # no temporary file left either


def test_an_id_nobody_recorded_is_the_writers(tmp_path):
    spool = Spool(tmp_path / "spool")
    spool.ensure()
    _recorded(spool, 3, "0" * 64)
    data = _request(8)
    assert spool.publish_new(rq.id_name(8), data).read_bytes() == data


def test_a_published_request_is_on_disk_name_and_all_before_its_id_is_reported(tmp_path, monkeypatch):
    spool = Spool(tmp_path / "spool")
    synced: list[tuple[str, int]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd).st_ino))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = spool.publish_new(rq.id_name(3), _request(3))
    assert synced[-1][0] == str(spool.incoming), "the directory holding the new name, after the file's data"
    assert synced[-2][1] == path.stat().st_ino, "the request's data"
    assert not [p for p in os.listdir(spool.incoming) if p.startswith(".")], "no temporary name left"


def test_a_request_the_daemon_refused_at_once_keeps_its_id_and_its_writer_learns_why(stub_daemon):
    """The daemon may refuse a request between its publication and the writer's check: the refusal is recorded
    under the id with the request's digest, so the writer finds the id its own (its refusal then shows in
    gstat and gsub --wait), not someone else's (it was tried again under new ids, which the daemon refused the
    same way, until gsub gave up with "no new id could be taken" instead of the daemon's reason)."""
    d = stub_daemon("[machine]\ncores = 2\n[daemon]\nautostart = false\n")
    nid = d.spool.next_id()
    data = rq.encode({"type": "submit", "job": {**valid_job(nid), "array": "0-9999999"}})  # over max_array_size
    path = d.spool.incoming / rq.id_name(nid)
    path.write_bytes(data)
    d.turn(time.time(), scan=True)
    d.settle(time.time(), force=True)
    rec = d.db.id_record(nid)
    assert rec is not None and rec["refused"] and "array" in rec["refused"], rec
    assert d.spool.id_digest(nid) == hashlib.sha256(data).hexdigest()
    path.write_bytes(data)  # as the writer still has it when it checks
    assert not d.spool._taken_meanwhile(path, data), "the id is the writer's own"
