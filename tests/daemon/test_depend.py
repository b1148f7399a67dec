"""The Slurm/PBS environment of a job, in the real daemon.

Dependencies between jobs are tested in process, on a driven clock, in test_depend_driven.py."""

from __future__ import annotations

import socket


def test_jobs_see_slurm_and_pbs_variables(gs):
    jid = gs.gsub(
        "-n",
        "2",
        "-N",
        "compat",
        "--wrap",
        "echo $SLURM_JOB_ID $SLURM_CPUS_ON_NODE $PBS_JOBID $NSLOTS $PBS_O_WORKDIR > env.out",
    )
    gs.wait_state(jid, "COMPLETED")
    host = socket.gethostname().split(".")[0]
    assert (gs.work / "env.out").read_text().split() == [str(jid), "2", f"{jid}.{host}", "2", str(gs.work)]
