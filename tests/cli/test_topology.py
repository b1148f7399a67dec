"""gctl topology, drain and resume, in-process on a temporary spool (no daemon)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gridsched.cli import gctl
from gridsched.core import cpuset
from gridsched.protocol.state import RESV_COLUMNS, StateDB

from .conftest import MACHINE_CORES

HOST = sorted(os.sched_getaffinity(0))
ROOT = Path(__file__).resolve().parents[2]


def requests(spool, kind: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(spool.incoming.glob(f"{kind}-*.json"))]


def states(data: dict) -> dict[int, dict]:
    return {t["core"]: t for b in data["boards"] for pc in b["physical_cores"] for t in pc["threads"]}


def put_resv(spool, rid: int, cores: str, **fields) -> None:
    """An ACTIVE reservation row, as the daemon writes it."""
    row = {c: None for c in RESV_COLUMNS}
    row.update(id=rid, state="ACTIVE", user="root", uid=0, name=f"R{rid}", ncpus=len(cpuset.parse(cores)))
    row.update(resources={}, duration=60, create_time=0.0, cores=cores, users=[], kill=True, reason="")
    row.update({"threads_per_core": 0, "exclusive_board": False, **fields})
    db = StateDB(spool.db, write=True)
    try:
        db.begin()
        db.put_resv(row)
        db.commit()
    finally:
        db.close()


def test_topology_of_a_flat_machine_with_jobs_drained_and_reserved_cores(env, spool, run, put_rows, make_row):
    put_rows(
        make_row(3, state="RUNNING", cores="0-3", ncpus=4),
        make_row(4, state="STOPPING", cores="4"),
        make_row(5, state="COMPLETED", cores="5"),
        make_row(6, state="PENDING"),
        meta={"drained": json.dumps({"cores": "3,6-7", "reason": "fan"})},
    )
    put_resv(spool, 1, "8-9")
    r = run(gctl.cli, ["topology", "--json"])
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["ncores"] == MACHINE_CORES and len(data["boards"]) == 1  # 16 cores > host CPUs: one flat board
    s = states(data)
    assert sorted(s) == list(range(MACHINE_CORES))
    assert [s[c]["host_cpu"] for c in range(MACHINE_CORES)] == [HOST[c % len(HOST)] for c in range(MACHINE_CORES)]
    assert [s[c]["job"] for c in range(5)] == [3, 3, 3, 3, 4]
    assert s[3]["drained"] and s[3]["state"] == "job"  # drained while its job finishes
    expect = ["free", "drained", "drained", "reserved", "reserved", "free"]
    assert [s[c]["state"] for c in (5, 6, 7, 8, 9, 10)] == expect
    assert s[8]["reserved"] == "R1"
    counts = {"job": 5, "backfill": 0, "held": 0, "lent": 0, "drained": 2, "reserved": 2, "free": MACHINE_CORES - 9}
    assert data["counts"] == counts
    free = [c for c in range(MACHINE_CORES) if c not in (0, 1, 2, 3, 4, 6, 7, 8, 9)]
    maps = {"allocated": [0, 1, 2, 3, 4], "backfill": [], "held": [], "lent": [], "drained": [3, 6, 7]}
    assert data["maps"] == {**maps, "reserved": [8, 9], "free": free}
    assert data["drained"] == {"cores": "3,6-7", "reason": "fan"}

    r = run(gctl.cli, ["topology"])
    assert r.exit_code == 0
    out = r.stdout
    assert f"core 0 (host CPU {HOST[0]}): job 3" in out
    assert f"core 3 (host CPU {HOST[3 % len(HOST)]}): job 3, draining" in out
    assert f"core 6 (host CPU {HOST[6 % len(HOST)]}): drained" in out
    assert f"core 8 (host CPU {HOST[8 % len(HOST)]}): reserved R1" in out
    assert f"core 10 (host CPU {HOST[10 % len(HOST)]}): free" in out
    assert "drained: 3,6-7 (fan)" in out
    assert "\x1b[" not in out  # no colours off a terminal


def test_topology_from_a_topology_file(env, run):
    topo = env / "topo.toml"
    topo.write_text(
        (ROOT / "etc" / "topology.toml")
        .read_text()
        .replace('host_cpus = "1"', f'host_cpus = "{HOST[-1]}"')
        .replace('host_cpus = "0"', f'host_cpus = "{HOST[0]}"')
    )
    cfg = env / "cfg.toml"
    cfg.write_text('[daemon]\nautostart = false\n[machine]\ntopology = "topo.toml"\n')
    r = run(gctl.cli, ["topology", "--json"])
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert [b["cores"] for b in data["boards"]] == ["0-3", "4-7"]
    assert [[[t["core"] for t in pc["threads"]] for pc in b["physical_cores"]] for b in data["boards"]] == [
        [[0, 1], [2, 3]],
        [[4, 5], [6, 7]],
    ]
    assert data["boards"][0]["distance"] == [10, 21]
    assert data["memory_binding"]["available"] is False
    r = run(gctl.cli, ["topology"])
    assert "board 1: cores 4-7, memory 8G, distance 21,10" in r.stdout
    assert "physical core 6-7" in r.stdout


def test_a_bad_topology_file_is_one_line_naming_it(env, run):
    topo = env / "topo.toml"
    topo.write_text('[[board]]\ncores = "0-1"\nhost_cpus = "0"\n[[board]]\ncores = "1-2"\nhost_cpus = "0"\n')
    (env / "cfg.toml").write_text('[daemon]\nautostart = false\n[machine]\ntopology = "topo.toml"\n')
    for args in (["topology"], ["drain", "0"]):
        r = run(gctl.cli, args)
        assert r.exit_code == 1
        assert r.stderr == f"gctl: error: topology {topo}:5: board 1: core 1 is already on board 0 (line 2)\n"


def test_drain_and_resume_write_requests(env, spool, run):
    r = run(gctl.cli, ["drain", "3,2", "--reason", "fan  broken"])
    assert r.exit_code == 0, r.stderr
    assert "drain of cores 2-3 requested" in r.stdout
    assert requests(spool, "drain") == [{"type": "drain", "cores": "2-3", "reason": "fan broken"}]
    r = run(gctl.cli, ["resume", "2"])
    assert r.exit_code == 0
    assert requests(spool, "undrain") == [{"type": "undrain", "cores": "2"}]
    # the view counts requests not yet taken in
    data = json.loads(run(gctl.cli, ["topology", "--json"]).stdout)
    assert data["requests_waiting"] == 2


def test_drain_refuses_unknown_cores_and_bad_lists(env, spool, run):
    r = run(gctl.cli, ["drain", f"{MACHINE_CORES - 1}-{MACHINE_CORES + 1}"])
    assert r.exit_code == 1
    assert r.stderr == (
        f"gctl: error: cores {MACHINE_CORES}-{MACHINE_CORES + 1} are not cores of this machine "
        f"(cores 0-{MACHINE_CORES - 1})\n"
    )
    r = run(gctl.cli, ["resume", str(MACHINE_CORES)])
    assert r.exit_code == 1 and r.stderr.startswith(f"gctl: error: core {MACHINE_CORES} is not a core")
    r = run(gctl.cli, ["drain", "2-x"])
    assert r.exit_code == 2
    assert r.stderr.startswith("gctl: error: cores '2-x': not a cpu list") and r.stderr.count("\n") == 1
    r = run(gctl.cli, ["drain", ""])
    assert r.exit_code == 2 and "no cores" in r.stderr
    assert not spool.incoming.exists() or not list(spool.incoming.iterdir())


def test_topology_shows_the_cores_a_job_holds_idle(env, run, put_rows, make_row):
    """A --threads-per-core 1 job keeps its cores' SMT siblings idle: they are held, not free."""
    row = make_row(3, state="RUNNING", cores="0-1", ncpus=2)
    row["run"] = {"held": [2, 3]}
    put_rows(row)
    data = json.loads(run(gctl.cli, ["topology", "--json"]).stdout)
    s = states(data)
    assert [s[c]["state"] for c in range(5)] == ["job", "job", "held", "held", "free"]
    assert s[2]["held_by"] == 3 and data["counts"]["held"] == 2
    out = run(gctl.cli, ["topology"]).stdout
    assert "held by job 3" in out and "held 2" in out


def test_topology_shows_backfilled_lent_and_placed_reservation_cores(env, spool, run, put_rows, make_row):
    """The status maps the scheduler uses: a preemptable backfilled job, a yielding parent's lent
    cores (one taken by its child), and the SMT siblings a --threads-per-core 1 reservation holds."""
    bf = make_row(3, state="RUNNING", cores="0", backfilled=1)
    bf["spec"]["checkpoint"] = "signal"
    parent = make_row(4, state="RUNNING", cores="1-2", ncpus=2)
    child = make_row(5, state="RUNNING", cores="2")
    put_rows(bf, parent, child, meta={"yielded": json.dumps({"4": {"cores": "1-2", "resuming": False}})})
    put_resv(spool, 9, "4", place="pack", threads_per_core=1)
    data = json.loads(run(gctl.cli, ["topology", "--json"]).stdout)
    s = states(data)
    assert [s[c]["state"] for c in range(4)] == ["backfill", "lent", "job", "free"]
    assert s[1]["lent_by"] == 4 and s[2]["job"] == 5 and s[2]["lent_by"] == 4
    assert data["maps"]["backfill"] == [0] and data["maps"]["lent"] == [1, 2] and data["maps"]["allocated"] == [2]
    # 16 declared cores on one flat board: no SMT, so the reservation holds only its own core
    assert data["maps"]["reserved"] == [4] and 3 in data["maps"]["free"] and 4 not in data["maps"]["free"]
    out = run(gctl.cli, ["topology"]).stdout
    assert "job 3 (backfilled, preemptable)" in out and "lent by job 4" in out and "lent 1" in out
