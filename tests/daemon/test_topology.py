"""Topology-aware placement in the real daemon: a declared 2-board x 4-core machine mapped onto the host, real
jobs pinned to their boards' CPUs and bound to their memory, a changed map refused at reload.

Drained cores and a board job larger than every board are tested in process, on a driven clock, in
test_topology_driven.py."""

from __future__ import annotations

import os
import signal

from gridsched.core import cpuset
from tests.conftest import wait_for

HOST = sorted(os.sched_getaffinity(0))
BOARD_CPU = {0: HOST[0], 1: HOST[-1]}


def topo_config(gs_root) -> str:
    topo = gs_root / "topology.toml"
    topo.write_text(
        f'[[board]]\ncores = "0-3"\nsiblings = ["0-1", "2-3"]\nhost_cpus = "{BOARD_CPU[0]}"\n'
        f'[[board]]\ncores = "4-7"\nsiblings = ["4-5", "6-7"]\nhost_cpus = "{BOARD_CPU[1]}"\n'
    )
    return f"""
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
[machine]
topology = "{topo}"
[daemon]
autostart = false
"""


def board(core: int) -> int:
    return 0 if core < 4 else 1


WAIT_GO = "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"


def test_place_board_keeps_a_job_on_one_board(make_gs, tmp_path):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root))
    gs.start()
    report = "grep Cpus_allowed_list /proc/self/status | cut -f2 > aff.$GS_JOBID; echo $GS_CORES > cores.$GS_JOBID; "
    a = gs.gsub("-n", "3", "--place", "board", "--wrap", report + WAIT_GO)
    gs.wait_state(a, "RUNNING")
    b = gs.gsub("-n", "4", "--place", "board", "--wrap", report + WAIT_GO)
    gs.wait_state(b, "RUNNING")
    (gs.work / "go").touch()
    for jid in (a, b):
        gs.wait_state(jid, "COMPLETED")
    c = gs.gsub("-n", "2", "--place", "spread", "--wrap", report)  # on an idle machine
    gs.wait_state(c, "COMPLETED")
    ca = cpuset.parse((gs.work / f"cores.{a}").read_text())
    cb = cpuset.parse((gs.work / f"cores.{b}").read_text())
    assert len({board(x) for x in ca}) == 1 and len(ca) == 3
    assert {board(x) for x in cb} == {1 - board(min(ca))} and len(cb) == 4  # the other board, whole
    assert cpuset.parse((gs.work / f"aff.{a}").read_text()) == {BOARD_CPU[board(min(ca))]}
    cc = cpuset.parse((gs.work / f"cores.{c}").read_text())
    assert {board(x) for x in cc} == {0, 1}  # spread: one core on each board
    segs = gs.run("gstat", "-f", str(b), check=True).stdout
    assert f"boards {1 - board(min(ca))}" in segs, segs


def test_memory_is_bound_to_the_numa_node_of_the_job_board(make_gs):
    gs = make_gs(start=False)
    topo = gs.root / "topology.toml"
    # a host NUMA node per board (this host's node 0 for both: binding to it is harmless everywhere)
    topo.write_text(
        f'[[board]]\ncores = "0-1"\nnode = 0\nhost_cpus = "{BOARD_CPU[0]}"\n'
        f'[[board]]\ncores = "2-3"\nnode = 0\nhost_cpus = "{BOARD_CPU[1]}"\n'
    )
    gs.cfgfile.write_text(f'[machine]\ntopology = "{topo}"\n[daemon]\nautostart = false\n')
    gs.start()
    jid = gs.gsub(
        "-n", "2", "--place", "board", "--wrap", "grep -o 'bind:[0-9,-]*' /proc/self/numa_maps | sort -u > policy"
    )
    j = gs.wait_state(jid, "COMPLETED")
    assert (gs.work / "policy").read_text().split() == ["bind:0"]
    assert "not bound" not in open(j["stderr"]).read()
    # without host nodes on the boards nothing is bound
    gs.stop()
    topo.write_text(
        f'[[board]]\ncores = "0-1"\nhost_cpus = "{BOARD_CPU[0]}"\n'
        f'[[board]]\ncores = "2-3"\nhost_cpus = "{BOARD_CPU[1]}"\n'
    )
    gs.start()
    jid = gs.gsub("-n", "2", "--wrap", "grep -c 'bind:' /proc/self/numa_maps > policy2 || true")
    gs.wait_state(jid, "COMPLETED")
    assert (gs.work / "policy2").read_text().split() == ["0"]


def test_a_changed_topology_file_is_refused_at_reload_and_the_running_map_stays(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root))
    gs.start()
    topo = gs.root / "topology.toml"
    good = topo.read_text()
    topo.write_text(f'[[board]]\ncores = "0-2"\nhost_cpus = "{BOARD_CPU[0]}"\n')  # 3 cores on one board now
    r = gs.run("gctl", "reload")
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1
    assert "machine map changed (1 board x 3 cores" in r.stderr and "running: 2 boards x 4 cores" in r.stderr
    os.kill(gs.proc.pid, signal.SIGHUP)  # bypassing gctl: the daemon itself refuses
    wait_for(lambda: "reload refused" in gs.log() and "machine map changed" in gs.log(), 10, "the refusal")
    assert gs.alive()
    # the running map stays: a job of 4 cores on one board still runs on the board of 4
    jid = gs.gsub("-n", "4", "--place", "board", "--wrap", "echo $GS_CORES > cores.$GS_JOBID")
    gs.wait_state(jid, "COMPLETED")
    assert len(cpuset.parse((gs.work / f"cores.{jid}").read_text())) == 4
    topo.write_text("[[board]]\ncores = nonsense\n")  # not a topology at all: refused in one line too
    r = gs.run("gctl", "reload")
    assert r.returncode == 1 and r.stderr.startswith("gctl: error: topology ") and len(r.stderr.splitlines()) == 1
    topo.write_text(good)
    r = gs.run("gctl", "reload")
    assert r.returncode == 0, r.stderr
