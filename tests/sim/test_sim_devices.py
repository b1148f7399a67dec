"""gsim with GPUs: the devices file, the simulated machine's GPUs, the replay through the core, the output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simtraces import swf_line

from gridsched.cli.gsim import main as gsim
from gridsched.core.devices import DeviceAsk
from gridsched.core.topology import Device
from gridsched.core.types import Params, Policy
from gridsched.sim.devices import DevicesError, JobDevices, attach, machine_devices, read_csv
from gridsched.sim.engine import Mode, SimulationError, simulate
from gridsched.sim.metrics import gpu_metrics
from gridsched.sim.swf import TOO_MANY_DEVICES, Trace
from gridsched.sim.swf import read as read_trace

TWO_GPUS = (Device("gpu", 0, 0), Device("gpu", 1, 0))

# 4 cores, 2 GPUs.  Job 1 takes both GPUs (and one core) over [0, 100).  Job 2 needs one GPU: it
# waits for job 1 whatever the free cores.  Job 3 needs no GPU: it runs beside job 1 at once (a
# backfill under easy: it ends at 30, before job 2's reservation at 100).  Job 4 (at 10) needs a GPU:
# none is free before 100, when jobs 2 and 4 take one each.  Job 5 (at 10) takes the last free core
# at once (it ends at 50 < 100).  FCFS starts nothing past job 2 until 100: then jobs 2, 3 and 4 fill
# the 4 cores, and job 5 waits for job 4 to end at 120.
HAND = [
    swf_line(1, 0, 100, 1, 100),
    swf_line(2, 0, 50, 1, 50),
    swf_line(3, 0, 30, 2, 30),
    swf_line(4, 10, 20, 1, 20),
    swf_line(5, 10, 40, 1, 40),
]
HAND_GPUS = "job,gpus\n1,2\n2,1\n4,1\n"
BACKFILL = [0.0, 100.0, 0.0, 100.0, 10.0]
EXPECTED = {
    Policy.FCFS: [0.0, 100.0, 100.0, 100.0, 120.0],
    Policy.EASY: BACKFILL,
    Policy.CONSERVATIVE: BACKFILL,
    Policy.CHECKPOINT_BACKFILL: BACKFILL,  # every walltime under the threshold: as easy
}


def hand_trace(write_trace, tmp_path: Path) -> Trace:
    tr = read_trace(write_trace(HAND))
    f = tmp_path / "gpus.csv"
    f.write_text(HAND_GPUS)
    problems, unknown = attach(tr, read_csv(str(f)), TWO_GPUS)
    assert problems == [] and unknown == 0
    return tr


@pytest.mark.parametrize("policy", list(Policy), ids=lambda p: p.value)
def test_gpu_jobs_wait_for_each_other_while_cpu_jobs_run_beside_them(write_trace, tmp_path, policy):
    tr = hand_trace(write_trace, tmp_path)
    res = simulate(tr, Params(policy=policy), devices=TWO_GPUS)
    assert res.start == EXPECTED[policy]
    assert res.gpus == [2, 1, 0, 1, 0]
    # without the devices, job 2 and job 4 would not wait
    plain = simulate(read_trace(write_trace(HAND)), Params(policy=policy))
    assert plain.start[1] < 100 and plain.start[3] < 100


@pytest.mark.parametrize("policy", list(Policy), ids=lambda p: p.value)
def test_on_a_machine_map_the_same_starts_and_each_job_its_own_gpus(write_trace, tmp_path, policy):
    topo = tmp_path / "topo.toml"
    topo.write_text(
        '[[board]]\ncores = "0-1"\n[[board]]\ncores = "2-3"\n'
        '[[device]]\ntype = "gpu"\nindex = 0\nboard = 0\n[[device]]\ntype = "gpu"\nindex = 1\nboard = 1\n'
    )
    from gridsched.host.topology import read as read_topology

    m = read_topology(topo, None)
    tr = hand_trace(write_trace, tmp_path)
    res = simulate(tr, Params(policy=policy), machine=m, devices=m.devices)
    assert res.start == EXPECTED[policy]


def test_gpu_utilization_and_the_gpus_column(write_trace, tmp_path):
    trace = write_trace(HAND)
    (tmp_path / "gpus.csv").write_text(HAND_GPUS)
    out = tmp_path / "jobs.csv"
    r = CliRunner().invoke(
        gsim,
        ["run", trace, "--devices", str(tmp_path / "gpus.csv"), "--gpus", "2", "--policy", "easy", "--json"]
        + ["--jobs-out", str(out)],
    )
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    # GPU-seconds: job 1 2 x 100, job 2 1 x 50, job 4 1 x 20 = 270, over 2 GPUs x a makespan of 150
    assert rec["gpus"] == 2 and rec["gpu_jobs"] == 3
    assert rec["gpu_hours"] == pytest.approx(270 / 3600)
    assert rec["gpu_utilization"] == pytest.approx(270 / 300)
    rows = {row["id"]: row for row in csv.DictReader(out.open())}
    assert {k: (v["start"], v["gpus"]) for k, v in rows.items()} == {
        "1": ("0", "2"),
        "2": ("100", "1"),
        "3": ("0", "0"),
        "4": ("100", "1"),
        "5": ("10", "0"),
    }
    # a machine without GPUs: no GPU keys in the summary
    r = CliRunner().invoke(gsim, ["run", trace, "--policy", "easy", "--json"])
    assert r.exit_code == 0 and "gpu_utilization" not in json.loads(r.stdout)


def test_the_workload_file_gives_gpus_too(write_trace, tmp_path):
    wl = tmp_path / "w.toml"
    wl.write_text('[[job]]\nid = 1\ngpus = 2\n[[job]]\nid = 2\ngpus = "1"\n[[job]]\nid = 4\ngres = "gpu:1"\n')
    r = CliRunner().invoke(
        gsim, ["run", write_trace(HAND), "--workload", str(wl), "--gpus", "2", "--policy", "easy", "--json"]
    )
    assert r.exit_code == 0, r.output
    out = tmp_path / "jobs.csv"
    r = CliRunner().invoke(
        gsim,
        ["run", write_trace(HAND), "--workload", str(wl), "--gpus", "2", "--policy", "fcfs", "--jobs-out", str(out)],
    )
    assert r.exit_code == 0, r.output
    assert [float(row["start"]) for row in csv.DictReader(out.open())] == EXPECTED[Policy.FCFS]
    (tmp_path / "d.csv").write_text("job,gpus\n1,1\n")
    r = CliRunner().invoke(
        gsim, ["run", write_trace(HAND), "--workload", str(wl), "--devices", str(tmp_path / "d.csv"), "--gpus", "2"]
    )
    assert r.exit_code == 1
    assert r.stderr == f"gsim: error: workload {wl}: job 1: job 1's devices are given in {tmp_path / 'd.csv'}:2 too\n"


def test_models_and_share(write_trace, tmp_path):
    # one H100 and one A100: two jobs asking for an H100 wait for each other, the A100 job does not
    tr = read_trace(
        write_trace([swf_line(1, 0, 100, 1, 100), swf_line(2, 0, 100, 1, 100), swf_line(3, 0, 100, 1, 100)])
    )
    devs = (Device("gpu", 0, 0, "H100"), Device("gpu", 1, 0, "A100"))
    jobs = [JobDevices(j, (DeviceAsk("gpu", 1, m),), f"f:{j}") for j, m in ((1, "H100"), (2, "H100"), (3, "A100"))]
    attach(tr, jobs, devs)
    assert simulate(tr, Params(policy=Policy.EASY), devices=devs).start == [0.0, 100.0, 0.0]
    # with a share of 2, the two H100 jobs run together
    shared = (Device("gpu", 0, 0, "H100", share=2), Device("gpu", 1, 0, "A100", share=2))
    assert simulate(tr, Params(policy=Policy.EASY), devices=shared).start == [0.0, 0.0, 0.0]
    cfg = tmp_path / "g.toml"
    cfg.write_text("[devices.gpu]\nshare = 2\n")
    (tmp_path / "d.csv").write_text("job,gpus\n1,1\n2,1\n3,1\n")
    out = tmp_path / "jobs.csv"
    args = ["run", write_trace([swf_line(j, 0, 100, 1, 100) for j in (1, 2, 3)]), "--devices", str(tmp_path / "d.csv")]
    args += ["--gpus", "1", "--policy", "easy", "--jobs-out", str(out)]
    assert CliRunner().invoke(gsim, args).exit_code == 0
    assert [row["start"] for row in csv.DictReader(out.open())] == ["0", "100", "200"]
    assert CliRunner().invoke(gsim, [*args, "--config", str(cfg)]).exit_code == 0
    assert [row["start"] for row in csv.DictReader(out.open())] == ["0", "0", "100"]


def test_a_backfilled_gpu_job_is_preempted_for_the_head(write_trace, tmp_path):
    # 2 cores, 1 GPU.  Job 1 holds a core until 100.  Job 2 (the head, at 1) needs both cores and the
    # GPU: its reservation is at 100.  Job 3 (at 2: 1 core and the GPU) is backfilled on its walltime
    # shortened to 0.01 x 3600 = 36 s (it would end at 38); at 100 it still holds the GPU and is
    # preempted for the head, which runs over [100, 200); job 3 restarts at 200 from its checkpoint.
    lines = [swf_line(1, 0, 100, 1, 100), swf_line(2, 1, 100, 2, 100), swf_line(3, 2, 300, 1, 3600)]
    tr = read_trace(write_trace(lines, max_procs=2))
    devs = (Device("gpu", 0, 0),)
    attach(tr, [JobDevices(2, (DeviceAsk("gpu", 1),), "f:2"), JobDevices(3, (DeviceAsk("gpu", 1),), "f:3")], devs)
    prm = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.01, threshold=60)
    res = simulate(tr, prm, devices=devs, overhead=0.0, mode=Mode.CHECKPOINT)
    assert res.start == [0.0, 100.0, 2.0]
    assert res.checkpoints == [0, 0, 1]
    assert res.runs(2) == [(2.0, 100.0), (200.0, 402.0)]  # 98 s done before, 202 s after


def test_a_job_the_core_starts_without_its_devices_is_an_error(write_trace, tmp_path):
    tr = hand_trace(write_trace, tmp_path)
    with pytest.raises(SimulationError, match="the machine has none"):
        simulate(tr, Params(policy=Policy.EASY))


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    n = draw(st.integers(1, 20))
    t = 0
    tr = Trace("<random>", 8, 8, None)
    for i in range(n):
        t += draw(st.sampled_from([0, 0, 1, 20, 300]))
        run = draw(st.sampled_from([0, 10, 100, 500, 4000]))
        wall = max(run, draw(st.sampled_from([1, 100, 1000, 5000])))  # walltime 0: see the xfail test below
        tr.ids.append(i + 1)
        tr.submit.append(float(t))
        tr.size.append(draw(st.integers(1, 8)))
        tr.walltime.append(float(wall))
        tr.run.append(float(run))
        tr.user.append("u")
    return tr


@pytest.mark.parametrize(
    "params",
    [
        Params(policy=Policy.FCFS),
        Params(policy=Policy.EASY),
        Params(policy=Policy.CONSERVATIVE),
        Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=600),
    ],
    ids=lambda p: p.policy.value,
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tr=traces())
def test_an_all_zero_devices_file_changes_nothing(tr: Trace, params: Params) -> None:
    plain = simulate(tr, params)
    jobs = [JobDevices(j, (), f"f:{k}") for k, j in enumerate(tr.ids, start=2)]
    problems, unknown = attach(tr, jobs, TWO_GPUS)
    assert problems == [] and unknown == 0 and tr.devices == {}
    zero = simulate(tr, params, devices=TWO_GPUS)  # the machine has GPUs, no job asks for one
    assert (zero.start, zero.end, zero.checkpoints, zero.segments) == (
        plain.start,
        plain.end,
        plain.checkpoints,
        plain.segments,
    )
    assert zero.gpus is None and gpu_metrics(zero) == {
        "gpus": 2,
        "gpu_jobs": 0,
        "gpu_hours": 0.0,
        "gpu_utilization": 0.0,
    }


def test_a_head_job_of_walltime_0_is_not_delayed_by_the_devices_of_the_machine() -> None:
    # 8 cores: job 1 holds 5 until 4000; job 2 (7 cores, walltime 0) is the head, due at 4000; job 3
    # (1 core) and job 4 (2 cores) would both run past 4000: only one core is left over for them then
    tr = Trace("<hand>", 8, 8, None)
    for k, (sub, n, wall) in enumerate([(0, 5, 4000), (0, 7, 0), (10, 1, 4000), (10, 2, 4000)], start=1):
        tr.ids.append(k)
        tr.submit.append(float(sub))
        tr.size.append(n)
        tr.walltime.append(float(wall))
        tr.run.append(float(wall))
        tr.user.append("u")
    easy = Params(policy=Policy.EASY)
    assert simulate(tr, easy).start == [0.0, 4000.0, 10.0, 4000.0]
    assert simulate(tr, easy, devices=TWO_GPUS).start == [0.0, 4000.0, 10.0, 4000.0]


def test_an_all_zero_devices_file_on_the_command_line(write_trace, tmp_path):
    trace = write_trace(HAND)
    (tmp_path / "zero.csv").write_text("job,gpus\n" + "".join(f"{j},0\n" for j in range(1, 6)))
    outs = []
    for extra in ([], ["--devices", str(tmp_path / "zero.csv"), "--gpus", "2"]):
        r = CliRunner().invoke(gsim, ["run", trace, "--policy", "easy", "--json", *extra])
        assert r.exit_code == 0, r.output
        rec = json.loads(r.stdout)
        outs.append({k: rec[k] for k in ("makespan", "wait_avg", "bsld_avg", "utilization", "jobs")})
    assert outs[0] == outs[1]


# -- bad input -------------------------------------------------------------------------------------


def invoke(write_trace, tmp_path, text: str, *args: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "d.csv"
    f.write_text(text)
    return CliRunner().invoke(gsim, ["run", write_trace(HAND), "--devices", str(f), "--policy", "easy", *args]), f


@pytest.mark.parametrize(
    "text, msg",
    [
        ("job,gpus\n1,1\n2,-1\n", "d.csv:3: gpus: '-1': must be a whole number of zero or more"),
        ("job,gpus\n1,1.5\n", "d.csv:2: gpus: '1.5': must be a whole number of zero or more"),
        ("job,gpus\n1,two\n", "d.csv:2: gpus: 'two': must be a whole number of zero or more"),
        ("# a comment\n\njob,gpus\n1,\n", "d.csv:4: gpus: '': must be a whole number of zero or more"),
        ("job,gpus\nx,1\n", "d.csv:2: job 'x': expected an SWF job number (1 or more)"),
        ("job,gpus\n1,1\n1,2\n", "d.csv:3: job 1 is already given at"),
        ("job,gpus\n1,1,3\n", "d.csv:2: 3 fields, the header names 2"),
        ("job,count\n1,1\n", "d.csv:1: unknown column 'count'"),
        ("job\n1\n", "d.csv:1: no 'gpus' column"),
        ("", "d.csv: empty: expected a header line such as job,gpus"),
        ("job,gpus,model\n1,1,bad model\n", "d.csv:2: model 'bad model': not a model name"),
    ],
)
def test_a_bad_devices_file_is_one_line_naming_file_and_line(write_trace, tmp_path, text, msg):
    r, f = invoke(write_trace, tmp_path, text, "--gpus", "2")
    assert r.exit_code == 1, r.output
    assert r.stderr.startswith("gsim: error: devices ") and r.stderr.count("\n") == 1, r.stderr
    assert msg in r.stderr and str(f) in r.stderr


def test_an_unknown_job_is_warned_and_the_replay_goes_on(write_trace, tmp_path):
    r, f = invoke(write_trace, tmp_path, "job,gpus\n1,2\n99,1\n98,1\n", "--gpus", "2", "--json")
    assert r.exit_code == 0, r.output
    assert r.stderr == (
        f"gsim: warning: {f}:3: job 99 is not replayed (not in the trace, skipped, or beyond --limit); "
        "its devices are ignored (and 1 more)\n"
    )
    assert json.loads(r.stdout)["jobs"] == 5


def test_a_job_asking_for_more_gpus_than_the_machine_has_is_skipped_and_reported(write_trace, tmp_path):
    r, f = invoke(write_trace, tmp_path, "job,gpus\n1,3\n2,1\n", "--gpus", "2", "--json")
    assert r.exit_code == 0, r.output
    assert r.stderr == f"gsim: warning: {f}:2: job 1 asks for 3 gpu: the machine has 2 GPUs\n"
    rec = json.loads(r.stdout)
    assert rec["jobs"] == 4 and rec["skipped_by"] == {TOO_MANY_DEVICES: 1}
    r, f = invoke(write_trace, tmp_path, "job,gpus\n1,3\n", "--gpus", "2", "--strict")
    assert (
        r.exit_code == 1 and r.stderr == f"gsim: error: devices {f}:2: job 1 asks for 3 gpu: the machine has 2 GPUs\n"
    )
    r, f = invoke(write_trace, tmp_path, "job,gpus,model\n1,1,V100\n", "--gpus", "H100:2")
    assert r.exit_code == 0 and "job 1 asks for 1 gpu of model V100: the machine has no gpu of model V100" in r.stderr


def test_gpus_asked_on_a_machine_without_any_is_an_error(write_trace, tmp_path):
    r, f = invoke(write_trace, tmp_path, "job,gpus\n1,1\n")
    assert r.exit_code == 1
    assert r.stderr == (
        f"gsim: error: devices {f}:2: job 1 asks for devices, and the machine has none "
        "(give --gpus N, or a --topology with [[device]] tables)\n"
    )


@pytest.mark.parametrize("gpus", ["0", "-2", "x", "a b:1"])
def test_a_bad_gpus_option_is_a_usage_error(write_trace, gpus):
    r = CliRunner().invoke(gsim, ["run", write_trace(HAND), "--gpus", gpus])
    assert r.exit_code == 2 and r.stderr.startswith(f"gsim: error: --gpus {gpus}: ") and r.stderr.count("\n") == 1


def test_gpus_and_a_topology_with_devices_exclude_each_other(write_trace, tmp_path):
    topo = tmp_path / "topo.toml"
    topo.write_text('[[board]]\ncores = "0-3"\n[[device]]\ntype = "gpu"\nindex = 0\nboard = 0\n')
    r = CliRunner().invoke(gsim, ["run", write_trace(HAND), "--topology", str(topo), "--gpus", "2"])
    assert r.exit_code == 2 and r.stderr == "gsim: error: --gpus: the --topology file declares devices already\n"


@pytest.mark.parametrize(
    "text, msg",
    [
        ("gpus = -1", "gpus -1: must be a whole number of zero or more"),
        ("gpus = 1.5", 'gpus 1.5: expected 2 or "H100:2"'),
        ('gres = "gpu:x y:1"', "gres gpu:x y:1: 'x y' is not a model name"),
        ('gpus = 1\ngres = "gpu:1"', "gpu devices are already asked for"),
    ],
)
def test_bad_gpus_in_the_workload_file(write_trace, tmp_path, text, msg):
    wl = tmp_path / "w.toml"
    wl.write_text(f"[[job]]\nid = 1\n{text}\n")
    r = CliRunner().invoke(gsim, ["run", write_trace(HAND), "--workload", str(wl), "--gpus", "2"])
    assert r.exit_code == 1 and r.stderr.startswith(f"gsim: error: workload {wl}: job 1: "), r.stderr
    assert msg in r.stderr and r.stderr.count("\n") == 1


def test_compare_and_tune_take_the_devices(write_trace, tmp_path):
    trace = write_trace(HAND)
    (tmp_path / "gpus.csv").write_text(HAND_GPUS)
    dev = ["--devices", str(tmp_path / "gpus.csv"), "--gpus", "2"]
    r = CliRunner().invoke(gsim, ["compare", trace, "--policies", "fcfs,easy", "--json", *dev])
    assert r.exit_code == 0, r.output
    res = {x["policy"]: x for x in json.loads(r.stdout)["results"]}
    assert res["easy"]["gpu_utilization"] == pytest.approx(0.9)
    # fcfs: job 5 starts at 120 and ends at 160: 270 GPU-seconds over 2 x 160
    assert res["fcfs"]["gpu_utilization"] == pytest.approx(270 / 320)
    r = CliRunner().invoke(gsim, ["tune", trace, "--p", "0.2", "--threshold", "10m", "--json", *dev])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["results"][0]["gpu_utilization"] == pytest.approx(0.9)


def test_machine_devices_spread_over_the_boards(tmp_path):
    assert [d.board for d in machine_devices("3", None)] == [0, 0, 0]
    topo = tmp_path / "topo.toml"
    topo.write_text('[[board]]\ncores = "0-1"\n[[board]]\ncores = "2-3"\n')
    from gridsched.host.topology import read as read_topology

    m = read_topology(topo, None)
    devs = machine_devices("H100:4", m)
    assert [(d.index, d.board, d.model) for d in devs] == [
        (0, 0, "H100"),
        (1, 0, "H100"),
        (2, 1, "H100"),
        (3, 1, "H100"),
    ]
    with pytest.raises(DevicesError):
        machine_devices("0", m)


# A Slurm history whose jobs held GPUs (AllocTRES gres/gpu), on a 4-CPU cluster with 1 GPU: jobs 1 and
# 2 each held the GPU, so on one GPU job 2 waits for job 1; job 3 (no GPU) runs beside them.
SACCT = """JobID|Submit|Start|End|Elapsed|Timelimit|AllocCPUS|ReqCPUS|ReqMem|User|State|AllocTRES
11|2026-11-02T09:00:00|2026-11-02T09:00:00|2026-11-02T09:10:00|00:10:00|00:10:00|1|1|1G|a|COMPLETED|billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1G,node=1
12|2026-11-02T09:00:00|2026-11-02T09:00:00|2026-11-02T09:05:00|00:05:00|00:05:00|1|1|1G|a|COMPLETED|cpu=1,gres/gpu=1,node=1
13|2026-11-02T09:00:00|2026-11-02T09:00:00|2026-11-02T09:05:00|00:05:00|00:05:00|2|2|1G|a|COMPLETED|cpu=2,node=1
"""


def test_a_slurm_historys_gpus_are_replayed_on_a_machine_with_gpus(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(SACCT)
    out = tmp_path / "jobs.csv"
    base = ["run", "--slurm-sacct", str(path), "--procs", "4", "--policy", "easy", "--jobs-out", str(out)]
    r = CliRunner().invoke(gsim, [*base, "--gpus", "1"])
    assert r.exit_code == 0, r.output
    assert [(row["start"], row["gpus"]) for row in csv.DictReader(out.open())] == [("0", "1"), ("600", "1"), ("0", "0")]
    # without GPUs on the machine: a note, and the history replayed on its CPUs alone
    r = CliRunner().invoke(gsim, base)
    assert r.exit_code == 0, r.output
    assert r.stderr == "gsim: note: 2 jobs of the history held GPUs (AllocTRES); --gpus N replays them\n"
    assert [(row["start"], row["gpus"]) for row in csv.DictReader(out.open())] == [("0", "0"), ("0", "0"), ("0", "0")]
