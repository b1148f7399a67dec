"""sbatch's and qsub's everyday options on gsub's and grun's command lines, and --mem-per-gpu."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gridsched.cli import grun, gsub
from gridsched.protocol.spool import Spool
from tests.cli.conftest import submitted

CPU = min(os.sched_getaffinity(0))
GiB = 1 << 30


@pytest.fixture
def job(env: Path) -> Path:
    (env / "job.sh").write_text("#!/bin/sh\ntrue\n")
    return env


def spec_of(env: Path, run, *args: str) -> dict:
    r = run(gsub.cli, list(args))
    assert r.exit_code == 0, r.stderr
    return submitted(Spool(env / "spool"))[-1]


def refused(env: Path, run, cmd, *args: str, code: int = 2) -> str:
    """The one line a refused command line prints; nothing is written to the spool."""
    r = run(cmd, list(args))
    assert r.exit_code == code, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert submitted(Spool(env / "spool")) == []
    return r.stderr.strip()


# -- sbatch's words -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, name, walltime",
    [
        (["-J", "x", "--time", "90", "job.sh"], "x", 90 * 60),
        (["--job-name=y", "--time=1:00:00", "job.sh"], "y", 3600),
        (["--job-name", "z", "-t", "2h", "job.sh"], "z", 7200),
    ],
)
def test_sbatch_job_name_and_time(job, run, args, name, walltime):
    spec = spec_of(job, run, *args)
    assert (spec["name"], spec["walltime"]) == (name, walltime)


def test_sbatch_job_name_and_time_in_gs_lines(job, run):
    (job / "job.sh").write_text("#!/bin/sh\n#GS -J named --time 5\ntrue\n")
    spec = spec_of(job, run, "job.sh")
    assert (spec["name"], spec["walltime"]) == ("named", 300)


# -- --mem-per-gpu ---------------------------------------------------------------------------------


@pytest.fixture
def genv(job: Path) -> Path:
    """``job`` with a declared machine of 8 cores and 4 GPUs."""
    topo = job / "topo.toml"
    text = f'[[board]]\ncores = "0-7"\nhost_cpus = "{CPU}"\n'
    text += "".join(f'[[device]]\ntype = "gpu"\nindex = {i}\nboard = 0\nmodel = "H100"\n' for i in range(4))
    topo.write_text(text)
    (job / "cfg.toml").write_text(f'[daemon]\nautostart = false\n[machine]\ntopology = "{topo}"\n')
    return job


@pytest.mark.parametrize(
    "args, script, mem",
    [
        (["--mem-per-gpu", "2G", "--gpus", "3"], "", 6 * GiB),
        (["--mem-per-gpu=1G", "--gres", "gpu:2"], "", 2 * GiB),
        (["--mem-per-gpu", "512M", "--gpus-per-task", "1", "--ntasks", "2"], "", GiB),
        ([], "#SBATCH --gpus=2\n#SBATCH --mem-per-gpu=3G\n", 6 * GiB),
        (["--mem-per-gpu", "1G"], "#SBATCH --gpus=2\n#SBATCH --mem=10G\n", 2 * GiB),  # the command line wins
        (["--mem", "1G"], "#SBATCH --gpus=2\n#SBATCH --mem-per-gpu=3G\n", GiB),
        ([], "#GS --gpus 4 --mem-per-gpu 1G\n", 4 * GiB),
    ],
)
def test_mem_per_gpu_is_the_value_times_the_gpus(genv, run, args, script, mem):
    (genv / "job.sh").write_text(f"#!/bin/sh\n{script}true\n")
    assert spec_of(genv, run, *args, "job.sh")["mem"] == mem


def test_the_spec_keeps_the_memory_per_gpu_asked_for_the_jobs_environment(genv, run):
    """The spec keeps --mem-per-gpu beside the total (the job's SLURM_MEM_PER_GPU), and the boundary takes it;
    where --mem won, there is none."""
    from gridsched.protocol.jobspec import JobSpec

    (genv / "job.sh").write_text("#!/bin/sh\n#SBATCH --gpus=2\n#SBATCH --mem-per-gpu=3G\ntrue\n")
    spec = spec_of(genv, run, "job.sh")
    assert (spec["mem"], spec["mem_per_gpu"]) == (6 * GiB, 3 * GiB)
    assert JobSpec.from_spec(spec).mem_per_gpu == 3 * GiB
    assert "mem_per_gpu" not in spec_of(genv, run, "--mem", "1G", "job.sh")


@pytest.mark.parametrize(
    "args, script, error",
    [
        (["--mem-per-gpu", "2G"], "", "--mem-per-gpu needs GPUs"),
        (["--mem-per-gpu", "2G", "--mem", "4G", "--gpus", "1"], "", "--mem and --mem-per-gpu exclude each other"),
        (["--mem-per-gpu", "2G", "--mem-per-cpu", "1G", "--gpus", "1"], "", "--mem-per-cpu and --mem-per-gpu"),
        ([], "#SBATCH --gpus=1\n#SBATCH --mem-per-gpu=1G\n#SBATCH --mem=2G\n", "--mem and --mem-per-gpu exclude"),
        (["--mem-per-gpu", "lots", "--gpus", "1"], "", "mem-per-gpu 'lots': not a memory size"),
    ],
)
def test_mem_per_gpu_refusals(genv, run, args, script, error):
    (genv / "job.sh").write_text(f"#!/bin/sh\n{script}true\n")
    line = refused(genv, run, gsub.cli, *args, "job.sh")
    assert line.startswith("gsub: error: ") and error in line


def test_mem_per_gpu_emitted_for_slurm_and_pbs(genv, run):
    r = run(gsub.cli, ["--emit", "slurm", "--gpus", "2", "--mem-per-gpu", "3G", "job.sh"])
    assert "#SBATCH --mem-per-gpu=3072M\n" in r.stdout
    r = run(gsub.cli, ["--emit", "pbs", "--gpus", "2", "--mem-per-gpu", "3G", "job.sh"])
    assert "#PBS -l select=1:ncpus=1:mem=6gb:ngpus=2\n" in r.stdout


# -- qsub's words ------------------------------------------------------------------------------------


def test_grid_engine_command_line(job, run):
    """The command line of a Grid Engine user: -cwd, -pe, -l h_rt and -terse are qsub's, not clustered letters."""
    (job / "sub").mkdir()
    os.chdir(job / "sub")
    r = run(gsub.cli, ["-cwd", "-pe", "smp", "4", "-l", "h_rt=1:00:00", "-terse", "../job.sh", "a"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip().isdigit()
    spec = submitted(Spool(job / "spool"))[-1]
    assert (spec["ncpus"], spec["walltime"], spec["pe"], spec["args"]) == (4, 3600, "smp", ["a"])
    assert spec["workdir"] == str(job / "sub")


@pytest.mark.parametrize(
    "args, want",
    [
        (["-pe", "smp", "2", "job.sh"], {"ncpus": 2, "pe": "smp"}),
        (["-wd", "/tmp", "-N", "w", "job.sh"], {"workdir": "/tmp", "name": "w"}),
        (["-cwd", "-t", "1-3", "job.sh"], {"array": "1-3", "walltime": 3600}),  # -t: qsub's array
        (["-cwd", "-hold_jid", "1", "job.sh"], {"depend": "afterany:1"}),
        (["-cwd", "-l", "h_vmem=1G", "-pe", "smp", "2", "job.sh"], {"mem": 2 * GiB}),
        (["-cwd", "-v", "A=1,B", "job.sh"], {"env_set": {"A": "1"}}),
        (["-cwd", "-h", "job.sh"], {"hold": True}),
        (["-cwd", "--mem", "1G", "-n", "3", "job.sh"], {"mem": GiB, "ncpus": 3}),  # gsub's own stay gsub's
        (["-l", "walltime=2:00:00,select=1:ncpus=3", "-N", "p", "job.sh"], {"walltime": 7200, "ncpus": 3}),
        (["-l", "nodes=1:ppn=2", "-W", "depend=afterok:1", "job.sh"], {"ncpus": 2, "depend": "afterok:1"}),
        (["-V", "-m", "abe", "-M", "me@example.org", "job.sh"], {"mail_user": ["me@example.org"]}),
        (["-j", "y", "-o", "out.txt", "-e", "err.txt", "job.sh"], {"stderr": "JOINED"}),
    ],
)
def test_qsub_options(job, run, args, want):
    spec_of(job, run, "--hold", "job.sh")  # job 1, for the dependencies
    spec = spec_of(job, run, *args)
    if spec["stderr"] == spec["stdout"]:
        spec["stderr"] = "JOINED"
    got = {k: spec.get(k) for k in want}
    assert got == want


def test_grid_engine_binary_job_runs_the_command_as_wrap(job, run):
    spec = spec_of(job, run, "-cwd", "-b", "y", "/bin/echo", "a b", "c")
    assert spec["name"] == "echo"
    assert "/bin/echo 'a b' c" in spec["script"]
    spec = spec_of(job, run, "-cwd", "-b", "n", "-N", "s", "job.sh")
    assert (spec["name"], spec["script"]) == ("s", "#!/bin/sh\ntrue\n")


@pytest.mark.parametrize(
    "args, out",
    [
        (["-cwd", "-t", "1-3"], "job.sh.o{id}.%a"),  # Grid Engine: NAME.oJOB.TASK
        (["-V", "-t", "1-3"], "job.sh.o{id}-%a"),  # Torque: NAME.oJOB-TASK
        (["-V", "-J", "1-3"], "job.sh.o{id}.%a"),  # PBS Pro: NAME.oJOB.TASK
        (["-a", "1-3"], "job.sh.o{id}_%a"),  # gsub's own
    ],
)
def test_qsub_arrays_name_their_files_as_that_qsub(job, run, args, out):
    spec = spec_of(job, run, *args, "job.sh")
    assert spec["stdout"] == str(job / out.format(id=spec["id"]))


def test_qsub_warnings_name_the_option(job, run):
    r = run(gsub.cli, ["-cwd", "-q", "all.q", "-now", "y", "job.sh"])
    assert r.exit_code == 0, r.stderr
    assert "gsub: warning: command line: -q all.q ignored: one queue on one machine" in r.stderr
    assert "gsub: warning: command line: -now y ignored" in r.stderr


def test_gsub_own_short_options_are_unchanged(job, run):
    """Without a word only a qsub takes, -t is the walltime, -l a licence, -j gsub's join, -h the help."""
    spec = spec_of(job, run, "-t", "10", "-j", "oe", "-n", "2", "job.sh")
    assert (spec["walltime"], spec["ncpus"]) == (600, 2)
    r = run(gsub.cli, ["-h"])
    assert r.exit_code == 0 and "Usage:" in r.stdout
    r = run(gsub.cli, ["-l", "matlab=1", "job.sh"])
    assert "gsub: error: resource 'matlab': unknown floating resource" in r.stderr


def test_gsub_floating_resources_stay_gsub_in_a_qsub_command_line(job, run):
    cfg = job / "cfg.toml"
    cfg.write_text(cfg.read_text() + "[resources.floating]\nmatlab = 2\n")
    spec = spec_of(job, run, "-cwd", "-l", "matlab=1", "-l", "h_rt=60", "job.sh")
    assert (spec["resources"], spec["walltime"]) == ({"matlab": 1}, 60)


def test_qsub_words_are_not_read_in_gs_lines(job, run):
    (job / "job.sh").write_text("#!/bin/sh\n#GS -cwd\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 2


@pytest.mark.parametrize(
    "args, error",
    [
        (["-cwd", "-W", "depend=afterok:1", "job.sh"], "-cwd is Grid Engine's qsub and -W PBS's"),
        (["-cwd", "-foo", "job.sh"], "-foo: not an option of Grid Engine's qsub that gsub knows"),
        (["-cwd", "-b", "y"], "-b y needs a command to run"),
        (["-pe", "smp"], "-pe needs a name and a slot count"),
        (["-cwd", "-j", "maybe", "job.sh"], "-j maybe: must be y or n"),
        (["-cwd", "-t", "x", "job.sh"], "-t x: not an array range"),
    ],
)
def test_qsub_refusals(job, run, args, error):
    line = refused(job, run, gsub.cli, *args)
    assert line.startswith("gsub: error: command line: ") and error in line


# -- grun ---------------------------------------------------------------------------------------------


def test_grun_takes_partition_account_and_qos(job, run):
    """grun checks them as gsub does: -p and -q warned of; a bad --mem-per-gpu refused before submitting."""
    line = refused(job, run, grun.cli, "-A", "proj", "--mem-per-gpu", "1G", "true")
    assert (
        line == "grun: error: --mem-per-gpu needs GPUs: give --gpus, --gpus-per-node, --gpus-per-task or --gres gpu:N"
    )
    line = refused(job, run, grun.cli, "-p", "x", "--mem", "1G", "--mem-per-gpu", "1G", "true")
    assert line == "grun: error: --mem and --mem-per-gpu exclude each other"
    r = run(grun.cli, ["-p", "debug", "-q", "high", "-A", "proj", "--mem-per-gpu", "1G", "true"])
    assert r.stderr.splitlines()[:2] == [
        "grun: warning: --partition debug ignored: no partitions on one machine",
        "grun: warning: --qos high ignored: no QOS",
    ]
    assert submitted(Spool(job / "spool")) == []
