"""GPU scheduling in the daemon, in process (stub executor, driven clock; the commands in process on its
spool), on the declared machine of test_devices.py: 8 cores on 2 boards with GPUs on them.  What a job is
told of its devices is the environment of its launch.

Jobs seeing their own devices as real processes, and a suspended GPU job continued on its GPU, are tested in
test_devices.py."""

from __future__ import annotations

from gridsched.core import cpuset
from tests.daemon.driven import Driven
from tests.daemon.test_devices import board_of_gpu, topo_config


def env_of(dr: Driven, jid: int) -> dict[str, str]:
    """The environment of the job's last launch."""
    return dict([s for s in dr.d.ex.started if s.job_id == jid][-1].env)


def gpus_of(env: dict[str, str]) -> set[int]:
    return {int(x) for x in env["GS_GPUS"].split(",") if x}


def test_a_one_gpu_job_gets_its_cores_on_its_gpus_board(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path)))
    jid = dr.gsub("--gpus", "1", "-n", "2", "--wrap", "true")
    assert dr.state(jid) == "COMPLETED"
    e = env_of(dr, jid)
    (g,) = gpus_of(e)
    cores = cpuset.parse(e["GS_CORES"])
    assert len(cores) == 2 and {0 if c < 4 else 1 for c in cores} == {board_of_gpu(g)}


def test_sbatch_gres_and_pbs_ngpus_scripts_get_one_gpu(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path)))
    slurm = tmp_path / "s.sh"
    slurm.write_text("#!/bin/sh\n#SBATCH --gres=gpu:1\ntrue\n")
    pbs = tmp_path / "p.sh"
    pbs.write_text("#!/bin/sh\n#PBS -l select=1:ncpus=1:ngpus=1\ntrue\n")
    for script in (slurm, pbs):
        jid = dr.gsub(str(script))
        assert dr.state(jid) == "COMPLETED"
        assert len(gpus_of(env_of(dr, jid))) == 1


def test_with_share_two_four_one_gpu_jobs_run_on_two_gpus(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path, gpus=2, share=2)))
    ids = [dr.gsub("--gpus", "1", "--wrap", "wait for go", work=None) for _ in range(5)]
    assert all(dr.running(j) for j in ids[:4])
    assert dr.state(ids[4]) == "PENDING"
    used: dict[int, int] = {}
    for jid in ids[:4]:
        for g in gpus_of(env_of(dr, jid)):
            used[g] = used.get(g, 0) + 1
    assert used == {0: 2, 1: 2}
    dr.finish(ids[0])
    assert dr.running(ids[4])
    for jid in ids[1:]:
        dr.finish(jid)
    assert dr.state(ids[4]) == "COMPLETED"


def test_a_reservation_holds_gpus_and_its_jobs_get_them_inside(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path)))
    rid = int(dr.command("gresv", "create", "-n", "2", "-t", "1h", "--gpus", "2").stdout)
    r = dr.resv(rid)
    assert r["state"] == "ACTIVE"
    assert r["resources"].get("device:gpu") == 2
    assert "gpu=2" in dr.command("gresv", "list").stdout
    outside = dr.gsub("--gpus", "3", "--wrap", "true")  # only 2 of the 4 GPUs are outside it
    inside = dr.gsub("--reservation", str(rid), "-t", "5m", "--gpus", "2", "--wrap", "wait for go", work=None)
    assert dr.running(inside)
    assert len(gpus_of(env_of(dr, inside))) == 2
    assert dr.state(outside) == "PENDING"
    small = dr.gsub("--gpus", "2", "-t", "10m", "--wrap", "true", work=1)  # ends before the reservation: backfilled
    dr.run_until(lambda: dr.state(small) == "COMPLETED", 10)
    assert not gpus_of(env_of(dr, small)) & gpus_of(env_of(dr, inside))
    dr.finish(inside)
    r = dr.command("gresv", "create", "-n", "1", "-t", "60", "--gpus", "5", check=False)
    assert r.exit_code != 0 and r.stderr.strip() == "gresv: error: --gpus 5: the machine has 4 GPUs"


def test_a_yielding_parent_lends_its_gpu_to_its_child_and_gets_it_back(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path, gpus=1)))  # one GPU: the child can only have the parent's
    parent = dr.gsub("-n", "1", "-t", "2m", "--gpus", "1", "--wrap", "gsub ...; gwait --yield $kid", work=None)
    assert dr.running(parent)
    inside = {"GS_JOBID": str(parent), "GS_SPOOL": str(dr.d.spool.root)}  # gsub run inside the parent
    kid = dr.gsub("-N", "kid", "-n", "1", "-t", "1m", "--gpus", "1", "--wrap", "true", work=0.5, env=inside)
    assert dr.state(kid) == "PENDING" and dr.job(kid)["spec"]["parent"] == parent
    dr.request("yield", job=parent, until=[kid])  # as gwait --yield KID
    assert dr.running(kid)
    pe, ke = env_of(dr, parent), env_of(dr, kid)
    assert ke["CUDA_VISIBLE_DEVICES"] == pe["CUDA_VISIBLE_DEVICES"] == "0" and gpus_of(ke) == gpus_of(pe) == {0}
    assert cpuset.parse(ke["GS_CORES"]) == cpuset.parse(pe["GS_CORES"])  # on the parent's yielded core
    dr.run_until(lambda: dr.state(kid) == "COMPLETED" and parent not in dr.d.trees.yielded, 10)
    # resumed, the parent holds its GPU again: a GPU job of its own waits for it
    other = dr.gsub("--gpus", "1", "-t", "1m", "--wrap", "true")
    assert dr.state(other) == "PENDING" and dr.running(parent)
    assert dr.job(other)["reason"]
    dr.finish(parent)
    assert dr.state(parent) == "COMPLETED"
    dr.run_until(lambda: dr.state(other) == "COMPLETED", 10)
    assert gpus_of(env_of(dr, other)) == {0}


def test_bad_device_requests_are_refused_at_gsub(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path)))
    for args, msg in (
        (("--gpus", "5"), "gsub: error: --gpus 5: the machine has 4 GPUs"),
        (("--gpus", "0"), "gsub: error: --gpus 0: at least 1 device is needed"),
        (("--gpus", "V100:1"), "gsub: error: --gpus V100:1: the machine has no gpu of model V100 (models: H100)"),
        (("--gres", "fpga:1"), "gsub: error: --gres fpga:1: the machine has no FPGAs"),
        (("--gpus-per-task", "1"), "gsub: error: --gpus-per-task 1: needs a task count (--ntasks)"),
        (("--gpu-bind", "strict"), "gsub: error: --gpu-bind needs --gpus or --gres"),
    ):
        r = dr.command("gsub", *args, "--wrap", "true", check=False)
        assert r.exit_code != 0 and r.stderr.strip() == msg, (args, r.stderr)
    assert not list(dr.d.spool.incoming.glob("submit-*"))
    ok = dr.gsub("--gpus-per-task", "1", "--ntasks", "2", "--wrap", "true")
    assert dr.state(ok) == "COMPLETED"
    assert len(gpus_of(env_of(dr, ok))) == 2


def test_gpus_per_task_is_refused_with_split_file_and_beyond_the_machine(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(topo_config(tmp_path, gpus=2)))
    script = tmp_path / "task.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("1 10\n")
    r = dr.command("gsub", "--split-file", str(tasks), "--gpus-per-task", "1", str(script), check=False)
    assert r.exit_code != 0 and r.stderr.startswith("gsub: error: --gpus-per-task goes with --split"), r.stderr
    r = dr.command("gsub", "--split", "2", "--task-time", "10", "--gpus-per-task", "3", str(script), check=False)
    assert r.exit_code != 0 and "the machine has 2 GPUs" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not list(dr.d.spool.incoming.glob("submit-*"))
