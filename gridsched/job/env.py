"""What a job sees in its environment: its own ``GS_*`` variables and, for scripts written for other
batch systems, the Slurm, PBS Pro, Torque and Grid Engine ones.

The ``GS_*`` variables, ``TMPDIR`` (the job's private temporary directory) and
the job's ``bin`` directory first on ``PATH`` (``srun``, and ``mpirun`` and
``mpiexec`` where no MPI is installed; see :mod:`gridsched.job.launcher`) are
always set.  With ``[compat] env = true`` in gridsched.toml (the default) a
job also sees the names scripts written for Slurm, PBS Pro, Torque and Grid
Engine read, with the values those systems give a one-node job of the same
request (docs/compat.md lists them with their sources).  With
``[compat] env = false`` it sees none of them: no variable of those names is
set, and none is passed on from the submitting environment.

Standard library only: the daemon calls this for every job start.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gridsched.core.topology import Device
    from gridsched.protocol.requests import JobSpec

PRIVATE_PREFIX = "gridsched."  # a job's private directory is BASE/gridsched.JOBID.RANDOM
QUEUE = "batch"  # the one queue (PBS_QUEUE) and partition (SLURM_JOB_PARTITION)
SGE_QUEUE = "all.q"  # Grid Engine's default queue name (QUEUE, PE_HOSTFILE)

# every name the compatibility environment may set: removed from the submitting environment first, so a
# job submitted from inside another job never sees that job's values
SLURM_NAMES = (
    "SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NAME SLURM_JOB_USER SLURM_JOB_UID SLURM_SUBMIT_DIR SLURM_SUBMIT_HOST "
    "SLURM_CLUSTER_NAME SLURM_JOB_PARTITION SLURM_CPUS_PER_TASK SLURM_NTASKS SLURM_NPROCS SLURM_NTASKS_PER_NODE "
    "SLURM_TASKS_PER_NODE SLURM_NNODES SLURM_JOB_NUM_NODES SLURM_JOB_NODELIST SLURM_NODELIST SLURMD_NODENAME "
    "SLURM_CPUS_ON_NODE SLURM_JOB_CPUS_PER_NODE SLURM_MEM_PER_NODE SLURM_MEM_PER_CPU SLURM_RESTART_COUNT "
    "SLURM_NODEID SLURM_PROCID SLURM_LOCALID SLURM_STEP_ID SLURM_STEPID SLURM_JOB_GID SLURM_GPUS "
    "SLURM_GPUS_PER_TASK SLURM_JOB_ACCOUNT SLURM_GET_USER_ENV SLURM_OPEN_MODE SLURM_GPUS_PER_NODE SLURM_HINT "
    "SLURM_THREADS_PER_CORE SLURM_NTASKS_PER_CORE SLURM_MEM_PER_GPU"
).split()
PBS_NAMES = (
    "PBS_JOBID PBS_JOBNAME PBS_O_WORKDIR PBS_O_HOST PBS_O_HOME PBS_O_PATH PBS_O_LOGNAME PBS_O_SHELL PBS_O_LANG "
    "PBS_O_MAIL PBS_O_QUEUE PBS_QUEUE PBS_NODEFILE PBS_NUM_NODES PBS_NUM_PPN PBS_NP NCPUS PBS_ENVIRONMENT "
    "PBS_TASKNUM PBS_NODENUM PBS_VNODENUM PBS_O_TZ PBS_O_SYSTEM PBS_WALLTIME"
).split()
SGE_NAMES = (
    "JOB_ID JOB_NAME NSLOTS NHOSTS NQUEUES QUEUE PE PE_HOSTFILE SGE_O_WORKDIR SGE_O_HOST SGE_O_HOME SGE_O_PATH "
    "SGE_O_LOGNAME SGE_O_SHELL RESTARTED ENVIRONMENT REQUEST REQNAME SGE_CWD_PATH SGE_STDOUT_PATH SGE_STDERR_PATH "
    "SGE_STDIN_PATH"
).split()
ARRAY_NAMES = (
    "SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX "
    "SLURM_ARRAY_TASK_STEP PBS_ARRAY_ID PBS_ARRAY_INDEX PBS_ARRAYID SGE_TASK_ID SGE_TASK_FIRST SGE_TASK_LAST "
    "SGE_TASK_STEPSIZE"
).split()
MPI_NAMES = ("OMPI_MCA_orte_default_hostfile", "PRTE_MCA_prte_default_hostfile", "HYDRA_HOST_FILE")
GS_ARRAY_NAMES = ("GS_ARRAY_JOB_ID", "GS_ARRAY_TASK_ID", "GS_ARRAY_TASK_COUNT")
DEVICE_NAMES = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
# the names the daemon sets for a job, which a submission may not give a value (gsub --export VAR=VALUE, #PBS -v)
OWNED_PREFIXES = ("GS_", "SLURM_")
OWNED_NAMES = frozenset((*SLURM_NAMES, *PBS_NAMES, *SGE_NAMES, *ARRAY_NAMES, *MPI_NAMES, *DEVICE_NAMES, "TMPDIR"))
# what the job may set for itself over what the daemon would give it
USER_WINS = ("OMP_NUM_THREADS",)
# Grid Engine's names that do not start with SGE_
SGE_PLAIN = frozenset(n for n in SGE_NAMES if not n.startswith("SGE_"))
# the systems that set no OMP_NUM_THREADS (PBS Pro sets it from the chunk's ncpus; gridsched's own jobs get it)
NO_OMP = ("slurm", "sge")
# Slurm 22.05's ntasks_per_core for --hint=multithread (INFINITE16), which sbatch puts in SLURM_NTASKS_PER_CORE
MULTITHREAD_TASKS_PER_CORE = "65535"


def system_of(name: str) -> str | None:
    """Which batch system's name ``name`` is: "slurm", "pbs", "sge", or None (gridsched's, or no system's)."""
    if name.startswith(("SLURM_", "SLURMD_")):
        return "slurm"
    if name.startswith("PBS_") or name == "NCPUS":
        return "pbs"
    if name.startswith("SGE_") or name in SGE_PLAIN:
        return "sge"
    return None


def of_dialect(env: Mapping[str, str], dialect: str | None) -> dict[str, str]:
    """``env`` without the names of other systems than ``dialect`` (None, a script without another system's
    directives: every system's names are kept)."""
    if dialect is None:
        return dict(env)
    return {k: v for k, v in env.items() if system_of(k) in (None, dialect)}


def owned(name: str) -> bool:
    """Whether the daemon sets ``name`` for a job (who it is, its cores, devices, private directory)."""
    return name.startswith(OWNED_PREFIXES) or name in OWNED_NAMES


def host() -> str:
    """The machine's short host name: the one node of every job."""
    return socket.gethostname().split(".", 1)[0] or "localhost"


@dataclass(frozen=True, slots=True)
class Private:
    """A job's private directory (``root``, the owner's, mode 0700) and what is in it."""

    root: str
    tmpdir: str  # TMPDIR
    nodefile: str  # the host once per core (PBS_NODEFILE)
    mpi_hosts: str  # the host once per MPI rank (jobenv.mpi_ranks)
    pe_hostfile: str  # Grid Engine's "host slots queue processors"
    bin: str  # srun (and mpirun, mpiexec without an MPI of the machine's), sbatch, scontrol, qsub, ...
    bash_env: str = ""  # BASH_ENV: bin first on PATH again after a login shell's profile


@dataclass(frozen=True, slots=True)
class Job:
    """What the environment of one start of a job is made from."""

    id: int
    name: str
    user: str
    uid: int
    ncpus: int
    submit_dir: str
    submit_env: Mapping[str, str] = field(default_factory=dict)
    ntasks: int | None = None  # as asked (gsub --ntasks, #SBATCH -n)
    cpus_per_task: int | None = None  # as asked (gsub --cpus-per-task, #SBATCH -c)
    mem: int | None = None  # bytes
    restarts: int = 0  # how many times it was requeued or preempted and started again
    array_id: int | None = None
    array_index: int | None = None
    host: str = "localhost"
    gid: int = -1
    dialect: str | None = None  # whose directives the script has (JobSpec.dialect)
    mem_per_cpu: int | None = None  # bytes, as asked (--mem-per-cpu)
    mem_per_gpu: int | None = None  # bytes, as asked (--mem-per-gpu)
    gpus_per_task: int | None = None  # as asked (--gpus-per-task)
    account: str | None = None  # as named (--account, #SBATCH -A)
    get_user_env: bool = False  # starts from the owner's login environment (--get-user-env)
    open_mode: str | None = None  # "append": its output files are appended to (--open-mode)
    ntasks_per_node: int | None = None  # as asked (--ntasks-per-node)
    hint: str | None = None  # as asked (--hint): a gridsched.protocol.jobs.Hint value
    threads_per_core: int = 0  # hardware threads of each physical core it uses (0: any)
    gpus: str | None = None  # its GPUs as --gpus asked them ([MODEL:]N), when it did
    gpus_per_node: str | None = None  # likewise --gpus-per-node
    pe: str | None = None  # the Grid Engine parallel environment it named (-pe NAME SLOTS)
    workdir: str = ""  # where it runs
    stdout: str = ""  # its standard output and error files
    stderr: str = ""
    walltime: int | None = None  # seconds, this start's limit


def tasks(ncpus: int, ntasks: int | None, cpus_per_task: int | None) -> tuple[int, int]:
    """``(tasks, cores per task)`` of a job: as asked, else one task on all its cores (gsub -n N is
    ``--ntasks=1 --cpus-per-task=N``, as gsub --emit slurm writes it)."""
    if ntasks is not None:
        return ntasks, cpus_per_task or max(1, ncpus // ntasks)
    if cpus_per_task is not None:
        return max(1, ncpus // cpus_per_task), cpus_per_task
    return 1, ncpus


def mpi_ranks(job: Job) -> int:
    """The MPI ranks of a job (the slots of its MPI host file): its tasks when it asked for tasks, else one
    per core (as PBS_NODEFILE lists them, which MPI under PBS starts a rank for each line of)."""
    if job.ntasks is None and job.cpus_per_task is None:
        return job.ncpus
    return tasks(job.ncpus, job.ntasks, job.cpus_per_task)[0]


def own_path(path: str) -> str:
    """``path`` without the private ``bin`` directories of other jobs (a job submitted from inside a job
    inherits its parent's PATH: the parent's srun must neither come first nor pass for an installed MPI)."""
    keep = []
    for d in path.split(":") if path else []:
        head, tail = os.path.split(d.rstrip("/"))
        if tail == "bin" and os.path.basename(head).startswith(PRIVATE_PREFIX):
            continue
        keep.append(d)
    return ":".join(keep)


def gs_env(job: Job, private: Private | None, path: str) -> dict[str, str]:
    """The variables every job gets whatever ``[compat] env`` says: tasks, the private directory, ``PATH``;
    ``OMP_NUM_THREADS`` but for a Slurm or Grid Engine script (those systems do not set it)."""
    n, c = tasks(job.ncpus, job.ntasks, job.cpus_per_task)
    env = {"GS_NTASKS": str(n), "GS_CPUS_PER_TASK": str(c)}
    if job.dialect not in NO_OMP:
        env["OMP_NUM_THREADS"] = str(c)
    if private is not None:
        env.update(
            TMPDIR=private.tmpdir,
            GS_TMPDIR=private.tmpdir,
            GS_NODEFILE=private.nodefile,
            GS_MPI_HOSTS=private.mpi_hosts,
            PATH=f"{private.bin}:{path}" if path else private.bin,
        )
    return env


def compat_env(job: Job, private: Private | None) -> dict[str, str]:
    """The Slurm, PBS Pro, Torque and Grid Engine variables of one start of ``job`` (a one-node job); of a
    script with another system's directives, that system's only (:func:`slurm_as_asked`)."""
    n, c = tasks(job.ncpus, job.ntasks, job.cpus_per_task)
    jid, cores, h = str(job.id), str(job.ncpus), job.host
    senv = job.submit_env
    env = {
        # Slurm (sbatch(1), OUTPUT ENVIRONMENT VARIABLES)
        "SLURM_JOB_ID": jid,
        "SLURM_JOBID": jid,
        "SLURM_JOB_NAME": job.name,
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_UID": str(job.uid),
        "SLURM_SUBMIT_DIR": job.submit_dir,
        "SLURM_SUBMIT_HOST": h,
        "SLURM_CLUSTER_NAME": h,
        "SLURM_JOB_PARTITION": QUEUE,
        "SLURM_NTASKS": str(n),
        "SLURM_NPROCS": str(n),
        "SLURM_NTASKS_PER_NODE": str(n),
        "SLURM_TASKS_PER_NODE": str(n),
        "SLURM_NNODES": "1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_JOB_NODELIST": h,
        "SLURM_NODELIST": h,
        "SLURMD_NODENAME": h,
        "SLURM_CPUS_ON_NODE": cores,
        "SLURM_JOB_CPUS_PER_NODE": cores,
        "SLURM_RESTART_COUNT": str(job.restarts),
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        # PBS Pro and Torque (their sources: docs/compat.md, PBS Pro and Torque)
        "PBS_JOBID": f"{jid}.{h}",
        "PBS_JOBNAME": job.name,
        "PBS_O_WORKDIR": job.submit_dir,
        "PBS_O_HOST": h,
        "PBS_O_LOGNAME": job.user,
        "PBS_O_QUEUE": QUEUE,
        "PBS_O_SYSTEM": os.uname().sysname,  # PBS Pro's qsub: uname's system name
        # PBS Pro's and Torque's qsub send the submitting HOME, "/" where it was not set
        "PBS_O_HOME": senv.get("HOME") or "/",
        "PBS_QUEUE": QUEUE,
        "PBS_ENVIRONMENT": "PBS_BATCH",
        "PBS_NUM_NODES": "1",
        "PBS_NUM_PPN": cores,
        "PBS_NP": cores,
        "PBS_TASKNUM": "1",
        "PBS_NODENUM": "0",
        "PBS_VNODENUM": "0",
        "NCPUS": cores,
        # Grid Engine (qsub(1), ENVIRONMENTAL VARIABLES)
        "JOB_ID": jid,
        "JOB_NAME": job.name,
        "REQUEST": job.name,
        "REQNAME": job.name,
        "NSLOTS": cores,
        "NHOSTS": "1",
        "NQUEUES": "1",
        "QUEUE": SGE_QUEUE,
        "ENVIRONMENT": "BATCH",
        "RESTARTED": "1" if job.restarts else "0",
        "SGE_O_WORKDIR": job.submit_dir,
        "SGE_O_HOST": h,
        "SGE_STDIN_PATH": "/dev/null",
    }
    if job.workdir:  # Grid Engine's shepherd names the job's directory and files (seen with Grid Engine 8.1.9)
        env.update(SGE_CWD_PATH=job.workdir, SGE_STDOUT_PATH=job.stdout, SGE_STDERR_PATH=job.stderr)
    if job.cpus_per_task is not None or job.ntasks is None:
        env["SLURM_CPUS_PER_TASK"] = str(c)  # Slurm sets it only when -c was given (gsub -n N is -c N)
    if job.mem_per_cpu is not None:
        env["SLURM_MEM_PER_CPU"] = str(max(1, job.mem_per_cpu >> 20))  # MiB, as --mem-per-cpu (and no _PER_NODE)
    elif job.mem_per_gpu is not None:
        env["SLURM_MEM_PER_GPU"] = str(max(1, job.mem_per_gpu >> 20))  # MiB, as --mem-per-gpu (and no _PER_NODE)
    elif job.mem is not None:
        env["SLURM_MEM_PER_NODE"] = str(max(1, job.mem >> 20))  # MiB, as --mem
    for var in ("HOME", "PATH", "SHELL", "LANG", "MAIL", "TZ"):
        if var in senv:
            env[f"PBS_O_{var}"] = senv[var]
            if var not in ("LANG", "TZ"):
                env[f"SGE_O_{var}"] = senv[var]
    if "LOGNAME" in senv:  # qsub(1): the submitting LOGNAME, only when it was set (as SGE_O_HOME, ...)
        env["SGE_O_LOGNAME"] = senv["LOGNAME"]
    if private is not None:
        env.update(PBS_NODEFILE=private.nodefile, PE_HOSTFILE=private.pe_hostfile)
    if job.array_id is not None and job.array_index is not None:
        # a PBS Pro subjob is ID[INDEX].server, its array ID[].server; Grid Engine's tasks share the array's id
        aid = str(job.array_id)
        env.update(PBS_JOBID=f"{aid}[{job.array_index}].{h}", PBS_ARRAY_ID=f"{aid}[].{h}", JOB_ID=aid)
    if job.gpus_per_task is not None:
        env["SLURM_GPUS_PER_TASK"] = str(job.gpus_per_task)
    if job.get_user_env:
        env["SLURM_GET_USER_ENV"] = "1"  # as sbatch --get-user-env sets it
    if job.open_mode == "append":
        env["SLURM_OPEN_MODE"] = "a"  # as sbatch --open-mode=append sets it
    if job.account:
        env["SLURM_JOB_ACCOUNT"] = job.account  # only when one was named (no accounting, so no default account)
    if job.walltime is not None:
        env["PBS_WALLTIME"] = str(job.walltime)  # Torque's mom: the walltime asked for, in seconds
    env.update(slurm_asked(job))
    if job.pe is not None:
        env["PE"] = job.pe  # Grid Engine names the parallel environment of a -pe job
    if job.dialect == "slurm":
        slurm_as_asked(env, job)
    if job.dialect == "sge":
        env.pop("ENVIRONMENT", None)  # qsub(1) names it, but Grid Engine 8.1.9 sets none
        if job.pe is None:
            env.pop("PE_HOSTFILE", None)  # Grid Engine 8.1.9 sets it only for a -pe job
    return of_dialect(env, job.dialect)


def slurm_asked(job: Job) -> dict[str, str]:
    """The Slurm names sbatch 22.05 sets from the options a job gave, as it sets them (seen side by side):
    ``SLURM_NTASKS_PER_NODE`` (--ntasks-per-node), ``SLURM_HINT`` (--hint), ``SLURM_THREADS_PER_CORE``
    (--threads-per-core, and every hint but multithread, which sets ``SLURM_NTASKS_PER_CORE`` instead),
    ``SLURM_GPUS`` (--gpus) and ``SLURM_GPUS_PER_NODE`` (--gpus-per-node), each ``[MODEL:]N``."""
    env: dict[str, str] = {}
    if job.ntasks_per_node is not None:
        env["SLURM_NTASKS_PER_NODE"] = str(job.ntasks_per_node)
    if job.hint is not None:
        env["SLURM_HINT"] = job.hint
    threads = job.threads_per_core or (1 if job.hint not in (None, "multithread") else 0)
    if threads:
        env["SLURM_THREADS_PER_CORE"] = str(threads)
    elif job.hint == "multithread":
        env["SLURM_NTASKS_PER_CORE"] = MULTITHREAD_TASKS_PER_CORE
    if job.gpus is not None:
        env["SLURM_GPUS"] = job.gpus
    if job.gpus_per_node is not None:
        env["SLURM_GPUS_PER_NODE"] = job.gpus_per_node
    return env


def slurm_as_asked(env: dict[str, str], job: Job) -> None:
    """A Slurm script's names as sbatch sets them (seen with Slurm 22.05): the task counts only when the job
    gave them (``SLURM_NTASKS`` and ``SLURM_NPROCS`` with ``-n``, ``SLURM_CPUS_PER_TASK`` with ``-c``),
    ``SLURM_TASKS_PER_NODE`` the tasks on the node (1 without ``-n``), ``SLURM_NTASKS_PER_NODE`` only
    with ``--ntasks-per-node`` (:func:`slurm_asked`), ``SLURM_RESTART_COUNT`` only once the job was started
    again, and the job's group."""
    for k in ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_CPUS_PER_TASK"):
        env.pop(k, None)
    if job.ntasks_per_node is None:
        env.pop("SLURM_NTASKS_PER_NODE", None)
    if job.ntasks is not None:
        env.update(SLURM_NTASKS=str(job.ntasks), SLURM_NPROCS=str(job.ntasks))
    if job.cpus_per_task is not None:
        env["SLURM_CPUS_PER_TASK"] = str(job.cpus_per_task)
    env["SLURM_TASKS_PER_NODE"] = str(job.ntasks or 1)
    if not job.restarts:
        env.pop("SLURM_RESTART_COUNT", None)
    if job.gid >= 0:
        env["SLURM_JOB_GID"] = str(job.gid)


def mpi_env(private: Private) -> dict[str, str]:
    """The variables that make an installed Open MPI or MPICH/Intel MPI (Hydra) start the job's ranks on its
    host: their default host files."""
    return dict.fromkeys(MPI_NAMES, private.mpi_hosts)


def job_environment(
    base: Mapping[str, str],
    gs: Mapping[str, str],
    job: Job,
    private: Private | None,
    compat: bool,
    mpi: bool,
    user_set: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of one start of a job.

    ``base`` is what it has of its submitting environment (with the array variables the daemon added when
    it took the array in), ``gs`` its ``GS_*`` variables; ``mpi``: an MPI of the machine's is on the job's
    ``PATH`` (it gets the job's host file, and no ``mpirun`` of gridsched's is put before it).  ``user_set``:
    the values the submission set (``gsub --export VAR=VALUE``), over ``base``; none of them is a name the
    daemon sets (:func:`owned`, refused at submission) but ``OMP_NUM_THREADS``, where the user's value wins.
    """
    env = {**base, **(user_set or {})}
    drop = [*SLURM_NAMES, *PBS_NAMES, *SGE_NAMES, *MPI_NAMES, "TMPDIR"]
    if job.array_id is None or not compat:
        drop += ARRAY_NAMES
    if job.array_id is None:
        drop += GS_ARRAY_NAMES
    for k in drop:
        env.pop(k, None)
    env.update(gs)
    env.update(gs_env(job, private, own_path(env.get("PATH", ""))))
    head, tail = os.path.split(env.get("BASH_ENV", ""))
    if tail == "bash_env" and os.path.basename(head).startswith(PRIVATE_PREFIX):
        del env["BASH_ENV"]  # another job's (a job submitted from inside a job): it names that job's bin/
    if private is not None and private.bash_env and "BASH_ENV" not in env:
        env["BASH_ENV"] = private.bash_env  # a job that has its own keeps it (it then puts bin/ back itself)
    if private is not None and mpi:
        env.update(mpi_env(private))
    if compat:
        env.update(compat_env(job, private))
        if job.array_id is None and job.dialect in (None, "sge"):
            env.update(SGE_TASK_ID="undefined", SGE_TASK_FIRST="undefined", SGE_TASK_LAST="undefined")
            env["SGE_TASK_STEPSIZE"] = "undefined"
    for k in USER_WINS:
        if user_set and k in user_set:
            env[k] = user_set[k]
    return env


@dataclass(frozen=True, slots=True)
class Start:
    """What the daemon decided for one start of a job, beside its spec."""

    ncpus: int  # its cores (a splittable job's: one wave)
    walltime: int  # seconds
    cores: str  # the cores it is pinned to (GS_CORES)
    host_cpus: str  # the host CPUs under them (GS_HOST_CPUS)
    restarts: int
    job_dir: str  # the daemon's directory of the job (its checkpoint/ is in it)
    spool: str
    host: str = "localhost"
    devices: Mapping[str, str] = field(default_factory=dict)  # the variables of its devices (host.devices)


def job_of(spec: JobSpec, start: Start) -> Job:
    """What the environment of this start of the job ``spec`` is made from."""
    return Job(
        id=spec.id,
        # Torque names each subjob NAME-INDEX, as it does its -o and -e paths (src/server/job_func.c, job_clone)
        name=f"{spec.name}-{spec.array_index}" if spec.name_per_task and spec.array_index is not None else spec.name,
        user=spec.user,
        uid=spec.uid,
        ncpus=start.ncpus,
        submit_dir=spec.submit_dir or spec.workdir,
        submit_env=dict(spec.env),
        ntasks=spec.ntasks,
        cpus_per_task=spec.cpus_per_task,
        mem=spec.mem,
        restarts=start.restarts,
        array_id=spec.array_id,
        array_index=spec.array_index,
        host=start.host,
        gid=spec.gid,
        dialect=spec.dialect,
        mem_per_cpu=spec.mem_per_cpu,
        mem_per_gpu=spec.mem_per_gpu,
        gpus_per_task=spec.gpus_per_task,
        account=spec.account,
        walltime=start.walltime,
        ntasks_per_node=spec.ntasks_per_node,
        hint=None if spec.hint is None else spec.hint.value,
        threads_per_core=spec.threads_per_core,
        gpus=_gpus_asked(spec, "gpus"),
        gpus_per_node=_gpus_asked(spec, "gpus_per_node"),
        pe=spec.pe,
        get_user_env=spec.get_user_env is not None,
        open_mode=spec.open_mode,
        workdir=spec.workdir,
        stdout=_task_file(spec.stdout, spec),
        stderr=_task_file(spec.stderr, spec),
    )


def _gpus_asked(spec: JobSpec, option: str) -> str | None:
    """The job's GPU request as ``option`` (--gpus, --gpus-per-node) gave it, ``[MODEL:]N``, or None when the
    job's GPUs came from another option (--gres, --gpus-per-task) or it has none."""
    if option not in spec.gpu_options:
        return None
    ask = next((a for a in spec.devices if a.type == "gpu"), None)
    if ask is None:
        return None
    return f"{ask.model}:{ask.count}" if ask.model else str(ask.count)


def _task_file(path: str, spec: JobSpec) -> str:
    """An output path of ``spec``, an array task's with its index (and own id) filled in."""
    if "%" not in path or spec.array_index is None:
        return path
    from gridsched.protocol.arrays import task_path

    return task_path(path, spec.id, spec.array_index)


def environment(spec: JobSpec, start: Start, private: Private | None, compat: bool) -> dict[str, str]:
    """The whole environment of one start of the job ``spec``: what it has of its submitting environment,
    its array variables, its ``GS_*`` variables, the compatibility names with ``compat``, its devices'.

    The array variables are computed here from the task's ``array_range``; a task taken in by an earlier
    release has them in its ``env`` already (and no ``array_range``)."""
    job = job_of(spec, start)
    gs = dict(
        GS_JOBID=str(spec.id),
        GS_JOBNAME=spec.name,
        GS_NCPUS=str(start.ncpus),
        GS_CORES=start.cores,
        GS_HOST_CPUS=start.host_cpus,
        GS_SUBMIT_DIR=job.submit_dir,
        GS_CHECKPOINT_DIR=os.path.join(start.job_dir, "checkpoint"),
        GS_RESTART_COUNT=str(start.restarts),
        GS_CHECKPOINT_MODE=spec.checkpoint.value,
        GS_WALLTIME=str(start.walltime),
        GS_SPOOL=start.spool,
    )
    base = dict(job.submit_env)
    if spec.array_id is not None and spec.array_index is not None and spec.array_range:
        base.update(
            of_dialect(array_vars(spec.array_id, spec.array_index, array_shape(spec.array_range), compat), job.dialect)
        )
    env = job_environment(base, gs, job, private, compat, False, dict(spec.env_set))
    env.update(of_dialect(start.devices, job.dialect))
    if job.dialect == "slurm":
        env.pop("HIP_VISIBLE_DEVICES", None)  # Slurm sets CUDA_ and ROCR_VISIBLE_DEVICES, not HIP's
    return env


@functools.lru_cache(maxsize=256)
def array_shape(text: str) -> tuple[int, int, int, int]:
    """The number of tasks, first and last index and step (:func:`array_step`) of the array range ``text``."""
    from gridsched.protocol.arrays import parse

    indices = parse(text, 1 << 62).indices
    return len(indices), indices[0], indices[-1], array_step(indices)


def array_step(indices: Sequence[int]) -> int:
    """The step of an array's indices (1 unless they are evenly spaced)."""
    if len(indices) < 2:
        return 1
    runs = getattr(indices, "runs", None)
    if runs is not None:  # Indices: runs of one step that follow each other at that step
        step = runs[0].step if len(runs[0]) > 1 else runs[1].start - runs[0].start
        even = all((len(r) == 1 or r.step == step) for r in runs)
        return step if even and all(b.start - a[-1] == step for a, b in zip(runs, runs[1:])) else 1
    step = indices[1] - indices[0]
    return step if all(b - a == step for a, b in zip(indices, indices[1:])) else 1


def array_env(
    array_id: int, index: int, indices: Sequence[int], compat: bool, step: int | None = None
) -> dict[str, str]:
    """The variables that tell an array task who it is (and the Slurm, PBS and Grid Engine names with
    ``compat``); ``step``: the array's :func:`array_step`, when the caller has it already."""
    shape = (len(indices), indices[0], indices[-1], array_step(indices) if step is None else step)
    return array_vars(array_id, index, shape, compat)


def array_vars(array_id: int, index: int, shape: tuple[int, int, int, int], compat: bool) -> dict[str, str]:
    """:func:`array_env` of an array of :func:`array_shape` ``shape``."""
    count, first, last, step = shape
    aid, idx = str(array_id), str(index)
    env = {"GS_ARRAY_JOB_ID": aid, "GS_ARRAY_TASK_ID": idx, "GS_ARRAY_TASK_COUNT": str(count)}
    if compat:
        step_text = str(step)
        env.update(
            SLURM_ARRAY_JOB_ID=aid,
            SLURM_ARRAY_TASK_ID=idx,
            SLURM_ARRAY_TASK_COUNT=str(count),
            SLURM_ARRAY_TASK_MIN=str(first),
            SLURM_ARRAY_TASK_MAX=str(last),
            SLURM_ARRAY_TASK_STEP=step_text,
            PBS_ARRAY_INDEX=idx,
            PBS_ARRAYID=idx,
            SGE_TASK_ID=idx,
            SGE_TASK_FIRST=str(first),
            SGE_TASK_LAST=str(last),
            SGE_TASK_STEPSIZE=step_text,
        )
    return env


def device_env(
    keys: Iterable[tuple[str, int]], devices: Iterable[Device], compat: bool = True, uuids: bool = False
) -> dict[str, str]:
    """The environment of a job holding the devices ``keys`` (empty when it holds none).

    GPUs: ``CUDA_VISIBLE_DEVICES`` (the indices, as Slurm gives them; with
    ``uuids``, ``[devices] visible = "uuid"``, the UUIDs where all are known),
    ``ROCR_VISIBLE_DEVICES`` and ``HIP_VISIBLE_DEVICES``, ``GPU_DEVICE_ORDINAL``
    and ``GS_GPUS`` (indices), and with ``compat`` the Slurm names
    ``SLURM_JOB_GPUS`` and ``SLURM_GPUS_ON_NODE``.  Every type: ``GS_DEVICES``
    (``gpu:0,gpu:1,fpga:0``).
    """
    mine = sorted(set(keys))
    if not mine:
        return {}
    by_key = {dv.key: dv for dv in devices}
    env = {"GS_DEVICES": ",".join(f"{t}:{i}" for t, i in mine)}
    gpus = [i for t, i in mine if t == "gpu"]
    if gpus:
        idx = ",".join(map(str, gpus))
        ids = [by_key[("gpu", i)].uuid if ("gpu", i) in by_key else "" for i in gpus]
        env.update(
            CUDA_VISIBLE_DEVICES=",".join(ids) if uuids and all(ids) else idx,
            ROCR_VISIBLE_DEVICES=idx,
            HIP_VISIBLE_DEVICES=idx,
            GPU_DEVICE_ORDINAL=idx,
            GS_GPUS=idx,
        )
        if compat:
            env.update(SLURM_JOB_GPUS=idx, SLURM_GPUS_ON_NODE=str(len(gpus)))
    return env
