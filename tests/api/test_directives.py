"""The Python API reads a script's directives without click (gridsched.submission.directives): what it takes
of them, and what it refuses and in which words, are gsub's, whose click command reads the same lines."""

from __future__ import annotations

import click
import pytest

from gridsched.cli import gsub
from gridsched.cli.gsub_cli import cli as gsub_command
from gridsched.submission import directives
from gridsched.submission.errors import SubmitError
from gridsched.submission.submit import Script


def test_the_option_table_is_gsubs():
    """Every option of gsub's command, by each of its names, with its parameter and whether it takes a value;
    and no other."""
    options = [p for p in gsub_command.params if isinstance(p, click.Option)]
    want = {o: (p.name, not p.is_flag) for p in options for o in p.opts}
    assert directives.OPTIONS == want
    assert directives.MULTIPLE == {p.name for p in options if p.multiple}
    refused = {k: v for k, v in gsub.NOT_IN_DIRECTIVES.items() if k not in ("script", "args")}
    assert directives.NOT_IN_DIRECTIVES == refused
    assert directives.PREFIX == gsub.DIRECTIVE
    assert directives.TAKEN <= {p.name for p in options}
    choices = {p.name: tuple(p.type.choices) for p in options if hasattr(p.type, "choices")}
    assert {**directives.CHOICES, "gpu_bind": choices["gpu_bind"]} == choices


def by_gsub(sc: Script, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, object] | None, str]:
    """What gsub's click command makes of the script's directives (the parameters the API takes, those set),
    or its one line refusing them; and its warnings."""
    ctx = gsub_command.make_context(gsub.PROG, [sc.label], help_option_names=[])
    try:
        p = gsub.apply_directives(ctx, ctx.params, sc)
    except SystemExit:
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("gsub: error: ")
        return None, err[-1].removeprefix("gsub: error: ")
    capsys.readouterr()
    return {k: v for k, v in p.items() if k in directives.TAKEN and v not in (None, False)}, ""


def by_api(sc: Script) -> tuple[dict[str, object] | None, str]:
    try:
        got = directives.job_values(directives.read(sc))
    except SubmitError as e:
        assert e.code == 2
        return None, str(e)
    return {k: v for k, v in got.items() if v not in (None, False)}, ""


SCRIPTS = [
    # taken: each form of each option the API takes
    "#GS -N fromdirective\n#GS -n 2\n#GS -t 7m\necho hi\n",
    "#GS -n2 -t10 --mem=4G -o out.txt -e err.txt -D /tmp\ntrue\n",
    "#!/bin/bash\n#GS --ncpus=3 --walltime 1:00:00 --mem-per-cpu 1G\n#GS --hold --checkpoint Signal\ntrue\n",
    "#GS --mem 0 --depend afterok:1:2 --shell /bin/bash\n#GS -d afterany:3\ntrue\n",
    "#GS -n 2\n#GS -n 4\n#GS -N a -N b\ntrue\n",  # a later value wins
    "#GS --dependency=afterok:7 --name=x=y -N'quoted name'\ntrue\n",
    # read for their form only, as the API takes none of them
    "#GS --begin now+1hour -l lic=1 -l lic2=2 --gres gpu:1 --exclusive --get-user-env\n#GS --array 0-3 -n 1\ntrue\n",
    "#GS --get-user-env=10L --signal USR1@60 --nice 5 -a 1-2 --place pack --gpus 1 -A acct -p part\ntrue\n",
    # other schedulers' directives, translated
    "#!/bin/bash\n#SBATCH -J slurmjob\n#SBATCH -c 4\n#SBATCH -t 10\n#SBATCH --mem=2G\n#SBATCH -o o.%j\ntrue\n",
    "#!/bin/bash\n#PBS -N pbsjob\n#PBS -l walltime=01:00:00\n#PBS -l ncpus=2\ntrue\n",
    "#!/bin/sh\n#$ -N sgejob\n#$ -l h_rt=600\ntrue\n",
    "true\n",  # none
    # refused, in gsub's words
    "#GS --bogus\ntrue\n",
    "#GS --nam x\ntrue\n",
    "#GS -x\ntrue\n",
    "#GS -n x\ntrue\n",
    "#GS -n 0\ntrue\n",
    "#GS -t -5\ntrue\n",
    "#GS -t 99:99:99:99\ntrue\n",
    "#GS --mem lots\ntrue\n",
    "#GS --mem-per-cpu -1\ntrue\n",
    "#GS --checkpoint sometimes\ntrue\n",
    "#GS -d garbage\ntrue\n",
    "#GS --hold=yes\ntrue\n",
    "#GS -n\ntrue\n",
    "#GS --name\ntrue\n",
    "#GS -n 2 foo\ntrue\n",
    "#GS -- foo\ntrue\n",
    "#GS --wrap 'echo hi'\ntrue\n",
    "#GS --spool /tmp/x\ntrue\n",
    "#GS -N 'unbalanced\ntrue\n",
    "#GS -n 2\n#GS -n x\ntrue\n",  # the line with the bad value is named
    "#GS -n x\n#GS -n 2\ntrue\n",  # a bad value is refused even when a later line gives another
    "\n#!/bin/bash\n#SBATCH -t 3\n[[ 1 == 1 ]]\n",
    # click's ways with the forms of a word
    "#GS -n=2\ntrue\n",
    "#GS --ncpus=\ntrue\n",
    "#GS --get-user-env -n 2\ntrue\n",
    "#GS --\n#GS -n 2 --\ntrue\n",
    "#GS -\ntrue\n",
    "#GS --exclusive=yes\ntrue\n",
    "#GS --help\ntrue\n",
    "#GS -name\ntrue\n",
    "#GS -o -n\ntrue\n",
    "#GS -N x # a comment\ntrue\n",
    # the values of the options the API does not take are checked as gsub checks them
    *(
        f"#GS {words}\ntrue\n"
        for words in (
            "--ntasks 0",
            "-c x",
            "--split 0",
            "--parent x",
            "--estimate -5",
            "--task-time x",
            "-j x",
            "--open-mode sideways",
            "--place everywhere",
            "--gpu-bind x",
            "--gpu-bind CLOSEST",
            "--nice x",
            "--nice 99999",
            "--priority -1",
            "--threads-per-core 5",
            "--threads-per-core x",
            "--split-retries 101",
            "--gpus-per-task x",
            "--export GS_JOBID=1",
            "--export 'A=\"b'",
            "--get-user-env=zz",
            "--mail-type bogus",
            "--mail-user 'a b'",
            "--begin garbage",
            "--signal FOO",
            "--emit x",
            "--emit slurm",
            "-n 2 --mem x --wrap true",  # the first bad value on the line is the one refused
            "--wrap true --mem x",
            "--join OE --open-mode APPEND --place Spread --nice -5 --priority 7 --threads-per-core 2",
            "--split-retries 3 --gpus-per-task 2 --export ALL,A=1 --mail-type END,FAIL --mail-user me",
            "--begin now+1hour --signal B:USR1@30 --estimate 5 --task-time 1m --gpu-bind none -l a=1 -l b=2",
        )
    ),
]


@pytest.mark.parametrize("text", SCRIPTS)
def test_the_api_reads_directives_as_gsub(text, capsys):
    sc = Script(text, "/work/job.sh", "job.sh")
    gsub_read, gsub_says = by_gsub(sc, capsys)
    api_read, api_says = by_api(sc)
    assert (api_read, api_says) == (gsub_read, gsub_says)


def test_the_cases_cover_taking_and_refusing(capsys):
    """The cases above are worth comparing: most are taken with values, some refused (a comparison of two
    readers that refuse everything would pass too)."""
    results = [by_api(Script(t, "/work/job.sh", "job.sh")) for t in SCRIPTS]
    taken = [r for r, _ in results if r]
    refused = [why for r, why in results if r is None]
    assert len(taken) >= 12 and len(refused) >= 40
    assert {"name", "ncpus", "walltime", "mem", "mem_per_cpu", "output", "error", "chdir", "hold"} <= {
        k for r in taken for k in r
    }
    assert {"checkpoint", "depend", "shell"} <= {k for r in taken for k in r}
