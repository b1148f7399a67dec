"""The same workload through the daemon (real sleep jobs) and through gsim gives the same schedule."""

from __future__ import annotations

import csv
import subprocess

import pytest

from tests.conftest import BIN
from tests.daemon.test_backfill import config, submit_scenario

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
def test_daemon_and_gsim_agree(make_gs, tmp_path, policy):
    sim_order, sim_ckpts = simulate(tmp_path, policy)
    gs = make_gs(config(policy))
    gs.env["UNIT_SECONDS"] = "0.5"
    ids = submit_scenario(gs)
    names = dict(zip(ids, "ABCDE"))
    a, b, c, d, e = ids
    if policy == "easy":  # the order is settled once D and E have started; B would run for minutes
        gs.wait_state(d, "RUNNING", "COMPLETED", timeout=60)
        gs.wait_state(e, "RUNNING", timeout=60)
    else:
        gs.wait_state(e, "COMPLETED", timeout=90)
    jobs = [gs.job(i) for i in ids]
    order = [names[j["id"]] for j in sorted(jobs, key=lambda j: (j["start_time"], j["id"]))]
    assert order == sim_order
    if policy != "easy":
        assert {names[j["id"]]: j["checkpoints"] for j in jobs} == sim_ckpts
        assert sim_ckpts["E"] == 1
    gs.run("gdel", *map(str, ids))
