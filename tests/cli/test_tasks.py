"""gsub --ntasks and --cpus-per-task, and #SBATCH -n/-c: the tasks a job records besides its cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridsched.cli import gsub


def script(env: Path, *lines: str) -> str:
    (env / "job.sh").write_text("#!/bin/sh\n" + "".join(f"{ln}\n" for ln in lines) + "true\n")
    return "job.sh"


def tasks(spec: dict) -> tuple:
    return spec["ncpus"], spec.get("ntasks"), spec.get("cpus_per_task")


@pytest.mark.parametrize(
    "lines, args, want",
    [
        (["#SBATCH -n 4 -c 2"], [], (8, 4, 2)),
        (["#SBATCH --ntasks=3"], [], (3, 3, None)),
        (["#SBATCH --cpus-per-task=5"], [], (5, None, 5)),
        ([], ["--ntasks", "2", "--cpus-per-task", "3"], (6, 2, 3)),
        ([], ["-n", "8", "--ntasks", "4"], (8, 4, None)),
        ([], ["-n", "8"], (8, None, None)),
        (["#PBS -l nodes=1:ppn=4"], [], (4, None, None)),
        (["#SBATCH -n 4 -c 2"], ["-n", "3"], (3, None, None)),  # the command line's -n wins over the script's
        (["#SBATCH -n 4 -c 2"], ["-n", "8"], (8, 4, 2)),
    ],
)
def test_tasks_recorded(env, run, submits, lines, args, want):
    r = run(gsub.cli, [*args, script(env, *lines)])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert tasks(spec) == want


@pytest.mark.parametrize(
    "lines, args, why",
    [
        ([], ["-n", "5", "--ntasks", "2"], "-n 5 cores cannot be --ntasks 2"),
        ([], ["--ntasks", "2", "--split", "4", "--task-time", "10"], "not --split"),
        ([], ["--ntasks", "0"], "ntasks '0'"),
        (["#SBATCH -n 4 -c 2"], ["--cpus-per-task", "1"], "-n 8 cores cannot be --ntasks 4 x --cpus-per-task 1"),
    ],
)
def test_tasks_that_do_not_make_the_cores_are_refused(env, run, submits, lines, args, why):
    r = run(gsub.cli, [*args, script(env, *lines)])
    assert r.exit_code == 2 and why in r.stderr and r.stderr.count("\n") == 1
    assert submits() == []


@pytest.mark.parametrize(
    "args, lines",
    [
        (["--ntasks", "4", "--cpus-per-task", "2"], ["#SBATCH --ntasks=4", "#SBATCH --cpus-per-task=2"]),
        (["-n", "6", "--ntasks", "3"], ["#SBATCH --ntasks=3", "#SBATCH --cpus-per-task=2"]),
        (["--cpus-per-task", "5"], ["#SBATCH --ntasks=1", "#SBATCH --cpus-per-task=5"]),
        (["-n", "4"], ["#SBATCH --ntasks=1", "#SBATCH --cpus-per-task=4"]),
    ],
)
def test_emit_slurm_writes_the_jobs_tasks(env, run, args, lines):
    r = run(gsub.cli, ["--emit", "slurm", *args, "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    assert [ln for ln in r.stdout.splitlines() if "--ntasks" in ln or "--cpus-per-task" in ln] == lines


def test_grun_names_itself_in_gsub_s_checks_and_gsub_keeps_its_name(env, run, submits):
    """grun runs gsub's checks of tasks and devices under its own name; gsub, run after it in the same
    process, still names itself."""
    from gridsched.cli import grun

    r = run(grun.cli, ["-n", "5", "--ntasks", "2", "true"])
    assert r.exit_code == 2 and r.stderr.startswith("grun: error: -n 5 cores cannot be --ntasks 2")
    r = run(grun.cli, ["--gpu-bind", "closest", "true"])
    assert r.exit_code != 0 and r.stderr.splitlines() == ["grun: error: --gpu-bind needs --gpus or --gres"]
    r = run(gsub.cli, ["-n", "5", "--ntasks", "2", script(env)])
    assert r.exit_code == 2 and r.stderr.startswith("gsub: error: -n 5 cores cannot be --ntasks 2")
    r = run(gsub.cli, ["--gpu-bind", "closest", script(env)])
    assert r.exit_code != 0 and r.stderr.splitlines() == ["gsub: error: --gpu-bind needs --gpus or --gres"]
    assert submits() == []
