"""Placed reservations in the daemon, in process (stub executor, driven clock; gsub, gresv and gctl in process
on its spool), and gctl topology showing the core's status maps.

The declared machine of tests/daemon/test_topology.py: two boards of four cores, SMT pairs (board 0: 0-1,
2-3; board 1: 4-5, 6-7).  A job's cores are those the daemon gives it (GS_CORES of its launch).  A bound job
on its reservation's cores with real processes is tested in test_reservations.py.
"""

from __future__ import annotations

import json
import os

import pytest

from gridsched.core import cpuset
from gridsched.protocol.spool import atomic_write
from tests.daemon.driven import Driven
from tests.daemon.test_topology import board, topo_config

SIBLING = {c: c ^ 1 for c in range(8)}


@pytest.fixture
def dr(stub_daemon, tmp_path) -> Driven:
    return Driven(stub_daemon(topo_config(tmp_path)))


def cores_of(dr: Driven, jid: int) -> frozenset[int]:
    """The cores job ``jid`` was started on (its GS_CORES)."""
    (spec,) = [s for s in dr.d.ex.started if s.job_id == jid]
    return frozenset(cpuset.parse(spec.env["GS_CORES"]))


def resv(dr: Driven, rid: int) -> dict:
    return json.loads(dr.command("gresv", "show", str(rid), "--json", turn=False).stdout)


def topology(dr: Driven) -> dict:
    return json.loads(dr.command("gctl", "topology", "--json", turn=False).stdout)


def refused(r) -> str:
    assert r.exit_code != 0, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def write_request(dr: Driven, rid: int, req: dict) -> None:
    """A request written straight into the spool (not through a command)."""
    spool = dr.d.spool
    tmp = spool.incoming / f".submit-{rid:010d}.json"
    atomic_write(tmp, json.dumps(req).encode())
    tmp.rename(spool.incoming / f"submit-{rid:010d}.json")
    dr.turn()


def test_place_board_reservation_takes_a_whole_board_and_bound_jobs_keep_their_own_requirement(dr):
    # a spread job holds one core of each board: no board is whole, the reservation waits
    spread = dr.gsub("-n", "2", "--place", "spread", "--wrap", "wait for go", work=None)
    assert dr.running(spread)
    assert {board(c) for c in cores_of(dr, spread)} == {0, 1}
    rid = int(dr.command("gresv", "create", "-n", "4", "-t", "120", "--place", "board").stdout)
    assert resv(dr, rid)["state"] == "WAITING"
    dr.finish(spread)
    r = resv(dr, rid)
    assert r["state"] == "ACTIVE"
    mine = cpuset.parse(r["cores"])
    assert len(mine) == 4 and len({board(c) for c in mine}) == 1  # one whole board
    assert (r["place"], r["threads_per_core"], r["exclusive_board"]) == ("board", 0, False)
    listed = json.loads(dr.command("gresv", "list", "--json").stdout)["reservations"]
    assert [x["place"] for x in listed if x["id"] == rid] == ["board"]
    assert "--place board" in dr.command("gresv", "list").stdout

    # bound jobs, each with its own requirement, inside the reservation's board
    def bound(*args: str) -> int:
        return dr.gsub("--reservation", str(rid), "-t", "60s", "-n", "1", *args, "--wrap", "wait", work=None)

    plain = bound()
    assert dr.running(plain)
    (a,) = cores_of(dr, plain)
    # a --threads-per-core 1 job never takes the sibling of a busy core: the other physical core,
    # whose sibling it holds idle
    tpc = bound("--threads-per-core", "1")
    assert dr.running(tpc)
    (b,) = cores_of(dr, tpc)
    assert {a, b} <= mine and b not in (a, SIBLING[a])
    # the next plain job gets the only core neither busy nor held: the sibling of the first
    other = bound()
    assert dr.running(other)
    assert cores_of(dr, other) == {SIBLING[a]}
    # the tpc job's sibling is held (not free), the board is reserved, nothing on it is free
    maps = topology(dr)["maps"]
    assert SIBLING[b] in maps["held"] and SIBLING[b] not in maps["free"]
    assert mine <= set(maps["reserved"]) and {a, b, SIBLING[a]} <= set(maps["allocated"])
    assert not mine & set(maps["free"])
    # a fourth bound job finds no core left inside (three busy, one held): it waits
    fourth = dr.gsub("--reservation", str(rid), "-t", "60s", "--wait-resv", "-n", "1", "--wrap", "true", work=0.5)
    assert dr.state(fourth) == "PENDING"
    for jid in (plain, tpc, other):
        dr.finish(jid)
    dr.run_until(lambda: dr.state(fourth) == "COMPLETED", 10)
    assert cores_of(dr, fourth) <= mine


def test_spread_reservation_refuses_a_bound_job_it_can_never_hold(dr):
    blocker = dr.gsub("-n", "8", "-t", "60s", "--wrap", "wait for go", work=None)
    assert dr.running(blocker)
    rid = int(dr.command("gresv", "create", "-n", "4", "-t", "120", "--place", "spread").stdout)
    # bound while the reservation waits (its cores unknown): taken, and once it is active,
    # forecast never, saying why
    early = dr.gsub("--reservation", str(rid), "-t", "60s", "-n", "4", "--place", "board", "--wrap", "true")
    dr.finish(blocker)
    r = resv(dr, rid)
    assert r["state"] == "ACTIVE"
    dr.run_to(dr.now - dr.t0 + 1)
    dr.d.forecast()
    why = dr.job(early)["reason"]
    assert why.startswith("can never start"), why
    assert f"in reservation {rid}: it asks for 4 cores with --place board" in why and "can never hold" in why
    assert dr.state(early) == "PENDING"
    mine = cpuset.parse(r["cores"])
    assert [len([c for c in mine if board(c) == b]) for b in (0, 1)] == [2, 2]
    line = refused(
        dr.command(
            "gsub", "--reservation", str(rid), "-t", "60s", "-n", "4", "--place", "board", "--wrap", "true", check=False
        )
    )
    assert line.startswith("gsub: error: job cannot run in reservation") and "--place board" in line, line
    assert "can never hold" in line
    # two cores on one board fit inside: on one of its boards
    ok = dr.gsub("--reservation", str(rid), "-t", "60s", "-n", "2", "--place", "board", "--wrap", "true", work=0.5)
    dr.run_until(lambda: dr.state(ok) == "COMPLETED", 10)
    got = cores_of(dr, ok)
    assert got <= mine and len({board(c) for c in got}) == 1
    # the daemon refuses the same job written straight into the spool
    jid = dr.d.spool.next_id()
    spec = {
        "id": jid,
        "name": "direct",
        "uid": os.getuid(),
        "gid": -1,
        "ncpus": 4,
        "walltime": 10,
        "checkpoint": "none",
        "hold": False,
        "script": "#!/bin/sh\ntrue\n",
        "args": [],
        "workdir": str(dr.d.spool.root),
        "stdout": "/dev/null",
        "stderr": "/dev/null",
        "env": {},
        "submit_time": 0.0,
        "reservation": rid,
        "place": "board",
    }
    write_request(dr, jid, {"type": "submit", "job": spec})
    j = dr.job(jid)
    assert j["state"] == "FAILED"
    assert f"cannot run in reservation {rid}" in j["reason"] and "--place board" in j["reason"]


def test_a_reservation_that_can_never_be_placed_is_refused(dr):
    line = refused(dr.command("gresv", "create", "-n", "5", "-t", "60", "--place", "board", check=False))
    assert line == "gresv: error: can never be placed: --place board: no board has 5 cores (largest: 4)"
    line = refused(dr.command("gresv", "create", "-n", "5", "-t", "60", "--threads-per-core", "1", check=False))
    assert "can never be placed: --threads-per-core 1" in line
    line = refused(dr.command("gresv", "create", "-n", "2", "-t", "60", "--place", "wide", check=False))
    assert line == "gresv: error: place 'wide': must be one of pack, spread, board"
    # written straight into the spool, the daemon refuses it with the same words
    rid = dr.d.spool.next_id()
    req = {"type": "resv_create", "resv": {"id": rid, "uid": os.getuid(), "ncpus": 5, "duration": 60, "place": "board"}}
    write_request(dr, rid, req)
    r = resv(dr, rid)
    assert r["state"] == "ENDED"
    assert r["reason"] == "refused: can never be placed: --place board: no board has 5 cores (largest: 4)"


def test_topology_shows_drained_and_reserved_cores_as_the_scheduler_sees_them(dr, caplog):
    caplog.set_level("INFO", logger="gschedd")
    dr.command("gctl", "drain", "3", "--reason", "fan")
    assert "drained now: 3" in caplog.text
    rid = int(dr.command("gresv", "create", "-n", "2", "-t", "120", "--threads-per-core", "1").stdout)
    r = resv(dr, rid)
    assert r["state"] == "ACTIVE"
    mine = cpuset.parse(r["cores"])
    held = {SIBLING[c] for c in mine}
    assert not mine & held and 3 not in mine | held  # a whole physical core per reserved core, not the drained one
    data = topology(dr)
    maps = data["maps"]
    assert maps["drained"] == [3]
    assert set(maps["reserved"]) == mine | held
    assert set(maps["free"]) == set(range(8)) - mine - held - {3}
    states = {t["core"]: t for b in data["boards"] for pc in b["physical_cores"] for t in pc["threads"]}
    assert states[3]["state"] == "drained"
    assert all(states[c]["state"] == "reserved" and states[c]["reserved"] == f"R{rid}" for c in mine | held)
    text = dr.command("gctl", "topology", turn=False).stdout
    assert "core 3 (host CPU" in text and "drained" in text and f"reserved R{rid}" in text
