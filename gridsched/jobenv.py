"""Environment variables that make a job feel at home for Slurm and PBS users.

With ``[compat] env = true`` in gridsched.toml a job sees, besides its own
``GS_*`` variables, the names scripts written for Slurm, PBS and Grid Engine
read.  Standard library only: the daemon calls this for every job start.
"""

from __future__ import annotations


def compat_env(job_id: int, name: str, ncpus: int, submit_dir: str) -> dict[str, str]:
    """The Slurm, PBS and Grid Engine variables of job ``job_id``."""
    jid, n = str(job_id), str(ncpus)
    return {
        "SLURM_JOB_ID": jid,
        "SLURM_JOBID": jid,
        "SLURM_CPUS_ON_NODE": n,
        "SLURM_JOB_NAME": name,
        "SLURM_SUBMIT_DIR": submit_dir,
        "PBS_JOBID": jid,
        "PBS_JOBNAME": name,
        "PBS_O_WORKDIR": submit_dir,
        "NSLOTS": n,
    }


def array_env(array_id: int, index: int, indices: tuple[int, ...], compat: bool) -> dict[str, str]:
    """The variables that tell an array task who it is (and the Slurm and PBS names with ``compat``)."""
    aid, idx = str(array_id), str(index)
    env = {"GS_ARRAY_JOB_ID": aid, "GS_ARRAY_TASK_ID": idx, "GS_ARRAY_TASK_COUNT": str(len(indices))}
    if compat:
        env.update(
            SLURM_ARRAY_JOB_ID=aid,
            SLURM_ARRAY_TASK_ID=idx,
            SLURM_ARRAY_TASK_COUNT=str(len(indices)),
            SLURM_ARRAY_TASK_MIN=str(indices[0]),
            SLURM_ARRAY_TASK_MAX=str(indices[-1]),
            PBS_ARRAY_ID=aid,
            PBS_ARRAY_INDEX=idx,
        )
    return env
