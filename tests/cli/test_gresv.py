"""gresv, and the reservation and floating-resource options of gsub and gstat (in-process, no daemon)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gridsched.cli import gresv, gstat, gsub
from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB
from tests.cli.conftest import MACHINE_CORES


@pytest.fixture
def fenv(env: Path) -> Path:
    """The command-test environment with two floating resources and a one-day reservation limit."""
    (env / "cfg.toml").write_text(
        f"[daemon]\nautostart = false\n[machine]\ncores = {MACHINE_CORES}\n"
        '[resources.floating]\nmatlab = 2\ncomsol = 1\n[reservations]\nmax_duration = "1d"\n'
    )
    return env


def requests(spool: Spool, kind: str) -> list[dict]:
    """The requests of ``kind`` waiting in the spool (a reservation is created by a request that brings its new
    id, named like a submission)."""
    out = [json.loads(p.read_text()) for p in sorted(spool.incoming.glob("*.json"))]
    return [r for r in out if r["type"] == kind]


def resv_row(rid: int, **fields) -> dict:
    now = time.time()
    row = {
        "id": rid,
        "state": "ACTIVE",
        "user": "alice",
        "uid": 1000,
        "name": f"R{rid}",
        "ncpus": 4,
        "resources": {"matlab": 1},
        "duration": 7200,
        "start": None,
        "create_time": now - 60,
        "activate_time": now - 60,
        "end_time": now + 7140,
        "predicted": None,
        "cores": "0-3",
        "users": [],
        "kill": True,
        "reason": "",
    }
    row.update(fields)
    return row


def put_resvs(spool: Spool, *rows: dict) -> None:
    spool.ensure()
    db = StateDB(spool.db, write=True)
    try:
        db.begin()
        for r in rows:
            db.put_resv(r)
        db.commit()
    finally:
        db.close()


def test_create_flexible_writes_one_request(fenv, spool, run):
    r = run(gresv.cli, ["create", "-n", "4", "-t", "2h", "-l", "matlab=1", "--users", "bob,carol", "--name", "x"])
    assert r.exit_code == 0
    rid = int(r.stdout)
    (req,) = requests(spool, "resv_create")
    assert req["type"] == "resv_create"
    res = req["resv"]
    assert (res["id"], res["ncpus"], res["duration"], res["resources"], res["start"], res["users"], res["kill"]) == (
        rid,
        4,
        7200,
        {"matlab": 1},
        None,
        ["bob", "carol"],
        True,
    )
    listed = json.loads(run(gresv.cli, ["list", "--json"]).stdout)["reservations"]
    assert [(x["id"], x["state"], x["flexible"]) for x in listed] == [(rid, "WAITING", True)]


def test_create_fixed_with_relative_start(fenv, spool, run):
    before = time.time()
    r = run(gresv.cli, ["create", "-n", "2", "-t", "30m", "--start", "+1h", "--no-kill", "--json"])
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert before + 3600 <= out["start"] <= time.time() + 3600
    assert out["kill"] is False and out["flexible"] is False
    assert requests(spool, "resv_create")[0]["resv"]["start"] == out["start"]


@pytest.mark.parametrize(
    "args, msg",
    [
        (["-n", "4", "-t", "0"], "duration '0': must be positive"),
        (["-n", "4", "-t", "2d"], "longer than the maximum"),
        (["-n", str(MACHINE_CORES + 1), "-t", "1h"], f"the machine has {MACHINE_CORES} cores"),
        (["-n", "1", "-t", "1h", "-l", "fluent=1"], "unknown floating resource"),
        (["-n", "1", "-t", "1h", "-l", "matlab=3"], "the machine has 2"),
        (["-n", "1", "-t", "1h", "--start", "2001-01-01T10:00"], "in the past"),
        (["-n", "1", "-t", "1h", "--start", "teatime"], "not a time"),
    ],
)
def test_bad_create_is_one_line_and_changes_nothing(fenv, spool, run, args, msg):
    r = run(gresv.cli, ["create", *args])
    assert r.exit_code != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gresv: error:") and msg in lines[0]
    assert requests(spool, "resv_create") == []
    assert not list(spool.incoming.glob("*.json"))  # no id was taken


def test_delete_checks_the_owner(fenv, spool, run, monkeypatch):
    put_resvs(spool, resv_row(5, uid=1000, user="alice"))
    monkeypatch.setattr("os.getuid", lambda: 1001)
    r = run(gresv.cli, ["delete", "5"])
    assert r.exit_code == 1 and "reservation 5: owned by alice" in r.stderr
    assert requests(spool, "resv_delete") == []
    monkeypatch.setattr("os.getuid", lambda: 1000)
    r = run(gresv.cli, ["delete", "R5", "--release"])
    assert r.exit_code == 0
    assert [(q["id"], q["release"]) for q in requests(spool, "resv_delete")] == [(5, True)]


def test_delete_unknown_or_ended(fenv, spool, run):
    put_resvs(spool, resv_row(6, state="ENDED"))
    assert "no such reservation" in run(gresv.cli, ["delete", "9"]).stderr
    assert "already ENDED" in run(gresv.cli, ["delete", "6"]).stderr


def test_show_and_gstat_r(fenv, spool, run):
    put_resvs(spool, resv_row(5), resv_row(6, state="ENDED"))
    shown = json.loads(run(gresv.cli, ["show", "5", "--json"]).stdout)
    assert list(shown) == gresv.JSON_KEYS
    assert shown["cores"] == "0-3" and shown["resources"] == {"matlab": 1}
    live = json.loads(run(gstat.cli, ["-r", "--json"]).stdout)["reservations"]
    assert [x["id"] for x in live] == [5]
    every = json.loads(run(gstat.cli, ["-r", "-a", "--json"]).stdout)["reservations"]
    assert [x["id"] for x in every] == [5, 6]
    table = run(gstat.cli, ["-r"]).stdout
    assert "ACTIVE" in table and "matlab=1" in table


# -- gsub ------------------------------------------------------------------------------


def test_gsub_floating_resources_and_directive(fenv, spool, run, submits):
    script = fenv / "job.sh"
    script.write_text("#!/bin/sh\n#GS -l comsol=1\ntrue\n")
    assert run(gsub.cli, ["-l", "matlab=1", "-l", "matlab=1", "--wrap", "true"]).exit_code == 0
    assert run(gsub.cli, [str(script)]).exit_code == 0
    specs = submits()
    assert specs[0]["resources"] == {"matlab": 2}
    assert specs[1]["resources"] == {"comsol": 1}


@pytest.mark.parametrize(
    "args, msg",
    [
        (["-l", "fluent=1"], "unknown floating resource"),
        (["-l", "matlab=3"], "the machine has 2"),
        (["-l", "matlab"], "expected NAME=COUNT"),
        (["--reservation", "42"], "reservation 42: no such reservation"),
        (["--reservation", "abc"], "not a reservation id"),
        (["--wait-resv"], "--wait-resv needs --reservation"),
    ],
)
def test_gsub_bad_resource_or_reservation(fenv, spool, run, args, msg):
    r = run(gsub.cli, [*args, "--wrap", "true"])
    assert r.exit_code != 0 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not list(spool.incoming.glob("submit-*")) if spool.incoming.exists() else True
    assert not list(spool.incoming.glob("*.json")) if spool.incoming.exists() else True


def test_gsub_binding_rules(fenv, spool, run, monkeypatch, put_rows, make_row, submits):
    put_resvs(
        spool,
        resv_row(5, uid=1000, user="alice", users=["bob"]),
        resv_row(6, state="ENDED"),
        resv_row(7, state="WAITING", activate_time=None, end_time=None, cores=""),
    )
    # a job of the reservation already runs on 3 of its 4 cores, with its one matlab licence
    put_rows(
        make_row(
            3,
            state="RUNNING",
            ncpus=3,
            uid=1000,
            user="alice",
            spec={"reservation": 5, "resources": {"matlab": 1}, "stdout": "/o", "stderr": "/e", "workdir": "/"},
        )
    )
    monkeypatch.setattr("os.getuid", lambda: 1002)
    monkeypatch.setattr(
        "gridsched.submission.submit.user_name", lambda uid: {1000: "alice", 1001: "bob"}.get(uid, "eve")
    )
    r = run(gsub.cli, ["--reservation", "5", "--wrap", "true"])
    assert "owned by alice, and eve is not among its users" in r.stderr
    monkeypatch.setattr("os.getuid", lambda: 1001)  # bob is listed
    r = run(gsub.cli, ["--reservation", "5", "-n", "2", "--wrap", "true"])
    assert "only 1 of its 4 cores are free now" in r.stderr
    r = run(gsub.cli, ["--reservation", "5", "-n", "1", "-t", "3h", "--wrap", "true"])
    assert "longer than the reservation's time left" in r.stderr
    assert "reservation 6: ended" in run(gsub.cli, ["--reservation", "6", "--wrap", "true"]).stderr
    assert submits() == []
    assert run(gsub.cli, ["--reservation", "5", "-n", "2", "--wait-resv", "--wrap", "true"]).exit_code == 0
    r = run(gsub.cli, ["--reservation", "5", "-n", "1", "-l", "matlab=1", "--wrap", "true"])
    assert "only 0 matlab free now" in r.stderr
    monkeypatch.setattr("os.getuid", lambda: 1000)
    assert run(gsub.cli, ["--reservation", "7", "-n", "4", "--wrap", "true"]).exit_code == 0  # waits for it
    got = [(s["reservation"], s["wait_resv"]) for s in submits()]
    assert got == [(5, True), (7, False)]
    listed = json.loads(run(gstat.cli, ["--json"]).stdout)["jobs"]
    assert {j["id"]: j["reservation"] for j in listed}[3] == 5


def test_create_with_a_placement_writes_it_and_list_shows_it(fenv, spool, run):
    args = ["create", "-n", "4", "-t", "1h", "--place", "spread", "--threads-per-core", "1", "--exclusive-board"]
    r = run(gresv.cli, args)
    assert r.exit_code == 0, r.stderr
    (req,) = requests(spool, "resv_create")
    res = req["resv"]
    assert (res["place"], res["threads_per_core"], res["exclusive_board"]) == ("spread", 1, True)
    listed = json.loads(run(gresv.cli, ["list", "--json"]).stdout)["reservations"]
    assert [(x["place"], x["threads_per_core"], x["exclusive_board"]) for x in listed] == [("spread", 1, True)]
    assert "--place spread --threads-per-core 1 --exclusive-board" in run(gresv.cli, ["list"]).stdout
    # without one: none is written, and none is shown
    run(gresv.cli, ["create", "-n", "2", "-t", "1h"])
    plain = requests(spool, "resv_create")[1]["resv"]
    assert "place" not in plain and "threads_per_core" not in plain
    shown = run(gresv.cli, ["show", str(plain["id"])]).stdout
    assert "pack (the fewest boards), any thread" in shown


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--place", "wide"], "place 'wide': must be one of pack, spread, board"),
        (["--threads-per-core", "3"], "threads-per-core: 3 is not in the range 1<=x<=2"),
        (["--threads-per-core", "0"], "threads-per-core: 0 is not in the range 1<=x<=2"),
    ],
)
def test_bad_placement_is_refused_as_gsub_refuses_it(fenv, spool, run, args, msg):
    r = run(gresv.cli, ["create", "-n", "2", "-t", "1h", *args])
    assert r.exit_code == 2 and r.stderr.strip() == f"gresv: error: {msg}"
    s = run(gsub.cli, ["-n", "2", *args, "--wrap", "true"])
    assert s.exit_code == 2 and s.stderr.strip() == f"gsub: error: {msg}"
    assert not list(spool.incoming.glob("*.json"))


def test_a_reservation_table_of_an_older_spool_reads_without_a_placement_and_is_migrated(fenv, spool):
    import sqlite3

    from gridsched.protocol.state import RESV_ADDED, RESV_SCHEMA

    spool.ensure()
    old = RESV_SCHEMA
    for col in RESV_ADDED:  # the table as it was before the placement columns
        old = "\n".join(line for line in old.splitlines() if not line.strip().startswith(col))
    old = old.replace("reason TEXT NOT NULL DEFAULT '',\n);", "reason TEXT NOT NULL DEFAULT ''\n);")
    conn = sqlite3.connect(spool.db)
    conn.executescript(old)
    row = resv_row(5)
    conn.execute(
        "INSERT INTO reservations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [json.dumps(v) if k in ("resources", "users") else v for k, v in row.items()],
    )
    conn.commit()
    conn.close()
    db = StateDB(spool.db)
    try:
        (r,) = db.reservations()
    finally:
        db.close()
    assert (r["id"], r["place"], r["threads_per_core"], r["exclusive_board"]) == (5, None, 0, False)
    db = StateDB(spool.db, write=True)  # the daemon's open adds the columns
    try:
        db.begin()
        db.update_resv(5, place="board", exclusive_board=True)
        db.commit()
        (r,) = db.reservations()
    finally:
        db.close()
    assert (r["place"], r["threads_per_core"], r["exclusive_board"], r["ncpus"]) == ("board", 0, True, 4)
