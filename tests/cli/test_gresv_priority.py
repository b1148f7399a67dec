"""gresv create --nice and --priority, and gresv update, as users try them (in-process, no daemon): a user may
only lower a flexible reservation's place among the jobs, an admin may also raise it; bad values are one line;
gstat --priority lists the reservation at its place at once, and gresv list shows its nice and priority.  The
daemon ordering by them: tests/daemon/test_priority_driven.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridsched.cli import gresv, gstat
from gridsched.protocol.spool import Spool
from tests.cli.conftest import MACHINE_CORES
from tests.cli.test_gresv import put_resvs, resv_row


@pytest.fixture
def alice(env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """alice (uid 1000, not an admin of the root-owned spool) may reserve by the configuration."""
    (env / "cfg.toml").write_text(
        f'[daemon]\nautostart = false\n[machine]\ncores = {MACHINE_CORES}\n[reservations]\nusers = ["alice"]\n'
    )
    Spool(env / "spool").ensure()
    monkeypatch.setattr("os.getuid", lambda: 1000)
    monkeypatch.setattr("gridsched.submission.submit.user_name", lambda uid: {1000: "alice"}.get(uid, "root"))
    return env


def created(spool: Spool) -> list[dict]:
    """The reservations of the create requests waiting in the spool."""
    out = [json.loads(p.read_text()) for p in sorted(spool.incoming.glob("*.json"))]
    return [r["resv"] for r in out if r["type"] == "resv_create"]


def one_line(r, *words: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gresv: error: "), r.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_a_user_may_lower_a_reservation_but_not_raise_it(alice, spool, run, put_rows, make_row):
    put_rows(make_row(1, state="PENDING", ncpus=2, user="bob", uid=1001))
    r = run(gresv.cli, ["create", "-n", "2", "-t", "1h", "--nice", "50"])
    assert r.exit_code == 0
    rid = int(r.stdout)
    assert [(x["id"], x.get("nice"), x.get("priority")) for x in created(spool)] == [(rid, 50, None)]
    for args, words in (
        (["--nice", "-5"], ("--nice -5", "only an admin")),
        (["--priority", "900"], ("--priority", "only an admin")),
    ):
        r = run(gresv.cli, ["create", "-n", "2", "-t", "1h", *args])
        assert r.exit_code == 2
        one_line(r, *words)
    assert len(created(spool)) == 1  # nothing more was written
    # gstat --priority lists it at once, below the job it gave way to, with its nice
    recs = json.loads(run(gstat.cli, ["--priority", "--json"]).stdout)["jobs"]
    assert [(x["id"], x.get("reservation", False), x["nice"]) for x in recs] == [(1, False, 0), (rid, True, 50)]
    assert recs[0]["priority"] > recs[1]["priority"]
    rows = [ln.split() for ln in run(gstat.cli, ["--priority"]).stdout.splitlines()[1:]]
    assert [(x[0], x[-1]) for x in rows] == [("1", "0"), (f"R{rid}", "50")]
    [shown] = json.loads(run(gresv.cli, ["list", "--json"]).stdout)["reservations"]
    assert (shown["nice"], shown["priority"]) == (50, None)


def test_an_admin_raises_a_reservation_above_the_jobs(env, spool, run, put_rows, make_row):
    put_rows(make_row(1, state="PENDING", ncpus=2))  # root runs the test: root administers every spool
    r = run(gresv.cli, ["create", "-n", "2", "-t", "1h", "--priority", "900"])
    assert r.exit_code == 0
    top = int(r.stdout)
    r = run(gresv.cli, ["create", "-n", "2", "-t", "1h", "--nice", "-100"])
    assert r.exit_code == 0
    ahead = int(r.stdout)
    recs = json.loads(run(gstat.cli, ["--priority", "--json"]).stdout)["jobs"]
    assert [x["id"] for x in recs] == [top, ahead, 1]
    assert recs[0]["admin_priority"] == 900 and recs[1]["nice"] == -100
    rows = run(gstat.cli, ["--priority"]).stdout.splitlines()[1:]
    assert rows[0].split()[:2] == [f"R{top}", "root"] and "(admin)" in rows[0]
    listed = {x["id"]: x for x in json.loads(run(gresv.cli, ["list", "--json"]).stdout)["reservations"]}
    assert (listed[top]["priority"], listed[ahead]["nice"]) == (900, -100)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--nice", "abc"], ("nice", "must be a whole number, not 'abc'")),
        (["--nice", "20000"], ("nice", "20000 is not between -10000 and 10000")),
        (["--priority", "-1"], ("priority", "-1 is not between 0")),
        (["--priority", "high"], ("priority", "must be a whole number")),
        (["--nice", "10", "--start", "+1h"], ("--nice", "flexible reservation", "--start")),
        (["--priority", "10", "--start", "+1h"], ("--priority", "flexible reservation", "--start")),
    ],
)
def test_bad_values_are_one_line_and_write_nothing(env, spool, run, args, words):
    r = run(gresv.cli, ["create", "-n", "2", "-t", "1h", *args])
    assert r.exit_code == 2
    one_line(r, *words)
    assert not (spool.incoming.exists() and any(spool.incoming.glob("*.json")))


def waiting(rid: int, **fields) -> dict:
    """A waiting flexible reservation's row, alice's."""
    return resv_row(rid, state="WAITING", activate_time=None, end_time=None, cores="", resources={}, **fields)


def updates(spool: Spool) -> list[dict]:
    out = [json.loads(p.read_text()) for p in sorted(spool.incoming.glob("*.json"))]
    return [{k: v for k, v in r.items() if k != "type"} for r in out if r["type"] == "resv_alter"]


def test_update_lets_its_owner_lower_a_waiting_reservation_and_only_an_admin_raise_it(alice, spool, run):
    put_resvs(spool, waiting(5), waiting(6, uid=1001, user="bob"), waiting(7, start=4e9), resv_row(8))
    r = run(gresv.cli, ["update", "R5", "--nice", "40"])
    assert r.exit_code == 0 and r.stdout.strip() == "reservation 5: updating"
    assert updates(spool) == [{"id": 5, "nice": 40}]
    for args, words in (
        (["5", "--nice", "-5"], ("--nice -5", "only an admin")),
        (["5", "--priority", "900"], ("--priority", "only an admin")),
        (["5", "--no-priority"], ("--no-priority", "only an admin")),
        (["5"], ("nothing to change",)),
        (["5", "--priority", "1", "--no-priority"], ("--priority and --no-priority",)),
        (["5", "--nice", "x"], ("nice", "must be a whole number")),
    ):
        r = run(gresv.cli, ["update", *args])
        assert r.exit_code == 2, (args, r.stderr)
        one_line(r, *words)
    for args, words in (
        (["6", "--nice", "1"], ("reservation 6: owned by bob",)),
        (["7", "--nice", "1"], ("reservation 7: has a fixed start",)),
        (["8", "--nice", "1"], ("reservation 8: is ACTIVE",)),
        (["9", "--nice", "1"], ("reservation 9: no such reservation",)),
    ):
        r = run(gresv.cli, ["update", *args])
        assert r.exit_code == 1, (args, r.stderr)
        one_line(r, *words)
    assert updates(spool) == [{"id": 5, "nice": 40}]  # nothing more was written


def test_an_admin_updates_a_reservations_priority_and_drops_it(env, spool, run):
    put_resvs(spool, waiting(5))  # alice's; root runs the test and administers the spool
    assert run(gresv.cli, ["update", "5", "--priority", "800", "--nice", "-3"]).exit_code == 0
    r = run(gresv.cli, ["update", "5", "--no-priority", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout) == {"update": True, "id": 5, "unset_priority": True}
    assert updates(spool) == [{"id": 5, "nice": -3, "priority": 800}, {"id": 5, "unset_priority": True}]
