"""#SBATCH and #PBS directives, gsub --emit slurm, --depend at submission, and the compat environment."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import click
import pytest

from gridsched.cli import gsub
from gridsched.daemon.jobtmp import layout
from gridsched.job.env import Job, array_env, compat_env, job_environment
from gridsched.protocol.config import parse
from gridsched.protocol.spool import Spool
from gridsched.submission import compat
from gridsched.submission.submit import SubmitError, check_depend

SLURM_SCRIPT = """#!/bin/bash
#SBATCH --job-name=sim
#SBATCH -n 2 -c 3
#SBATCH --time=90
#SBATCH --partition=gpu
#SBATCH -o out/%x-%j.out --error=out/%x-%A_%a.err
#SBATCH --mem=4G
#SBATCH -D sub
#SBATCH --hold
srun ./sim
#SBATCH --time=5
"""

PBS_SCRIPT = """#!/bin/sh
#PBS -N pjob
#PBS -l nodes=1:ppn=4,walltime=01:30:00
#PBS -l mem=2gb
#PBS -o host.example:/tmp/pjob.out
#PBS -d sub
#PBS -h
./run
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("gsub: warning: ")]


def test_slurm_directives_become_options(env, run, submits):
    (env / "sub" / "out").mkdir(parents=True)
    write(env / "job.sh", SLURM_SCRIPT)
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0
    [spec] = submits()
    assert spec["name"] == "sim"
    assert spec["ncpus"] == 6  # ntasks * cpus-per-task
    assert spec["walltime"] == 90 * 60  # a bare Slurm time is minutes; the line after the script is not read
    assert spec["mem"] == 4 << 30
    assert spec["workdir"] == str(env / "sub")
    assert spec["hold"] is True
    assert spec["stdout"] == str(env / "sub" / "out" / "sim-1.out")  # relative to the working directory
    # %A: the job id; %a of a job that is not an array: sbatch's NO_VAL
    assert spec["stderr"] == str(env / "sub" / "out" / "sim-1_4294967294.err")
    assert warnings(r.stderr) == [
        "gsub: warning: job.sh:5: #SBATCH --partition=gpu ignored: no partitions on one machine"
    ]


def test_pbs_directives_become_options(env, run, submits):
    (env / "sub").mkdir()
    write(env / "p.sh", PBS_SCRIPT)
    r = run(gsub.cli, ["p.sh"])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert (spec["name"], spec["ncpus"], spec["walltime"], spec["mem"]) == ("pjob", 4, 5400, 2 << 30)
    assert spec["stdout"] == "/tmp/pjob.out"  # the host: prefix is dropped
    assert spec["workdir"] == str(env / "sub") and spec["hold"] is True
    assert warnings(r.stderr) == []


@pytest.mark.parametrize(
    "line, ncpus",
    [
        ("#PBS -l ncpus=3", 3),
        ("#PBS -l select=2:ncpus=4", 8),
        ("#PBS -l select=1:ncpus=5:mem=1gb", 5),
        ("#SBATCH --cpus-per-task=7", 7),
        ("#SBATCH --ntasks=3", 3),
    ],
)
def test_core_counts(env, run, submits, line, ncpus):
    write(env / "j.sh", f"#!/bin/sh\n{line}\ntrue\n")
    assert run(gsub.cli, ["j.sh"]).exit_code == 0
    assert submits()[0]["ncpus"] == ncpus


@pytest.mark.parametrize(
    "line, warning",
    [
        ("#SBATCH -L matlab:2", "job.sh:2: #SBATCH -L matlab:2 ignored: licences are not supported yet"),
        ("#PBS -l matlab=1", "job.sh:2: #PBS -l matlab=1 ignored: resource 'matlab': licences"),
        ("#SBATCH --nodes=2", "job.sh:2: #SBATCH --nodes=2: this is one machine: the job runs here on 2 cores"),
        ("#SBATCH --frobnicate=3", "job.sh:2: #SBATCH --frobnicate=3 ignored: not a directive gsub knows"),
        ("#PBS -q long", "job.sh:2: #PBS -q long ignored: one queue on one machine"),
    ],
)
def test_what_has_no_meaning_here_is_warned_and_the_job_still_submits(env, run, submits, line, warning):
    write(env / "job.sh", f"#!/bin/sh\n{line}\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0
    [w] = warnings(r.stderr)
    assert w.startswith("gsub: warning: " + warning)
    assert len(submits()) == 1


@pytest.mark.parametrize(
    "line, text",
    [
        ("#SBATCH --array=1-10%2", "1-10%2"),
        ("#SBATCH -a 0-15:4", "0-12:4"),
        ("#PBS -J 1-4", "1-4"),
        ("#PBS -J 2-10:4%1", "2-10:4%1"),
    ],
)
def test_arrays_become_gsub_arrays(env, run, submits, line, text):
    write(env / "job.sh", f"#!/bin/sh\n{line}\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0, r.stderr
    assert warnings(r.stderr) == []
    assert submits()[0]["array"] == text


@pytest.mark.parametrize(
    "line, error",
    [
        ("#SBATCH --array=1-x", "job.sh:2: #SBATCH --array=1-x: not an array range"),
        ("#SBATCH -c zero", "job.sh:2: #SBATCH -c zero: 'zero' is not a whole number"),
        ("#SBATCH --time=abc", "job.sh:2: #SBATCH --time=abc: 'abc': not a duration"),
        ("#PBS -l mem=lots", "job.sh:2: #PBS -l mem=lots: 'lots' is not a PBS size"),
        ("#SBATCH --job-name", "job.sh:2: #SBATCH --job-name needs a value"),
        ("#PBS -W depend=before:3", "job.sh:2: #PBS -W depend=before:3: depend 'before:3': unknown condition 'before'"),
    ],
)
def test_bad_values_are_one_line_errors(env, run, submits, line, error):
    write(env / "job.sh", f"#!/bin/sh\n{line}\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [f"gsub: error: {error}"] or r.stderr.startswith(f"gsub: error: {error}")
    assert len(r.stderr.splitlines()) == 1
    assert submits() == []


def test_gs_directives_win_and_foreign_ones_are_then_not_read(env, run, submits):
    write(env / "job.sh", "#!/bin/sh\n#GS -n 2\n#SBATCH -c 5 --partition=x\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0 and warnings(r.stderr) == []
    assert submits()[0]["ncpus"] == 2


def test_command_line_wins_over_sbatch(env, run, submits):
    write(env / "job.sh", "#!/bin/sh\n#SBATCH -c 5 -J x\ntrue\n")
    assert run(gsub.cli, ["-n", "1", "job.sh"]).exit_code == 0
    assert (submits()[0]["ncpus"], submits()[0]["name"]) == (1, "x")


def test_manual_table_covers_every_rule():
    rows = compat.manual_rows()
    tables = (compat.SLURM, compat.PBS, compat.PBS_RESOURCES, compat.SGE, compat.SGE_RESOURCES)
    assert len(rows) == sum(len(t) for t in tables) + 1
    flat = " ".join(r[0] for r in rows)
    for flag in ("--job-name", "--cpus-per-task", "--dependency", "--licenses", "#PBS -l walltime="):
        assert flag in flat


# -- --emit slurm ------------------------------------------------------------------


def params_from(text: str, label: str = "x.sh") -> dict:
    """The gsub parameters the #SBATCH lines of ``text`` set, parsed as gsub parses them."""
    tr = compat.translate(text, label)
    out = {}
    for _, toks in tr.settings:
        ctx = gsub.cli.make_context("gsub", list(toks), help_option_names=[])
        for k, v in ctx.params.items():
            if ctx.get_parameter_source(k) == click.core.ParameterSource.COMMANDLINE:
                out[k] = v
    return out


ROUND_TRIP = [
    [
        "-N",
        "render",
        "-n",
        "4",
        "-t",
        "2:00:00",
        "--mem",
        "1536M",
        "-o",
        "logs/%x-%j.out",
        "-e",
        "e.%j",
        "-D",
        "/tmp",
        "--hold",
        "-d",
        "afterok:3:4,singleton",
        "--checkpoint",
        "requeue",
    ],
    ["-t", "1d", "--checkpoint", "none", "--wait", "-N", "with space"],
    ["--mem", "100K", "-n", "1"],
]


@pytest.mark.parametrize("args", ROUND_TRIP)
def test_emitted_script_reads_back_as_the_same_options(env, run, submits, args):
    write(env / "job.sh", "#!/bin/bash\n#GS -N fromgs\n# keep me\necho run\n")
    r = run(gsub.cli, ["--emit", "slurm", *args, "job.sh"])
    assert r.exit_code == 0
    assert submits() == []  # nothing submitted
    out = r.stdout
    assert out.startswith("#!/bin/bash\n#SBATCH ") and "#GS" not in out
    assert "# keep me\necho run\n" in out
    back = params_from(out)
    want = gsub.cli.make_context("gsub", [*args, "job.sh"], help_option_names=[]).params
    want["name"] = want["name"] or "fromgs"  # the #GS line, where the command line does not say otherwise
    if "ncpus" in back:  # -n N is written as one task of N cores, and read back as that
        assert (back.pop("ntasks"), back.pop("cpus_per_task")) == (1, back["ncpus"])
    for k, v in back.items():
        assert want[k] == v, k
    set_keys = {k for k in gsub.JOB_PARAMS if want.get(k) not in (None, False, ())}
    assert set(back) == set_keys


def test_emit_drops_what_slurm_lacks_with_a_comment(env, run):
    r = run(gsub.cli, ["--emit", "slurm", "--checkpoint", "suspend", "-n", "2", "--wrap", "true"])
    assert r.exit_code == 0
    assert "# gridsched: dropped --checkpoint suspend (no Slurm equivalent)\n" in r.stdout
    assert r.stdout.startswith("#!/bin/sh\n")


@pytest.mark.parametrize(
    "args",
    [
        ["-N", "t", "-n", "1", "-t", "5m"],
        # what gridsched has grown: a throttled array, a begin time, the checkpoint signal and requeue
        ["-N", "t", "-n", "2", "-t", "1h", "--array", "1-10%2", "--begin", "now+60", "--checkpoint", "signal"],
    ],
    ids=["plain", "grown"],
)
def test_sbatch_accepts_the_emitted_script(env, run, slurm_cluster, args):
    r = run(gsub.cli, ["--emit", "slurm", *args, "--wrap", "true"])
    (env / "e.sh").write_text(r.stdout)
    s = subprocess.run(["sbatch", "--test-only", str(env / "e.sh")], capture_output=True, text=True, timeout=60)
    assert s.returncode == 0, s.stderr


def test_emit_devices_and_the_checkpoint_signal(env, run):
    """Devices are translated with Slurm's own options (sbatch --test-only cannot check them on a node
    without GPUs); --checkpoint signal becomes the signal before the time limit plus --requeue."""
    r = run(
        gsub.cli,
        [
            "--emit",
            "slurm",
            "--gpus",
            "H100:2",
            "--gpu-bind",
            "strict",
            "--checkpoint",
            "signal",
            "--gres",
            "fpga:1",
            "--wrap",
            "true",
        ],
    )
    assert r.exit_code == 0
    lines = [x for x in r.stdout.splitlines() if x.startswith("#SBATCH")]
    assert lines == [
        "#SBATCH --gpus=H100:2",
        "#SBATCH --gres=fpga:1",
        "#SBATCH --gres-flags=enforce-binding",
        "#SBATCH --signal=B:USR1@30",
        "#SBATCH --requeue",
    ]
    (env / "cfg.toml").write_text(
        (env / "cfg.toml").read_text() + '[jobs]\ncheckpoint_signal = "TERM"\ncheckpoint_grace = "2m"\n'
    )
    r = run(gsub.cli, ["--emit", "slurm", "--checkpoint", "signal", "--wrap", "true"])
    assert "#SBATCH --signal=B:TERM@120\n#SBATCH --requeue\n" in r.stdout
    r = run(gsub.cli, ["--emit", "pbs", "--gpus", "2", "-n", "4", "--wrap", "true"])
    assert "#PBS -l select=1:ncpus=4:ngpus=2\n" in r.stdout
    r = run(gsub.cli, ["--emit", "slurm", "--nice", "10", "--wrap", "true"])
    assert "#SBATCH --nice=10\n" in r.stdout


# -- --depend ------------------------------------------------------------------------


def test_depend_is_stored_normalized(env, run, submits, put_rows, make_row):
    put_rows(make_row(1), make_row(2, state="COMPLETED"))
    r = run(gsub.cli, ["-d", "afterok:1:2, singleton", "--spool", str(env / "spool"), "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    assert run(gsub.cli, ["--wrap", "true"]).exit_code == 0
    assert [s["depend"] for s in submits()] == ["afterok:1:2,singleton", ""]


def test_depend_on_a_job_not_yet_taken_in(env, run, submits):
    assert run(gsub.cli, ["--wrap", "true"]).exit_code == 0
    assert run(gsub.cli, ["--depend", "afterany:1", "--wrap", "true"]).exit_code == 0
    assert submits()[1]["depend"] == "afterany:1"


def test_depend_in_a_gs_directive(env, run, submits):
    assert run(gsub.cli, ["--wrap", "true"]).exit_code == 0
    write(env / "j.sh", "#!/bin/sh\n#GS -d afternotok:1\ntrue\n")
    assert run(gsub.cli, ["j.sh"]).exit_code == 0
    assert submits()[1]["depend"] == "afternotok:1"


@pytest.mark.parametrize(
    "spec, code, error",
    [
        ("afterok:7", 1, "depend: job 7: no such job"),
        ("after", 2, "depend 'after': after needs at least one job id (after:ID)"),
        (
            "later:1",
            2,
            "depend 'later:1': unknown condition 'later' (use after, afterany, afterok, afternotok, singleton)",
        ),
    ],
)
def test_depend_refusals(env, run, submits, put_rows, make_row, spec, code, error):
    put_rows(make_row(1), make_row(50))
    r = run(gsub.cli, ["-d", spec, "--wrap", "true"])
    assert r.exit_code == code
    assert r.stderr == f"gsub: error: {error}\n"
    assert submits() == []


def test_depend_on_another_users_job(env, put_rows, make_row):
    """Refused for anyone but root (checked with explicit uids: the tests may run as root)."""
    put_rows(make_row(1, uid=4242, user="someone"))
    spool = Spool(env / "spool")
    with pytest.raises(SubmitError, match="^depend: job 1: owned by someone$"):
        check_depend(spool, "afterok:1", 2, uid=4343)
    assert check_depend(spool, "afterok:1", 2, uid=4242) == "afterok:1"
    assert check_depend(spool, "afterok:1", 2, uid=0) == "afterok:1"


# -- the compat environment -------------------------------------------------------------


def test_compat_env():
    """A -n 4 -c 2 job with --mem 2G, restarted once: the values Slurm, PBS and Grid Engine give it."""
    job = Job(17, "render", "ann", 1000, 8, "/home/a/w", {"HOME": "/home/a", "PATH": "/usr/bin"}, 4, 2, 2 << 30, 1)
    job = replace(job, host="node1")
    e = compat_env(job, layout("/tmp/gridsched.17.x"))
    want = {
        "SLURM_JOB_ID": "17",
        "SLURM_JOBID": "17",
        "SLURM_JOB_NAME": "render",
        "SLURM_JOB_USER": "ann",
        "SLURM_SUBMIT_DIR": "/home/a/w",
        "SLURM_SUBMIT_HOST": "node1",
        "SLURM_CPUS_PER_TASK": "2",
        "SLURM_NTASKS": "4",
        "SLURM_NPROCS": "4",
        "SLURM_TASKS_PER_NODE": "4",
        "SLURM_NNODES": "1",
        "SLURM_JOB_NODELIST": "node1",
        "SLURMD_NODENAME": "node1",
        "SLURM_CPUS_ON_NODE": "8",
        "SLURM_JOB_CPUS_PER_NODE": "8",
        "SLURM_MEM_PER_NODE": "2048",
        "SLURM_RESTART_COUNT": "1",
        "PBS_JOBID": "17.node1",
        "PBS_JOBNAME": "render",
        "PBS_O_WORKDIR": "/home/a/w",
        "PBS_O_HOME": "/home/a",
        "PBS_O_PATH": "/usr/bin",
        "PBS_NODEFILE": "/tmp/gridsched.17.x/nodefile",
        "PBS_NUM_NODES": "1",
        "PBS_NUM_PPN": "8",
        "PBS_NP": "8",
        "NCPUS": "8",
        "JOB_ID": "17",
        "NSLOTS": "8",
        "PE_HOSTFILE": "/tmp/gridsched.17.x/pe_hostfile",
        "RESTARTED": "1",
    }
    assert {k: e.get(k) for k in want} == want
    assert "PBS_ARRAY_ID" not in e and "SLURM_MEM_PER_CPU" not in e


def test_cpus_per_task_only_when_asked():
    """As Slurm: SLURM_CPUS_PER_TASK with -c (and gsub -n N, one task of N cores), not with -n alone."""
    assert "SLURM_CPUS_PER_TASK" not in compat_env(Job(1, "a", "u", 0, 4, "/", ntasks=4), None)
    assert compat_env(Job(1, "a", "u", 0, 4, "/", cpus_per_task=4), None)["SLURM_NTASKS"] == "1"
    plain = compat_env(Job(1, "a", "u", 0, 6, "/"), None)
    assert (plain["SLURM_NTASKS"], plain["SLURM_CPUS_PER_TASK"]) == ("1", "6")


def test_array_task_ids():
    """Task 7 of array 40 (indices 1-9:2), job id 43: PBS Pro's ID[INDEX].host, Torque's PBS_ARRAYID."""
    base = array_env(40, 7, (1, 3, 5, 7, 9), True)
    env = job_environment(
        base, {}, Job(43, "a", "u", 0, 1, "/", array_id=40, array_index=7, host="h"), None, True, False
    )
    assert env["SLURM_JOB_ID"] == "43"
    assert [
        env[f"SLURM_ARRAY_{k}"] for k in ("JOB_ID", "TASK_ID", "TASK_COUNT", "TASK_MIN", "TASK_MAX", "TASK_STEP")
    ] == ["40", "7", "5", "1", "9", "2"]
    assert (env["PBS_JOBID"], env["PBS_ARRAY_ID"], env["PBS_ARRAY_INDEX"], env["PBS_ARRAYID"]) == (
        "40[7].h",
        "40[].h",
        "7",
        "7",
    )
    assert (env["JOB_ID"], env["SGE_TASK_ID"], env["SGE_TASK_STEPSIZE"]) == ("40", "7", "2")


def test_environment_is_the_jobs_own():
    """Variables of those names in the submitting environment (gsub run inside another job) are not passed
    on; with [compat] env = false none of them is set."""
    parent = {"SLURM_CPUS_PER_TASK": "9", "SLURM_ARRAY_TASK_ID": "3", "PBS_ARRAYID": "3", "TMPDIR": "/old", "X": "1"}
    job = Job(5, "a", "u", 0, 4, "/", ntasks=4)
    env = job_environment(parent, {"GS_JOBID": "5"}, job, layout("/t/gridsched.5.y"), True, False)
    assert "SLURM_CPUS_PER_TASK" not in env and "SLURM_ARRAY_TASK_ID" not in env and "PBS_ARRAYID" not in env
    assert (env["X"], env["TMPDIR"], env["SGE_TASK_ID"]) == ("1", "/t/gridsched.5.y/tmp", "undefined")
    off = job_environment(parent, {"GS_JOBID": "5"}, job, layout("/t/gridsched.5.y"), False, False)
    assert not [k for k in off if k.startswith(("SLURM", "PBS_", "SGE_")) or k in ("NSLOTS", "JOB_ID")]
    assert off["TMPDIR"] == "/t/gridsched.5.y/tmp" and off["PATH"].startswith("/t/gridsched.5.y/bin")
    assert (off["GS_NTASKS"], off["GS_CPUS_PER_TASK"], off["OMP_NUM_THREADS"]) == ("4", "1", "1")


def test_compat_env_config_key():
    assert parse({}).compat_env is True
    assert parse({"compat": {"env": False}}).compat_env is False
    with pytest.raises(Exception, match="compat.env"):
        parse({"compat": {"env": "yes"}})
