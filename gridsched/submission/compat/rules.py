"""The directives gsub reads, as tables of rules: ``#SBATCH`` (:data:`SLURM`), ``#PBS`` (:data:`PBS`,
``-l`` :data:`PBS_RESOURCES`) and ``#$`` (:data:`SGE`, ``-l`` :data:`SGE_RESOURCES`); the gsub options they
become; the rows of the section "SLURM AND PBS DIRECTIVES" of gsub(1)."""

from __future__ import annotations

from dataclasses import dataclass


class CompatError(Exception):
    """A directive whose value cannot be translated; the message names the line."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One directive: its flags, what it sets (``key``), and what gsub does with it."""

    flags: tuple[str, ...]
    key: str  # what it sets; "ignore" for directives that have no meaning here, "quiet" for harmless ones
    meaning: str
    gs: str  # the gridsched equivalent, for the manual
    value: bool = True  # takes a value
    why: str = ""  # for "ignore": why, in the warning
    optional: bool = False  # the value is optional: only --flag=VALUE gives one


_MAIL_GS = "--mail-type (sent where [mail] sendmail is configured)"

SLURM: tuple[Rule, ...] = (
    Rule(("-J", "--job-name"), "name", "job name", "-N NAME"),
    Rule(("-n", "--ntasks"), "ntasks", "number of tasks", "-n NTASKS*CPUS_PER_TASK"),
    Rule(
        ("--ntasks-per-node", "--tasks-per-node"),
        "per_node",
        "tasks on each node (SLURM_NTASKS_PER_NODE)",
        "--ntasks-per-node, and -n NODES*TASKS_PER_NODE*CPUS_PER_TASK",
    ),
    Rule(("-c", "--cpus-per-task"), "cpus", "cores per task", "-n NTASKS*CPUS_PER_TASK"),
    Rule(("-N", "--nodes"), "nodes", "number of nodes", "(more than 1: warned, and the cores of all nodes asked here)"),
    Rule(
        ("-t", "--time"),
        "time",
        "time limit (a bare number is minutes; seconds rounded up to a minute; UNLIMITED is warned)",
        "-t",
    ),
    Rule(("--time-min",), "ignore", "minimum time limit", "(warned)", why="-t is the one time limit"),
    Rule(("-o", "--output"), "output", "standard output file (default slurm-%j.out)", "-o"),
    Rule(("-e", "--error"), "error", "standard error file (default: joined to the output)", "-e"),
    Rule(("--open-mode",), "open_mode", "output files: append or truncate", "--open-mode"),
    Rule(("--mem",), "mem", "memory of the job (a bare number is MiB; 0 is the whole machine)", "--mem"),
    Rule(("--mem-per-cpu",), "mem_per_cpu", "memory per core (times the cores)", "--mem-per-cpu"),
    Rule(("--mem-per-gpu",), "mem_per_gpu", "memory per GPU (times the GPUs)", "--mem-per-gpu"),
    Rule(("-a", "--array"), "array", "job array (RANGE[%MAX])", "--array"),
    Rule(("-d", "--dependency"), "depend", "dependencies", "-d SPEC"),
    Rule(("-L", "--licenses"), "licenses", "licences", "(not supported yet: warned)"),
    Rule(("-D", "--chdir"), "chdir", "working directory", "-D DIR"),
    Rule(("--reservation",), "reservation", "run in a reservation", "--reservation"),
    Rule(("-H", "--hold"), "hold", "submit held", "--hold", value=False),
    Rule(("-W", "--wait"), "wait", "wait for the job to end", "--wait", value=False),
    Rule(("-b", "--begin"), "begin", "start no earlier than (now+1hour, 16:00, 2030-01-20T12:34)", "--begin"),
    Rule(("--requeue",), "requeue", "may be requeued", "--checkpoint requeue", value=False),
    Rule(("--no-requeue",), "norequeue", "never requeued", "--checkpoint none", value=False),
    Rule(
        ("--export",),
        "export",
        "environment passed: ALL, NONE, or [ALL,]VAR[=VALUE],...",
        "--export",
    ),
    Rule(
        ("--get-user-env",),
        "get_user_env",
        "start from the user's login environment ([TIMEOUT][S|L]; the submitting variables win)",
        "--get-user-env",
        optional=True,
    ),
    Rule(("-v", "--verbose"), "quiet", "sbatch's own messages", "(no effect)", value=False),
    Rule(("-V", "--version"), "quiet", "sbatch's version", "(no effect)", value=False),
    Rule(("-p", "--partition"), "ignore", "partition", "(warned)", why="no partitions on one machine"),
    Rule(
        ("-A", "--account"),
        "account",
        "account, lowercased as Slurm does (SLURM_JOB_ACCOUNT; not charged)",
        "--account",
    ),
    Rule(("-q", "--qos"), "ignore", "quality of service", "(warned)", why="no QOS"),
    Rule(("--nice",), "nice", "lower the job's priority by N (100 when no =N is given)", "--nice", optional=True),
    Rule(("--mail-type",), "mail_type", "mail events (BEGIN, END, FAIL, REQUEUE, TIME_LIMIT..., ALL, NONE)", _MAIL_GS),
    Rule(("--mail-user",), "mail_user", "mail recipients (default: the submitting user)", "--mail-user"),
    Rule(
        ("--exclusive",),
        "exclusive",
        "the whole node (=user and =mcs are warned)",
        "--exclusive: all the machine's cores",
        optional=True,
    ),
    Rule(
        ("--ntasks-per-core",),
        "ignore",
        "tasks on one core",
        "(warned)",
        why="the job's tasks share the job's cores as it starts them",
    ),
    Rule(
        ("--hint",),
        "hint",
        "nomultithread, compute_bound, memory_bound: one thread of each core; multithread (SLURM_HINT)",
        "--hint",
    ),
    Rule(("--threads-per-core",), "threads_per_core", "hardware threads of each core used", "--threads-per-core"),
    Rule(("-C", "--constraint"), "ignore", "node features", "(warned)", why="no node features on one machine"),
    Rule(("--gres",), "gres", "generic resources (gpu:2, gpu:a100:1, fpga:1)", "--gres NAME[:MODEL]:N"),
    Rule(("-G", "--gpus"), "gpus", "GPUs of the job ([MODEL:]N)", "--gpus [MODEL:]N"),
    Rule(("--gpus-per-node",), "gpus_per_node", "GPUs on the node ([MODEL:]N)", "--gpus-per-node [MODEL:]N"),
    Rule(
        ("--gpus-per-task",),
        "gpus_per_task",
        "GPUs per task",
        "--gpus-per-task N with -n or --ntasks-per-node (else, or with a model, --gpus NTASKS*N)",
    ),
    Rule(("--gpu-bind",), "gpu_bind", "GPU binding (closest, none; other forms warned)", "--gpu-bind"),
    Rule(("-w", "--nodelist"), "ignore", "nodes to use", "(warned)", why="one machine"),
    Rule(("--signal",), "signal", "signal before the time limit ([B:]SIG[@SECONDS])", "--signal"),
)

PBS: tuple[Rule, ...] = (
    Rule(("-N",), "name", "job name", "-N NAME"),
    Rule(("-l",), "resources", "resources, comma-separated (below)", "see -l"),
    Rule(("-o",), "output", "standard output file or directory (a host: prefix is dropped; ^array_index^)", "-o"),
    Rule(("-e",), "error", "standard error file or directory (a host: prefix is dropped; ^array_index^)", "-e"),
    Rule(("-j",), "join", "join: oe (error into output), eo (output into error), n", "--join"),
    Rule(
        ("-k",),
        "quiet",
        "keep output on the execution host",
        "(accepted: output is always written straight into its final files)",
    ),
    Rule(("-J",), "array", "job array (X-Y[:Z][%MAX])", "--array"),
    Rule(("-t",), "array", "Torque job array (1-10, 1,3,5-7, with %MAX)", "--array"),
    Rule(("-W",), "attr", "attribute: depend=SPEC (job ids may carry a .server suffix)", "-d SPEC"),
    Rule(("-d",), "chdir", "working directory (Torque)", "-D DIR"),
    Rule(("-h",), "hold", "submit held", "--hold", value=False),
    Rule(("-S",), "shell", "shell of a script without #! on line 1", "--shell"),
    Rule(("-r",), "rerun", "rerunnable: y or n", "--checkpoint requeue (y) or none (n)"),
    Rule(("-V",), "export_all", "export the whole environment", "(the default)", value=False),
    Rule(("-v",), "export_vars", "variables to pass or set: VAR[=VALUE],...", "--export ALL,VAR[=VALUE],..."),
    Rule(("-n",), "exclusive", "node exclusive (Torque)", "--exclusive: all the machine's cores", value=False),
    Rule(("-q",), "ignore", "queue", "(warned)", why="one queue on one machine"),
    Rule(("-A",), "ignore", "account", "(warned)", why="no accounts"),
    Rule(("-m",), "pbs_mail", "mail events: a (aborted), b (began), e (ended), j (each subjob), or n", _MAIL_GS),
    Rule(("-M",), "mail_user", "mail recipients, comma-separated", "--mail-user"),
    Rule(
        ("-p",),
        "pbs_priority",
        "priority, -1024 to 1023, higher first: -p N with N <= 0 is --nice -N; a positive N is warned "
        "(only an admin raises a job: gsub --nice -N)",
        "--nice",
    ),
    Rule(("-P",), "ignore", "project", "(warned)", why="no projects"),
    Rule(("-a",), "begin", "start no earlier than [[[[CC]YY]MM]DD]hhmm[.SS]", "--begin"),
)

# Resources of PBS -l NAME=VALUE; any other NAME is a licence (warned).
PBS_RESOURCES: tuple[Rule, ...] = (
    Rule(("walltime",), "time", "time limit, seconds or [[HH:]MM:]SS", "-t"),
    Rule(("ncpus", "ppn"), "ncpus", "cores", "-n"),
    Rule(("nodes",), "nodes", "nodes=N:ppn=M: N*M cores", "-n N*M (N > 1 warned: one machine)"),
    Rule(
        ("select",),
        "select",
        "select=N:ncpus=M[:mem=SIZE][:ngpus=G]: N*M cores, N*G GPUs",
        "-n N*M, --mem, --gpus (N > 1 warned)",
    ),
    Rule(("ngpus",), "ngpus", "GPUs", "--gpus"),
    Rule(("mem",), "mem", "memory of the job (b, kb, mb, gb, tb; bare: bytes)", "--mem"),
    Rule(("pmem",), "pmem", "memory per process (times the cores)", "--mem-per-cpu"),
    Rule(("vmem",), "vmem", "virtual memory of the job", "--mem (when mem= is not given)"),
    Rule(("pvmem",), "pvmem", "virtual memory per process", "--mem-per-cpu (when pmem= is not given)"),
    Rule(
        ("place",),
        "place",
        "placement: excl and exclhost make the job exclusive (pack, free, shared: nothing to do on one machine; "
        "scatter, vscatter, group= warned)",
        "--exclusive",
    ),
    Rule(("host", "vnode", "arch"), "ignore", "placement", "(warned)", why="one machine"),
    Rule(("cput", "pcput"), "ignore", "CPU time", "(warned)", why="only walltime is enforced"),
    Rule(("soft_walltime",), "estimate", "the time the scheduler plans with (PBS Pro)", "--estimate"),
)

SGE: tuple[Rule, ...] = (
    Rule(("-N",), "name", "job name", "-N NAME"),
    Rule(("-pe",), "pe", "parallel environment NAME SLOTS: SLOTS cores (PE, PE_HOSTFILE)", "--pe NAME -n SLOTS"),
    Rule(("-l",), "resources", "resources, comma-separated (below)", "see -l"),
    Rule(("-t",), "array", "job array (N-M[:STEP])", "--array"),
    Rule(("-tc",), "throttle", "tasks of the array at once", "--array RANGE%MAX"),
    Rule(("-o",), "output", "standard output file or directory ($JOB_ID, $TASK_ID, $JOB_NAME)", "-o"),
    Rule(("-e",), "error", "standard error file or directory", "-e"),
    Rule(("-j",), "join", "y: error joined to the output", "--join oe"),
    Rule(
        ("-cwd",),
        "cwd",
        "run in the submit directory (without -cwd or -wd: in the home directory, as Grid Engine runs it)",
        "-D SUBMIT_DIR",
        value=False,
    ),
    Rule(("-wd",), "chdir", "working directory", "-D DIR"),
    Rule(("-V",), "export_all", "export the whole environment", "(the default)", value=False),
    Rule(("-v",), "export_vars", "variables to pass or set: VAR[=VALUE],...", "--export ALL,VAR[=VALUE],..."),
    Rule(("-S",), "shell", "shell of a script without #! on line 1", "--shell"),
    Rule(
        ("-hold_jid",),
        "hold_jid",
        "start after these jobs end: ids, or names (and patterns) of your earlier jobs",
        "-d afterany:ID; names: --hold-jid",
    ),
    Rule(("-h",), "hold", "submit held", "--hold", value=False),
    Rule(("-r",), "rerun", "rerunnable: y or n", "--checkpoint requeue (y) or none (n)"),
    Rule(("-b",), "binary", "y: the command is a binary", "(y refused: gsub takes a script)"),
    Rule(("-q",), "ignore", "queue", "(warned)", why="one queue on one machine"),
    Rule(("-P",), "ignore", "project", "(warned)", why="no projects"),
    Rule(("-A",), "ignore", "account", "(warned)", why="no accounts"),
    Rule(("-m",), "sge_mail", "mail events: b (began), e (ended), a (aborted, rescheduled), s (warned), n", _MAIL_GS),
    Rule(("-M",), "mail_user", "mail recipients, comma-separated (user[@host])", "--mail-user"),
    Rule(("-R",), "ignore", "resource reservation", "(warned)", why="backfilling always reserves for the head job"),
    Rule(("-notify",), "ignore", "warn before suspend or kill", "(warned)", why="use --checkpoint signal", value=False),
    Rule(("-sync",), "sync", "y: wait for the job to end and exit with its exit status", "--wait"),
    Rule(("-terse",), "quiet", "print the job id alone", "(what gsub prints)", value=False),
    Rule(("-now",), "now", "y: start at once or not at all", "(y warned: the job waits in the queue)"),
    Rule(("-shell",), "quiet", "start a binary (-b y) through a shell: y or n", "(no effect)"),
)

# Resources of SGE -l NAME=VALUE; any other NAME is warned.
SGE_RESOURCES: tuple[Rule, ...] = (
    Rule(("h_rt", "s_rt"), "time", "time limit, seconds or HH:MM:SS", "-t"),
    Rule(
        ("h_vmem", "s_vmem", "mem_free", "virtual_free", "h_rss", "mem_req"),
        "mem_per_slot",
        "memory per slot (times the slots)",
        "--mem-per-cpu",
    ),
    Rule(("gpu", "gpus"), "gpus", "GPUs: a count, or true (one) or false (none)", "--gpus N"),
)

DIALECTS = {"#SBATCH": "slurm", "#PBS": "pbs", "#$": "sge"}
PREFIXES = {"#SBATCH": SLURM, "#PBS": PBS, "#$": SGE}
# gsub options the translation produces, by key, and the option that carries them.
GS_FLAG = {
    "name": "-N",
    "ncpus": "-n",
    "ntasks": "--ntasks",
    "ntasks_per_node": "--ntasks-per-node",
    "hint": "--hint",
    "threads_per_core": "--threads-per-core",
    "pe": "--pe",
    "cpus_per_task": "--cpus-per-task",
    "time": "-t",
    "output": "-o",
    "error": "-e",
    "mem": "--mem",
    "mem_per_cpu": "--mem-per-cpu",
    "mem_per_gpu": "--mem-per-gpu",
    "depend": "-d",
    "chdir": "-D",
    "reservation": "--reservation",
    "checkpoint": "--checkpoint",
    "array": "--array",
    "join": "--join",
    "shell": "--shell",
    "begin": "--begin",
    "nice": "--nice",
    "open_mode": "--open-mode",
    "signal": "--signal",
    "estimate": "--estimate",
    "gpus": "--gpus",
    "gpus_per_node": "--gpus-per-node",
    "gpus_per_task": "--gpus-per-task",
    "gres": "--gres",
    "gpu_bind": "--gpu-bind",
    "export": "--export",
    "hold_jid": "--hold-jid",
    "mail_type": "--mail-type",
    "mail_user": "--mail-user",
    "account": "--account",
}
GS_SWITCH = {"hold": "--hold", "wait": "--wait", "exclusive": "--exclusive"}


# -- the manual ------------------------------------------------------------------


def manual_rows() -> list[tuple[str, str, str]]:
    """``(directive, meaning, gridsched option)`` for every directive read."""
    rows = [("#SBATCH " + ", ".join(r.flags), r.meaning, r.gs) for r in SLURM]
    rows += [("#PBS " + ", ".join(r.flags), r.meaning, r.gs) for r in PBS]
    rows += [("#PBS -l " + ", ".join(f"{f}=" for f in r.flags), r.meaning, r.gs) for r in PBS_RESOURCES]
    rows.append(("#PBS -l NAME=K", "any other resource (licences)", "(not supported yet: warned)"))
    rows += [("#$ " + ", ".join(r.flags), r.meaning, r.gs) for r in SGE]
    rows += [("#$ -l " + ", ".join(f"{f}=" for f in r.flags), r.meaning, r.gs) for r in SGE_RESOURCES]
    return rows
