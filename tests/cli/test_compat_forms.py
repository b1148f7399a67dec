"""Slurm, PBS, Torque and SGE scripts read as those systems read them: times, sizes, directives, output
file names, the interpreter, and the checks gsub and the daemon share."""

from __future__ import annotations

import os
import pwd
import socket
import time
from pathlib import Path

import click
import pytest

from gridsched.cli import gsub
from gridsched.core.units import UnitError
from gridsched.protocol import requests as rq
from gridsched.protocol.arrays import task_path
from gridsched.submission import compat
from gridsched.submission.submit import SubmitError, choose_shell, output_path
from tests.fuzz.test_requests import valid_job


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def warnings(stderr: str) -> list[str]:
    return [ln[len("gsub: warning: ") :] for ln in stderr.splitlines() if ln.startswith("gsub: warning: ")]


def opts(text: str) -> dict[str, str | bool]:
    return compat.translate(text, "j.sh").params()


# -- times -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, secs",
    [
        ("60", 3600),  # a bare number is minutes
        ("1", 60),
        ("90:30", 90 * 60 + 30),  # MM:SS
        ("1:00:00", 3600),
        ("2-0", 2 * 86400),  # D-HH
        ("1-2", 86400 + 2 * 3600),
        ("1-2:30", 86400 + 2 * 3600 + 30 * 60),  # D-HH:MM
        ("1-2:30:15", 86400 + 2 * 3600 + 30 * 60 + 15),
        # Slurm checks no field against its unit (seen with Slurm 22.05): 1-25 is 2-01:00:00
        ("1-25", 86400 + 25 * 3600),
        ("1:75:00", 2 * 3600 + 15 * 60),
        ("90:61", 91 * 60 + 1),
        ("90s", 90),
        ("2h", 7200),
        ("30m", 1800),
    ],
)
def test_sbatch_times(text, secs):
    assert compat.sbatch_time(text) == secs


@pytest.mark.parametrize("text", ["0", "0:00", "0-0:0:0", "-5", "abc", "99:99:99:99", "1:2:3:4", ""])
def test_bad_sbatch_times(text):
    with pytest.raises(UnitError):
        compat.sbatch_time(text)


@pytest.mark.parametrize(
    "text, secs",
    [
        ("60", 60),
        ("3600", 3600),
        ("01:30:00", 5400),
        ("90:00", 5400),
        ("100:00:00", 360000),
        # OpenPBS src/lib/Libattr/attr_fn_time.c, decode_time: no field held to its unit, a fraction of a
        # second rounded to the nearest second
        ("1:75:00", 8100),
        ("10.5", 11),
        ("10.499", 10),
    ],
)
def test_pbs_times_bare_is_seconds(text, secs):
    assert compat.pbs_time(text) == secs


@pytest.mark.parametrize("text", ["::30", "1:", ":5", "1:2:3:4", "1.2.3", "0", "0:00"])
def test_bad_pbs_times(text):
    with pytest.raises(UnitError):
        compat.pbs_time(text)


# Grid Engine 8.1.9's qsub, seen with -l h_rt=VALUE and qstat -j (tests/compat/test_sge_oracle.py)
@pytest.mark.parametrize(
    "text, secs", [("60", 60), ("10.5", 10), ("01:30:00", 5400), ("::30", 30), ("1:75:00", 8100), ("48:0:0", 172800)]
)
def test_sge_times(text, secs):
    assert compat.sge_time(text) == secs


@pytest.mark.parametrize("text", ["90:00", "1-00:00:00", "ten", "0", "::"])
def test_bad_sge_times(text):
    with pytest.raises(UnitError):
        compat.sge_time(text)


NOW = time.mktime((2030, 1, 20, 10, 0, 0, 0, 0, -1))


@pytest.mark.parametrize(
    "text, want",
    [
        ("now", NOW),
        ("now+90", NOW + 90),
        ("now+1hour", NOW + 3600),
        ("now+2days", NOW + 2 * 86400),
        ("now+10minutes", NOW + 600),
        ("16:00", time.mktime((2030, 1, 20, 16, 0, 0, 0, 0, -1))),
        ("09:30:15", time.mktime((2030, 1, 21, 9, 30, 15, 0, 0, -1))),  # passed today: tomorrow
        ("2030-02-01", time.mktime((2030, 2, 1, 0, 0, 0, 0, 0, -1))),
        ("2030-02-01T12:34", time.mktime((2030, 2, 1, 12, 34, 0, 0, 0, -1))),
        ("2030-02-01T12:34:56", time.mktime((2030, 2, 1, 12, 34, 56, 0, 0, -1))),
        ("noon", time.mktime((2030, 1, 20, 12, 0, 0, 0, 0, -1))),
        ("tomorrow", time.mktime((2030, 1, 21, 0, 0, 0, 0, 0, -1))),
    ],
)
def test_begin_times(text, want):
    assert compat.parse_begin(text, NOW) == want


@pytest.mark.parametrize("text", ["later", "now+3fortnights", "25:00", "2030-13-01", "2030-02-01T12"])
def test_bad_begin_times(text):
    with pytest.raises(ValueError, match="'"):
        compat.parse_begin(text, NOW)


# -- Slurm directives ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines, ncpus",
    [
        ("#SBATCH --ntasks-per-node=4", "4"),
        ("#SBATCH --tasks-per-node=3 -c 2", "6"),
        ("#SBATCH -N 1 --ntasks-per-node=8", "8"),
        ("#SBATCH -N 2 --ntasks-per-node=4 -c 2", "16"),
        ("#SBATCH -n 3 --ntasks-per-node=8", "3"),  # -n counts the tasks
        ("#SBATCH -N 2", "2"),  # one task per node
    ],
)
def test_slurm_core_counts(lines, ncpus):
    assert opts(f"#!/bin/sh\n{lines}\ntrue\n")["-n"] == ncpus


def test_a_multi_node_request_says_what_the_one_node_one_is():
    tr = compat.translate("#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=4 -c 2\ntrue\n", "j.sh")
    assert tr.warnings == [
        "j.sh:2: #SBATCH -N 2: this is one machine: the job runs here on 16 cores "
        "(the one-node equivalent: --nodes=1 --ntasks=8 --cpus-per-task=2)"
    ]


@pytest.mark.parametrize(
    "line, key, value",
    [
        ("#SBATCH -t 60", "-t", "3600s"),
        ("#SBATCH --time=1-00:00", "-t", "86400s"),
        ("#SBATCH --mem-per-cpu=2G", "--mem-per-cpu", "2G"),
        ("#SBATCH --mem=0", "--mem", "0"),
        ("#SBATCH --mem=300", "--mem", "300"),
        ("#SBATCH --begin=now+1hour", "--begin", "now+1hour"),
        ("#SBATCH --open-mode=append", "--open-mode", "append"),
        ("#SBATCH --requeue", "--checkpoint", "requeue"),
        ("#SBATCH --no-requeue", "--checkpoint", "none"),
        ("#SBATCH -b 16:00", "--begin", "16:00"),
        ("#SBATCH --nice=10", "--nice", "10"),
        ("#SBATCH --nice", "--nice", "100"),
        ("#SBATCH -A Proj_X", "--account", "proj_x"),
    ],
)
def test_slurm_values(line, key, value):
    assert opts(f"#!/bin/sh\n{line}\ntrue\n")[key] == value


@pytest.mark.parametrize(
    "line, warning",
    [
        ("#SBATCH --exclusive=user", "#SBATCH --exclusive=user ignored: only the whole machine"),
        ("#SBATCH --ntasks-per-core=1", "#SBATCH --ntasks-per-core=1 ignored: the job's tasks share"),
        ("#SBATCH --qos=high", "#SBATCH --qos=high ignored: no QOS"),
        ("#SBATCH -p gpu", "#SBATCH -p gpu ignored: no partitions"),
        ("#SBATCH --frob 3", "#SBATCH --frob 3 ignored: not a directive gsub knows"),
        ("#SBATCH -t UNLIMITED", "#SBATCH -t UNLIMITED ignored: no unlimited walltime"),
    ],
)
def test_slurm_warnings_name_the_line_and_directive(line, warning):
    tr = compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh")
    [w] = tr.warnings
    assert w.startswith(f"j.sh:2: {warning}")


def test_harmless_sbatch_flags_are_silent():
    tr = compat.translate("#!/bin/sh\n#SBATCH -v -V\n#SBATCH --export=ALL\ntrue\n", "j.sh")
    assert tr.warnings == [] and tr.settings == []


@pytest.mark.parametrize(
    "line, error",
    [
        ("#SBATCH --open-mode=sideways", "j.sh:2: #SBATCH --open-mode=sideways: must be append or truncate"),
        ("#SBATCH --begin=someday", "j.sh:2: #SBATCH --begin=someday: 'someday': not a begin time"),
        ("#SBATCH --mem-per-cpu=lots", "j.sh:2: #SBATCH --mem-per-cpu=lots: 'lots': not a memory size"),
        ("#SBATCH --ntasks-per-node=x", "j.sh:2: #SBATCH --ntasks-per-node=x: 'x' is not a whole number"),
        ("#SBATCH -N zero", "j.sh:2: #SBATCH -N zero: 'zero' is not a whole number"),
    ],
)
def test_slurm_bad_values_name_file_line_and_directive(line, error):
    with pytest.raises(compat.CompatError) as e:
        compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh")
    assert str(e.value).startswith(error)


# -- PBS and Torque -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, key, value",
    [
        ("#PBS -t 1-10", "--array", "1-10"),  # Torque arrays
        ("#PBS -t 2-6", "--array", "2-6"),
        ("#PBS -t 1-10%2", "--array", "1-10%2"),
        ("#PBS -t 1,3,5-7", "--array", "1,3,5-7"),
        ("#PBS -j oe", "--join", "oe"),
        ("#PBS -j eo", "--join", "eo"),
        ("#PBS -j n", "--join", "n"),
        ("#PBS -S /bin/bash", "--shell", "/bin/bash"),
        ("#PBS -r y", "--checkpoint", "requeue"),
        ("#PBS -r n", "--checkpoint", "none"),
        ("#PBS -l walltime=60", "-t", "60s"),  # a bare PBS walltime is seconds
        ("#PBS -l walltime=01:30:00", "-t", "5400s"),
        ("#PBS -l mem=2gb", "--mem", "2048M"),
        ("#PBS -l pmem=512mb", "--mem-per-cpu", "512M"),
        ("#PBS -l vmem=1gb", "--mem", "1024M"),
        ("#PBS -l pvmem=1gb", "--mem-per-cpu", "1024M"),
        ("#PBS -l nodes=1:ppn=6", "-n", "6"),
        ("#PBS -l select=1:ncpus=4:mem=3gb", "--mem", "3072M"),
        ("#PBS -l select=2:ncpus=4:mem=3gb", "--mem", "6144M"),  # mem is per chunk
        ("#PBS -l select=1:ncpus=2+1:ncpus=3", "-n", "5"),
        ("#PBS -l ncpus=3", "-n", "3"),
        ("#PBS -W depend=afterok:12.server:13.server", "-d", "afterok:12:13"),
        ("#PBS -o host:/tmp/o", "-o", "/tmp/o"),
    ],
)
def test_pbs_values(line, key, value):
    assert opts(f"#!/bin/sh\n{line}\ntrue\n")[key] == value


def test_mem_wins_over_vmem():
    assert opts("#!/bin/sh\n#PBS -l vmem=8gb\n#PBS -l mem=1gb\ntrue\n")["--mem"] == "1024M"


@pytest.mark.parametrize(
    "line, warning",
    [
        ("#PBS -l nodes=2:ppn=8", "#PBS -l nodes=2:ppn=8: 2 nodes: this is one machine"),
        ("#PBS -l select=2:ncpus=4", "#PBS -l select=2:ncpus=4: 2 nodes: this is one machine"),
        ("#PBS -l place=scatter", "#PBS -l place=scatter ignored: scatter: one machine"),
        ("#PBS -M <EMAIL>", "#PBS -M <EMAIL> ignored: '<EMAIL>' is not a mail address"),
        ("#PBS -q long", "#PBS -q long ignored: one queue on one machine"),
        ("#PBS -W group_list=x", "#PBS -W group_list=x ignored: attribute 'group_list' is not supported"),
        ("#PBS -l cput=10:00:00", "#PBS -l cput=10:00:00 ignored: only walltime is enforced"),
        ("#PBS -X 2-6", "#PBS -X 2-6 ignored: not a directive gsub knows"),  # a value is not an option
    ],
)
def test_pbs_warnings(line, warning):
    [w] = compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh").warnings
    assert w.startswith(f"j.sh:2: {warning}")


def test_multi_node_pbs_says_the_one_node_request():
    [w] = compat.translate("#!/bin/sh\n#PBS -l nodes=2:ppn=8\ntrue\n", "j.sh").warnings
    assert w.endswith("(the one-node equivalent: -l nodes=1:ppn=16)")
    assert opts("#!/bin/sh\n#PBS -l nodes=2:ppn=8\ntrue\n")["-n"] == "16"


def test_pbs_k_is_accepted_silently():
    tr = compat.translate("#!/bin/sh\n#PBS -k oe\ntrue\n", "j.sh")
    assert tr.warnings == [] and tr.settings == []


@pytest.mark.parametrize(
    "line, error",
    [
        ("#PBS -j x", "j.sh:2: #PBS -j x: must be oe, eo or n"),
        ("#PBS -r maybe", "j.sh:2: #PBS -r maybe: must be y or n"),
        ("#PBS -t 1-x", "j.sh:2: #PBS -t 1-x: not an array range"),
        ("#PBS -l walltime=soon", "j.sh:2: #PBS -l walltime=soon: 'soon'"),
        ("#PBS -l nodes=1:ppn=zero", "j.sh:2: #PBS -l nodes=1:ppn=zero: 'zero' is not a whole number"),
    ],
)
def test_pbs_bad_values(line, error):
    with pytest.raises(compat.CompatError) as e:
        compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh")
    assert str(e.value).startswith(error)


# -- SGE ----------------------------------------------------------------------------------------

SGE_SCRIPT = """#!/bin/bash
#$ -N sg
#$ -pe smp 4
#$ -l h_rt=01:00:00,h_vmem=2G
#$ -t 1-6:2
#$ -tc 2
#$ -cwd
#$ -V
#$ -j y
#$ -o logs/$JOB_NAME.$JOB_ID.$TASK_ID
#$ -e err
#$ -S /bin/bash
#$ -hold_jid 3,4
#$ -wd /tmp
#$ -r y
echo run
"""


def test_sge_directives():
    tr = compat.translate(SGE_SCRIPT, "g.sh")
    assert tr.dialect == "sge" and tr.warnings == []
    assert tr.params() == {
        "-N": "sg",
        "-n": "4",
        "--pe": "smp",  # the parallel environment's name: PE
        "-t": "3600s",
        "--mem-per-cpu": "2G",  # h_vmem is per slot
        "--array": "1-6:2%2",
        "--join": "oe",
        "-o": "logs/%x.%j.%a",
        "-e": "err",
        "--shell": "/bin/bash",
        "-d": "afterany:3:4",
        "-D": "/tmp",
        "--checkpoint": "requeue",
    }


@pytest.mark.parametrize(
    "line, warning",
    [
        ("#$ -q all.q", "#$ -q all.q ignored: one queue on one machine"),
        ("#$ -m s", "#$ -m s ignored: s: no mail when a job is suspended"),
        ("#$ -l tmem=2G", "#$ -l tmem=2G ignored: resource 'tmem' is not supported"),
        ("#$ -pe mpi 4-8", "#$ -pe mpi 4-8: a slot range: 4 cores are asked"),
    ],
)
def test_sge_warnings(line, warning):
    [w] = compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh").warnings
    assert w.startswith(f"j.sh:2: {warning}")


@pytest.mark.parametrize(
    "line, error",
    [
        ("#$ -pe smp", "j.sh:2: #$ -pe needs a name and a slot count"),
        ("#$ -pe smp x", "j.sh:2: #$ -pe smp x: 'x' is not a whole number"),
        ("#$ -hold_jid ,", "j.sh:2: #$ -hold_jid ,: needs job ids or names"),
        ("#$ -b y", "j.sh:2: #$ -b y: gsub takes a script"),
        ("#$ -l h_rt=soon", "j.sh:2: #$ -l h_rt=soon: 'soon'"),
    ],
)
def test_sge_bad_values(line, error):
    with pytest.raises(compat.CompatError) as e:
        compat.translate(f"#!/bin/sh\n{line}\ntrue\n", "j.sh")
    assert str(e.value).startswith(error)


# -- mixing -------------------------------------------------------------------------------------


def test_mixed_directives_say_which_wins():
    tr = compat.translate("#!/bin/sh\n#PBS -N p\n#SBATCH -J s\n#$ -N g\ntrue\n", "j.sh")
    assert tr.dialect == "pbs" and tr.params() == {"-N": "p"}
    assert tr.warnings == [
        "j.sh:3: the script mixes #PBS and #SBATCH lines: the #PBS lines are read (the first directive, line 2); "
        "the #SBATCH lines are ignored",
        "j.sh:4: the script mixes #PBS and #$ lines: the #PBS lines are read (the first directive, line 2); "
        "the #$ lines are ignored",
    ]


# -- output file names --------------------------------------------------------------------------


def test_every_sbatch_pattern(tmp_path):
    user = pwd.getpwuid(os.getuid()).pw_name
    host = socket.gethostname().split(".", 1)[0]
    p = output_path("o.%j.%J.%A.%a.%x.%u.%N.%n.%s.%t.%%.%5j", "d", 42, "nm", tmp_path, tmp_path)
    assert p == tmp_path / f"o.42.42.42.0.nm.{user}.{host}.0.batch.0.%.00042"


def test_array_patterns_are_left_for_each_task(tmp_path):
    p = output_path("o.%A.%J.%4a.%x.%%", "d", 42, "a%b", tmp_path, tmp_path, array=True)
    assert str(p) == str(tmp_path / "o.42.%j.%4a.a%%b.%%")
    assert task_path(str(p), 43, 7) == str(tmp_path / "o.42.43.0007.a%b.%")


def test_unknown_patterns_are_found():
    assert compat.unknown_patterns("out.%j.%q.%%.%5a.%") == ["%q", "%"]
    assert compat.unknown_patterns("slurm-%A_%a.out") == []


# -- the interpreter ----------------------------------------------------------------------------

LOGIN = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"


def test_a_shebang_on_line_1_wins():
    assert choose_shell("#!/bin/bash\n#PBS -N x\ntrue\n", "j.sh", "pbs", None, os.getuid()) == (None, [])
    shell, notes = choose_shell("#!/bin/bash\ntrue\n", "j.sh", "pbs", "/bin/sh", os.getuid())
    assert shell is None and notes == ["j.sh: shell /bin/sh ignored: the #! line on line 1 chooses the interpreter"]


def test_pbs_and_sge_scripts_without_shebang_run_the_login_shell():
    for dialect in ("pbs", "sge"):
        shell, _ = choose_shell("#PBS -N x\ntrue\n", "j.sh", dialect, None, os.getuid())
        assert shell == (LOGIN if os.access(LOGIN, os.X_OK) else "/bin/sh")


def test_an_explicit_shell_wins_over_the_login_shell():
    assert choose_shell("#PBS -S /bin/sh\ntrue\n", "j.sh", "pbs", "/bin/sh", os.getuid()) == ("/bin/sh", [])


def test_an_sbatch_script_without_shebang_is_refused_as_sbatch_does():
    with pytest.raises(SubmitError) as e:
        choose_shell("#SBATCH -n 1\ntrue\n", "j.sh", "slurm", None, os.getuid())
    assert str(e.value).startswith(
        "j.sh: This does not look like a batch script.  The first line must start with #! followed by the path "
        "to an interpreter."
    )
    assert choose_shell("#SBATCH -n 1\ntrue\n", "j.sh", "slurm", "/bin/sh", os.getuid())[0] == "/bin/sh"


def test_a_shebang_below_line_1_is_named_when_another_shell_runs_the_script():
    shell, notes = choose_shell("\n#!/bin/bash\n(( 1 )) && echo\n", "j.sh", None, None, os.getuid())
    assert shell is None
    assert notes == [
        "j.sh:2: the #! line is not on line 1, so it is not read: the script runs with /bin/sh "
        "(gridsched's default for a script without #! on line 1); move it to line 1 to run bash"
    ]
    _, notes = choose_shell("\n#!/usr/bin/env bash\ntrue\n", "j.sh", "pbs", "/bin/bash", os.getuid())
    assert notes == []  # the shell that runs it is the one it names


@pytest.mark.parametrize("shell", ["bash", "/no/such/shell", "/etc/passwd", "/tmp"])
def test_a_shell_must_be_an_absolute_executable(shell):
    with pytest.raises(SubmitError, match=f"^shell '{shell}': "):
        choose_shell("true\n", "j.sh", None, shell, os.getuid())


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"shell": "bash"}, "must be an absolute path"),
        ({"shell": "/bin/" + "x" * 256}, "component longer than 255 bytes"),
        ({"shell": "/bin/s\0h"}, "NUL"),
        ({"open_mode": "sideways"}, "must be append or truncate"),
    ],
)
def test_the_boundary_checks_the_shell_and_open_mode(fields, why):
    sender = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), False)
    with pytest.raises(rq.Refused, match=why):
        rq.parse({"type": "submit", "job": {**valid_job(5), **fields}}, rq.id_name(5), sender)
    # the form of the shell only: whether it exists is for the job's owner to find out (gsub, the job)
    for shell in ("/bin/sh", "/no/such/shell", "/etc/passwd"):
        ok = rq.parse(
            {"type": "submit", "job": {**valid_job(5), "shell": shell, "open_mode": "append"}}, rq.id_name(5), sender
        )
        assert ok.job.to_spec()["shell"] == shell and ok.job.to_spec()["open_mode"] == "append"  # type: ignore[union-attr]


# -- gsub: what a submission becomes ----------------------------------------------------------


def test_gsub_t_bare_number_is_minutes(env, run, submits):
    assert run(gsub.cli, ["-t", "60", "--wrap", "true"]).exit_code == 0
    assert run(gsub.cli, ["-t", "60s", "--wrap", "true"]).exit_code == 0
    assert run(gsub.cli, ["-t", "1-2", "--wrap", "true"]).exit_code == 0
    write(env / "j.sh", "#!/bin/sh\n#GS -t 5\ntrue\n")
    assert run(gsub.cli, ["j.sh"]).exit_code == 0
    assert [s["walltime"] for s in submits()] == [3600, 60, 86400 + 7200, 300]


def test_a_slurm_script_without_o_writes_slurm_jobid_out_with_stderr_joined(env, run, submits):
    (env / "w").mkdir()
    write(env / "s.sh", "#!/bin/sh\n#SBATCH -D w\ntrue\n")
    write(env / "a.sh", "#!/bin/sh\n#SBATCH --array=1-3\ntrue\n")
    write(env / "e.sh", "#!/bin/sh\n#SBATCH -e err.%j\ntrue\n")
    for s in ("s.sh", "a.sh", "e.sh"):
        assert run(gsub.cli, [s]).exit_code == 0
    assert run(gsub.cli, ["-o", "mine.out", "s.sh"]).exit_code == 0
    s, a, e, mine = submits()
    assert s["stdout"] == s["stderr"] == str(env / "w" / "slurm-1.out")  # in the working directory
    assert a["stdout"] == a["stderr"] == str(env / "slurm-2_%a.out")
    assert (e["stdout"], e["stderr"]) == (str(env / "slurm-3.out"), str(env / "err.3"))
    assert mine["stdout"] == mine["stderr"] == str(env / "w" / "mine.out")


def test_a_plain_script_keeps_two_files(env, run, submits):
    assert run(gsub.cli, ["--wrap", "true"]).exit_code == 0
    [s] = submits()
    assert (s["stdout"], s["stderr"]) == (str(env / "wrap.o1"), str(env / "wrap.e1"))


@pytest.mark.parametrize(
    "join, out, err",
    [("oe", "p.o1", "p.o1"), ("eo", "p.e1", "p.e1"), ("n", "p.o1", "p.e1")],
)
def test_pbs_join(env, run, submits, join, out, err):
    write(env / "p.sh", f"#!/bin/sh\n#PBS -N p\n#PBS -j {join}\ntrue\n")
    assert run(gsub.cli, ["p.sh"]).exit_code == 0
    [s] = submits()
    assert (s["stdout"], s["stderr"]) == (str(env / out), str(env / err))


def test_pbs_o_naming_a_directory(env, run, submits):
    (env / "logs").mkdir()
    write(env / "p.sh", "#!/bin/sh\n#PBS -N p\n#PBS -o logs\n#PBS -e logs/\ntrue\n")
    assert run(gsub.cli, ["p.sh"]).exit_code == 0
    [s] = submits()
    assert (s["stdout"], s["stderr"]) == (str(env / "logs" / "p.o1"), str(env / "logs" / "p.e1"))


def test_unknown_patterns_are_warned(env, run, submits):
    r = run(gsub.cli, ["-o", "o.%q.%j", "--wrap", "true"])
    assert r.exit_code == 0
    assert warnings(r.stderr) == [
        "output 'o.%q.%j': %q is not a file name pattern (known: %A %a %j %J %N %n %s %t %u %x %%); it stays as written"
    ]
    assert submits()[0]["stdout"] == str(env / "o.%q.1")


def test_mem_per_cpu_is_multiplied_by_the_cores(env, run, submits):
    write(env / "s.sh", "#!/bin/sh\n#SBATCH --mem-per-cpu=100M -n 2 -c 3\ntrue\n")
    write(env / "p.sh", "#!/bin/sh\n#PBS -l nodes=1:ppn=4,pmem=1gb\ntrue\n")
    assert run(gsub.cli, ["s.sh"]).exit_code == 0
    assert run(gsub.cli, ["p.sh"]).exit_code == 0
    assert run(gsub.cli, ["-n", "2", "s.sh"]).exit_code == 0  # the command line's cores
    assert run(gsub.cli, ["--mem", "1G", "s.sh"]).exit_code == 0  # the command line's --mem wins
    assert run(gsub.cli, ["--mem-per-cpu", "10M", "--wrap", "true"]).exit_code == 0  # default: 1 core
    assert [s["mem"] for s in submits()] == [600 << 20, 4 << 30, 200 << 20, 1 << 30, 10 << 20]
    r = run(gsub.cli, ["--mem", "1G", "--mem-per-cpu", "1G", "--wrap", "true"])
    assert (r.exit_code, r.stderr) == (2, "gsub: error: --mem and --mem-per-cpu exclude each other\n")


def test_mem_zero_is_the_whole_machine(env, run, submits):
    write(env / "s.sh", "#!/bin/sh\n#SBATCH --mem=0\ntrue\n")
    assert run(gsub.cli, ["s.sh"]).exit_code == 0
    assert run(gsub.cli, ["--mem", "0", "--wrap", "true"]).exit_code == 0
    assert [s["mem"] for s in submits()] == [None, None]


def test_more_memory_than_the_machine_is_refused(env, run, submits):
    write(env / "s.sh", "#!/bin/sh\n#SBATCH --mem=300T\ntrue\n")
    r = run(gsub.cli, ["s.sh"])
    assert r.exit_code == 1
    assert r.stderr.startswith("gsub: error: job can never run: it asks for 300T of memory, the machine has ")
    assert submits() == []


def test_begin_and_open_mode(env, run, submits):
    before = time.time()
    write(env / "s.sh", "#!/bin/sh\n#SBATCH --begin=now+1hour --open-mode=append\ntrue\n")
    assert run(gsub.cli, ["s.sh"]).exit_code == 0
    assert run(gsub.cli, ["--begin", "now+90", "--wrap", "true"]).exit_code == 0
    s, w = submits()
    assert before + 3600 <= s["begin"] <= time.time() + 3600 and s["open_mode"] == "append"
    assert before + 90 <= w["begin"] <= time.time() + 90 and "open_mode" not in w
    r = run(gsub.cli, ["--begin", "someday", "--wrap", "true"])
    assert r.exit_code == 2 and "'someday': not a begin time" in r.stderr


def test_the_interpreter_in_the_request(env, run, submits):
    write(env / "pbs.sh", "#PBS -N p\ntrue\n")
    write(env / "pbs_s.sh", "#PBS -N p\n#PBS -S /bin/sh\ntrue\n")
    write(env / "plain.sh", "true\n")
    write(env / "bang.sh", "#!/bin/sh\n#PBS -S /bin/bash\ntrue\n")
    for s in ("pbs.sh", "pbs_s.sh", "plain.sh", "bang.sh"):
        assert run(gsub.cli, [s]).exit_code == 0
    r = run(gsub.cli, ["--shell", "/bin/sh", "--wrap", "true"])
    assert r.exit_code == 0
    shells = [s.get("shell") for s in submits()]
    assert shells == [LOGIN if os.access(LOGIN, os.X_OK) else "/bin/sh", "/bin/sh", None, None, None]


def test_an_sbatch_script_without_shebang_is_refused(env, run, submits):
    write(env / "s.sh", "#SBATCH -n 1\ntrue\n")
    r = run(gsub.cli, ["s.sh"])
    assert r.exit_code == 2
    assert r.stderr.startswith("gsub: error: s.sh: This does not look like a batch script.")
    assert run(gsub.cli, ["--shell", "/bin/sh", "s.sh"]).exit_code == 0
    assert submits()[0]["shell"] == "/bin/sh"


@pytest.mark.parametrize(
    "line, secs",
    [("0:0:30", 60), ("1:30", 120), ("0-0:0:1", 60), ("0:2:00", 120), ("5", 300)],
)
def test_sbatch_times_are_whole_minutes_rounded_up(line, secs):
    # Slurm keeps time limits in minutes: --time=0:0:30 is a limit of one minute
    assert opts(f"#!/bin/sh\n#SBATCH --time={line}\ntrue\n")["-t"] == f"{secs}s"


@pytest.mark.parametrize(
    "lines, out, err",
    [
        # PBS Pro -J: a subjob's files are JOBNAME.oSEQ.INDEX
        ("#PBS -N a\n#PBS -J 3-5", "a.o1.3", "a.e1.3"),
        # Torque -t: JOBNAME.oJOBID-INDEX
        ("#PBS -N a\n#PBS -t 3-5", "a.o1-3", "a.e1-3"),
        # Grid Engine -t: JOBNAME.oJOBID.TASKID (-cwd: in the submit directory)
        ("#$ -N a\n#$ -cwd\n#$ -t 3-5", "a.o1.3", "a.e1.3"),
        # gsub's own
        ("#GS -N a\n#GS --array 3-5", "a.o1_3", "a.e1_3"),
        # PBS Pro ^array_index^ in -o/-e is the subjob's index; a % is itself
        ("#PBS -J 3-5\n#PBS -o o_^array_index^.txt\n#PBS -e e%j_^array_index^", "o_3.txt", "e%j_3"),
    ],
)
def test_array_task_file_names_as_each_system_writes_them(env, run, submits, lines, out, err):
    write(env / "a.sh", f"#!/bin/sh\n{lines}\ntrue\n")
    r = run(gsub.cli, ["a.sh"])
    assert r.exit_code == 0, r.stderr
    [s] = submits()
    assert task_path(s["stdout"], 1, 3) == str(env / out)
    assert task_path(s["stderr"], 1, 3) == str(env / err)


def test_grid_engine_without_cwd_runs_in_the_home_directory(env, run, submits):
    """Grid Engine runs a job without -cwd or -wd in its owner's home directory and writes its files there
    (seen with Grid Engine 8.1.9: tests/compat/test_sge_oracle.py); -cwd is the submit directory."""
    import pwd

    home = pwd.getpwuid(os.getuid()).pw_dir
    write(env / "h.sh", "#!/bin/sh\n#$ -N h\n#$ -o rel.out\ntrue\n")
    write(env / "c.sh", "#!/bin/sh\n#$ -N c\n#$ -cwd\ntrue\n")
    assert run(gsub.cli, ["h.sh"]).exit_code == 0 and run(gsub.cli, ["c.sh"]).exit_code == 0
    h, c = submits()
    assert (h["workdir"], h["stdout"], h["stderr"]) == (home, f"{home}/rel.out", f"{home}/h.e{h['id']}")
    assert (c["workdir"], c["stdout"]) == (str(env), f"{env}/c.o{c['id']}")


def test_torque_relative_paths_are_from_the_submit_directory_not_from_d(env, run, submits):
    (env / "w").mkdir()
    write(env / "t.sh", "#!/bin/sh\n#PBS -d w\n#PBS -o out.txt\n#PBS -e logs/../err.txt\ntrue\n")
    (env / "logs").mkdir()
    assert run(gsub.cli, ["t.sh"]).exit_code == 0
    [s] = submits()
    assert s["workdir"] == str(env / "w")
    assert (s["stdout"], s["stderr"]) == (str(env / "out.txt"), str(env / "logs/../err.txt"))


def test_slurm_relative_paths_stay_from_the_working_directory(env, run, submits):
    (env / "w").mkdir()
    write(env / "s.sh", "#!/bin/sh\n#SBATCH -D w\n#SBATCH -o out.txt\ntrue\n")
    assert run(gsub.cli, ["s.sh"]).exit_code == 0
    assert submits()[0]["stdout"] == str(env / "w" / "out.txt")


def test_sge_default_files_go_in_the_working_directory(env, run, submits):
    (env / "w").mkdir()
    write(env / "g.sh", "#!/bin/sh\n#$ -N g\n#$ -wd w\ntrue\n")
    assert run(gsub.cli, ["g.sh"]).exit_code == 0
    [s] = submits()
    assert (s["stdout"], s["stderr"]) == (str(env / "w" / "g.o1"), str(env / "w" / "g.e1"))


@pytest.mark.parametrize(
    "lines, err",
    [
        ("#SBATCH -e e_%A_%a.txt", "e_1_4294967294.txt"),  # sbatch: %a of a job that is not an array is NO_VAL
        ("#GS -e e_%A_%a.txt", "e_1_0.txt"),  # gsub's own: 0
    ],
)
def test_array_index_of_a_job_that_is_not_an_array(env, run, submits, lines, err):
    write(env / "x.sh", f"#!/bin/sh\n{lines}\ntrue\n")
    assert run(gsub.cli, ["x.sh"]).exit_code == 0
    assert submits()[0]["stderr"] == str(env / err)


@pytest.mark.parametrize(
    "line, shown",
    [
        ("#PBS -u someone", "#PBS -u someone"),
        ("#SBATCH -F nodes.txt", "#SBATCH -F nodes.txt"),
        ("#SBATCH --wckey wk1", "#SBATCH --wckey wk1"),
        ("#$ -ac key=value", "#$ -ac key=value"),
    ],
)
def test_an_unknown_option_with_a_separate_value_is_one_warning(env, run, submits, line, shown):
    prefix = line.split()[0]
    name = {"#SBATCH": "-J u"}.get(prefix, "-N u")  # a directive read after it
    write(env / "u.sh", f"#!/bin/sh\n{line}\n{prefix} {name}\ntrue\n")
    r = run(gsub.cli, ["u.sh"])
    assert r.exit_code == 0, r.stderr
    assert warnings(r.stderr) == [f"u.sh:2: {shown} ignored: not a directive gsub knows"]
    assert submits()[0]["name"] == "u"


# -- --emit pbs ---------------------------------------------------------------------------------


def pbs_params_from(text: str) -> dict:
    tr = compat.translate(text, "x.sh")
    out = {}
    for _, toks in tr.settings:
        ctx = gsub.cli.make_context("gsub", list(toks), help_option_names=[])
        for k, v in ctx.params.items():
            if ctx.get_parameter_source(k) == click.core.ParameterSource.COMMANDLINE:
                out[k] = v
    return out


@pytest.mark.parametrize(
    "args",
    [
        ["-N", "render", "-n", "4", "-t", "2:00:00", "--mem", "1536M", "-o", "out.log", "-e", "err.log"],
        ["-t", "1d", "--checkpoint", "none", "--hold", "-j", "oe", "-d", "afterok:3"],
        ["--array", "1-4", "--checkpoint", "requeue", "-D", "/tmp", "--shell", "/bin/bash"],
    ],
)
def test_emitted_pbs_reads_back_as_the_same_options(env, run, submits, args):
    write(env / "job.sh", "#!/bin/bash\n#GS -N fromgs\n# keep me\necho run\n")
    r = run(gsub.cli, ["--emit", "pbs", *args, "job.sh"])
    assert r.exit_code == 0 and submits() == []
    assert r.stdout.startswith("#!/bin/bash\n#PBS ") and "#GS" not in r.stdout
    assert "# keep me\necho run\n" in r.stdout
    back = pbs_params_from(r.stdout)
    want = gsub.cli.make_context("gsub", [*args, "job.sh"], help_option_names=[]).params
    want["name"] = want["name"] or "fromgs"
    for k, v in back.items():
        if k == "ncpus" and want.get("ncpus") is None:
            assert v == 1  # select=1:ncpus=1 carries the memory
            continue
        assert want[k] == v, k


def test_emit_pbs_comments_what_pbs_lacks(env, run):
    r = run(gsub.cli, ["--emit", "pbs", "--checkpoint", "signal", "-o", "o.%j", "--wrap", "true"])
    assert r.exit_code == 0
    assert "# gridsched: dropped --checkpoint signal (no PBS equivalent)\n" in r.stdout
    assert "# gridsched: PBS does not expand % patterns in -o\n" in r.stdout


def test_emit_starts_with_the_interpreter_the_script_runs_under(env, run):
    write(env / "p.sh", "#PBS -N p\n#PBS -l walltime=60\ntrue\n")
    r = run(gsub.cli, ["--emit", "slurm", "p.sh"])
    assert r.exit_code == 0
    want = LOGIN if os.access(LOGIN, os.X_OK) else "/bin/sh"
    assert r.stdout == f"#!{want}\n#SBATCH --job-name=p\n#SBATCH --time=00:01:00\ntrue\n"


def test_pbs_W_depend_after_another_attribute():
    tr = compat.translate("#!/bin/sh\n#PBS -W group_list=g,depend=afterok:1.srv,afterany:2\ntrue\n", "j.sh")
    assert tr.params() == {"-d": "afterok:1,afterany:2"}
    assert tr.warnings == ["j.sh:2: #PBS -W group_list=g ignored: attribute 'group_list' is not supported"]


def test_pbs_mem_wins_over_pmem():
    tr = compat.translate("#!/bin/sh\n#PBS -l mem=4gb,pmem=1gb\ntrue\n", "j.sh")
    assert tr.params() == {"--mem": "4096M"}
    assert tr.warnings == ["j.sh:2: #PBS -l pmem=1gb ignored: mem= gives the memory of the whole job"]


# Grid Engine reads #$ lines as qsub(1) of Grid Engine 8.1.9 was seen to, here: "#$-l h_rt=3:59:59" gave
# h_rt=14399 and "#$-cwd" the submit directory (qstat -j), a "#$ -N late" below the first command named the
# job "late", an indented "  #$ -N x" did not.
def test_sge_lines_are_read_without_a_space_and_below_the_first_command():
    tr = compat.translate("#!/bin/sh\n#$-l h_rt=3:59:59\n#$-cwd\necho hi\n#$ -N late\n  #$ -N indented\n", "g.sh")
    assert tr.dialect == "sge" and tr.warnings == []
    assert tr.params() == {"-t": "14399s", "-N": "late"}


def test_a_hash_dollar_comment_is_no_directive():
    assert compat.scan("#!/bin/sh\necho hi\n#$HOME is where it runs\n", "#$") == []
    assert compat.translate("#!/bin/sh\n#SBATCH -N 1\ntrue\n#$HOME\n", "s.sh").dialect == "slurm"


def test_an_sge_script_written_without_spaces_keeps_its_walltime_and_shell(env, run, submits):
    write(env / "g.sh", "#$-l h_rt=3:59:59\n#$-cwd\ntrue\n")
    assert run(gsub.cli, ["g.sh"]).exit_code == 0
    [s] = submits()
    assert s["walltime"] == 14399
    assert s["shell"] == (LOGIN if os.access(LOGIN, os.X_OK) else "/bin/sh")


def test_an_sbatch_reservation_is_gsubs_reservation():
    tr = compat.translate("#!/bin/sh\n#SBATCH --reservation=maint\ntrue\n", "r.sh")
    assert tr.warnings == [] and tr.params() == {"--reservation": "maint"}


# PBS Pro's and Torque's sizes (OpenPBS src/lib/Libattr/attr_fn_size.c, to_size): k/m/g/t/p in any case,
# then an optional b or w (a word is 8 bytes); gsub's --mem takes the bytes rounded up to KiB.
@pytest.mark.parametrize(
    "value, mem",
    [("12G", "12288M"), ("12gb", "12288M"), ("512m", "512M"), ("2kw", "16K"), ("4096", "4K"), ("1w", "1K")],
)
def test_pbs_sizes_take_every_unit_pbs_takes(value, mem):
    tr = compat.translate(f"#!/bin/sh\n#PBS -l mem={value}\ntrue\n", "p.sh")
    assert tr.warnings == [] and tr.params()["--mem"] == mem


@pytest.mark.parametrize("value", ["12gbw", "12bb", "12x", "g"])
def test_what_pbs_refuses_as_a_size_is_refused(value):
    with pytest.raises(compat.CompatError, match="is not a PBS size"):
        compat.translate(f"#!/bin/sh\n#PBS -l mem={value}\ntrue\n", "p.sh")


# Torque gives each subjob of a -t array its own -o and -e files, the path with -INDEX after it (Torque
# src/server/job_func.c, job_clone); PBS Pro's -J keeps the path as written (^array_index^ names subjobs).
def test_a_torque_arrays_files_are_one_per_task(env, run, submits):
    tr = compat.translate("#!/bin/sh\n#PBS -t 1-3\n#PBS -o run.log\n#PBS -e err.log\ntrue\n", "t.sh")
    assert tr.params() == {"--array": "1-3", "-o": "run.log-%a", "-e": "err.log-%a"}
    assert compat.translate("#!/bin/sh\n#PBS -J 1-3\n#PBS -o run.log\ntrue\n", "p.sh").params()["-o"] == "run.log"
    write(env / "t.sh", "#!/bin/sh\n#PBS -t 1-3\n#PBS -o run.log\ntrue\n")
    assert run(gsub.cli, ["t.sh"]).exit_code == 0
    assert submits()[0]["stdout"] == str(env / "run.log-%a")
