"""A job row's spec as the commands read it (SpecView): the typed job the daemon stored, read back from the
state db; brief rows with the keys a table shows; a submission not yet taken in as its sender wrote it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gridsched.core.model import DeviceAsk
from gridsched.protocol.jobs import Checkpoint, JobState
from gridsched.protocol.jobspec import JobSpec
from gridsched.protocol.specview import SpecView
from gridsched.protocol.state import StateDB
from gridsched.protocol.view import from_submit
from tests.cli.conftest import job_row

if TYPE_CHECKING:
    pass


def job(jid: int, **fields: object) -> JobSpec:
    base = JobSpec(
        id=jid,
        name="sweep",
        user="ann",
        uid=1000,
        gid=100,
        ncpus=4,
        walltime=3600,
        mem=8 << 30,
        checkpoint=Checkpoint.SIGNAL,
        hold=False,
        depend="afterok:3",
        script="#!/bin/sh\ntrue\n",
        args=("a", "b"),
        workdir="/w",
        stdout="/w/out",
        stderr="/w/err",
        env=(("HOME", "/home/ann"),),
        submit_time=1000.0,
        submit_dir="/w",
    )
    return base._replace(**fields)


def write(path: Path, *jobs: JobSpec) -> None:
    db = StateDB(path, write=True)
    try:
        db.begin()
        for j in jobs:
            row = job_row(
                j.id,
                user=j.user,
                uid=j.uid,
                name=j.name,
                ncpus=j.ncpus,
                walltime=j.walltime,
                submit_time=j.submit_time,
                spec=SpecView(j.stored()[0]),
            )
            db.put(row)
        assert db.commit()
    finally:
        db.close()


def test_a_row_s_spec_is_the_job_the_daemon_stored(tmp_path):
    gpus = (DeviceAsk("gpu", 2, "H100"), DeviceAsk("gpu", 1, exclusive=True))
    stored = job(7, devices=gpus, parent=5, reservation=2, resources=(("lic", 3),), array_id=7, array_index=0)
    write(tmp_path / "state.db", stored)
    db = StateDB(tmp_path / "state.db")
    try:
        row = db.job(7)
    finally:
        db.close()
    assert row is not None
    spec = row["spec"]
    assert isinstance(spec, SpecView)
    assert spec.job() == stored.public()
    assert spec.checkpoint is Checkpoint.SIGNAL and spec.checkpoint_text == "signal"
    assert (spec.mem, spec.gid, spec.depend, spec.parent, spec.reservation) == (8 << 30, 100, "afterok:3", 5, 2)
    assert (spec.array_id, spec.array_index, spec.array_max, spec.split, spec.split_of) == (7, 0, None, None, None)
    assert spec.resources == {"lic": 3}
    assert spec.device_asks() == gpus and spec.device_counts() == {"gpu": 3}
    # the private part is not in the row: its fields read as absent
    assert spec.args == () and spec.workdir is None and spec.stdout is None
    # it is the spec's JSON object: written back, it is the same text
    assert json.dumps(spec.raw, sort_keys=True) == json.dumps(stored.stored()[0], sort_keys=True)


def test_a_brief_row_has_the_keys_a_table_shows(tmp_path):
    write(tmp_path / "state.db", job(3), job(4, array_id=4, array_index=2, array_max=1))
    db = StateDB(tmp_path / "state.db")
    try:
        rows = {r["id"]: r for r in db.iter_jobs(brief=True)}
    finally:
        db.close()
    plain, task = rows[3]["spec"], rows[4]["spec"]
    assert isinstance(plain, SpecView) and isinstance(task, SpecView)
    assert dict(plain) == {"hold": False}
    assert (task.array_id, task.array_index, task.array_max) == (4, 2, 1)
    # a field a brief row does not carry reads as absent
    assert task.checkpoint is None and task.checkpoint_text == "" and task.mem is None and not task.split_chains


def test_every_reader_gives_a_row_s_state_as_a_job_state(tmp_path):
    write(tmp_path / "state.db", job(1), job(2), job(3))
    db = StateDB(tmp_path / "state.db", write=True)
    try:
        db.begin()
        db.update(2, state=JobState.RUNNING)
        db.update(3, state="OUT_OF_MEMORY")  # as an earlier release wrote it: the text
        assert db.commit()
        want = {1: JobState.PENDING, 2: JobState.RUNNING, 3: JobState.OUT_OF_MEMORY}
        for rows in (db.jobs(), db.iter_jobs(brief=True), db.iter_jobs(spec_keys=("name",))):
            for r in rows:
                assert r["state"] is want[r["id"]]
        assert [r["state"] for r in db.iter_jobs(states=[JobState.OUT_OF_MEMORY])] == [JobState.OUT_OF_MEMORY]
    finally:
        db.close()


def test_a_submission_not_taken_in_is_shown_as_written():
    row = from_submit({"id": 9, "ncpus": 2, "walltime": 60, "checkpoint": "sometimes", "hold": True, "nice": 3})
    spec = row["spec"]
    assert row["state"] is JobState.HELD and isinstance(spec, SpecView)
    assert spec.checkpoint is None and spec.checkpoint_text == "sometimes"
    assert spec.hold and spec.nice == 3 and spec.device_asks() == ()
    with pytest.raises(AttributeError):
        spec.no_such_field  # noqa: B018 - a field SpecView does not have is an error, not a default


def test_a_spec_written_by_hand_reads_as_json_reads_it(tmp_path):
    # the readers parse what the daemon wrote with json's C scanner alone; text around the value, as a hand
    # might leave it, reads as json.loads reads it, and text that is no JSON fails as json.loads fails
    write(tmp_path / "state.db", job(5), job(6))
    stored = json.dumps(job(5).stored()[0])
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.execute("UPDATE jobs SET spec = ?, segments = ' [] ' WHERE id = 5", (f"  {stored}\n",))
    conn.execute("UPDATE jobs SET spec = '{\"id\": 6} trailing' WHERE id = 6")
    conn.commit()
    conn.close()
    db = StateDB(tmp_path / "state.db")
    try:
        row = db.job(5)
        assert row is not None and row["spec"].raw == json.loads(stored) and row["segments"] == []
        with pytest.raises(json.JSONDecodeError):
            db.job(6)
    finally:
        db.close()
