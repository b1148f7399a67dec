"""GPUs in the real daemon: a declared machine of 8 cores on 2 boards with 4 GPUs (2 per board).

Jobs print their environment; each sees only its own devices, placed beside its cores.  The scheduling of
GPUs (cores on a GPU's board, #SBATCH --gres and #PBS ngpus, shared GPUs, a reservation holding GPUs, a
yielding parent lending its GPU, bad device requests refused by gsub) is tested in process, on a driven
clock, in test_devices_driven.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from gridsched.protocol import requests as rq
from tests.conftest import wait_for
from tests.fuzz.test_requests import valid_job

ROOT = Path(__file__).resolve().parents[2]
HOST = sorted(os.sched_getaffinity(0))
BOARD_CPU = {0: HOST[0], 1: HOST[-1]}
WAIT_GO = "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
REPORT = (
    'echo "CUDA=$CUDA_VISIBLE_DEVICES ROCR=$ROCR_VISIBLE_DEVICES GS_GPUS=$GS_GPUS '
    'SLURM_JOB_GPUS=$SLURM_JOB_GPUS CORES=$GS_CORES" > env.$GS_JOBID; '
)


def topo_config(root, gpus: int = 4, share: int = 1, policy: str = "easy") -> str:
    topo = root / "topology.toml"
    text = (
        f'[[board]]\ncores = "0-3"\nhost_cpus = "{BOARD_CPU[0]}"\n'
        f'[[board]]\ncores = "4-7"\nhost_cpus = "{BOARD_CPU[1]}"\n'
    )
    for i in range(gpus):
        text += f'[[device]]\ntype = "gpu"\nindex = {i}\nboard = {i * 2 // gpus}\nmodel = "H100"\n'
    topo.write_text(text)
    return f"""
[scheduler]
policy = "{policy}"
[jobs]
kill_grace = "1s"
checkpoint_grace = "5s"
[machine]
topology = "{topo}"
[daemon]
autostart = false
[devices.gpu]
share = {share}
"""


def env_of(gs, jid: int) -> dict[str, str]:
    path = gs.work / f"env.{jid}"
    wait_for(path.exists, 20, f"job {jid} to write its environment")
    text = wait_for(lambda: path.read_text().strip() or None, 10, f"job {jid}'s environment")
    return dict(kv.split("=", 1) for kv in text.split())


def gpus_of(env: dict[str, str]) -> set[int]:
    return {int(x) for x in env["GS_GPUS"].split(",") if x}


def board_of_gpu(i: int, gpus: int = 4) -> int:
    return i * 2 // gpus


@pytest.fixture
def gpu_gs(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root))
    gs.start()
    return gs


def test_two_gpu_jobs_run_on_disjoint_gpus_the_third_waits_a_cpu_job_does_not(gpu_gs):
    gs = gpu_gs
    ids = [gs.gsub("--gpus", "2", "--wrap", REPORT + WAIT_GO) for _ in range(3)]
    for jid in ids[:2]:
        gs.wait_state(jid, "RUNNING")
    cpu = gs.gsub("--wrap", REPORT)
    gs.wait_state(cpu, "COMPLETED")
    assert gs.job(ids[2])["state"] == "PENDING"
    e1, e2 = env_of(gs, ids[0]), env_of(gs, ids[1])
    g1, g2 = gpus_of(e1), gpus_of(e2)
    assert len(g1) == len(g2) == 2 and not g1 & g2
    for e in (e1, e2):
        assert e["CUDA"] == e["ROCR"] == e["GS_GPUS"] == e["SLURM_JOB_GPUS"]
    assert env_of(gs, cpu)["CUDA"] == ""  # a job without devices is told of none
    (gs.work / "go").touch()
    gs.wait_state(ids[2], "COMPLETED")
    assert len(gpus_of(env_of(gs, ids[2]))) == 2
    row = gs.job(ids[0])
    assert row.get("devices") == "gpu:" + ",".join(map(str, sorted(g1)))


def test_bad_device_requests_written_directly_are_refused_with_the_same_words(stub_daemon, tmp_path):
    d = stub_daemon(topo_config(tmp_path, policy="fcfs"))

    def submit(devices: object) -> int:
        nid = d.id_high + 1
        req = {"type": "submit", "job": {**valid_job(nid), "devices": devices}}
        (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps(req))
        d.ingest()
        return nid

    gpus = {"type": "gpu", "count": 5, "model": "", "bind": "closest", "exclusive": False}
    nid = submit([gpus])
    assert d.db.job(nid)["reason"] == "can never run: --gpus 5: the machine has 4 GPUs"
    for bad, why in (
        ([{**gpus, "count": 0}], "--gpus 0: at least 1 device is needed"),
        ([{**gpus, "count": 1, "per_task": 1}], "--gpus-per-task 1: needs a task count (--ntasks)"),
        ([{**gpus, "bind": "near"}], "--gpu-bind near: must be one of closest, strict, none"),
        ([{**gpus, "type": "GPU;rm"}], "is not a device type"),
        ("gpu:2", "must be a list"),
    ):
        nid = submit(bad)
        rec = d.db.id_record(nid)
        assert rec is not None and why in (rec["refused"] or ""), (bad, rec)
        assert d.db.job(nid) is None
    ok = submit([{**gpus, "count": 2}])
    assert d.db.job(ok)["state"] == "PENDING"


def test_a_backfilled_gpu_job_is_preempted_for_the_head_and_finishes_its_work_once(make_gs):
    gs = make_gs(start=False)
    cfg = topo_config(gs.root, gpus=1, policy="checkpoint-backfill")
    gs.cfgfile.write_text(
        cfg.replace('policy = "checkpoint-backfill"', 'policy = "checkpoint-backfill"\np = 0.001\nthreshold = 1')
    )
    gs.start()
    counter = ROOT / "scripts" / "examples" / "checkpoint_counter.sh"
    # a job holds the cores the head needs for a few seconds; the head needs every core and the one GPU
    blocker = gs.gsub("-n", "7", "-t", "10m", "--wrap", "sleep 3")
    gs.wait_state(blocker, "RUNNING")
    head = gs.gsub("-n", "8", "-t", "10m", "--gpus", "1", "--wrap", REPORT)
    # backfilled on its shortened estimate (1h * p = 3.6 s): it holds a core and the GPU past it
    bf = gs.gsub(
        "-n", "1", "-t", "1h", "--gpus", "1", "--checkpoint", "signal", "--wrap", f"{REPORT} exec sh {counter} 30"
    )
    gs.wait_state(bf, "RUNNING")
    assert gs.job(head)["state"] == "PENDING"
    gs.wait_state(head, "RUNNING", "COMPLETED", timeout=60)
    gs.wait_state(bf, "COMPLETED", timeout=90)
    assert gs.job(bf)["preemptions"] >= 1
    units = (gs.work / "units.log").read_text().split("\n")
    assert [u for u in units if u] == [f"unit {i}" for i in range(1, 31)]  # every unit of work done once
    assert gpus_of(env_of(gs, head)) == {0} and gpus_of(env_of(gs, bf)) == {0}


def test_nvidia_smi_sees_each_jobs_own_gpu(make_gs):
    smi = shutil.which("nvidia-smi")
    ok = False
    if smi:
        try:
            ok = subprocess.run([smi, "-L"], capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
    if not ok:
        pytest.skip("no NVIDIA GPU: nvidia-smi does not answer")
    gs = make_gs(start=False)
    gs.cfgfile.write_text('[scheduler]\npolicy = "easy"\n[daemon]\nautostart = false\n')
    gs.start()
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout
    if listed.count("UUID") < 2:
        pytest.skip("fewer than two NVIDIA GPUs")
    ids = [
        gs.gsub("--gpus", "1", "--wrap", 'echo "$CUDA_VISIBLE_DEVICES" > uuid.$GS_JOBID; ' + WAIT_GO) for _ in range(2)
    ]
    for jid in ids:
        gs.wait_state(jid, "RUNNING")
    seen = [
        wait_for(lambda j=jid: (gs.work / f"uuid.{j}").exists() and (gs.work / f"uuid.{j}").read_text().strip(), 20)
        for jid in ids
    ]
    (gs.work / "go").touch()
    assert seen[0] != seen[1] and all(u in listed for u in seen)


def test_a_running_jobs_gpus_are_recovered_after_kill_9(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root, gpus=2))
    gs.start()
    a = gs.gsub("--gpus", "1", "--wrap", REPORT + WAIT_GO)
    gs.wait_state(a, "RUNNING")
    ga = gpus_of(env_of(gs, a))
    gs.kill9()
    gs.start()
    b = gs.gsub("--gpus", "1", "--wrap", REPORT + WAIT_GO)
    c = gs.gsub("--gpus", "1", "--wrap", REPORT)
    gs.wait_state(b, "RUNNING")
    assert gpus_of(env_of(gs, b)) == {0, 1} - ga  # job a still holds its GPU
    assert gs.job(a)["state"] == "RUNNING" and gs.job(a)["devices"] == f"gpu:{min(ga)}"
    assert gs.job(c)["state"] == "PENDING"
    (gs.work / "go").touch()
    gs.wait_state(c, "COMPLETED")


def test_an_older_job_table_gets_the_devices_column(tmp_path):
    from gridsched.protocol import state
    from gridsched.protocol.state import COLUMNS, StateDB

    path = tmp_path / "state.db"
    con = sqlite3.connect(path)
    con.executescript(state.SCHEMA)  # the jobs table as an older version made it
    row = {c: 0 for c in COLUMNS}
    row.update(state="COMPLETED", user="u", name="n", cores="0", segments="[]", run="{}", spec="{}")
    con.execute(
        f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", [row[c] for c in COLUMNS]
    )
    con.commit()
    con.close()
    ro = StateDB(path)
    assert ro.jobs()[0]["devices"] == ""  # read before any daemon added the column
    ro.close()
    db = StateDB(path, write=True)
    db.begin()
    db.update(0, devices="gpu:1")
    assert db.commit()
    assert db.jobs()[0]["devices"] == "gpu:1"
    db.close()


def test_views_show_each_jobs_devices(gpu_gs):
    gs = gpu_gs
    jid = gs.gsub("--gpus", "H100:1", "--exclusive-gpu", "--wrap", REPORT + WAIT_GO)
    gs.wait_state(jid, "RUNNING")
    (g,) = gpus_of(env_of(gs, jid))
    topo = gs.run("gctl", "topology", check=True).stdout
    assert f"gpu {g} (H100): job {jid}" in topo, topo
    assert topo.count("(H100): free") == 3
    data = json.loads(gs.run("gctl", "topology", "--json", check=True).stdout)
    on_board = data["boards"][board_of_gpu(g)]["devices"]
    assert [d["jobs"] for d in on_board if d["index"] == g] == [[jid]]
    full = gs.run("gstat", "-f", str(jid), check=True).stdout
    assert f"gpu {g} (H100)" in full and "--gpus H100:1 (exclusive)" in full, full
    table = gs.run("gstat", check=True).stdout
    assert f"gpu:{g}" in table
    info = gs.run("gctl", "info", check=True).stdout
    assert "devices:        4 gpu (H100) (from: declared in " in info, info
    (gs.work / "go").touch()
    gs.wait_state(jid, "COMPLETED")
    acct = json.loads(gs.run("gacct", "--json", check=True).stdout)
    assert [j["devices"] for j in acct["jobs"] if j["id"] == jid] == [f"gpu:{g}"]
    segs = gs.run("gstat", "-f", str(jid), check=True).stdout
    assert f"with gpu:{g}" in segs


def test_array_tasks_each_get_their_own_gpus(gpu_gs):
    gs = gpu_gs
    arr = gs.gsub("--array", "0-2", "--gpus", "2", "--wrap", 'echo "$GS_GPUS" > g.$GS_ARRAY_TASK_ID; ' + WAIT_GO)
    files = [gs.work / f"g.{i}" for i in range(3)]
    wait_for(lambda: sum(f.exists() and bool(f.read_text().strip()) for f in files) == 2, 20, "two tasks to run")
    seen = [set(f.read_text().split(",")) for f in files if f.exists() and f.read_text().strip()]
    assert len(seen) == 2 and all(len(s) == 2 for s in seen) and not seen[0] & seen[1]
    (gs.work / "go").touch()
    wait_for(lambda: all(f.exists() for f in files), 30, "the third task to run")
    gs.wait_state(arr, "COMPLETED")


def test_the_python_client_asks_for_gpus(gpu_gs, tmp_path, monkeypatch):
    from gridsched.api.client import Client, GridschedError

    monkeypatch.chdir(gpu_gs.work)
    c = Client(spool=gpu_gs.spool, config=str(gpu_gs.cfgfile))
    j = c.submit(command=REPORT, gpus="H100:2", walltime="1m")
    done = c.wait(j.id, timeout=30)
    assert done.state == "COMPLETED" and len(done.devices.split(":")[1].split(",")) == 2
    assert len(gpus_of(env_of(gpu_gs, j.id))) == 2
    with pytest.raises(GridschedError, match="--gpus 9: the machine has 4 GPUs"):
        c.submit(command="true", gpus=9)


def test_a_suspended_gpu_job_keeps_its_gpu_and_is_continued_on_it(make_gs):
    gs = make_gs(start=False)
    cfg = topo_config(gs.root, gpus=1, policy="checkpoint-backfill")
    gs.cfgfile.write_text(
        cfg.replace('policy = "checkpoint-backfill"', 'policy = "checkpoint-backfill"\np = 0.001\nthreshold = 1')
    )
    gs.start()
    wait_head = "i=0; while [ ! -e go_head ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
    blocker = gs.gsub("-n", "7", "-t", "10m", "--wrap", "sleep 3")
    gs.wait_state(blocker, "RUNNING")
    head = gs.gsub("-n", "8", "-t", "10m", "--wrap", wait_head)  # cores only
    # backfilled on its shortened estimate; suspended (not ended) when the head's time comes
    bf = gs.gsub(
        "-n", "1", "-t", "1h", "--gpus", "1", "--checkpoint", "suspend", "--nice", "100", "--wrap", REPORT + WAIT_GO
    )
    gs.wait_state(bf, "RUNNING")
    # a GPU job of higher priority than the suspended one will be: it waits for the GPU
    other = gs.gsub("-n", "1", "-t", "1m", "--gpus", "1", "--wrap", REPORT)
    gs.wait_state(bf, "SUSPENDED", timeout=60)
    gs.wait_state(head, "RUNNING")
    (gs.work / "go_head").touch()
    gs.wait_state(head, "COMPLETED")
    # the GPU stayed the suspended job's: it is continued on it, the other job still waits
    gs.wait_state(bf, "RUNNING", timeout=30)
    assert gs.job(other)["state"] == "PENDING", gs.job(other)
    assert gs.job(bf).get("devices") == "gpu:0"
    (gs.work / "go").touch()
    gs.wait_state(bf, "COMPLETED")
    gs.wait_state(other, "COMPLETED")
    assert gpus_of(env_of(gs, bf)) == gpus_of(env_of(gs, other)) == {0}
