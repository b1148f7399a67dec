"""What a real daemon does with gsub --export and --exclusive: the environment the job runs with, and a job
that runs alone on every core.  SGE's -hold_jid by name is tested in process in test_queue_driven.py."""

from __future__ import annotations

import os
import pwd

from gridsched.submission.submit import LOGIN_PATH
from tests.conftest import wait_for
from tests.daemon.test_jobenv import env_of, make_shared

CORES = 4


def run_env(gs, *args: str, script: str = "#!/bin/sh\nenv -0 > env.$GS_JOBID\n", extra=None) -> dict[str, str]:
    """Submit ``script`` with gsub ARGS (gsub's environment updated with ``extra``), wait for it to complete,
    and return the environment it ran with."""
    path = gs.work / "e.sh"
    path.write_text(script)
    saved = gs.env
    gs.env = {**saved, **(extra or {})}
    try:
        jid = gs.gsub(*args, str(path))
    finally:
        gs.env = saved
    gs.wait_state(jid, "COMPLETED")
    return env_of(gs.work / f"env.{jid}")


def test_export_none_gives_a_login_environment_and_the_jobs_own(shared_make_gs):
    gs = make_shared(shared_make_gs, cores=CORES)
    e = run_env(gs, "--export=NONE", "-n", "2", extra={"GS_TEST_MARK": "submitted"})
    pw = pwd.getpwuid(os.getuid())
    assert "GS_TEST_MARK" not in e and "GRIDSCHED_CONFIG" not in e
    assert (e["HOME"], e["USER"], e["LOGNAME"]) == (pw.pw_dir, pw.pw_name, pw.pw_name)
    # the job's own bin/ (srun) first, then a standard PATH: the script found env(1) on it
    assert e["PATH"].endswith(":" + LOGIN_PATH) and e["PATH"].split(":")[0].endswith("/bin")
    assert (e["GS_NCPUS"], e["SLURM_CPUS_ON_NODE"], e["SLURM_JOB_ID"]) == ("2", "2", e["GS_JOBID"])
    assert e["TMPDIR"] == e["GS_TMPDIR"]


def test_an_export_list_copies_and_sets(shared_make_gs):
    gs = make_shared(shared_make_gs, cores=CORES)
    e = run_env(
        gs,
        "--export=KEEP_ME,MISSING,INPUT=data 1.txt,LIST='a,b'",
        extra={"KEEP_ME": "kept", "GS_TEST_MARK": "submitted"},
    )
    assert (e["KEEP_ME"], e["INPUT"], e["LIST"]) == ("kept", "data 1.txt", "a,b")
    assert "GS_TEST_MARK" not in e and "MISSING" not in e


def test_all_with_values_keeps_everything_and_the_users_omp_num_threads_wins(shared_make_gs):
    gs = make_shared(shared_make_gs, cores=CORES)
    e = run_env(
        gs,
        "--export=ALL,OMP_NUM_THREADS=1,TEST_MARK2=x",
        "-n",
        "2",
        extra={"GS_TEST_MARK": "submitted"},
    )
    assert (e["GS_TEST_MARK"], e["TEST_MARK2"]) == ("submitted", "x")
    assert (e["OMP_NUM_THREADS"], e["GS_NCPUS"], e["SLURM_CPUS_PER_TASK"]) == ("1", "2", "2")


def test_pbs_and_sge_v_set_values_in_the_job(shared_make_gs):
    gs = make_shared(shared_make_gs, cores=CORES)
    body = "env -0 > env.$GS_JOBID\n"
    e = run_env(gs, script=f"#!/bin/sh\n#PBS -V\n#PBS -v INPUT=in.dat,STEPS=10\n{body}", extra={"MARK": "m"})
    assert (e["INPUT"], e["STEPS"], e["MARK"]) == ("in.dat", "10", "m")
    e = run_env(gs, script=f"#!/bin/sh\n#$ -cwd\n#$ -v MODE=fast -v PATH=/opt/x:/usr/bin:/bin\n{body}")
    assert e["MODE"] == "fast"
    assert e["PATH"].split(":")[1:] == ["/opt/x", "/usr/bin", "/bin"]  # the set PATH, after the job's bin/


def test_array_tasks_get_the_values(shared_make_gs):
    gs = make_shared(shared_make_gs, cores=CORES)
    path = gs.work / "a.sh"
    path.write_text('#!/bin/sh\necho "$MODE $GS_ARRAY_TASK_ID" > out.$GS_ARRAY_TASK_ID\n')
    jid = gs.gsub("--array", "0-1", "--export=ALL,MODE=slow", str(path))
    for i in (0, 1):
        wait_for(lambda i=i: (gs.work / f"out.{i}").exists(), 30, f"task {i} of array {jid}")
        wait_for(lambda i=i: (gs.work / f"out.{i}").read_text() == f"slow {i}\n", 10, f"task {i}'s output")

    def ended() -> bool:
        tasks = [j for j in gs.gstat_json()["jobs"] if j["array_id"] == jid]
        return len(tasks) == 2 and all(j["state"] == "COMPLETED" for j in tasks)

    wait_for(ended, 30, f"the tasks of array {jid} to complete")


def test_an_exclusive_job_runs_alone_on_every_core(shared_make_gs):
    gs = make_shared(shared_make_gs, cores=CORES)
    flag = gs.work / "go"
    waiting = (
        "#!/bin/sh\nenv -0 > env.tmp && mv env.tmp env.$GS_JOBID\n"  # whole once it is there
        f"i=0; while [ ! -e {flag} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n"
    )
    (gs.work / "x.sh").write_text(waiting)
    (gs.work / "one.sh").write_text("#!/bin/sh\ntrue\n")
    x = gs.gsub("-n", "2", "--exclusive", str(gs.work / "x.sh"))
    one = gs.gsub("-n", "1", str(gs.work / "one.sh"))  # 2 cores are idle, but the machine is x's
    gs.wait_state(x, "RUNNING")
    e = env_of(wait_for(lambda: (gs.work / f"env.{x}").exists() and gs.work / f"env.{x}", 10, "x's environment"))
    assert (e["GS_NCPUS"], e["SLURM_CPUS_ON_NODE"], e["NSLOTS"], e["NCPUS"]) == (str(CORES),) * 4
    assert (e["SLURM_NTASKS"], e["SLURM_CPUS_PER_TASK"], e["OMP_NUM_THREADS"]) == ("1", "2", "2")
    # the other job was looked at by the scheduler and left waiting (with a reason) while x runs
    held = wait_for(lambda: (j := gs.job(one))["reason"] and j, 20, f"job {one} to get a reason to wait")
    assert held["state"] == "PENDING"
    flag.touch()
    gs.wait_state(x, "COMPLETED")
    done = gs.wait_state(one, "COMPLETED")
    assert done["start_time"] >= gs.job(x)["end_time"]
