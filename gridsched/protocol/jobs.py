"""Job states and checkpoint modes, shared by the daemon and the commands."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gridsched.protocol.jobspec import JobSpec


class _Text(str, Enum):
    """A str-valued enum whose members print as their value: stored, printed and compared as the plain text
    (``JobState.RUNNING == "RUNNING"``), so the spool, the state db and the JSON they hold are unchanged.
    str's own methods print it (in C: a long table prints a state per row)."""

    __str__ = str.__str__
    __format__ = str.__format__  # type: ignore[assignment]  # str's, with its parameter's other name


class JobState(_Text):
    PENDING = "PENDING"
    HELD = "HELD"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"  # told to stop (preempted); returns to PENDING when it has exited
    SUSPENDED = "SUSPENDED"  # preempted in suspend mode: stopped, in memory, waiting for cores
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"  # killed for want of memory (its cgroup's OOM killer)

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY}
)
ACTIVE = frozenset({JobState.RUNNING, JobState.STOPPING})


class Checkpoint(_Text):
    """How a job is preempted: told to save its state and rerun from it (``signal``), stopped and continued
    (``suspend``), rerun from the start (``requeue``), or never (``none``)."""

    NONE = "none"
    SIGNAL = "signal"
    SUSPEND = "suspend"
    REQUEUE = "requeue"

    @property
    def reruns(self) -> bool:
        """Preempted, the job is run again (from its checkpoint or from the start)."""
        return self in RERUN_MODES


class Stop(_Text):
    """Why the daemon told a running job to stop (kept in its run info until it has exited)."""

    CANCEL = "cancel"  # gdel
    TIMEOUT = "timeout"  # its walltime ended
    OVERRUN = "overrun"  # backfilled on its own estimate, it overran it while the head job waited
    PREEMPT = "preempt"  # preempted for the head job (checkpoint or requeue)
    REQUEUE = "requeue"  # grequeue
    RESVEND = "resvend"  # its reservation ended


CHECKPOINT_MODES = tuple(m.value for m in Checkpoint)
DIALECTS = ("slurm", "pbs", "sge")  # the batch systems whose scripts gsub reads (JobSpec.dialect)


class Hint(_Text):
    """sbatch --hint: how the job uses the threads of a core (JobSpec.hint; SLURM_HINT)."""

    NOMULTITHREAD = "nomultithread"  # one thread per physical core (Slurm's threads_per_core=1)
    MULTITHREAD = "multithread"  # every thread of a core (Slurm's ntasks_per_core=INFINITE)
    COMPUTE_BOUND = "compute_bound"  # all cores of each socket, one thread per core
    MEMORY_BOUND = "memory_bound"  # one core of each socket, one thread per core

    @property
    def one_thread(self) -> bool:
        """Whether the job uses one thread of each physical core (Slurm 22.05 sets threads_per_core=1)."""
        return self is not Hint.MULTITHREAD


# the options that may give a job's GPUs whose values Slurm puts in the environment (JobSpec.gpu_options):
# --gpus (SLURM_GPUS) and --gpus-per-node (SLURM_GPUS_PER_NODE); --gres and --gpus-per-task set neither
GPU_OPTIONS = ("gpus", "gpus_per_node")
WAITING = frozenset({JobState.PENDING, JobState.HELD})


# Exit status a job in `signal` mode uses to say "I saved my state, restart me"
# (as EX_TEMPFAIL of sysexits.h). Any other status after the checkpoint signal
# means the job finished.
EXIT_CHECKPOINTED = 75


# The job specification, as gsub writes it into a submit request and as the
# daemon keeps it (column ``spec`` of the job table).  All keys are present.
SPEC_KEYS = {
    "id": "int: job id from Spool.next_id()",
    "name": "str: job name (-N, default the script's file name, 'wrap' for --wrap, 'stdin')",
    "user": "str: submitting user's login name",
    "uid": "int: submitting user's uid",
    "gid": "int: submitting user's primary gid",
    "ncpus": "int: cores (-n)",
    "walltime": "int: seconds (-t)",
    "mem": "int | None: bytes (--mem)",
    "checkpoint": "str: checkpoint mode (none, signal, suspend, requeue)",
    "hold": "bool: submitted held (--hold)",
    "depend": "str: dependencies, normalized (-d, see gridsched.core.depend), '' for none",
    "script": "str: the script's text (copied at submit time)",
    "args": "list[str]: arguments after the script",
    "workdir": "str: absolute working directory (-D, default the submit directory)",
    "stdout": "str: absolute path of the output file, %j and %x substituted",
    "stderr": "str: absolute path of the error file, %j and %x substituted",
    "env": "dict[str, str]: what the job gets of the submitting environment: all of it (as Slurm's "
    "--export=ALL, the default), or with gsub --export NONE or a list without ALL only a login's HOME, USER, "
    "LOGNAME, SHELL and PATH and the variables listed",
    "submit_time": "float: seconds since the epoch",
    "submit_dir": "str: absolute directory gsub ran in",
    "umask": "int: the submitter's umask, which the job runs with (its output and checkpoint files get it)",
}

# Why grequeue (the command and the daemon) refuses a grun job.
GRUN_NOT_REQUEUED = "a grun job cannot be requeued: its rerun could not reconnect to grun"
# Checkpoint modes that rerun a job: a grun job (spec ``interactive``) takes neither.
RERUN_MODES = (Checkpoint.SIGNAL, Checkpoint.REQUEUE)


def change_refused(old: JobSpec, new: JobSpec) -> str | None:
    """Why waiting job ``old`` cannot become ``new`` whatever the machine (galter and the daemon ask the
    same), or None."""
    if old.exclusive and new.ncpus != old.ncpus:
        return f"an --exclusive job takes every core ({old.ncpus}): its cores cannot change"
    return rerun_refused(new.interactive, new.checkpoint)


def rerun_refused(interactive: bool, checkpoint: str | None) -> str | None:
    """Why checkpoint mode ``checkpoint`` is refused: for a grun job (``interactive``), one that reruns it; or
    None."""
    if interactive and checkpoint in RERUN_MODES:
        return f"--checkpoint {checkpoint}: a grun job cannot be rerun (the rerun could not reconnect to grun)"
    return None


# Keys of the job specification present only when the submission sets them.
SPEC_OPTIONAL_KEYS = {
    "parent": "int: the job this one is a child of (gsub inside a job, --parent; see docs/trees.md)",
    "recoverable": "bool: if the job fails, is cancelled or times out, its subtree is held, not cancelled "
    "(gsub --recoverable)",
    "resources": "dict[str, int]: floating resources (gsub -l NAME=COUNT), name -> units",
    "reservation": "int: the reservation the job is bound to (gsub --reservation)",
    "wait_resv": "bool: with reservation, wait for its cores instead of being refused (gsub --wait-resv)",
    "shell": "str: absolute path of what runs a script without #! on line 1 (gsub --shell, #PBS -S, the login "
    "shell of a PBS or SGE script; absent: /bin/sh)",
    "dialect": "str: whose directives the script was read from: 'slurm', 'pbs' or 'sge' (the job's environment "
    "and in-job commands are that system's; absent: gridsched's own, with every system's names)",
    "mem_per_cpu": "int: bytes per core, when the job asked its memory so (gsub --mem-per-cpu); mem is the total "
    "(SLURM_MEM_PER_CPU)",
    "mem_per_gpu": "int: bytes per GPU, when the job asked its memory so (gsub --mem-per-gpu); mem is the total "
    "(SLURM_MEM_PER_GPU)",
    "gpus_per_task": "int: GPUs per task, when the job asked so (gsub --gpus-per-task; SLURM_GPUS_PER_TASK)",
    "ntasks_per_node": "int: tasks per node the job asked for (gsub --ntasks-per-node, #SBATCH --ntasks-per-node; "
    "SLURM_NTASKS_PER_NODE), as given",
    "hint": "str: sbatch --hint, one of gridsched.protocol.jobs.Hint (SLURM_HINT); all but multithread take one "
    "thread of each physical core (threads_per_core 1)",
    "gpu_options": "list[str]: which of gridsched.protocol.jobs.GPU_OPTIONS gave the job's GPUs (gsub --gpus, "
    "--gpus-per-node): the job sees SLURM_GPUS, SLURM_GPUS_PER_NODE ([MODEL:]N of its GPU request)",
    "pe": "str: the Grid Engine parallel environment the job names (gsub --pe, #$ -pe NAME SLOTS; PE, PE_HOSTFILE)",
    "account": "str: the account the job names (gsub --account, #SBATCH -A; SLURM_JOB_ACCOUNT); nothing is charged",
    "name_per_task": "bool: an array whose tasks see the name NAME-INDEX (PBS_JOBNAME), as Torque names the "
    "subjobs of #PBS -t",
    "open_mode": "str: 'append': output files are appended to, never truncated (gsub --open-mode)",
    "begin": "float: not before this time, seconds since the epoch (gsub --begin, #SBATCH --begin)",
    "array": "str: a submitted array's range (gsub --array, canonical form of gridsched.protocol.arrays); the daemon "
    "takes it in as one job per index, whose specs have the three keys below instead",
    "ntasks": "int: tasks the job asked for (gsub --ntasks, #SBATCH -n); ncpus is a multiple of it",
    "cpus_per_task": "int: cores per task the job asked for (gsub --cpus-per-task, #SBATCH -c); ncpus is a "
    "multiple of it (ntasks * cpus_per_task == ncpus when both are given)",
    "array_id": "int: the array a task belongs to (the job id of its first task)",
    "array_index": "int: the task's index in its array",
    "array_max": "int: most tasks of the array running at once (the %MAX of the range)",
    "array_range": "str: the array's range (canonical), from which the task's array variables are computed at "
    "each start (a task taken in by an earlier release has them in env instead)",
    "split": "dict: a splittable job (gsub --split): n sub-tasks of ncpus cores and task_time seconds each; "
    "or (gsub --split-file) tasks, one [ncpus, seconds, args] each, ncpus and task_time then the largest; "
    "retries (gsub --split-retries); the daemon adds left, the indices not yet run or taken out, and moves "
    "each sub-task's args to split_args",
    "split_args": "list[list[str]] (a piece: dict index -> list): each sub-task's own arguments (private)",
    "env_set": "dict[str, str]: variables the submission set (gsub --export VAR=VALUE, #PBS -v, #$ -v), over env; "
    "never a name the daemon sets for the job (gridsched.job.env.owned) (private)",
    "exclusive": "bool: the job runs alone (gsub --exclusive): ncpus is all the machine's cores, and its tasks "
    "need only fit in them",
    "mail_type": "str: mail events, comma-separated canonical sbatch --mail-type names (gsub --mail-type, "
    "#SBATCH --mail-type, #PBS -m, #$ -m); mail is sent only where [mail] sendmail is configured",
    "mail_user": "list[str]: mail recipients (gsub --mail-user, #PBS -M, #$ -M); absent: the job's owner",
    "get_user_env": "str: TIMEOUT seconds and L (login shell) or S: the job starts from its owner's login "
    "environment (gsub --get-user-env, #SBATCH --get-user-env)",
    "interactive": "bool: a grun job, whose streams go to the grun that waits for it: it is never rerun "
    "(grequeue refuses it)",
    "split_of": "int: a piece of a splittable job: the job its sub-tasks were taken from",
    "split_chains": "list[list[int]]: a piece's sub-task indices, one list per chain of ncpus cores, run in order",
    "split_widths": "list[int]: the cores of each of a piece's chains",
    "split_task": "dict: a piece's sub-tasks: n, ncpus, task_time and retries of the job it was taken from, and "
    "tasks (index -> [ncpus, seconds]) for sub-tasks of their own sizes",
}


# The parts of a job's spec only its owner (and root) may read: kept out of the
# world-readable job table, in ``jobs/ID/private.json`` (mode 0600, owned by
# the job's owner); see :func:`gridsched.protocol.view.private`.
PRIVATE_KEYS = ("env", "env_set", "args", "workdir", "stdout", "stderr", "submit_dir", "split_args")
PRIVATE_FILE = "private.json"
