"""gsub's options and arguments, as one decorator of its click command (:func:`gsub_options`).

The same definitions read the command line and the script's ``#GS`` directives, and grun and galter
take some of them (``gsub.cli.params``).  Their order here is their order in ``gsub --help`` and the
man page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gridsched.cli.common import COUNT, DURATION, SIZE, ChoiceType, place_options, spool_options
from gridsched.cli.gsub_types import (
    BeginType,
    DependType,
    ExportType,
    MailTypeType,
    MailUserType,
    MemType,
    SignalType,
    UserEnvType,
    WalltimeType,
    WholeType,
)
from gridsched.core.params import ADMIN_MAX, NICE_MAX, NICE_MIN
from gridsched.protocol.jobs import Hint
from gridsched.submission.devopts import device_options
from gridsched.submission.submit import LOGIN_PATH

CHECKPOINT_CHOICES = ("none", "signal", "suspend", "requeue", "criu")
EMIT_CHOICES = ("slurm", "pbs")
JOIN_CHOICES = ("oe", "eo", "n")
OPEN_MODES = ("append", "truncate")
HINTS = tuple(h.value for h in Hint)

F = TypeVar("F", bound=Callable[..., Any])

# The decorators, outermost first, as they would stand above the command's function.
_DECORATORS: tuple[Callable[[Any], Any], ...] = (
    click.argument("script", required=False, metavar="[SCRIPT | -]"),
    click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]..."),
    click.option(
        "-N",
        "-J",
        "--name",
        "--job-name",  # sbatch's words
        "name",
        metavar="NAME",
        help="Job name (default: the script's file name, 'wrap' for --wrap, "
        "'stdin' for a script read from standard input); -J and --job-name are sbatch's words for it.",
    ),
    click.option("-n", "--ncpus", type=COUNT, help="Number of cores (default: jobs.default_ncpus)."),
    click.option(
        "--ntasks",
        type=COUNT,
        metavar="N",
        help="Tasks of the job (as Slurm's -n): srun in the job starts N copies; the job's cores are N times "
        "--cpus-per-task when -n is not given. See JOB ENVIRONMENT.",
    ),
    click.option(
        "--ntasks-per-node",
        type=COUNT,
        metavar="N",
        help="Tasks on the node, as sbatch --ntasks-per-node: on one machine the job's tasks (--ntasks N "
        "when --ntasks is not given); the job sees SLURM_NTASKS_PER_NODE=N.",
    ),
    click.option(
        "-c",
        "--cpus-per-task",
        type=COUNT,
        metavar="C",
        help="Cores per task (as Slurm's -c); the job sees SLURM_CPUS_PER_TASK=C.",
    ),
    click.option(
        "-t",
        "--walltime",
        "--time",  # sbatch's word
        "walltime",
        type=WalltimeType(),
        help="Walltime: the job is stopped when it has run this long. As in sbatch, a bare number is "
        "MINUTES (-t 60 is one hour); also MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or 90s, 30m, 2h, 1d "
        "(default: jobs.default_walltime, at most jobs.max_walltime). --time is sbatch's word for it.",
    ),
    click.option(
        "--mem",
        type=MemType(),
        help="Memory of the job (512M, 4G; a bare number is MiB; 0 is the whole machine). More than the "
        "machine has is refused.",
    ),
    click.option(
        "--mem-per-cpu",
        type=SIZE,
        metavar="SIZE",
        help="Memory per core: the job gets SIZE times its cores (as sbatch --mem-per-cpu). Excludes --mem.",
    ),
    click.option(
        "--mem-per-gpu",
        type=SIZE,
        metavar="SIZE",
        help="Memory per GPU: the job gets SIZE times its GPUs (as sbatch --mem-per-gpu); it needs GPUs (--gpus, "
        "--gres gpu:N, ...). Excludes --mem and --mem-per-cpu.",
    ),
    click.option(
        "-o",
        "--output",
        metavar="PATH",
        help="Standard output file, with sbatch's patterns: %j the job id, %x the job name, %u the user, %N the "
        "host, %A and %a the array id and index, %% a percent sign; an existing directory gets the default name "
        "(default: NAME.oJOBID in the submit directory; slurm-%j.out in the working directory for an #SBATCH "
        "script). See OUTPUT FILES.",
    ),
    click.option(
        "-e",
        "--error",
        metavar="PATH",
        help="Standard error file, with the patterns of -o (default: NAME.eJOBID in the submit directory; joined "
        "to the output for an #SBATCH script).",
    ),
    click.option(
        "-j",
        "--join",
        type=ChoiceType(JOIN_CHOICES, "JOIN"),
        help="Join the two files, as PBS -j: oe (standard error into the output file), eo (output into the "
        "error file), n (two files, the default but for an #SBATCH script without -e).",
    ),
    click.option(
        "--open-mode",
        type=ChoiceType(OPEN_MODES, "MODE"),
        help="append: output files are appended to; truncate (the default): emptied when the job starts.",
    ),
    click.option(
        "--nice",
        type=WholeType(NICE_MIN, NICE_MAX),
        metavar="N",
        help="Lower the job's priority by N, as sbatch --nice=N: -10000 to 10000; only an admin gives a "
        "negative N, which raises it (an #SBATCH --nice without a value is 100, as in Slurm).",
    ),
    click.option(
        "--priority",
        type=WholeType(0, ADMIN_MAX),
        metavar="N",
        help="Set the job's priority to N, as sbatch --priority (admins only): the queue's multifactor priority "
        "and nice do not count for this job.",
    ),
    click.option(
        "--exclusive",
        is_flag=True,
        help="Run the job alone, as sbatch --exclusive gives a job the whole node: it takes all the machine's "
        "cores (GS_NCPUS, SLURM_CPUS_ON_NODE, NSLOTS count them all), so no other job starts beside it. A core "
        "count it asks (-n, or its tasks) stays its tasks' shape: -n 4 --exclusive is one task of 4 cores "
        "(SLURM_CPUS_PER_TASK=4, OMP_NUM_THREADS=4) holding every core. Also #SBATCH --exclusive, "
        "#PBS -l place=excl, #PBS -n. See ENVIRONMENT EXPORT AND EXCLUSIVE JOBS.",
    ),
    click.option(
        "--export",
        "export",
        type=ExportType(),
        metavar="ALL|NONE|[ALL,]VAR[=VALUE],...",
        help="What the job gets of the submitting environment, as sbatch --export: ALL (the default) all of it; "
        "NONE none of it (only HOME, USER, LOGNAME, SHELL of the password database, PATH=" + LOGIN_PATH + ", and "
        "the job's own variables); a list copies the variables it names and sets those given a =VALUE; with ALL "
        "in the list, everything and these. A variable gridsched sets for the job (GS_*, SLURM_*, the PBS and "
        "Grid Engine ones, TMPDIR, CUDA_VISIBLE_DEVICES, ...) cannot be given a value; OMP_NUM_THREADS can, and "
        "wins. #PBS -v and #$ -v lists are --export ALL,LIST. See ENVIRONMENT EXPORT AND EXCLUSIVE JOBS.",
    ),
    click.option(
        "--get-user-env",
        "get_user_env",
        type=UserEnvType(),
        metavar="[=TIMEOUT][S|L]",
        help="Start the job from its owner's login environment, as sbatch --get-user-env: the owner's login shell "
        "is run as 'SHELL -l -c \"env -0\"' (S: without -l) for at most TIMEOUT seconds (default 8) when the job "
        "starts, and the job gets what it prints, with the variables it was submitted with (and its own) over "
        "them. If the shell fails or takes longer, the job runs with the submitting environment and its standard "
        "error says so. See MAIL AND LOGIN ENVIRONMENT.",
    ),
    click.option(
        "--mail-type",
        "mail_type",
        type=MailTypeType(),
        help="Mail about the job, as sbatch --mail-type: BEGIN (it started), END (it ended: state and exit code), "
        "FAIL (it failed, timed out or ran out of memory: instead of END), REQUEUE, TIME_LIMIT, TIME_LIMIT_90, "
        "TIME_LIMIT_80, TIME_LIMIT_50 (it reached that part of its walltime), ARRAY_TASKS (a mail per task of an "
        "array; else one for the array: BEGIN as its first task starts, END or FAIL as its last ends), "
        "INVALID_DEPEND and STAGE_OUT (accepted: such a job's END mail), ALL (BEGIN, END, FAIL, REQUEUE), NONE. "
        "Sent by the daemon only where the admin set [mail] sendmail; else gsub warns that no mail is sent. "
        "#PBS -m and #$ -m letters are read as these. See MAIL AND LOGIN ENVIRONMENT.",
    ),
    click.option(
        "--mail-user",
        "mail_user",
        type=MailUserType(),
        help="Who gets the job's mail (default: the submitting user's name, delivered on this machine): up to 16 "
        "comma-separated addresses or user names, letters, digits and . _ + = % ~ - before an optional @domain.",
    ),
    click.option("-D", "--chdir", metavar="DIR", help="Working directory of the job (default: the submit directory)."),
    click.option("--hold", is_flag=True, help="Submit the job held: it does not start until released (grls)."),
    click.option(
        "--begin",
        type=BeginType(),
        help="Start the job no earlier than TIME, in sbatch's forms: now+N[seconds|minutes|hours|days|weeks] "
        "(now+90 is 90 seconds), HH:MM[:SS] (the next such time), YYYY-MM-DD[THH:MM[:SS]] (local time), "
        "midnight, noon, teatime, today, tomorrow.",
    ),
    click.option(
        "--estimate",
        type=WalltimeType(),
        help="How long the job is expected to run, in the forms of -t (a bare number is minutes): the scheduler "
        "plans with it (backfilling, predicted starts) in place of the walltime, which still ends the job; at "
        "most the walltime. As PBS soft_walltime. See ESTIMATES.",
    ),
    click.option(
        "--signal",
        "signal",
        type=SignalType(),
        help="Send the job signal SIG (a name, with or without SIG, or a number) SECONDS (default 60, at most 65535, "
        "not more than the walltime) before its walltime ends, as sbatch --signal: to all its processes, or with B: "
        "to its batch shell alone. The walltime's SIGTERM follows as ever. See SIGNALS BEFORE THE WALLTIME.",
    ),
    click.option(
        "--shell",
        metavar="PATH",
        help="What runs a script without #! on line 1 (an absolute path to an executable, as #PBS -S). "
        "Default: /bin/sh; the login shell for a #PBS or #$ script; an #SBATCH script without #! is refused, "
        "as sbatch refuses it. See INTERPRETER.",
    ),
    click.option(
        "-d",
        "--depend",
        "--dependency",  # sbatch's word
        "depend",
        type=DependType(),
        help="Start the job only when SPEC holds: afterok:ID[:ID...], afterany:ID..., afternotok:ID..., "
        "after:ID..., singleton, or a comma-separated list of these (all must hold). See DEPENDENCIES.",
    ),
    click.option(
        "--hold-jid",
        "hold_jid",
        metavar="NAME|ID,...",
        help="Start the job after every job of yours, pending or running, that has one of these names (a shell "
        "pattern such as 'prep*' matches several) or ids has ended, as Grid Engine's qsub -hold_jid (#$ "
        "-hold_jid): names are looked up at submission and become -d afterany:ID... (a name no such job has is "
        "warned of). See DEPENDENCIES.",
    ),
    click.option(
        "-a",
        "--array",
        metavar="RANGE",
        help="Submit a job array: one task per index of RANGE, such as 0-99, 1-9:2 (a step), 1,3,5-7, with "
        "%MAX at the end to run at most MAX tasks at once (0-99%4). Task INDEX of array ID is ID_INDEX; it "
        "sees GS_ARRAY_JOB_ID and GS_ARRAY_TASK_ID; in -o and -e, %A is the array id and %a the index. "
        "Indices go up to jobs.max_array_size - 1. See JOB ARRAYS.",
    ),
    click.option(
        "--split",
        type=COUNT,
        metavar="N",
        help="A splittable job of N independent sub-tasks (each a run of the script with GS_TASK_ID set, "
        "0 to N-1), each on -n cores for at most --task-time. It runs in waves on as many cores as the "
        "machine has; while it waits, sub-tasks may be taken out of it to fill backfill windows. "
        "See SPLITTABLE JOBS.",
    ),
    click.option(
        "--task-time",
        type=DURATION,
        metavar="DURATION",
        help="With --split: the walltime of one sub-task. -t, the walltime of the whole job, defaults to the "
        "waves it needs on the whole machine.",
    ),
    click.option(
        "--split-file",
        metavar="TASKS",
        help="A splittable job of the sub-tasks listed in the file TASKS, one per line: NCPUS WALLTIME "
        "[ARGS...] (words as in the shell, # starts a comment). Sub-task K (GS_TASK_ID=K, from 0 in line "
        "order) is a run of the script with the job's ARGS then its own, on NCPUS cores, killed at its "
        "WALLTIME. Excludes --split, --task-time and -n. See SPLITTABLE JOBS.",
    ),
    click.option(
        "--split-retries",
        type=click.IntRange(0, 100),
        metavar="N",
        help="With --split or --split-file: run a sub-task that failed or was killed at its time again, up "
        "to N more times (default 0).",
    ),
    click.option(
        "--wait",
        is_flag=True,
        help="Wait until the job (every task of an array) has finished and exit with its exit status "
        "(the highest of the tasks').",
    ),
    click.option(
        "--checkpoint",
        type=ChoiceType(CHECKPOINT_CHOICES, "MODE"),
        help="How the job may be preempted: none (never), signal (the job saves its state when "
        "signalled), suspend (stopped and continued), requeue (rerun from the start), criu "
        "(transparent; refused with the reason: not driven yet). Default: jobs.checkpoint.",
    ),
    click.option(
        "-l",
        "--resource",
        "resource",
        metavar="NAME=COUNT",
        multiple=True,
        help="Floating resources (licences) from [resources.floating] of the configuration, such as "
        "matlab=1; repeatable. The job starts only when its cores and every unit are free.",
    ),
    click.option(
        "--reservation",
        metavar="R",
        help="Run in reservation R (gresv): at once if it is active and has the cores, units and time "
        "left, when it becomes active if it waits. Only its owner and its listed users may.",
    ),
    click.option(
        "--wait-resv",
        is_flag=True,
        help="With --reservation: wait for the reservation's cores and units instead of refusing "
        "the job when too few are free now.",
    ),
    place_options("job"),
    click.option(
        "--hint",
        type=ChoiceType(HINTS, "HINT"),
        help="As sbatch --hint: nomultithread, compute_bound and memory_bound take one hardware thread of "
        "each physical core (--threads-per-core 1, unless given), multithread any; the job sees SLURM_HINT.",
    ),
    device_options,
    click.option(
        "--parent",
        type=COUNT,
        metavar="ID",
        help="Make the job a child of ID, another running job of yours (default inside a job: the job "
        "gsub runs in, $GS_JOBID). See JOB TREES.",
    ),
    click.option("--no-parent", is_flag=True, help="Inside a job: submit an independent job, not a child."),
    click.option(
        "--recoverable",
        "--suspend-subtree-on-failure",
        "recoverable",
        is_flag=True,
        help="If this job fails, is cancelled or times out, keep its subtree: running children finish, "
        "pending ones are held until gresume-tree ID releases them (default: the subtree is cancelled).",
    ),
    click.option("--wrap", metavar="COMMAND", help="Run COMMAND with /bin/sh instead of a script file."),
    click.option("--json", "as_json", is_flag=True, help="Print the submitted job as JSON."),
    click.option(
        "--parsable",
        is_flag=True,
        help="Print the job id alone, as sbatch --parsable: what gsub prints anyway (taken for sbatch's habit).",
    ),
    click.option("-p", "--partition", metavar="P", help="sbatch's partition: warned of and ignored (one machine)."),
    click.option(
        "-A",
        "--account",
        metavar="NAME",
        help="The account the job names, as sbatch -A: the job sees it as SLURM_JOB_ACCOUNT (a #SBATCH line's "
        "lowercased, as Slurm keeps it); nothing is charged to it (no accounting).",
    ),
    click.option(
        "--pe",
        metavar="NAME",
        help="The Grid Engine parallel environment the job names (#$ -pe NAME SLOTS gives it): the job sees "
        "PE=NAME and PE_HOSTFILE; its slots are its cores (-n).",
    ),
    click.option("-q", "--qos", metavar="Q", help="sbatch's quality of service: warned of and ignored (no QOS)."),
    click.option(
        "--emit",
        type=ChoiceType(EMIT_CHOICES, "FORMAT"),
        help="Print the script with #SBATCH (slurm) or #PBS (pbs) directives equivalent to its directives and "
        "the options given, and submit nothing.",
    ),
    spool_options,
)


def gsub_options(f: F) -> F:
    """``f`` with all of gsub's arguments and options, in the order of ``gsub --help``."""
    for decorate in reversed(_DECORATORS):
        f = decorate(f)
    return f
