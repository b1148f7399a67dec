"""This release on the spool an earlier one left (tests/data): every queued job, array task and reservation is
there once, in its state, and runs; an array the earlier daemon was still taking in when it was killed goes on
as a record."""

from __future__ import annotations

import shutil
import sqlite3
import tarfile
from pathlib import Path

import pytest

from gridsched.daemon.loop import Daemon
from gridsched.daemon.spawn import Stub
from gridsched.protocol import config as configmod
from gridsched.protocol.arrays import Indices
from gridsched.protocol.spool import Spool
from tests.conftest import wait_for

DATA = Path(__file__).resolve().parents[1] / "data" / "spool-0.1.0.tar.gz"


def unpack(to: Path) -> Path:
    with tarfile.open(DATA) as tar:
        tar.extractall(to, filter="data")
    return to


def every_index_once(db: sqlite3.Connection, aid: int, total: int) -> dict[str, int]:
    seen: dict[int, str] = {}
    q = "SELECT json_extract(spec, '$.array_index'), state FROM jobs WHERE json_extract(spec, '$.array_id') = ?"
    for index, state in db.execute(q, (aid,)):
        assert index not in seen, f"task {aid}_{index} twice"
        seen[index] = state
    for pending, held in db.execute("SELECT pending, held FROM arrays WHERE id = ?", (aid,)):
        for col, text in (("rest-pending", pending), ("rest-held", held)):
            for i in Indices.from_text(text):
                assert i not in seen, f"task {aid}_{i} made and in the record"
                seen[i] = col
    assert sorted(seen) == list(range(total))
    counts: dict[str, int] = {}
    for s in seen.values():
        counts[s] = counts.get(s, 0) + 1
    return counts


def test_this_release_takes_over_the_spool_of_the_last(tmp_path):
    root = unpack(tmp_path)
    d = Daemon(
        Spool(root / "spool"), configmod.load(str(root / "gridsched.toml")), str(root / "gridsched.toml"), Stub()
    )
    d.lock()
    d.open()
    try:
        for k in range(3):
            d.turn(float(k), scan=True)
        d.settle(0.0, force=True)
        db = d.db.conn
        states = dict(db.execute("SELECT id, state FROM jobs WHERE id IN (1, 22, 24, 246)").fetchall())
        assert states == {1: "HELD", 22: "HELD", 24: "COMPLETED", 246: "RUNNING"}, states
        assert every_index_once(db, 2, 20) == {"HELD": 20}
        big = every_index_once(db, 25, 3000)
        assert big == {"HELD": 169, "rest-held": 2831}, big
        assert not [n for n in (root / "spool" / "incoming").iterdir() if n.name.startswith("submit-")]
        assert [r["name"] for r in d.db.reservations()] == ["flexr"]
        assert not any(k.startswith("intake-") for k in d.db.meta())
    finally:
        d.close()


@pytest.mark.daemon
def test_a_held_job_and_an_array_task_left_by_the_last_release_run_to_their_end(make_gs, tmp_path):
    outs = [Path("/tmp/gs-upgrade-1.out"), Path("/tmp/gs-upgrade-2_3.out")]  # where the earlier release put them
    for p in outs:
        p.unlink(missing_ok=True)
    errs = Path("/tmp/oldspool")  # the jobs' error files go to the directory they were submitted from
    made = not errs.exists()
    errs.mkdir(exist_ok=True)
    gs = make_gs(start=False)
    unpack(tmp_path / "old")
    (tmp_path / "old" / "spool").rename(gs.spool)
    try:
        gs.start()
        gs.run("grls", "1", "2_3", check=True)
        wait_for(lambda: "COMPLETED" in gs.run("gstat", "-a", "-j", "1").stdout, 30, "job 1 to run")
        wait_for(lambda: "COMPLETED" in gs.run("gstat", "-a", "-j", "2_3").stdout, 30, "task 2_3 to run")
        assert outs[0].read_text().strip() == "held job ran"
        assert outs[1].read_text().strip() == "task 3"
    finally:
        for p in outs:
            p.unlink(missing_ok=True)
        if made:
            shutil.rmtree(errs, ignore_errors=True)
