"""gsub --export and --exclusive, and the directives that ask for them (#SBATCH --export, #PBS -v/-V/-n,
-l place=excl, #$ -v/-V), Grid Engine's -l gpu=N: what gsub writes into the spool, and what the
trust boundary accepts."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from gridsched.cli import gsub
from gridsched.protocol import requests as rq
from gridsched.submission import compat
from gridsched.submission.submit import LOGIN_PATH
from tests.cli.conftest import MACHINE_CORES, job_row, write_rows
from tests.fuzz.test_requests import SENDER, valid_job

LOGIN_NAMES = {"HOME", "USER", "LOGNAME", "SHELL", "PATH"}


def opts(text: str) -> dict[str, str | bool]:
    return compat.translate(text, "j.sh").params()


def script(env: Path, text: str, name: str = "j.sh") -> str:
    (env / name).write_text(text)
    return name


def error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("gsub: error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


# -- reading the values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, want",
    [
        ("ALL", compat.Export(True)),
        ("all", compat.Export(True)),
        ("NONE", compat.Export(False)),
        ("FOO", compat.Export(False, ("FOO",))),
        ("ALL,FOO=1,BAR", compat.Export(True, ("BAR",), (("FOO", "1"),))),
        ("A=,B=x=y", compat.Export(False, (), (("A", ""), ("B", "x=y")))),
        ("LIST='a,b',X", compat.Export(False, ("X",), (("LIST", "a,b"),))),
        ('Q="it\'s"', compat.Export(False, (), (("Q", "it's"),))),
        ("A=1,A=2", compat.Export(False, (), (("A", "2"),))),
    ],
)
def test_export_values_read_as_sbatch_reads_them(text, want):
    got = compat.parse_export(text)
    assert got == want
    assert compat.parse_export(got.text()) == want  # what --emit writes reads back the same


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty"),
        ("NONE,FOO=1", "NONE cannot be combined"),
        ("1X=2", "'1X' is not a variable name"),
        ("A-B", "'A-B' is not a variable name"),
        ("A='x", "a quote is not closed"),
        ("ALL,,B", "'' is not a variable name"),
    ],
)
def test_bad_export_values_say_why(text, why):
    with pytest.raises(ValueError, match=why):
        compat.parse_export(text)


@pytest.mark.parametrize(
    "text, want",
    [
        ("#SBATCH --export=NONE", "NONE"),
        ("#SBATCH --export=ALL,OMP_PROC_BIND=true", "ALL,OMP_PROC_BIND=true"),
        ("#SBATCH --export=PATH,HOME", "PATH,HOME"),
        ("#PBS -v A=1,B", "ALL,B,A=1"),
        ("#PBS -V\n#PBS -v A=1\n#PBS -v C=3", "ALL,A=1,C=3"),
        ("#$ -v A=1 -v B=2", "ALL,A=1,B=2"),
        ("#$ -V\n#$ -v 'X=a b'", "ALL,X=a b"),
    ],
)
def test_export_directives(text, want):
    assert opts(f"#!/bin/sh\n{text}\ntrue\n")["--export"] == want


@pytest.mark.parametrize("text", ["#SBATCH --export=ALL", "#PBS -V", "#$ -V\n#$ -cwd"])
def test_exporting_everything_is_the_default_and_silent(text):
    tr = compat.translate(f"#!/bin/sh\n{text}\ntrue\n", "j.sh")
    assert tr.settings == [] and tr.warnings == []


@pytest.mark.parametrize(
    "text, error",
    [
        ("#SBATCH --export=NONE,A=1", "j.sh:2: #SBATCH --export=NONE,A=1: NONE cannot be combined"),
        ("#PBS -v 9A=1", "j.sh:2: #PBS -v 9A=1: '9A' is not a variable name"),
        ("#$ -v A='x", "j.sh:2: #$ -v A='x: no closing quotation"),  # the line itself cannot be read
    ],
)
def test_bad_export_directives_name_the_line(text, error):
    with pytest.raises(compat.CompatError) as e:
        compat.translate(f"#!/bin/sh\n{text}\ntrue\n", "j.sh")
    assert str(e.value).startswith(error)


@pytest.mark.parametrize(
    "text",
    [
        "#SBATCH --exclusive",
        "#PBS -n",
        "#PBS -l place=excl",
        "#PBS -l place=pack:excl",
        "#PBS -l select=1:ncpus=2,place=exclhost",
    ],
)
def test_exclusive_directives(text):
    tr = compat.translate(f"#!/bin/sh\n{text}\ntrue\n", "j.sh")
    assert tr.params()["--exclusive"] is True and tr.warnings == []


def test_exclusive_placement_warns_of_the_rest():
    tr = compat.translate("#!/bin/sh\n#PBS -l place=scatter:excl:group=switch\ntrue\n", "j.sh")
    assert tr.params()["--exclusive"] is True
    assert tr.warnings == [
        "j.sh:2: #PBS -l place=scatter:excl:group=switch ignored: scatter, group=switch: one machine, "
        "nothing to place apart"
    ]


def test_shared_placement_is_silent_and_not_exclusive():
    tr = compat.translate("#!/bin/sh\n#PBS -l place=pack:shared\ntrue\n", "j.sh")
    assert tr.settings == [] and tr.warnings == []


@pytest.mark.parametrize(
    "line, gpus",
    [("gpu=2", "2"), ("gpu=true", "1"), ("gpu=TRUE", "1"), ("gpus=3", "3"), ("gpu=false", None), ("gpu=0", None)],
)
def test_grid_engine_gpu_requests(line, gpus):
    assert opts(f"#!/bin/sh\n#$ -l {line},h_rt=60\ntrue\n").get("--gpus") == gpus


def test_a_grid_engine_gpu_count_that_is_not_one_is_an_error():
    with pytest.raises(compat.CompatError, match="j.sh:2: #\\$ -l gpu=many: 'many' is not a whole number"):
        compat.translate("#!/bin/sh\n#$ -l gpu=many\ntrue\n", "j.sh")


# -- what gsub submits ----------------------------------------------------------------------------


def test_the_default_passes_the_whole_environment(env, run, submits, monkeypatch):
    monkeypatch.setenv("GS_TEST_MARK", "here")
    r = run(gsub.cli, ["--wrap", "true"])
    assert r.exit_code == 0
    [spec] = submits()
    assert spec["env"]["GS_TEST_MARK"] == "here" and "env_set" not in spec


def test_export_none_passes_only_a_logins_basics(env, run, submits, monkeypatch):
    monkeypatch.setenv("GS_TEST_MARK", "here")
    r = run(gsub.cli, ["--export=NONE", "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    pw = pwd.getpwuid(os.getuid())
    assert spec["env"] == {
        "HOME": pw.pw_dir,
        "USER": pw.pw_name,
        "LOGNAME": pw.pw_name,
        "SHELL": pw.pw_shell or "/bin/sh",
        "PATH": LOGIN_PATH,
    }
    assert "env_set" not in spec


def test_an_export_list_copies_the_names_and_sets_the_values(env, run, submits, monkeypatch):
    monkeypatch.setenv("GS_TEST_MARK", "here")
    monkeypatch.setenv("KEEP_ME", "kept")
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    r = run(gsub.cli, ["--export", "KEEP_ME,NOT_SET_HERE,NEW=a b", "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert set(spec["env"]) == LOGIN_NAMES | {"KEEP_ME"} and spec["env"]["KEEP_ME"] == "kept"
    assert spec["env_set"] == {"NEW": "a b"}


def test_all_and_values(env, run, submits, monkeypatch):
    monkeypatch.setenv("GS_TEST_MARK", "here")
    r = run(gsub.cli, ["--export=ALL,GS_TEST_MARK2=x,OMP_NUM_THREADS=1", "--wrap", "true"])
    assert r.exit_code == 2  # GS_* is the daemon's
    assert error_line(r.stderr) == (
        "gsub: error: export: GS_TEST_MARK2 is set by gridsched for every job (see docs/compat.md); "
        "it cannot be given a value"
    )
    r = run(gsub.cli, ["--export=ALL,MARK2=x,OMP_NUM_THREADS=1", "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert spec["env"]["GS_TEST_MARK"] == "here"
    assert spec["env_set"] == {"MARK2": "x", "OMP_NUM_THREADS": "1"}


def test_the_command_line_export_wins_over_the_scripts(env, run, submits, monkeypatch):
    monkeypatch.setenv("GS_TEST_MARK", "here")
    name = script(env, "#!/bin/sh\n#SBATCH --export=NONE\ntrue\n")
    r = run(gsub.cli, ["--export=ALL", name])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert spec["env"]["GS_TEST_MARK"] == "here"


@pytest.mark.parametrize(
    "name",
    ["SLURM_JOB_ID", "SLURM_CPUS_ON_NODE", "PBS_JOBID", "NSLOTS", "JOB_ID", "TMPDIR", "CUDA_VISIBLE_DEVICES"],
)
def test_a_value_for_a_variable_the_daemon_sets_is_refused(env, run, submits, name):
    r = run(gsub.cli, [f"--export=ALL,{name}=1", "--wrap", "true"])
    assert r.exit_code == 2
    assert f"{name} is set by gridsched for every job" in error_line(r.stderr)
    assert submits() == []


def test_a_pbs_value_for_a_variable_the_daemon_sets_names_the_line(env, run, submits):
    name = script(env, "#!/bin/sh\n#PBS -N x\n#PBS -v PBS_O_WORKDIR=/x\ntrue\n")
    r = run(gsub.cli, [name])
    assert r.exit_code == 2
    line = error_line(r.stderr)
    assert line.startswith("gsub: error: j.sh:3: #PBS -v PBS_O_WORKDIR=/x: ") and "PBS_O_WORKDIR is set by" in line
    assert submits() == []


def test_pbs_v_sets_values_over_the_whole_environment(env, run, submits, monkeypatch):
    monkeypatch.setenv("GS_TEST_MARK", "here")
    name = script(env, "#!/bin/sh\n#PBS -v INPUT=data.txt,GS_TEST_MARK\n#PBS -l ncpus=2\ntrue\n")
    r = run(gsub.cli, [name])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert spec["env"]["GS_TEST_MARK"] == "here" and spec["env_set"] == {"INPUT": "data.txt"}
    assert spec["ncpus"] == 2


def test_exclusive_takes_the_whole_machine(env, run, submits):
    for args in (["--exclusive"], ["--exclusive", "-n", "4"], ["--exclusive", "--ntasks", "3"]):
        assert run(gsub.cli, [*args, "--wrap", "true"]).exit_code == 0
    plain, four, three = submits()
    assert (plain["ncpus"], plain.get("ntasks"), plain.get("cpus_per_task"), plain["exclusive"]) == (
        MACHINE_CORES,
        None,
        None,
        True,
    )
    assert (four["ncpus"], four["ntasks"], four["cpus_per_task"]) == (MACHINE_CORES, 1, 4)
    assert (three["ncpus"], three["ntasks"], three["cpus_per_task"]) == (MACHINE_CORES, 3, 1)


def test_exclusive_directives_take_the_whole_machine(env, run, submits):
    name = script(env, "#!/bin/sh\n#PBS -l select=1:ncpus=8 -l place=pack:excl\ntrue\n")
    r = run(gsub.cli, [name])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert (spec["ncpus"], spec["ntasks"], spec["cpus_per_task"], spec["exclusive"]) == (MACHINE_CORES, 1, 8, True)
    assert "place" not in r.stderr  # carried out, so not warned of


@pytest.mark.parametrize(
    "args, error",
    [
        (["--exclusive", "-n", "17"], "job can never run: it asks for 17 cores, the machine has 16"),
        (["--exclusive", "--split", "3", "--task-time", "1m"], "--exclusive goes with a plain job or an array"),
    ],
)
def test_exclusive_refusals(env, run, submits, args, error):
    r = run(gsub.cli, [*args, "--wrap", "true"])
    assert r.exit_code != 0
    assert error_line(r.stderr).startswith(f"gsub: error: {error}")
    assert submits() == []


def test_emit_writes_export_and_exclusive_back(env, run):
    name = script(env, "#!/bin/sh\n#SBATCH -c 4\n#SBATCH --exclusive\n#SBATCH --export=NONE\necho hi\n")
    r = run(gsub.cli, ["--emit", "slurm", name])
    assert r.exit_code == 0, r.stderr
    assert "#SBATCH --exclusive\n" in r.stdout and "#SBATCH --export=NONE\n" in r.stdout
    r = run(gsub.cli, ["--emit", "pbs", "--export", "ALL,A=1,B", name])
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "#PBS -l place=excl" in lines and "#PBS -V" in lines and "#PBS -v B,A=1" in lines
    # what --emit slurm wrote reads back as the same request; a quoted value keeps its comma
    r = run(gsub.cli, ["--emit", "slurm", "--export", "ALL,LIST='a,b'", name])
    assert r.exit_code == 0, r.stderr
    again = compat.translate(r.stdout, "e.sh").params()
    assert compat.parse_export(str(again["--export"])) == compat.Export(True, (), (("LIST", "a,b"),))
    assert again["--exclusive"] is True


# -- the boundary ---------------------------------------------------------------------------------


def parse(**fields: object) -> rq.JobSpec:
    req = rq.parse({"type": "submit", "job": {**valid_job(), **fields}}, rq.id_name(1), SENDER)
    assert isinstance(req, rq.Submit)
    return req.job


def test_the_boundary_takes_env_set_and_exclusive():
    job = parse(env_set={"A": "1", "OMP_NUM_THREADS": "2"}, exclusive=True, ncpus=16, ntasks=3)
    assert job.env_set == (("A", "1"), ("OMP_NUM_THREADS", "2")) and job.exclusive
    spec = job.to_spec()
    assert spec["env_set"] == {"A": "1", "OMP_NUM_THREADS": "2"} and spec["exclusive"] is True


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"env_set": {"SLURM_JOB_ID": "1"}}, "SLURM_JOB_ID is set by gridsched"),
        ({"env_set": {"GS_JOBID": "1"}}, "GS_JOBID is set by gridsched"),
        ({"env_set": {"CUDA_VISIBLE_DEVICES": "0"}}, "CUDA_VISIBLE_DEVICES is set by gridsched"),
        ({"env_set": {"A B": "1"}}, "is not a variable name"),
        ({"env_set": {"": "1"}}, "is not a variable name"),
        ({"env_set": {"A": 1}}, "must be a string"),
        ({"env_set": {"A": "x\0y"}}, "NUL"),
        ({"env_set": ["A"]}, "must map at most"),
        ({"env_set": {f"V{i}": "" for i in range(rq.MAX_ENV_SET + 1)}}, "must map at most"),
        ({"env_set": {f"V{i}": "x" * 100_000 for i in range(11)}}, "holds more than"),
        ({"exclusive": "yes"}, "must be true or false"),
        ({"exclusive": True, "ncpus": 4, "ntasks": 3, "cpus_per_task": 2}, "3 tasks of 2 cores are more than"),
        ({"ncpus": 4, "ntasks": 3}, "ntasks 3 does not divide its 4 cores"),  # not exclusive: as before
    ],
)
def test_the_boundary_refuses(fields, why):
    with pytest.raises(rq.Refused, match=why):
        parse(**fields)


# -- -hold_jid by name ------------------------------------------------------------------------------


def test_hold_jid_names_are_read_for_lookup_at_submission():
    assert opts("#!/bin/sh\n#$ -cwd\n#$ -hold_jid prep,12\ntrue\n") == {"--hold-jid": "prep,12"}
    assert opts("#!/bin/sh\n#$ -cwd\n#$ -hold_jid 3,4\ntrue\n") == {"-d": "afterany:3:4"}


def test_hold_jid_waits_for_every_pending_job_of_mine_with_the_name(env, run, submits):
    for name in ("prep", "prep", "other", "prep2"):
        assert run(gsub.cli, ["-N", name, "--wrap", "true"]).exit_code == 0
    name = script(env, "#!/bin/sh\n#$ -hold_jid prep,nosuch\n#$ -N post\ntrue\n")
    r = run(gsub.cli, [name])
    assert r.exit_code == 0, r.stderr
    assert "gsub: warning: --hold-jid nosuch: no job of yours pending or running has this name" in r.stderr
    r = run(gsub.cli, ["-d", "afterok:3", "--hold-jid", "prep*", "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    post, both = submits()[4:]
    assert post["depend"] == "afterany:1:2"
    assert both["depend"] == "afterok:3,afterany:1:2:4"


def test_hold_jid_matches_neither_ended_jobs_nor_other_users(env, run, submits, spool):
    me = os.getuid()
    write_rows(
        spool,
        job_row(1, uid=me, name="prep", state="COMPLETED"),
        job_row(2, uid=me + 1, user="someone", name="prep"),
        job_row(3, uid=me, name="prep", state="RUNNING"),
    )
    r = run(gsub.cli, ["--hold-jid", "prep", "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    [spec] = submits()
    assert spec["depend"] == "afterany:3"
