"""Topology-aware scheduling in the daemon, in process (stub executor, driven clock), on a declared 2-board x
4-core machine: drained cores take no new job and come back with gctl resume; gsub refuses a board job larger
than every board.

Placement with real jobs (their pinning, memory bound to the board's node, a changed map refused at reload)
is tested in test_topology.py."""

from __future__ import annotations

import pytest

from gridsched.core import cpuset
from tests.daemon.driven import Driven
from tests.daemon.test_topology import board, topo_config


@pytest.fixture
def dr(stub_daemon, tmp_path) -> Driven:
    return Driven(stub_daemon(topo_config(tmp_path)))


def test_drained_cores_take_no_new_job(dr, caplog):
    caplog.set_level("INFO", logger="gschedd")
    r = dr.command("gctl", "drain", "0-3", "--reason", "maintenance")
    assert r.stdout.startswith("gctl: drain of cores 0-3 requested")
    assert "drained now: 0-3" in caplog.text
    ids = [dr.gsub("-n", "1", "--wrap", "echo $GS_CORES; wait for go", work=None) for _ in range(5)]
    assert all(dr.running(j) for j in ids[:4])
    assert dr.state(ids[4]) == "PENDING"  # only the four undrained cores
    used: set[int] = set()
    for jid in ids[:4]:
        used |= cpuset.parse(dr.job(jid)["cores"])
    assert used == {4, 5, 6, 7}
    topo = dr.command("gctl", "topology").stdout
    assert "drained" in topo and "maintenance" in topo
    dr.command("gctl", "resume", "0-3")
    assert dr.running(ids[4]) and board(int(dr.job(ids[4])["cores"])) == 0
    for jid in ids:
        dr.finish(jid)
        assert dr.state(jid) == "COMPLETED"


def test_gsub_refuses_a_board_job_larger_than_every_board(dr):
    r = dr.command("gsub", "-n", "5", "--place", "board", "--wrap", "true", check=False)
    assert r.exit_code != 0
    assert r.stderr == "gsub: error: job can never run: --place board: no board has 5 cores (largest: 4)\n"
    assert not list(dr.d.spool.incoming.glob("submit-*"))
