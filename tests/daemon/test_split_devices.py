"""Splittable jobs whose sub-tasks ask for GPUs (gsub --split N --gpus-per-task G) in the real daemon.

The machine is declared: 8 cores on 2 boards with 2 GPUs, one per board.  Each sub-task records
the GPUs it is told of and when it ran.  gsub refusing --gpus-per-task with a split file or beyond the
machine is tested in process in test_devices_driven.py.
"""

from __future__ import annotations

import json
import sys

import pytest

from gridsched.protocol import requests as rq
from tests.conftest import wait_for
from tests.daemon.test_devices import topo_config
from tests.fuzz.test_requests import SENDER, valid_job

# one line per sub-task at its start and one at its end: what it sees, and its time
RECORDER = """#!/bin/sh
echo "start $GS_TASK_ID $(date +%s.%N) CUDA=$CUDA_VISIBLE_DEVICES GS_GPUS=$GS_GPUS \
NCPUS=$GS_NCPUS CORES=$GS_CORES JOB=$GS_JOBID" >> {log}
sleep {sleep}
echo "end $GS_TASK_ID $(date +%s.%N)" >> {log}
"""


def jobs(gs) -> list[dict]:
    return json.loads(gs.run("gstat", "-a", "--json", check=True).stdout)["jobs"]


def read_log(path) -> tuple[dict[int, tuple[float, dict[str, str]]], dict[int, float]]:
    starts: dict[int, tuple[float, dict[str, str]]] = {}
    ends: dict[int, float] = {}
    for line in path.read_text().splitlines():
        what, tid, when, *rest = line.split()
        i = int(tid)
        if what == "start":
            assert i not in starts, f"sub-task {i} started twice:\n{path.read_text()}"
            starts[i] = (float(when), dict(kv.split("=", 1) for kv in rest))
        else:
            assert i not in ends, f"sub-task {i} ended twice"
            ends[i] = float(when)
    return starts, ends


def test_four_one_gpu_sub_tasks_on_two_gpus_run_two_at_a_time_each_on_its_own_gpu(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root, gpus=2))
    gs.start()
    log = gs.work / "log"
    script = gs.work / "task.sh"
    script.write_text(RECORDER.format(log=log, sleep=2))
    jid = gs.gsub("--split", "4", "--task-time", "60", "--gpus-per-task", "1", str(script))
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=60)
    assert job["state"] == "COMPLETED", gs.log()
    assert job["ncpus"] == 2  # one wave: as many sub-tasks as the GPUs hold, not the 8 cores
    assert job["walltime"] == 120  # by default the waves it needs: two of 60 s
    starts, ends = read_log(log)
    assert sorted(starts) == sorted(ends) == [0, 1, 2, 3]
    for i, (_, env) in starts.items():  # one GPU each, told of it the same way as a whole job
        assert env["GS_GPUS"] in ("0", "1"), (i, env)
        assert env["CUDA"] == env["GS_GPUS"]
        assert env["NCPUS"] == "1"
        assert int(env["CORES"]) // 4 == int(env["GS_GPUS"])  # on its GPU's board (GPU i hangs on board i)
    # never more than two at once; those running at once see different GPUs; two did run at once
    spans = {i: (starts[i][0], ends[i]) for i in starts}
    overlapped = 0
    for i in spans:
        at_once = [k for k in spans if spans[k][0] <= spans[i][0] < spans[k][1]]
        assert len(at_once) <= 2, spans
        for k in at_once:
            if k != i:
                overlapped += 1
                assert starts[k][1]["GS_GPUS"] != starts[i][1]["GS_GPUS"], (starts, spans)
    assert overlapped >= 1, spans
    # each chain ran as a piece of its own, holding its one GPU (the job table's devices column)
    pieces = {j["id"]: j for j in jobs(gs) if (j.get("split") or {}).get("of") == jid}
    runners = {int(starts[i][1]["JOB"]) for i in starts}
    assert jid not in runners  # the job never ran whole
    assert len(runners) == 2 and runners == set(pieces), (starts, pieces)
    assert {p["devices"] for p in pieces.values()} == {"gpu:0", "gpu:1"}
    assert all(p["state"] == "COMPLETED" and p["ncpus"] == 1 for p in pieces.values())
    for p in pieces.values():  # a piece runs the sub-tasks of its chain, on its GPU
        assert {starts[i][1]["GS_GPUS"] for i in p["split"]["tasks"]} == {p["devices"].removeprefix("gpu:")}


def test_each_sub_task_can_open_only_its_own_gpu_where_isolation_is_on(make_gs, tmp_path):
    from tests.daemon.test_device_isolation import OPENER, config, job_cgroups, make_nodes, need_controller

    c = need_controller()
    before = job_cgroups(c)
    nodes_dir = tmp_path / "dev"
    nodes_dir.mkdir(mode=0o755)
    paths = make_nodes(nodes_dir)
    gs = make_gs(start=False)
    gs.cfgfile.write_text(config(gs.root, paths))
    gs.start()
    script = gs.work / "open.py"
    script.write_text(OPENER.format(python=sys.executable, paths=paths).replace('"GS_JOBID"', '"GS_TASK_ID"'))
    script.chmod(0o755)
    jid = gs.gsub("--split", "4", "--task-time", "30", "--gpus-per-task", "1", str(script))
    job = gs.wait_state(jid, "COMPLETED", "FAILED", timeout=60)
    assert job["state"] == "COMPLETED", gs.log()
    seen = set()
    for i in range(4):
        text = (gs.work / f"open.{i}").read_text().strip()
        gpus, _, errs = text.rpartition(" ")
        (mine,) = {int(g) for g in gpus.split(",")}
        assert errs.split(",")[mine] == "ENXIO", text  # its own GPU: the driver (absent here) answers
        assert errs.split(",")[1 - mine] == "EPERM", text  # the other sub-task's GPU is refused
        seen.add(mine)
    assert seen == {0, 1}
    wait_for(lambda: job_cgroups(c) == before, 10, "the pieces' cgroups to be removed")


def _submit(job: dict) -> rq.Request:
    return rq.parse({"type": "submit", "job": job}, rq.id_name(1), SENDER)


def test_the_request_boundary_takes_each_sub_tasks_devices_and_refuses_what_gsub_refuses():
    job = valid_job()
    job.update(ncpus=2, walltime=120)
    gpu = {"type": "gpu", "count": 1, "model": "", "bind": "closest", "exclusive": False}
    job["split"] = {"n": 4, "ncpus": 1, "task_time": 60, "devices": [gpu]}
    req = _submit(job)
    assert isinstance(req, rq.Submit) and req.job.split is not None
    assert [a.count for a in req.job.split.devices] == [1]
    assert req.job.to_spec()["split"]["devices"] == [gpu]  # stored as it came
    with_file = json.loads(json.dumps(job))
    with_file["split"].update(n=1, tasks=[[1, 60, []]])
    for bad, why in (
        (with_file, "--gpus-per-task goes with --split, not --split-file"),
        ({**job, "devices": [gpu]}, "exclude devices for the whole job"),
        ({**job, "split": {**job["split"], "devices": [{**gpu, "count": 0}]}}, "at least 1 device"),
        ({**job, "split": {**job["split"], "devices": "gpu"}}, "device requests"),
    ):
        with pytest.raises(rq.Refused, match=why) as e:
            _submit(bad)
        assert "\n" not in str(e.value)


def test_pieces_holding_gpus_are_found_again_after_kill_9_and_every_sub_task_runs_once(make_gs):
    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root, gpus=2))
    gs.start()
    log = gs.work / "log"
    script = gs.work / "task.sh"
    wait_go = "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
    script.write_text(RECORDER.format(log=log, sleep=0.1).replace("sleep 0.1\n", wait_go + "\n"))
    jid = gs.gsub("--split", "4", "--task-time", "60", "--gpus-per-task", "1", str(script))
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 2, 20, "two sub-tasks to start")
    running = [j for j in jobs(gs) if (j.get("split") or {}).get("of") == jid]
    assert len(running) == 2 and {j["devices"] for j in running} == {"gpu:0", "gpu:1"}
    gs.kill9()
    gs.start()
    for j in running:  # found again, holding their GPUs
        row = gs.job(j["id"])
        assert row["state"] == "RUNNING" and row["devices"] == j["devices"], row
    (gs.work / "go").touch()
    assert gs.wait_state(jid, "COMPLETED", "FAILED", timeout=60)["state"] == "COMPLETED", gs.log()
    starts, ends = read_log(log)  # read_log refuses a sub-task started twice
    assert sorted(starts) == sorted(ends) == [0, 1, 2, 3]
