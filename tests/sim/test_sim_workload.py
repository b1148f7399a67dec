"""gsim with dependencies (SWF fields 17, 18), arrays with a throttle and holds: engine, file, command."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner
from simtraces import swf_line

from gridsched.cli.gsim import main as gsim
from gridsched.core.types import Params, Policy
from gridsched.sim.engine import SimResv, simulate
from gridsched.sim.metrics import compute
from gridsched.sim.reservations import ResvFileError
from gridsched.sim.reservations import read as read_resv
from gridsched.sim.swf import read as read_trace
from gridsched.sim.workload import WorkloadError, gates, read

EASY = Params(policy=Policy.EASY)


def dep_line(job: int, submit: float, run: float, procs: int, req: float, prev: int, think: float, **kw) -> str:
    """An SWF line whose fields 17 and 18 name a preceding job and the think time."""
    f = swf_line(job, submit, run, procs, req, **kw).split()
    f[16], f[17] = str(prev), str(think)
    return " ".join(f)


# 4 cores.  Job 1 holds the machine over [0, 100).  Job 2 (submitted at 10) follows job 1 with a
# think time of 30: with dependencies it may start at 100 + 30 = 130 only, and its wait counts from
# then (0).  Job 3 (submitted at 20) is not held back by job 2: it starts at 100.
DEPS = [
    swf_line(1, 0, 100, 4, 200),
    dep_line(2, 10, 50, 2, 100, prev=1, think=30),
    swf_line(3, 20, 10, 2, 20),
]


@pytest.mark.parametrize("policy", list(Policy))
def test_a_job_follows_its_preceding_job_plus_the_think_time(write_trace, policy):
    tr = read_trace(write_trace(DEPS))
    assert tr.preceding == {2: (1, 30.0)}
    plain = simulate(tr, Params(policy=policy))
    assert plain.start == [0.0, 100.0, 100.0]
    g, ignored = gates(tr, dependencies=True)
    assert ignored == 0
    res = simulate(tr, Params(policy=policy), gates=g)
    assert res.start == [0.0, 130.0, 100.0]
    assert res.eligible == [0.0, 130.0, 20.0]
    assert compute(res).wait_avg == pytest.approx((0 + 0 + 80) / 3)


def test_a_preceding_job_that_ended_before_the_submit_changes_nothing(write_trace):
    # job 1 ends at 5; 5 + 2 < 10: job 2 starts at its submit time
    tr = read_trace(write_trace([swf_line(1, 0, 5, 4, 10), dep_line(2, 10, 5, 4, 10, prev=1, think=2)]))
    res = simulate(tr, EASY, gates=gates(tr, dependencies=True)[0])
    assert res.start == [0.0, 10.0] and res.eligible == [0.0, 10.0]


def test_a_preceding_job_not_replayed_is_ignored(write_trace):
    # job 9 is not in the trace, job 1 never ran (no run time): both dependencies are ignored
    lines = [
        swf_line(1, 0, -1, 4, 10),
        dep_line(2, 0, 10, 4, 20, prev=1, think=5),
        dep_line(3, 0, 10, 4, 20, prev=9, think=5),
    ]
    tr = read_trace(write_trace(lines))
    g, ignored = gates(tr, dependencies=True)
    assert ignored == 2 and not g
    r = CliRunner().invoke(gsim, ["run", write_trace(lines), "--dependencies", "--json", "--policy", "easy"])
    assert r.exit_code == 0, r.output
    assert "2 jobs name a preceding job that is not replayed" in r.stderr
    assert json.loads(r.stdout)["jobs"] == 2


def write_workload(tmp_path, text: str) -> str:
    p = tmp_path / "w.toml"
    p.write_text(text)
    return str(p)


def test_an_array_with_a_throttle_runs_at_most_max_tasks(write_trace, tmp_path):
    tr = read_trace(write_trace([swf_line(i, 0, 10, 1, 10) for i in range(1, 6)]))
    wl = read(write_workload(tmp_path, "[[array]]\njobs = [1, 2, 3, 4]\nmax = 2\n"))
    res = simulate(tr, EASY, gates=gates(tr, workload=wl)[0])
    assert res.start == [0.0, 0.0, 10.0, 10.0, 0.0]  # job 5 is no task of it: it runs at once
    assert res.eligible == [0.0] * 5  # a throttled task is eligible: its wait counts from its submit


def test_a_held_job_waits_for_its_release(write_trace, tmp_path):
    tr = read_trace(write_trace([swf_line(1, 0, 10, 1, 10), swf_line(2, 0, 10, 1, 10)]))
    wl = read(write_workload(tmp_path, '[[job]]\nid = 1\nhold_until = "1m"\n'))
    res = simulate(tr, EASY, gates=gates(tr, workload=wl)[0])
    assert res.start == [60.0, 0.0] and res.eligible == [60.0, 0.0]


def test_afterok_on_a_failed_job_is_cancelled_and_afternotok_runs(write_trace, tmp_path):
    # job 1 failed in the trace (status 0): job 2 (afterok) is cancelled, job 3 (afternotok) runs after it
    tr = read_trace(
        write_trace([swf_line(1, 0, 10, 4, 10, status=0), swf_line(2, 0, 10, 4, 10), swf_line(3, 0, 10, 4, 10)])
    )
    wl = read(
        write_workload(
            tmp_path, '[[job]]\nid = 2\ndependency = "afterok:1"\n[[job]]\nid = 3\ndependency = "afternotok:1"\n'
        )
    )
    res = simulate(tr, EASY, gates=gates(tr, workload=wl)[0])
    assert res.cancelled == [1]
    assert res.start[0] == 0.0 and res.start[2] == 10.0
    m = compute(res)
    assert (m.jobs, m.cancelled, m.wait_avg) == (2, 1, 0.0)


def test_singleton_runs_one_job_of_a_name_at_a_time(write_trace, tmp_path):
    tr = read_trace(write_trace([swf_line(i, 0, 10, 1, 10) for i in range(1, 4)]))
    text = "".join(f'[[job]]\nid = {i}\nname = "n"\ndependency = "singleton"\n' for i in range(1, 4))
    res = simulate(tr, EASY, gates=gates(tr, workload=read(write_workload(tmp_path, text)))[0])
    assert res.start == [0.0, 10.0, 20.0]


@pytest.mark.parametrize(
    "text, msg",
    [
        ("[jobs]\n", "unknown key 'jobs'"),
        ("[[job]]\nname = 'x'\n", "job 1: missing 'id'"),
        ("[[job]]\nid = 0\n", "job 1: id: 0: expected a whole number of at least 1"),
        ("[[job]]\nid = 1\nwhen = 3\n", "job 1: unknown key 'when'"),
        ("[[job]]\nid = 1\n[[job]]\nid = 1\n", "job 2: id 1: job 1 has two [[job]] tables"),
        ("[[job]]\nid = 1\ndependency = 'afterwards:2'\n", "job 1: dependency 'afterwards:2': unknown condition"),
        ("[[job]]\nid = 1\ndependency = 'afterok:1'\n", "job 1 depends on itself"),
        ("[[job]]\nid = 1\ndependency = 'singleton'\n", "singleton needs the job's name"),
        ("[[job]]\nid = 1\nhold_until = -5\n", "hold_until: -5: must be zero or more seconds"),
        ("[[job]]\nid = 1\nhold_until = 'soon'\n", "hold_until: 'soon': not a number of seconds"),
        ("[[array]]\njobs = [1, 2]\n", "array 1: missing 'max'"),
        ("[[array]]\njobs = []\nmax = 1\n", "array 1: jobs: expected a list"),
        ("[[array]]\njobs = [1]\nmax = 0\n", "array 1: max: 0"),
        ("[[array]]\njobs = [1]\nmax = 1\n[[array]]\njobs = [1]\nmax = 1\n", "job 1 is already in array 1"),
        ("[[job]\n", "w.toml: "),
    ],
)
def test_bad_workload_files(tmp_path, text, msg):
    with pytest.raises(WorkloadError, match=msg.replace("[", r"\[").replace("(", r"\(")):
        read(write_workload(tmp_path, text))


@pytest.mark.parametrize(
    "text, msg",
    [
        ("[[job]]\nid = 7\n", "job 1: id: job 7 is not replayed"),
        ("[[job]]\nid = 1\ndependency = 'afterany:8'\n", "job 1: dependency: job 8 is not replayed"),
        ("[[array]]\njobs = [1, 9]\nmax = 1\n", "array 1: jobs: job 9 is not replayed"),
        ("[[job]]\nid = 1\nhold_until = []\n", "hold_until: []"),
    ],
)
def test_gsim_refuses_a_bad_workload_in_one_line(write_trace, tmp_path, text, msg):
    wf = write_workload(tmp_path, text)
    for cmd in ("run", "compare"):
        r = CliRunner().invoke(gsim, [cmd, write_trace(DEPS), "--workload", wf])
        assert r.exit_code == 1
        assert r.stderr.startswith(f"gsim: error: workload {wf}: ") and msg in r.stderr
        assert len(r.stderr.splitlines()) == 1


def test_gsim_run_and_compare_with_dependencies(write_trace, tmp_path):
    trace = write_trace(DEPS)
    out = tmp_path / "jobs.csv"
    r = CliRunner().invoke(gsim, ["run", trace, "--policy", "easy", "--dependencies", "--json", "--jobs-out", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["wait_avg"] == pytest.approx(80 / 3)
    rows = {row["id"]: row for row in csv.DictReader(out.open())}
    assert (rows["2"]["start"], rows["2"]["eligible"], rows["2"]["wait"]) == ("130", "130", "0")
    r = CliRunner().invoke(gsim, ["compare", trace, "--policies", "easy,fcfs", "--dependencies", "--json"])
    assert r.exit_code == 0, r.output
    assert [x["wait_avg"] for x in json.loads(r.stdout)["results"]] == [pytest.approx(80 / 3)] * 2
    r = CliRunner().invoke(gsim, ["run", trace, "--policy", "easy", "--json"])  # off by default, with a note
    assert r.exit_code == 0 and "--dependencies replays them" in r.stderr
    assert json.loads(r.stdout)["wait_avg"] == pytest.approx((0 + 90 + 80) / 3)


# Placed reservations: two boards of four cores (0-3, 4-7).
TOPOLOGY = '[[board]]\ncores = "0-3"\n[[board]]\ncores = "4-7"\n'


@pytest.mark.parametrize("exclusive, start", [(True, 100.0), (False, 1.0)])
def test_a_reservation_with_an_exclusive_board_holds_the_whole_board(write_trace, tmp_path, exclusive, start):
    # R: 2 cores for 100 s from 0; with exclusive_board it holds a whole board, so a 6-core job waits for its end
    topo = tmp_path / "topology.toml"
    topo.write_text(TOPOLOGY)
    rf = tmp_path / "r.toml"
    rf.write_text(
        f"[[reservation]]\ncreate = 0\nncpus = 2\nduration = 100\nexclusive_board = {str(exclusive).lower()}\n"
    )
    trace = write_trace([swf_line(1, 1, 10, 6, 10)], max_procs=8)
    out = tmp_path / "jobs.csv"
    args = [
        "run",
        trace,
        "--policy",
        "easy",
        "--topology",
        str(topo),
        "--reservations",
        str(rf),
        "--jobs-out",
        str(out),
    ]
    r = CliRunner().invoke(gsim, args)
    assert r.exit_code == 0, r.output
    assert float(next(csv.DictReader(out.open()))["start"]) == start


def test_placement_fields_of_reservations(tmp_path):
    csv_file = tmp_path / "r.csv"
    csv_file.write_text("create,ncpus,duration,place,threads_per_core,exclusive_board\n0,2,60,board,1,yes\n0,2,60,,,\n")
    a, b = read_resv(str(csv_file)).reservations
    assert a.place is not None and (a.place.place, a.place.threads_per_core, a.place.exclusive_board) == (
        "board",
        1,
        True,
    )
    assert b == SimResv(0.0, 2, 60.0)


@pytest.mark.parametrize(
    "row, msg",
    [
        ("0,2,60,row,,", "place 'row': must be one of pack, spread, board"),
        ("0,2,60,,3,", "threads_per_core 3: must be 0, 1 or 2"),
        ("0,2,60,,,maybe", "exclusive_board 'maybe': must be true or false"),
    ],
)
def test_bad_placement_fields(tmp_path, row, msg):
    f = tmp_path / "r.csv"
    f.write_text(f"create,ncpus,duration,place,threads_per_core,exclusive_board\n{row}\n")
    with pytest.raises(ResvFileError, match=f"r.csv:2: {msg}"):
        read_resv(str(f))


def test_placed_reservations_need_a_topology_that_fits_them(write_trace, tmp_path):
    rf = tmp_path / "r.toml"
    rf.write_text('[[reservation]]\ncreate = 0\nncpus = 6\nduration = 100\nplace = "board"\n')
    trace = write_trace([swf_line(1, 1, 10, 2, 10)], max_procs=8)
    r = CliRunner().invoke(gsim, ["run", trace, "--reservations", str(rf)])
    assert r.exit_code == 1 and "reservation 1: place, threads_per_core and exclusive_board need --topology" in r.stderr
    topo = tmp_path / "topology.toml"
    topo.write_text(TOPOLOGY)
    r = CliRunner().invoke(gsim, ["run", trace, "--reservations", str(rf), "--topology", str(topo)])
    assert r.exit_code == 1 and f"reservations {rf}: reservation 1: " in r.stderr
