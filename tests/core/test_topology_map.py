"""The machine map: its checks and text form, topology files and their errors, host detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import cpuset
from gridsched.core.topology import Board, MachineMap, TopologyError, board, flat, make
from gridsched.host import topology
from gridsched.host.topology import declared
from gridsched.protocol.config import parse as parse_config

ROOT = Path(__file__).resolve().parents[2]
HOST = sorted(os.sched_getaffinity(0))


# -- the map -------------------------------------------------------------------


def test_lookups_on_a_two_board_smt_map():
    m = make([board(0, range(4), [(0, 2), (1, 3)], memory=1 << 30), board(5, range(4, 8))], [0] * 4 + [1] * 4)
    assert m.ncores == 8 and m.cores() == tuple(range(8))
    assert m.board_of(3).id == 0 and m.board_of(4).id == 5 and m.board_index(4) == 1
    assert m.siblings(2) == (0, 2) and m.siblings(1) == (1, 3) and m.siblings(6) == (6,)
    assert m.host_cpu(5) == 1 and m.host_set([0, 1, 7]) == {0, 1}
    assert m.board_distance(0, 5) == 20 and m.board_distance(5, 5) == 10
    assert m.smt() == 2
    assert m.summary() == "2 boards x 4 cores (8 cores, 6 physical, SMT 2)"


@pytest.mark.parametrize(
    "boards, host, why",
    [
        ([board(0, (0, 1)), board(1, (1, 2))], [0, 0, 0], "core 1 is on board 0 and on board 1"),
        ([board(0, (0, 2))], [0, 0, 0], "cores 1 are on no board"),
        ([board(0, ())], [], "board 0 has no cores"),
        ([board(0, (0,)), board(0, (1,))], [0, 0], "board id 0 is used twice"),
        ([Board(0, (0, 1), ((0,),))], [0, 0], "board 0: cores 1 are in no sibling group"),
    ],
)
def test_inconsistent_maps_are_refused(boards, host, why):
    with pytest.raises(TopologyError, match=why):
        make(boards, host)


def test_flat_map_matches_the_flat_machine():
    cfg = parse_config({"machine": {"cores": 5}})
    ncores, host = declared(cfg)
    m = flat(ncores, host)
    assert [m.host_cpu(c) for c in range(5)] == [host[c % len(host)] for c in range(5)]
    assert len(m.boards) == 1 and m.smt() == 1


# -- the text form ---------------------------------------------------------------


@st.composite
def maps(draw) -> MachineMap:
    boards, nxt = [], 0
    nb = draw(st.integers(1, 4))
    order = draw(st.permutations(range(nb)))
    for bid in order:
        size = draw(st.integers(1, 6))
        cores = list(range(nxt, nxt + size))
        draw(st.randoms()).shuffle(cores)  # groups of scattered cores, as Linux numbers them
        groups, i = [], 0
        while i < size:
            k = draw(st.integers(1, 3))
            groups.append(cores[i : i + k])
            i += k
        memory = draw(st.none() | st.integers(1, 1 << 42))
        node = draw(st.none() | st.integers(0, 7))
        boards.append(board(bid * 3, cores, groups, memory=memory, node=node))
        nxt += size
    host = draw(st.lists(st.integers(0, 63), min_size=nxt, max_size=nxt))
    dist = draw(st.none() | st.lists(st.lists(st.integers(1, 99), min_size=nb, max_size=nb), min_size=nb, max_size=nb))
    return make(boards, host, dist)


@settings(max_examples=150, deadline=None)
@given(m=maps())
def test_text_form_reads_back_to_the_same_map(m):
    assert topology.parse(m.text()) == m


# -- topology files ----------------------------------------------------------------


def test_the_example_file_describes_two_sockets_of_four_smt_cores_on_two_cpus():
    m = topology.read(ROOT / "etc" / "topology.toml", host_cpus=[0, 1])
    assert [b.cores for b in m.boards] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert [b.siblings for b in m.boards] == [((0, 1), (2, 3)), ((4, 5), (6, 7))]
    assert m.host_cpus == (0, 0, 0, 0, 1, 1, 1, 1)
    assert [b.memory for b in m.boards] == [8 << 30, 8 << 30]
    assert m.distance == ((10, 21), (21, 10))


GOOD = """\
# a comment
[[board]]
cores = "0-3"
siblings = ["0,2", "1,3"]
host_cpus = "0"

[[board]]
cores = "4-5"
host_cpus = [1, 1]
memory = 1024
"""


def test_a_file_with_defaults():
    m = topology.parse(GOOD, "t.toml", host_cpus=[0, 1])
    assert [b.id for b in m.boards] == [0, 1]
    assert m.siblings(0) == (0, 2) and m.siblings(5) == (5,)
    assert m.host_cpus == (0, 0, 0, 0, 1, 1)
    assert m.boards[1].memory == 1024 and m.boards[0].memory is None
    assert m.distance == ((10, 20), (20, 10))


def replace_line(text: str, line: int, new: str) -> str:
    lines = text.splitlines()
    lines[line - 1] = new
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "line, new, why",
    [
        # (line replaced, line named) when the error is on another line than the one changed
        (3, 'cores = "0-3,2"', "board 0: core 2 is listed twice"),
        (8, 'cores = "3-4"', "board 1: core 3 is already on board 0 (line 3)"),
        (8, 'cores = ""', "board 1: is empty"),
        (5, 'host_cpus = "7"', "board 0: host CPU 7 is not one this host offers (0-1)"),
        ((5, 3), "", "board 0: core 2 would run on host CPU 2, which this host does not offer"),
        (3, 'cores = "0-3', "TOML syntax error"),
        (4, 'siblings = ["0,2", "2,3"]', "board 0: siblings: core 2 is in '0,2' and in '2,3'"),
        (4, 'siblings = ["0,9"]', "board 0: siblings '0,9': core 9 is not a core of this board"),
        (10, 'memory = "lots"', "board 1: memory = 'lots': not a memory size"),
        (10, "colour = 1", "board 1: unknown key 'colour'"),
        (9, "host_cpus = [1]", "board 1: host_cpus lists 1 CPUs for 2 cores"),
        (10, "distance = [10, 20, 30]", "board 1: distance has 3 entries, the file has 2 boards"),
        (8, 'cores = "5-6"', "cores must be numbered 0 to 5 without gaps: core 4 is on no board"),
    ],
)
def test_each_file_error_names_its_line(line, new, why):
    line, named = line if isinstance(line, tuple) else (line, line)
    text = replace_line(GOOD, line, new)
    with pytest.raises(TopologyError) as e:
        topology.parse(text, "t.toml", host_cpus=[0, 1])
    msg = str(e.value)
    assert msg.startswith(f"t.toml:{named}: "), msg
    assert why in msg, msg
    assert "\n" not in msg


def test_errors_without_a_line():
    with pytest.raises(TopologyError, match=r"^t.toml: no \[\[board\]\] table"):
        topology.parse("# nothing\n", "t.toml")
    with pytest.raises(TopologyError, match=r"^t.toml:2: unknown key or table 'machine'"):
        topology.parse("\n[machine]\ncores = 4\n", "t.toml")
    with pytest.raises(TopologyError, match=r"no such file"):
        topology.read("/nonexistent/topology.toml")


def test_unchecked_host_accepts_any_cpu():
    assert topology.parse('[[board]]\ncores = "0-63"\n').ncores == 64


# -- host detection ----------------------------------------------------------------


def test_host_detection_returns_every_allowed_cpu_exactly_once():
    m = topology.detect()
    assert sorted(m.host_cpus) == HOST and len(set(m.host_cpus)) == len(HOST)
    assert sorted(c for b in m.boards for c in b.cores) == list(range(len(HOST)))
    sysfs = Path("/sys/devices/system/cpu")
    for core, cpu in enumerate(m.host_cpus):
        path = sysfs / f"cpu{cpu}" / "topology" / "thread_siblings_list"
        if path.exists():
            expect = cpuset.parse(path.read_text()) & set(HOST)
            assert {m.host_cpus[s] for s in m.siblings(core)} == expect


def test_host_detection_restricted_to_some_cpus():
    m = topology.detect(HOST[:1])
    assert m.host_cpus == (HOST[0],) and m.ncores == 1


def fake_sysfs(root: Path, cpus: dict[int, tuple[int, int, str]], nodes: dict[int, tuple[str, str, int]]) -> Path:
    """cpus: cpu -> (package, core id, thread siblings); nodes: node -> (cpulist, distance row, MemTotal kB)."""
    for cpu, (pkg, core, sib) in cpus.items():
        t = root / "cpu" / f"cpu{cpu}" / "topology"
        t.mkdir(parents=True)
        (t / "physical_package_id").write_text(f"{pkg}\n")
        (t / "core_id").write_text(f"{core}\n")
        (t / "thread_siblings_list").write_text(f"{sib}\n")
    for n, (cl, dist, kb) in nodes.items():
        d = root / "node" / f"node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cl + "\n")
        (d / "distance").write_text(dist + "\n")
        (d / "meminfo").write_text(f"Node {n} MemTotal:       {kb} kB\nNode {n} MemFree:  1 kB\n")
    return root


def test_two_numa_nodes_with_smt_become_two_boards(tmp_path):
    # 2 nodes x 2 cores x 2 threads, Linux style: siblings are cpu N and N+4
    cpus = {c: (c % 4 // 2, c % 2, f"{c % 4},{c % 4 + 4}") for c in range(8)}
    root = fake_sysfs(tmp_path, cpus, {0: ("0-1,4-5", "10 21", 1024), 1: ("2-3,6-7", "21 10", 2048)})
    m = topology.detect(range(8), root)
    assert [(b.id, b.node, b.memory) for b in m.boards] == [(0, 0, 1 << 20), (1, 1, 2 << 20)]
    assert [b.cores for b in m.boards] == [(0, 1, 4, 5), (2, 3, 6, 7)]
    assert m.siblings(1) == (1, 5) and m.siblings(6) == (2, 6)
    assert m.distance == ((10, 21), (21, 10))
    assert topology.membind_unavailable(m) is None
    # restricted to cpus 2-7: declared cores 0-5 run on them, board 0 keeps cpus 4-5 only
    r = topology.detect(range(2, 8), root)
    assert r.host_cpus == (2, 3, 4, 5, 6, 7)
    assert [b.cores for b in r.boards] == [(2, 3), (0, 1, 4, 5)]
    assert r.siblings(0) == (0, 4) and r.siblings(2) == (2,)


def test_two_sockets_on_one_node_become_two_boards_without_memory(tmp_path):
    cpus = {c: (c // 2, c % 2, str(c)) for c in range(4)}
    root = fake_sysfs(tmp_path, cpus, {0: ("0-3", "10", 4096)})
    m = topology.detect(range(4), root)
    assert [(b.id, b.cores, b.node, b.memory) for b in m.boards] == [(0, (0, 1), 0, None), (1, (2, 3), 0, None)]
    assert m.smt() == 1
    assert topology.membind_unavailable(m) is None  # both boards are host node 0: bound there


def test_no_sysfs_gives_one_board_without_smt(tmp_path):
    m = topology.detect([0, 1, 2], tmp_path)
    assert len(m.boards) == 1 and m.smt() == 1 and m.host_cpus == (0, 1, 2)


# -- load_machine ------------------------------------------------------------------


def test_load_machine_from_a_topology_file_relative_to_the_config(tmp_path):
    (tmp_path / "topo.toml").write_text(GOOD)
    cfg = parse_config({"machine": {"topology": "topo.toml", "cpus": "0"}}, str(tmp_path / "gridsched.toml"))
    with pytest.raises(TopologyError, match="host CPU 1 is not one this host offers"):
        topology.load_machine(cfg)  # machine.cpus = "0": CPU 1 is not the daemon's
    if len(HOST) >= 2 and HOST[:2] == [0, 1]:
        cfg = parse_config({"machine": {"topology": "topo.toml"}}, str(tmp_path / "gridsched.toml"))
        assert topology.load_machine(cfg).ncores == 6
        cfg = parse_config({"machine": {"topology": "topo.toml", "cores": 4}}, str(tmp_path / "gridsched.toml"))
        with pytest.raises(TopologyError, match="declares 6 cores, but machine.cores = 4"):
            topology.load_machine(cfg)


def test_load_machine_without_a_file():
    big = topology.load_machine(parse_config({"machine": {"cores": len(HOST) + 3}}))
    assert len(big.boards) == 1 and big.ncores == len(HOST) + 3
    assert big.host_cpus == tuple(HOST[i % len(HOST)] for i in range(len(HOST) + 3))
    host = topology.load_machine(parse_config({}))
    assert sorted(host.host_cpus) == HOST
    one = topology.load_machine(parse_config({"machine": {"cores": 1}}))
    assert one.host_cpus == (HOST[0],)


def test_numa_memory_is_the_boards_only_where_it_adds_up_to_the_hosts(tmp_path):
    cpus = {c: (0, c, str(c)) for c in range(4)}
    nodes = {0: ("0-1", "10 21", 1024), 1: ("2-3", "21 10", 2048)}
    root = fake_sysfs(tmp_path / "sys", cpus, nodes)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        3072 kB\nMemFree:  1 kB\n")
    assert [b.memory for b in topology.detect(range(4), root, meminfo).boards] == [1 << 20, 2 << 20]
    # a virtual machine whose node 0 reports a fraction of the host's memory: the host's counts
    meminfo.write_text("MemTotal:        24576000 kB\n")
    assert [b.memory for b in topology.detect(range(4), root, meminfo).boards] == [None, None]
