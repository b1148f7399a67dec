"""Mail and login-environment directives: #SBATCH, #PBS and #$ lines read, and written back by --emit."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridsched.cli import gsub
from gridsched.submission import compat


def opts(text: str) -> dict[str, str | bool]:
    return compat.translate(text, "j.sh").params()


@pytest.mark.parametrize(
    "line, key, value",
    [
        ("#SBATCH --mail-type=END", "--mail-type", "END"),
        ("#SBATCH --mail-type=fail,begin", "--mail-type", "BEGIN,FAIL"),
        ("#SBATCH --mail-type=ALL", "--mail-type", "BEGIN,END,FAIL,INVALID_DEPEND,REQUEUE,STAGE_OUT"),
        ("#SBATCH --mail-type=NONE", "--mail-type", "NONE"),
        ("#SBATCH --mail-type=TIME_LIMIT_80,ARRAY_TASKS", "--mail-type", "ARRAY_TASKS,TIME_LIMIT_80"),
        ("#SBATCH --mail-user=ann@example.org", "--mail-user", "ann@example.org"),
        ("#PBS -m abe", "--mail-type", "BEGIN,END,FAIL"),
        ("#PBS -m ej", "--mail-type", "ARRAY_TASKS,END"),
        ("#PBS -m n", "--mail-type", "NONE"),
        ("#PBS -M ann@example.org,bob", "--mail-user", "ann@example.org,bob"),
        ("#$ -m bea", "--mail-type", "BEGIN,END,FAIL,REQUEUE"),
        ("#$ -m b,e", "--mail-type", "BEGIN,END"),
        ("#$ -M ann@example.org", "--mail-user", "ann@example.org"),
        ("#SBATCH --get-user-env", "--get-user-env=8L", True),
        ("#SBATCH --get-user-env=20", "--get-user-env=20L", True),
        ("#SBATCH --get-user-env=5S", "--get-user-env=5S", True),
    ],
)
def test_mail_directives_become_options(line, key, value):
    got = opts(f"#!/bin/sh\n{line}\ntrue\n")
    assert got[key] == value
    assert compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh").warnings == []


@pytest.mark.parametrize(
    "line, error",
    [
        ("#SBATCH --mail-type=SOMETIMES", "unknown mail event 'SOMETIMES'"),
        ("#PBS -m xyz", "use letters of abej"),
        ("#PBS -m an", "use letters of abej"),
        ("#$ -m q", "use letters of bea"),
        ("#SBATCH --get-user-env=9999", "from 1 to 600 seconds"),
        ("#SBATCH --get-user-env=soon", "use [TIMEOUT][S|L]"),
    ],
)
def test_bad_values_name_the_line(line, error):
    with pytest.raises(compat.CompatError) as e:
        compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh")
    assert str(e.value).startswith("j.sh:2: ") and error in str(e.value)


def emit(run, env: Path, fmt: str, *args: str) -> str:
    (env / "job.sh").write_text("#!/bin/sh\ntrue\n")
    r = run(gsub.cli, ["--emit", fmt, *args, "job.sh"])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_emit_slurm_writes_mail_and_user_env_back(env, run):
    out = emit(run, env, "slurm", "--mail-type=END,fail", "--mail-user=ann@example.org,bob", "--get-user-env")
    assert "#SBATCH --mail-type=END,FAIL\n" in out
    assert "#SBATCH --mail-user=ann@example.org,bob\n" in out
    assert "#SBATCH --get-user-env=8L\n" in out
    back = opts(out)  # and reads back as the same
    assert back["--mail-type"] == "END,FAIL" and back["--mail-user"] == "ann@example.org,bob"
    assert back["--get-user-env=8L"] is True
    assert "#SBATCH --mail-type=NONE\n" in emit(run, env, "slurm", "--mail-type=NONE")


def test_emit_pbs_writes_mail_letters(env, run):
    out = emit(run, env, "pbs", "--mail-type=BEGIN,END,FAIL,ARRAY_TASKS,REQUEUE", "--mail-user=ann@example.org")
    assert "#PBS -m abej\n" in out
    assert "#PBS -M ann@example.org\n" in out
    assert "# gridsched: dropped --mail-type REQUEUE (no PBS mail event)\n" in out
    assert opts(out)["--mail-type"] == "ARRAY_TASKS,BEGIN,END,FAIL"


def test_bare_get_user_env_never_takes_the_script(env, run, submits):
    (env / "job.sh").write_text("#!/bin/sh\ntrue\n")
    r = run(gsub.cli, ["--get-user-env", "job.sh", "arg"])
    assert r.exit_code == 0, r.output
    [spec] = submits()
    assert spec["get_user_env"] == "8L" and spec["args"] == ["arg"]
    r = run(gsub.cli, ["job.sh", "--get-user-env"])  # after the script: the script's argument
    assert r.exit_code == 0, r.output
    assert submits()[-1]["args"] == ["--get-user-env"] and "get_user_env" not in submits()[-1]
    r = run(gsub.cli, ["--get-user-env=3S", "-N", "x", "job.sh"])
    assert r.exit_code == 0, r.output
    assert submits()[-1]["get_user_env"] == "3S"
