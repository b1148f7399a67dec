"""A job's environment is made by one function at each start, from its typed spec: an array task's variables
are computed then from its ``array_range``; a task taken in by the previous release has them in its ``env``."""

from __future__ import annotations

from gridsched.job.env import Start, array_env, environment
from gridsched.protocol import requests as rq

START = Start(ncpus=2, walltime=60, cores="0-1", host_cpus="0-1", restarts=1, job_dir="/s/jobs/12", spool="/s")


def task(**over: object) -> rq.JobSpec:
    spec = {
        "id": 12,
        "name": "sweep",
        "user": "me",
        "uid": 1000,
        "gid": 1000,
        "ncpus": 2,
        "walltime": 60,
        "checkpoint": "signal",
        "submit_time": 1.0,
        "workdir": "/w",
        "env": {"HOME": "/home/me", "PATH": "/usr/bin"},
        "array_id": 10,
        "array_index": 4,
        **over,
    }
    return rq.JobSpec.from_spec(spec)


def test_an_array_tasks_variables_are_computed_at_its_start():
    env = environment(task(array_range="0-8:2%2"), START, None, True)
    assert env["GS_ARRAY_JOB_ID"] == "10" and env["GS_ARRAY_TASK_ID"] == "4" and env["GS_ARRAY_TASK_COUNT"] == "5"
    assert (env["SLURM_ARRAY_TASK_MIN"], env["SLURM_ARRAY_TASK_MAX"], env["SLURM_ARRAY_TASK_STEP"]) == ("0", "8", "2")
    assert env["GS_CHECKPOINT_MODE"] == "signal" and env["GS_RESTART_COUNT"] == "1"
    assert env["GS_CHECKPOINT_DIR"] == "/s/jobs/12/checkpoint" and env["GS_SUBMIT_DIR"] == "/w"
    plain = environment(task(array_range="0-8:2%2"), START, None, False)
    assert plain["GS_ARRAY_TASK_ID"] == "4" and "SLURM_ARRAY_TASK_ID" not in plain


def test_a_task_taken_in_by_the_previous_release_keeps_its_variables():
    baked = {"HOME": "/home/me", "PATH": "/usr/bin", **array_env(10, 4, (0, 2, 4, 6, 8), True)}
    old = environment(task(env=baked), START, None, True)
    new = environment(task(array_range="0-8:2%2"), START, None, True)
    assert old == new
