"""Slurm's, PBS's and Grid Engine's commands inside a job, in the real daemon: a Slurm script resubmits
itself with sbatch, finds its host with scontrol, sees itself in squeue and cancels its follower with
scancel; a PBS script submits with qsub and looks with qstat; a ``#!/bin/bash -l`` script keeps its srun."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.daemon.test_jobenv import config, env_of, make_shared

NAME = socket.gethostname().split(".")[0]


def test_slurm_script_uses_sbatch_scontrol_squeue_scancel(shared_make_gs):
    gs = make_shared(shared_make_gs)
    script = gs.work / "chain.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -J chain\n#SBATCH -o chain-%j.out\n"
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        'echo "master=$MASTER_ADDR"\n'
        'if [ "$1" != again ]; then\n'
        '  next=$(sbatch --parsable --dependency=afterok:$SLURM_JOB_ID --hold -J follower "$0" again) || exit 3\n'
        '  echo "next=$next"\n'
        "  squeue -h -o '%i %t %j' -j $SLURM_JOB_ID,$next\n"
        "  scontrol show job $SLURM_JOB_ID | head -n 3\n"
        "  scancel $next || exit 4\n"
        "  fed=$(printf '#!/bin/sh\\n#SBATCH -J fed\\ntrue\\n' | sbatch --hold) || exit 5\n"
        '  echo "fed=${fed##* }"\n'
        "  scancel ${fed##* } || exit 6\n"
        "fi\n"
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    out = (gs.work / f"chain-{jid}.out").read_text()
    lines = out.splitlines()
    assert lines[0] == f"master={NAME}"
    nxt = int(lines[1].removeprefix("next="))
    assert f"{jid} R chain" in lines and f"{nxt} PD follower" in lines
    assert f"JobId={jid} JobName=chain" in out and "JobState=RUNNING" in out
    assert gs.job(nxt)["state"] == "CANCELLED"
    assert gs.job(nxt)["name"] == "follower"
    fed = int(lines[-1].removeprefix("fed="))  # a script on sbatch's standard input
    assert (gs.job(fed)["name"], gs.job(fed)["state"]) == ("fed", "CANCELLED")


def test_sbatch_and_qsub_refuse_what_they_do_not_know(shared_make_gs):
    gs = make_shared(shared_make_gs)
    script = gs.work / "bad.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH -J bad\n"
        "sbatch --no-such-option x.sh 2> sb.err; echo $? > sb.rc\n"
        "scontrol show partition 2> sc.err; echo $? > sc.rc\n"
        "scancel 999999 2> sx.err; echo $? > sx.rc\n"
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    for name in ("sb", "sc", "sx"):
        assert (gs.work / f"{name}.rc").read_text().strip() == "1", name
        err = (gs.work / f"{name}.err").read_text().splitlines()
        assert len(err) == 1 and ": error: " in err[0], err
    assert "--no-such-option" in (gs.work / "sb.err").read_text()


def test_pbs_script_uses_qsub_qstat_qdel(shared_make_gs):
    gs = make_shared(shared_make_gs)
    (gs.work / "child.sh").write_text("#!/bin/sh\n#PBS -N child\nsleep 30\n")
    script = gs.work / "p.sh"
    script.write_text(
        "#!/bin/sh\n#PBS -N parent\ncd $PBS_O_WORKDIR\n"
        "id=$(qsub -h -l walltime=00:05:00 child.sh) || exit 3\n"
        'echo "$id" > qsub.out\n'
        'qstat "$id" > qstat.out\n'
        'qdel "$id" || exit 4\n'
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    pid = (gs.work / "qsub.out").read_text().strip()
    assert pid.endswith(f".{NAME}")
    child = int(pid.split(".")[0])
    table = (gs.work / "qstat.out").read_text().splitlines()
    assert table[0].startswith("Job id") and table[2].split()[:2] == [pid[:17], "child"]
    assert table[2].split()[-2:] == ["H", "batch"]
    assert gs.job(child)["state"] == "CANCELLED"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_login_shell_keeps_the_jobs_commands(shared_make_gs):
    """``#!/bin/bash -l``: where /etc/profile sets PATH anew, BASH_ENV puts the job's bin/ back first, so
    srun and scontrol are found (and the job's ending says whether they were)."""
    gs = make_shared(shared_make_gs)
    script = gs.work / "l.sh"
    script.write_text(
        "#!/bin/bash -l\n#SBATCH -n 2\n#SBATCH -o l.out\n"
        "srun -n 2 true || exit 5\n"
        "scontrol show hostnames || exit 6\n"
        "env -0 > env.out\n"
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED", "FAILED")
    assert gs.job(jid)["state"] == "COMPLETED", (gs.work / "l.out").read_text()
    e = env_of(gs.work / "env.out")
    assert e["PATH"].split(":")[0].endswith("/bin") and Path(e["BASH_ENV"]).name == "bash_env"
    assert (gs.work / "l.out").read_text().splitlines() == [NAME]
    wait_for(lambda: not Path(e["BASH_ENV"]).exists(), 10, "the private directory to be removed")


def test_a_jobs_own_bash_env_is_kept(shared_make_gs):
    gs = make_shared(shared_make_gs)
    mine = gs.work / "mine.sh"
    mine.write_text("export FROM_MINE=1\n")
    script = gs.work / "b.sh"
    script.write_text("#!/bin/bash\nenv -0 > env.out\n")
    jid = gs.gsub(f"--export=ALL,BASH_ENV={mine}", str(script))
    gs.wait_state(jid, "COMPLETED")
    e = env_of(gs.work / "env.out")
    assert e["BASH_ENV"] == str(mine) and e["FROM_MINE"] == "1"


assert config  # the daemon's configuration of these tests is test_jobenv's


def test_grid_engine_script_uses_its_qsub_and_qstat(shared_make_gs):
    """In a #$ job, qsub reads Grid Engine's options (-terse, -N, -h) and qstat shows Grid Engine's states."""
    gs = make_shared(shared_make_gs)
    (gs.work / "kid.sh").write_text("#!/bin/sh\nsleep 30\n")
    script = gs.work / "g.sh"
    script.write_text(
        "#!/bin/sh\n#$ -N ge\n#$ -cwd\n"
        "id=$(qsub -terse -h -N kid kid.sh) || exit 3\n"
        'echo "$id" > qsub.out\n'
        "qstat > qstat.out\n"
        'qdel "$id" || exit 4\n'
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    kid = int((gs.work / "qsub.out").read_text().strip())
    rows = [ln.split() for ln in (gs.work / "qstat.out").read_text().splitlines()[2:]]
    assert [kid, "kid", "hqw"] in [[int(r[0]), r[1], r[3]] for r in rows]
    assert [jid, "ge", "r"] in [[int(r[0]), r[1], r[3]] for r in rows]
    assert gs.job(kid)["state"] == "CANCELLED"


def test_sbatch_wrap_makes_a_slurm_job(shared_make_gs):
    """sbatch --wrap inside a job: a job named wrap (or -J), writing slurm-ID.out, with Slurm's
    environment (no OMP_NUM_THREADS of gridsched's), as under sbatch."""
    gs = make_shared(shared_make_gs)
    script = gs.work / "w.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH -J parent\n#SBATCH -o parent.out\n"
        "cmd='echo \"name=$SLURM_JOB_NAME omp=${OMP_NUM_THREADS:-unset} pbs=${PBS_JOBID:-unset}\"'\n"
        'sbatch --parsable --wrap "$cmd"\n'
        'sbatch --parsable -J named --wrap "$cmd"\n'
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    kids = [int(x) for x in (gs.work / "parent.out").read_text().split()]
    for kid, name in zip(kids, ("wrap", "named"), strict=True):
        gs.wait_state(kid, "COMPLETED")
        out = gs.work / f"slurm-{kid}.out"
        assert out.read_text().strip() == f"name={name} omp=unset pbs=unset"
