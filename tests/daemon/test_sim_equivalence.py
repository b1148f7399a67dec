"""The same workload through the daemon and through gsim gives the same schedule.

The daemon runs in process (the stub executor, a driven clock: tests/daemon/driven.py): its scheduling
decisions are the real daemon's, and the stand-in jobs do the work the trace says they do."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

from tests.conftest import BIN
from tests.daemon.driven import Driven
from tests.daemon.test_backfill_driven import scenario
from tests.daemon.test_topology import topo_config

# The scenario of test_backfill as an SWF trace: A, B at t=0; C, D, E at t=1 (seconds).
SWF = """; MaxProcs: 8
1 0 -1 11 2 -1 -1 2 12 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 600 2 -1 -1 2 600 -1 1 1 1 -1 -1 -1 -1 -1
3 1 -1 2 6 -1 -1 6 60 -1 1 1 1 -1 -1 -1 -1 -1
4 1 -1 2 2 -1 -1 2 30 -1 1 1 1 -1 -1 -1 -1 -1
5 1 -1 20 2 -1 -1 2 30 -1 1 1 1 -1 -1 -1 -1 -1
"""
NAMES = {1: "A", 2: "B", 3: "C", 4: "D", 5: "E"}


def simulate(tmp_path, policy: str) -> tuple[list[str], dict[str, int]]:
    trace = tmp_path / "scenario.swf"
    trace.write_text(SWF)
    out = tmp_path / f"{policy}.csv"
    subprocess.run(
        [
            str(BIN / "gsim"),
            "run",
            str(trace),
            "--policy",
            policy,
            "--p",
            "0.2",
            "--threshold",
            "10s",
            "--checkpoint-overhead",
            "0",
            "--jobs-out",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    rows = list(csv.DictReader(out.open()))
    order = [NAMES[int(r["id"])] for r in sorted(rows, key=lambda r: (float(r["start"]), int(r["id"])))]
    ckpts = {NAMES[int(r["id"])]: int(r["checkpoints"]) for r in rows}
    return order, ckpts


@pytest.mark.parametrize("policy", ["checkpoint-backfill", "easy"])
def test_daemon_and_gsim_agree(stub_daemon, tmp_path, policy):
    sim_order, sim_ckpts = simulate(tmp_path, policy)
    dr, ids = scenario(stub_daemon, policy)  # E does 40 units of 0.5 s of work, as in the trace
    names = dict(zip(ids, "ABCDE"))
    a, b, c, d, e = ids
    if policy == "easy":  # the order is settled once D and E have started; B would run for minutes
        dr.run_until(lambda: dr.state(d) in ("RUNNING", "COMPLETED") and dr.state(e) == "RUNNING", 60)
    else:
        dr.run_until(lambda: dr.state(e) == "COMPLETED", 90)
    jobs = [dr.job(i) for i in ids]
    order = [names[j["id"]] for j in sorted(jobs, key=lambda j: (j["start_time"], j["id"]))]
    assert order == sim_order
    if policy != "easy":
        assert {names[j["id"]]: j["checkpoints"] for j in jobs} == sim_ckpts
        assert sim_ckpts["E"] == 1


# A dependency, a placed reservation and a topology (two boards of four cores, test_topology's
# machine), under easy, in seconds:
#   A (t=0): 4 cores (a whole board), runs 3 s;  B (t=0): 2 cores, afterany:A, runs 2 s.
#   R (t=0): a flexible reservation of a whole board (--place board) for 8 s: active at once.
#   C (t=1): 4 cores, runs 1 s: no four cores are free (R holds a board) before B ends at 5.
# B may start only when A has ended (3), two seconds before C (5): the order is A, B, C, with no preemption.
SWF_GATED = """; MaxProcs: 8
1 0 -1 3 4 -1 -1 4 10 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 2 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 1 0
3 1 -1 1 4 -1 -1 4 10 -1 1 1 1 -1 -1 -1 -1 -1
"""
RESV_GATED = '[[reservation]]\ncreate = 0\nncpus = 4\nduration = 8\nplace = "board"\n'


def test_daemon_and_gsim_agree_on_a_dependency_and_a_placed_reservation(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path)))
    trace, resv_file, out = tmp_path / "gated.swf", tmp_path / "r.toml", tmp_path / "gated.csv"
    trace.write_text(SWF_GATED)
    resv_file.write_text(RESV_GATED)
    args = ["run", str(trace), "--policy", "easy", "--dependencies", "--topology", str(tmp_path / "topology.toml")]
    args += ["--reservations", str(resv_file), "--jobs-out", str(out), "--json"]
    sim = subprocess.run([str(BIN / "gsim"), *args], check=True, capture_output=True, text=True)
    assert json.loads(sim.stdout)["reservations"]["activation_delays"] == [0.0]
    rows = list(csv.DictReader(out.open()))
    sim_order = ["ABC"[int(r["id"]) - 1] for r in sorted(rows, key=lambda r: (float(r["start"]), int(r["id"])))]
    assert sim_order == ["A", "B", "C"]
    assert [float(r["start"]) for r in rows] == [0.0, 3.0, 5.0]

    a = dr.gsub("-N", "A", "-n", "4", "-t", "10s", "--wrap", "sleep 3", work=3)
    b = dr.gsub("-N", "B", "-n", "2", "-t", "10s", "-d", f"afterany:{a}", "--wrap", "sleep 2", work=2)
    assert dr.running(a)
    r = dr.command("gresv", "create", "-n", "4", "-t", "8", "--place", "board")
    rid = int(r.stdout.strip().splitlines()[-1])
    assert dr.resv(rid)["state"] == "ACTIVE"
    dr.run_to(1)
    c = dr.gsub("-N", "C", "-n", "4", "-t", "10s", "--wrap", "sleep 1", work=1)
    dr.run_until(lambda: dr.state(c) == "COMPLETED" and dr.state(b) == "COMPLETED", 30)
    jobs = [dr.job(i) for i in (a, b, c)]
    names = dict(zip((a, b, c), "ABC"))
    assert [names[j["id"]] for j in sorted(jobs, key=lambda j: (j["start_time"], j["id"]))] == sim_order
    assert jobs[1]["start_time"] >= jobs[0]["end_time"]  # B waited for A's end
    assert [j["checkpoints"] for j in jobs] == [int(r["checkpoints"]) for r in rows] == [0, 0, 0]


# A splittable job of sub-tasks of their own sizes (gsub --split-file; gsim run --split-file), under easy on
# 8 cores: tests/sim/test_sim_split_file.py's scene.  A (4 cores) runs 10 s of 11; B (4 cores) 4 s of 5;
# H, the head, all 8 for 5 s of 6; S: sub-tasks 0 (2 cores, 3 s), 1 (2, 5 s), 2 (1, 2 s), 3 (4, 6 s).
SWF_SPLIT = """; MaxProcs: 8
1 0 -1 10 4 -1 -1 4 11 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 4 4 -1 -1 4 5 -1 1 1 1 -1 -1 -1 -1 -1
3 0 -1 5 8 -1 -1 8 6 -1 1 1 1 -1 -1 -1 -1 -1
4 0 -1 8 8 -1 -1 8 8 -1 1 1 1 -1 -1 -1 -1 -1
"""
SUB_TASKS = [(2, 3), (2, 5), (1, 2), (4, 6)]


def test_daemon_and_gsim_agree_on_a_job_of_differing_sub_tasks(stub_daemon, tmp_path):
    from tests.daemon.driven import Work
    from tests.daemon.test_arrays_split import EASY

    trace, side, out = tmp_path / "split.swf", tmp_path / "sim-tasks.txt", tmp_path / "split.csv"
    trace.write_text(SWF_SPLIT)
    side.write_text("".join(f"4 {c} {t}\n" for c, t in SUB_TASKS))
    args = ["run", str(trace), "--policy", "easy", "--split-file", str(side), "--jobs-out", str(out), "--json"]
    sim = subprocess.run([str(BIN / "gsim"), *args], check=True, capture_output=True, text=True)
    assert json.loads(sim.stdout)["split"] == {"jobs": 1, "pieces": 2, "sub_tasks": 3}
    rows = {int(r["id"]): r for r in csv.DictReader(out.open())}

    dr = Driven(stub_daemon(EASY))

    class ByChain(dict):  # a piece's stand-in works as long as its longest chain of sub-tasks: its walltime
        def setdefault(self, jid, default=None):
            rec = dr.d.table.jobs.get(jid)
            if jid not in self and rec is not None and rec.split_of is not None:
                default = Work(float(rec.walltime), "none")
            return super().setdefault(jid, default)

    dr.work = ByChain(dr.work)
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("".join(f"{c} {t}s x{k}\n" for k, (c, t) in enumerate(SUB_TASKS)))
    script = tmp_path / "task.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    a = dr.gsub("-N", "A", "-n", "4", "-t", "11s", "--wrap", "sleep 10", work=10)
    b = dr.gsub("-N", "B", "-n", "4", "-t", "5s", "--wrap", "sleep 4", work=4)
    h = dr.gsub("-N", "H", "-n", "8", "-t", "6s", "--wrap", "sleep 5", work=5)
    s = dr.gsub("-N", "S", "--split-file", str(tasks), str(script), work=6)  # run whole: 3 alone, 6 s
    dr.run_until(lambda: dr.state(s) == "COMPLETED" and dr.state(h) == "COMPLETED", 60)
    jobs = {j["id"]: j for j in json.loads(dr.command("gstat", "-a", "--json").stdout)["jobs"]}
    pieces = sorted((j for j in jobs.values() if (j["split"] or {}).get("of") == s), key=lambda j: j["start_time"])
    assert [p["split"]["tasks"] for p in pieces] == [[0, 1], [2]]
    t0 = dr.t0
    for jid, k in ((a, 1), (b, 2), (h, 3)):
        assert jobs[jid]["start_time"] - t0 == pytest.approx(float(rows[k]["start"]), abs=0.3)
        assert jobs[jid]["end_time"] - t0 == pytest.approx(float(rows[k]["end"]), abs=0.3)
    # gsim's job starts with its first sub-task and ends with its last: the first piece, the whole start
    assert pieces[0]["start_time"] - t0 == pytest.approx(float(rows[4]["start"]), abs=0.3)
    assert jobs[s]["end_time"] - t0 == pytest.approx(float(rows[4]["end"]), abs=0.3)
    assert jobs[s]["ncpus"] == int(rows[4]["procs"]) - 4  # whole, on the 4 cores sub-task 3 needs
