"""Placed reservations in the real daemon, and gctl topology showing the core's status maps.

The declared machine of tests/daemon/test_topology.py: two boards of four cores, SMT pairs
(board 0: 0-1, 2-3; board 1: 4-5, 6-7).
"""

from __future__ import annotations

import json
import os

from gridsched.core import cpuset
from gridsched.protocol.spool import Spool, atomic_write
from tests.conftest import wait_for
from tests.daemon.test_reservations import resv, wait_resv
from tests.daemon.test_topology import WAIT_GO, board, topo_config

SIBLING = {c: c ^ 1 for c in range(8)}
REPORT = "echo $GS_CORES > cores.$GS_JOBID; "


def started(gs):
    gs.cfgfile.write_text(topo_config(gs.root))
    gs.start()
    return gs


def cores_of(gs, jid: int) -> frozenset[int]:
    path = gs.work / f"cores.{jid}"
    wait_for(lambda: path.exists() and path.read_text().strip(), 20, f"job {jid} to report its cores")
    return cpuset.parse(path.read_text())


def topology(gs) -> dict:
    return json.loads(gs.run("gctl", "topology", "--json", check=True).stdout)


def refused(r) -> str:
    assert r.returncode != 0, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_place_board_reservation_takes_a_whole_board_and_bound_jobs_keep_their_own_requirement(make_gs):
    gs = started(make_gs(start=False))
    # a spread job holds one core of each board: no board is whole, the reservation waits
    spread = gs.gsub("-n", "2", "--place", "spread", "--wrap", REPORT + WAIT_GO)
    gs.wait_state(spread, "RUNNING")
    assert {board(c) for c in cores_of(gs, spread)} == {0, 1}
    rid = int(gs.run("gresv", "create", "-n", "4", "-t", "120", "--place", "board", check=True).stdout)
    wait_for(lambda: resv(gs, rid)["reason"] != "created, not yet taken in by the daemon", 10, "the daemon")
    assert resv(gs, rid)["state"] == "WAITING"
    (gs.work / "go").touch()
    gs.wait_state(spread, "COMPLETED")
    (gs.work / "go").unlink()
    r = wait_resv(gs, rid, "ACTIVE")
    mine = cpuset.parse(r["cores"])
    assert len(mine) == 4 and len({board(c) for c in mine}) == 1  # one whole board
    assert (r["place"], r["threads_per_core"], r["exclusive_board"]) == ("board", 0, False)
    listed = json.loads(gs.run("gresv", "list", "--json", check=True).stdout)["reservations"]
    assert [x["place"] for x in listed if x["id"] == rid] == ["board"]
    assert "--place board" in gs.run("gresv", "list", check=True).stdout

    # bound jobs, each with its own requirement, inside the reservation's board
    def bound(*args: str) -> int:
        return gs.gsub("--reservation", str(rid), "-t", "60s", "-n", "1", *args, "--wrap", REPORT + WAIT_GO)

    plain = bound()
    gs.wait_state(plain, "RUNNING")
    (a,) = cores_of(gs, plain)
    # a --threads-per-core 1 job never takes the sibling of a busy core: the other physical core,
    # whose sibling it holds idle
    tpc = bound("--threads-per-core", "1")
    gs.wait_state(tpc, "RUNNING")
    (b,) = cores_of(gs, tpc)
    assert {a, b} <= mine and b not in (a, SIBLING[a])
    # the next plain job gets the only core neither busy nor held: the sibling of the first
    other = bound()
    gs.wait_state(other, "RUNNING")
    assert cores_of(gs, other) == {SIBLING[a]}
    # the tpc job's sibling is held (not free), the board is reserved, nothing on it is free
    maps = topology(gs)["maps"]
    assert SIBLING[b] in maps["held"] and SIBLING[b] not in maps["free"]
    assert mine <= set(maps["reserved"]) and {a, b, SIBLING[a]} <= set(maps["allocated"])
    assert not mine & set(maps["free"])
    # a fourth bound job finds no core left inside (three busy, one held): it waits
    fourth = gs.gsub("--reservation", str(rid), "-t", "60s", "--wait-resv", "-n", "1", "--wrap", REPORT)
    taken = "submitted, not yet taken in by the daemon"
    wait_for(lambda: gs.job(fourth)["reason"] != taken, 10, f"job {fourth} to be taken in")
    assert gs.job(fourth)["state"] == "PENDING"
    (gs.work / "go").touch()
    gs.wait_state(fourth, "COMPLETED")
    assert cores_of(gs, fourth) <= mine


def test_spread_reservation_refuses_a_bound_job_it_can_never_hold(make_gs):
    gs = started(make_gs(start=False))
    blocker = gs.gsub("-n", "8", "-t", "60s", "--wrap", WAIT_GO)
    gs.wait_state(blocker, "RUNNING")
    rid = int(gs.run("gresv", "create", "-n", "4", "-t", "120", "--place", "spread", check=True).stdout)
    # bound while the reservation waits (its cores unknown): taken, and once it is active,
    # forecast never, saying why
    early = gs.gsub("--reservation", str(rid), "-t", "60s", "-n", "4", "--place", "board", "--wrap", "true")
    (gs.work / "go").touch()
    r = wait_resv(gs, rid, "ACTIVE")
    why = wait_for(
        lambda: (j := gs.job(early))["reason"].startswith("can never start") and j["reason"], 20, "the reason"
    )
    assert f"in reservation {rid}: it asks for 4 cores with --place board" in why and "can never hold" in why
    assert gs.job(early)["state"] == "PENDING"
    mine = cpuset.parse(r["cores"])
    assert [len([c for c in mine if board(c) == b]) for b in (0, 1)] == [2, 2]
    line = refused(
        gs.run("gsub", "--reservation", str(rid), "-t", "60s", "-n", "4", "--place", "board", "--wrap", "true")
    )
    assert line.startswith("gsub: error: job cannot run in reservation") and "--place board" in line, line
    assert "can never hold" in line
    # two cores on one board fit inside: on one of its boards
    ok = gs.gsub("--reservation", str(rid), "-t", "60s", "-n", "2", "--place", "board", "--wrap", REPORT)
    gs.wait_state(ok, "COMPLETED")
    got = cores_of(gs, ok)
    assert got <= mine and len({board(c) for c in got}) == 1
    # the daemon refuses the same job written straight into the spool
    spool = Spool(gs.spool)
    jid = spool.next_id()
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
        "workdir": str(gs.work),
        "stdout": "/dev/null",
        "stderr": "/dev/null",
        "env": {},
        "submit_time": 0.0,
        "reservation": rid,
        "place": "board",
    }
    tmp = spool.incoming / f".submit-{jid:010d}.json"
    atomic_write(tmp, json.dumps({"type": "submit", "job": spec}).encode())
    tmp.rename(spool.incoming / f"submit-{jid:010d}.json")
    spool.wake()
    j = gs.wait_state(jid, "FAILED")
    assert f"cannot run in reservation {rid}" in j["reason"] and "--place board" in j["reason"]


def test_a_reservation_that_can_never_be_placed_is_refused(make_gs):
    gs = started(make_gs(start=False))
    line = refused(gs.run("gresv", "create", "-n", "5", "-t", "60", "--place", "board"))
    assert line == "gresv: error: can never be placed: --place board: no board has 5 cores (largest: 4)"
    line = refused(gs.run("gresv", "create", "-n", "5", "-t", "60", "--threads-per-core", "1"))
    assert "can never be placed: --threads-per-core 1" in line
    line = refused(gs.run("gresv", "create", "-n", "2", "-t", "60", "--place", "wide"))
    assert line == "gresv: error: place 'wide': must be one of pack, spread, board"
    # written straight into the spool, the daemon refuses it with the same words
    spool = Spool(gs.spool)
    rid = spool.next_id()
    req = {
        "type": "resv_create",
        "resv": {"id": rid, "uid": os.getuid(), "ncpus": 5, "duration": 60, "place": "board"},
    }
    tmp = spool.incoming / f".submit-{rid:010d}.json"
    atomic_write(tmp, json.dumps(req).encode())
    tmp.rename(spool.incoming / f"submit-{rid:010d}.json")
    spool.wake()
    r = wait_resv(gs, rid, "ENDED")
    assert r["reason"] == "refused: can never be placed: --place board: no board has 5 cores (largest: 4)"
    assert gs.alive()


def test_topology_shows_drained_and_reserved_cores_as_the_scheduler_sees_them(make_gs):
    gs = started(make_gs(start=False))
    gs.run("gctl", "drain", "3", "--reason", "fan", check=True)
    wait_for(lambda: "drained now: 3" in gs.log(), 10, "the drain to be applied")
    rid = int(gs.run("gresv", "create", "-n", "2", "-t", "120", "--threads-per-core", "1", check=True).stdout)
    r = wait_resv(gs, rid, "ACTIVE")
    mine = cpuset.parse(r["cores"])
    held = {SIBLING[c] for c in mine}
    assert not mine & held and 3 not in mine | held  # a whole physical core per reserved core, not the drained one
    data = topology(gs)
    maps = data["maps"]
    assert maps["drained"] == [3]
    assert set(maps["reserved"]) == mine | held
    assert set(maps["free"]) == set(range(8)) - mine - held - {3}
    states = {t["core"]: t for b in data["boards"] for pc in b["physical_cores"] for t in pc["threads"]}
    assert states[3]["state"] == "drained"
    assert all(states[c]["state"] == "reserved" and states[c]["reserved"] == f"R{rid}" for c in mine | held)
    text = gs.run("gctl", "topology", check=True).stdout
    assert "core 3 (host CPU" in text and "drained" in text and f"reserved R{rid}" in text
