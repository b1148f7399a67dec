"""The corpus of Slurm, PBS Pro, Torque and SGE job scripts: how gsub reads each, and how some run.

Each script in ``scripts/`` (provenance in ``README.md``) has an entry in
:data:`WANT`: what a user of the original system would see if the whole
cluster were this one machine (:data:`MACHINE`): the job refused, with the
reason, or accepted with its cores, walltime, memory, GPUs, output files,
interpreter and array indices.  Every value was worked out by hand from the
rules of sbatch(1), qsub(1B) of PBS Pro, qsub of Torque and qsub(1) of Grid
Engine, never by running gsub; the rule is named where it is not obvious.

The parse-only tests submit each script once with gsub (in-process, no
daemon) and read the job spec gsub wrote to the spool.  :data:`RUNS` names
scripts that also run in one real daemon for the module, with what their own
output must say.

Where today's gsub does not meet an expectation, the case is marked
``xfail(strict=True)`` with what is missing (:data:`XFAIL`); when the feature
lands the case passes, strict xfail turns that into a failure, and the mark
is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gridsched.cli import gsub
from gridsched.protocol import arrays
from gridsched.protocol.spool import Spool
from tests.cli.conftest import submitted
from tests.conftest import BIN, Gridsched, wait_for

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"

G = 1 << 30
M = 1 << 20
HOUR = 3600

# The machine the expectations are for: one node of 16 cores and 4 GPUs, with
# enough memory for every request below (none asks for more than 16 GiB).
# Limits of the site: a job without a time gets the default of 1 hour (Slurm's
# DefaultTime, PBS's resources_default.walltime, SGE's default h_rt), at most
# 30 days; array indices below 100000 (Slurm's MaxArraySize, PBS's
# max_array_size).
# TOPOLOGY declares them: two boards of 8 cores, each with 2 GPUs.
MACHINE = {"cores": 16, "gpus": 4}
DEFAULT_WALLTIME = HOUR
TOPOLOGY = """
[[board]]
id = 0
cores = "0-7"
host_cpus = "0"
distance = [10, 21]

[[board]]
id = 1
cores = "8-15"
host_cpus = "1"
distance = [21, 10]
""" + "".join(f'\n[[device]]\ntype = "gpu"\nindex = {i}\nboard = {i // 2}\n' for i in range(4))
CONFIG = """
[daemon]
autostart = false
[machine]
cores = 16
topology = "topology.toml"
[jobs]
default_walltime = "1h"
max_walltime = "30d"
max_array_size = 100000
"""

LOGIN = "LOGIN"  # the submitting user's login shell (pw_shell)
SAME = "SAME"  # standard error goes into the standard output file


@dataclass(frozen=True)
class Want:
    """An accepted job.  Paths are relative to the submit directory unless absolute; ``{id}`` is the job id,
    ``{host}`` the short host name and ``{home}`` the submitting user's home directory.  For an array, the
    paths are those of the task with the first index."""

    cores: int = 1
    walltime: int = DEFAULT_WALLTIME
    mem: int | None = None
    gpus: int = 0
    stdout: str = ""
    stderr: str = SAME
    interpreter: str = LOGIN
    array: tuple[int, ...] | None = None
    mkdirs: tuple[str, ...] = ()  # directories a user would have made before submitting


@dataclass(frozen=True)
class Refused:
    """A refused submission; ``reason`` is a regular expression the one-line error must match."""

    reason: str
    mkdirs: tuple[str, ...] = ()


# Multi-node requests have no one-machine answer in Slurm or PBS.  gsub(1),
# SLURM AND PBS DIRECTIVES: "A request for more than one node ... is submitted
# with the cores of all its nodes, with a warning saying that this is one
# machine and what the one-node request is"; more cores than the machine has
# is then refused naming both numbers.


def slurm_out(name: str = "slurm-{id}.out") -> str:
    """sbatch: without --output, standard output goes to slurm-%j.out (slurm-%A_%a.out for an array task)
    in the submit directory; without --error, standard error goes to the same file."""
    return name


WANT: dict[str, Want | Refused] = {
    # -- Slurm (sbatch) ----------------------------------------------------------------
    "slurm-openmp-account.sh": Want(cores=4, walltime=300, stdout=slurm_out(), interpreter="/bin/bash"),
    # sbatch: error: Invalid numeric value "XXXmpinodesXXX" for --ntasks.
    "slurm-template-placeholders.sh": Refused(r"XXXmpinodesXXX"),
    # %N in a file name pattern is the short host name of the (first) node.
    "slurm-openmp-nodename-output.sh": Want(
        cores=12, walltime=5400, mem=8 * G, stdout="hello_omp.{id}.{host}.out", interpreter="/bin/bash"
    ),
    # Outside an array, %A is the job id and %a is 4294967294 (NO_VAL, "no array index").
    "slurm-array-outputs-without-array.sh": Want(
        cores=16,
        stdout="graph_n1000_{id}_4294967294.out",
        stderr="graph_{id}_4294967294.err",
        interpreter="/bin/bash",
    ),
    # --ntasks-per-node=4 on one node: 4 tasks of 1 cpu; --mem-per-cpu is per allocated cpu: 4 * 2G.
    "slurm-gpus-per-node-mem-per-cpu.sh": Want(cores=4, mem=8 * G, gpus=1, stdout=slurm_out(), interpreter="/bin/bash"),
    "slurm-gpus-two.sh": Want(cores=8, mem=6 * G, gpus=2, stdout=slurm_out(), interpreter="/bin/bash"),
    # The text after # on a directive line is a comment.
    "slurm-gres-inline-comment.sh": Want(gpus=2, stdout=slurm_out(), interpreter="/bin/bash"),
    # -t 0-20:00 is days-hours:minutes: 20 hours.
    "slurm-gres-days-hours.sh": Want(
        cores=2,
        walltime=20 * HOUR,
        mem=10 * G,
        gpus=2,
        stdout="logs/log{id}.out",
        stderr="logs/log{id}.err",
        interpreter="/bin/sh",
        mkdirs=("logs",),
    ),
    # -n 16 over -N 2: 16 cores (gsub(1): the cores of all its nodes).  8192MB is 8192 MiB.
    "slurm-mpi-two-nodes.sh": Want(cores=16, walltime=600, mem=8192 * M, stdout=slurm_out(), interpreter="/bin/bash"),
    # 16 nodes of 32 tasks: 512 cores (gsub(1): the cores of all its nodes), more than the machine has.
    "slurm-mpi-sixteen-nodes.sh": Refused(r"\b512\b.*\b16\b"),
    # -D ./ is the submit directory; -o and -e are relative to it.
    "slurm-login-shell-chdir.sh": Want(
        cores=8, walltime=600, stdout="sim.out", stderr="sim.err", interpreter="/bin/bash -l"
    ),
    "slurm-tacc-inline-comments.sh": Want(cores=16, walltime=5400, stdout="mv1.o{id}", interpreter="/bin/bash"),
    # -t 0-0:1 is days-hours:minutes: one minute.  --mem 1G (a space, not =) is read as --mem=1G.
    "slurm-array-throttle.sh": Want(
        walltime=60,
        mem=1 * G,
        stdout="slurm_array_{id}-0.out",
        stderr="slurm_array_{id}-0.err",
        interpreter="/bin/bash",
        array=tuple(range(10)),
    ),
    # --mem-per-cpu=4000M with one cpu; indices up to 9999 are below this site's MaxArraySize.
    "slurm-array-high-indices.sh": Want(
        walltime=6 * HOUR,
        mem=4000 * M,
        stdout="out_split/slrm_9000.out",
        interpreter="/bin/bash",
        array=tuple(range(9000, 10000)),
        mkdirs=("out_split",),
    ),
    # --time 0:0:30 is hours:minutes:seconds, and Slurm keeps time limits in whole minutes,
    # rounding seconds up: the limit is one minute.
    "slurm-array-seconds-time.sh": Want(
        walltime=60, stdout="slurm-{id}_1.out", interpreter="/bin/bash", array=tuple(range(1, 11))
    ),
    # Blank lines between #SBATCH lines do not end the directives.
    "slurm-array-blank-lines.sh": Want(
        walltime=48 * HOUR,
        mem=2 * G,
        stdout="R4-{id}.1.out",
        stderr="R4-{id}.1.err",
        interpreter="/bin/bash",
        array=tuple(range(1, 11)),
    ),
    "slurm-env-bash-hostname.sh": Want(
        walltime=300, mem=1 * G, stdout="hello-my-hostname-is.o{id}.{host}", interpreter="/usr/bin/env bash"
    ),
    # ##SBATCH lines are comments.  0-00:15:00 is days-hours:minutes:seconds.
    "slurm-partition-list-srun.sh": Want(walltime=900, mem=1 * G, stdout=slurm_out(), interpreter="/bin/bash"),
    # --time=60:00 is minutes:seconds; --mem-per-cpu=200 without a unit is megabytes.
    "slurm-minutes-seconds.sh": Want(walltime=HOUR, mem=200 * M, stdout="res.txt", interpreter="/bin/bash"),
    # 2 nodes of 4 tasks of 5 cpus: 40 cores (gsub(1): the cores of all its nodes), more than the machine has.
    "slurm-hybrid-two-nodes.sh": Refused(r"\b40\b.*\b16\b"),
    "slurm-hybrid-omp-mpi.sh": Want(cores=16, walltime=300, stdout=slurm_out(), interpreter="/bin/bash -l"),
    # A bare "#SBATCH" line is harmless; the next line (--mem=32G) is a command, so the
    # directives end there: --partition and --gres below it are never read.
    "slurm-bare-directive-line.sh": Want(cores=8, stdout=slurm_out(), interpreter="/bin/bash"),
    # sbatch: error: Invalid directive found in batch script: PARTITION
    "slurm-template-brackets.sh": Refused(r"PARTITION"),
    # 20 cpus on a 16-core node: "Requested node configuration is not available".
    "slurm-more-cores-than-machine.sh": Refused(r"\b20\b.*\b16\b", mkdirs=("logs",)),
    "slurm-optional-directives.sh": Want(
        cores=4, walltime=HOUR, stdout="output_file", stderr="error_file", interpreter="/bin/bash"
    ),
    # sbatch: error: This does not look like a batch script.  The first line must start with #!
    "slurm-shebang-on-line-2.sh": Refused(r"#!"),
    "slurm-no-shebang.sh": Refused(r"#!"),
    # -t 0-00:05 is days-hours:minutes; --mem=100 without a unit is megabytes.
    "slurm-dhhmm-bare-mem.sh": Want(
        walltime=300, mem=100 * M, stdout="hostname_{id}.out", stderr="hostname_{id}.err", interpreter="/bin/bash"
    ),
    # A bare number is minutes.
    "slurm-bare-minutes.sh": Want(walltime=300, stdout="minutes_{id}.out", interpreter="/bin/bash"),
    # Spaces after the interpreter on the #! line are not part of it.
    "slurm-trailing-spaces-shebang.sh": Want(walltime=300, stdout=slurm_out(), interpreter="/bin/bash"),
    # -- written here (tests/compat/README.md): Slurm ---------------------------------------------
    # 2 tasks of 4 cpus, each with a GPU: 8 cores and 2 GPUs; %x is the job name.
    "slurm-ddp-gpus-per-task.sh": Want(
        cores=8,
        walltime=2 * HOUR,
        mem=12 * G,
        gpus=2,
        stdout="logs/ddp-train-{id}.out",
        interpreter="/bin/bash",
        mkdirs=("logs",),
    ),
    # --mem-per-cpu times the 8 cpus; --hint=nomultithread: one thread of each core (SLURM_HINT).
    "slurm-openmp-hint.sh": Want(cores=8, walltime=1200, mem=8 * 500 * M, stdout=slurm_out(), interpreter="/bin/bash"),
    # %3a is the task index padded to 3 digits; -t 5 is five minutes.
    "slurm-array-padded-index.sh": Want(walltime=300, stdout="run_001.log", interpreter="/bin/bash", array=(1, 2, 3)),
    # A range with a step and a single index in one list.
    "slurm-array-list-and-step.sh": Want(
        walltime=120, mem=256 * M, stdout="{id}_0.out", interpreter="/bin/bash", array=(0, 5, 7, 10, 15, 20)
    ),
    # sbatch: error: Invalid --time specification
    "slurm-bad-time-word.sh": Refused(r"abc"),
    # sbatch: error: Invalid --mem specification
    "slurm-bad-mem-word.sh": Refused(r"lots"),
    # sbatch: error: Invalid numeric value "0" for --cpus-per-task.
    "slurm-bad-zero-cpus.sh": Refused(r"cpus-per-task"),
    # sbatch: error: Invalid numeric value "2.5" for --cpus-per-task.
    "slurm-bad-fraction-cpus.sh": Refused(r"2\.5"),
    # #PBS lines after the #SBATCH ones are comments to sbatch; gsub reads the first kind (a warning).
    "slurm-then-pbs-lines.sh": Want(cores=4, walltime=1800, stdout=slurm_out(), interpreter="/bin/bash"),
    "slurm-export-none-user-env.sh": Want(walltime=300, stdout="login-env.{id}", interpreter="/bin/bash"),
    # A placeholder mail address: sbatch takes it; gsub warns and mails the owner.
    "slurm-mail-placeholder.sh": Want(walltime=600, stdout=slurm_out(), interpreter="/bin/bash"),
    # -D run: a relative -o is in the working directory; -t 1:00 is minutes:seconds.
    "slurm-chdir-relative.sh": Want(walltime=60, stdout="run/chd.{id}.log", interpreter="/bin/bash", mkdirs=("run",)),
    "slurm-open-mode-append.sh": Want(walltime=900, stdout="shared.log", stderr="shared.err", interpreter="/bin/bash"),
    "slurm-signal-requeue.sh": Want(cores=2, walltime=600, stdout=slurm_out(), interpreter="/bin/bash"),
    # sbatch takes 4GB as 4G (seen with Slurm 22.05).
    "slurm-mem-gb-suffix.sh": Want(cores=2, walltime=45 * 60, mem=4 * G, stdout=slurm_out(), interpreter="/bin/bash"),
    # 2-25:00:00 is 2 days and 25 hours: sbatch takes it as 3-01:00:00 (seen with Slurm 22.05).
    "slurm-hours-past-a-day.sh": Want(walltime=73 * HOUR, stdout=slurm_out(), interpreter="/bin/bash"),
    # A lower-case unit; --time=90 is minutes.
    "slurm-lowercase-mem.sh": Want(cores=3, walltime=90 * 60, mem=2 * G, stdout=slurm_out(), interpreter="/bin/bash"),
    # -- PBS Pro (qsub) -------------------------------------------------------------------
    # Without -o/-e: JOBNAME.oSEQ and JOBNAME.eSEQ in the submit directory; the job name
    # defaults to the script's file name.  walltime=H:MM:SS.
    "pbspro-select-mem.sh": Want(
        cores=2,
        walltime=300,
        mem=2 * G,
        stdout="pbspro-select-mem.sh.o{id}",
        stderr="pbspro-select-mem.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # The chunks' cores summed (gsub(1): the cores of all its nodes): 1152, more than the machine has.
    "pbspro-multinode-template.sh": Refused(r"\b1152\b.*\b16\b"),
    # No #! line: the shell of #PBS -S runs the script.
    "pbspro-no-shebang-shell-option.sh": Want(
        cores=6,
        walltime=24 * HOUR,
        stdout="pbspro-no-shebang-shell-option.sh.o{id}",
        stderr="pbspro-no-shebang-shell-option.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # A blank line inside the directives does not end them; size units are case-insensitive (8Gb).
    "pbspro-blank-line-in-header.sh": Want(
        cores=8,
        walltime=HOUR,
        mem=8 * G,
        stdout="pbspro-blank-line-in-header.sh.o{id}",
        stderr="pbspro-blank-line-in-header.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # Two -l options on one line; place=pack:excl asks for the node to itself: the job runs alone on
    # every core of the machine (as Slurm's --exclusive; docs/compat.md, exclusive jobs).
    "pbspro-two-resource-options.sh": Want(
        cores=16,
        walltime=24 * 60,
        mem=2 * G,
        stdout="pbspro-two-resource-options.sh.o{id}",
        stderr="pbspro-two-resource-options.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # ^array_index^ in -o/-e is the subjob's index.  A line holding one space is blank.
    "pbspro-array-index-in-path.sh": Want(
        walltime=3 * HOUR,
        mem=4 * G,
        stdout="output_0.txt",
        stderr="error_0.txt",
        interpreter="/bin/bash",
        array=tuple(range(8)),
    ),
    # -o and -e name a directory: the default file names go in it; a subjob's are
    # JOBNAME.oSEQ.INDEX and JOBNAME.eSEQ.INDEX.
    "pbspro-array-step-output-dir.sh": Want(
        walltime=1800,
        mem=32 * M,
        stdout="out/Array_Example.o{id}.0",
        stderr="out/Array_Example.e{id}.0",
        interpreter="/bin/bash",
        array=tuple(range(128)),
        mkdirs=("out",),
    ),
    # walltime after a comma in the same -l as select; -j oe: standard error into standard output.
    "pbspro-ngpus-walltime-in-select.sh": Want(
        cores=8, walltime=15 * HOUR, mem=16 * G, gpus=2, stdout="DS_cvt.txt", interpreter="/bin/bash"
    ),
    # -- Torque (qsub) ----------------------------------------------------------------------
    # -t 0-256: an array; a task's default files are JOBNAME.oJOBID-INDEX and JOBNAME.eJOBID-INDEX.
    "torque-array-mail.sh": Want(
        walltime=23 * HOUR + 59 * 60,
        stdout="rumi-22r.o{id}-0",
        stderr="rumi-22r.e{id}-0",
        interpreter="/bin/sh",
        array=tuple(range(257)),
    ),
    # No #! line and no -S: the user's login shell runs the script.  -j oe merges.
    "torque-no-shebang.sh": Want(walltime=600, stdout="myjob.o{id}", interpreter=LOGIN),
    # nodes=3:ppn=4: 12 cores (gsub(1): the cores of all its nodes); ./ paths are in the submit directory.
    "torque-multinode-no-shebang.sh": Want(
        cores=12, walltime=600, stdout="outputB.csv", stderr="error.txt", interpreter=LOGIN
    ),
    # Indented comments do not end the directives; "#  #PBS" is a comment, not a directive.
    "torque-indented-comments.sh": Want(walltime=HOUR, stdout="stdout", stderr="stderr", interpreter="/bin/bash"),
    # "PBS -l ..." without # is a command: the script has no directives at all.
    "torque-directive-without-hash.sh": Want(
        stdout="torque-directive-without-hash.sh.o{id}",
        stderr="torque-directive-without-hash.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # gpus=1 in the nodes spec; a relative -o/-e is relative to qsub's directory, not to -d.
    "torque-gpus-workdir.sh": Want(
        walltime=40 * HOUR, gpus=1, stdout="output.txt", stderr="error.txt", interpreter=LOGIN
    ),
    # pmem is per process: ppn=8 processes of 512mb.
    "torque-ppn-pmem-devnull.sh": Want(
        cores=8, walltime=1200, mem=8 * 512 * M, stdout="/dev/null", stderr="/dev/null", interpreter=LOGIN
    ),
    # -- Grid Engine (qsub) -----------------------------------------------------------------
    # -cwd: the files go to the submit directory, JOBNAME.oJOBID (JOBNAME.oJOBID.TASKID for
    # an array task); -o logs names a directory; -j y merges; -t 1-380 with -tc 50.
    "sge-array-task-throttle.sh": Want(
        stdout="logs/figopt.o{id}.1",
        interpreter="/bin/bash",
        array=tuple(range(1, 381)),
        mkdirs=("logs",),
    ),
    # qsub: ERROR! -pe option must have range as 2nd argument
    "sge-template-placeholders.sh": Refused(r"CORES|-pe"),
    # -pe orte 8: 8 slots; h_rt=1200000 is seconds; m_mem_free is a site resource, not a limit.
    "sge-orte-seconds.sh": Want(cores=8, walltime=1200000, stdout="off500-5-3.o{id}", interpreter="/bin/sh"),
    # 343 slots on a 16-core host can never be granted.
    "sge-more-slots-than-machine.sh": Refused(r"\b343\b"),
    # h_rt=48:0:0.  mem_free is a load value or a consumable as the site configures it; gsub(1),
    # TIMES AND MEMORY, reads it as memory per slot: 6 slots of 1G.
    "sge-ompi-mem-free.sh": Want(
        cores=6,
        walltime=48 * HOUR,
        mem=6 * G,
        stdout="sge-ompi-mem-free.sh.o{id}",
        stderr="sge-ompi-mem-free.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # h_vmem is per slot: 2 slots of 1G; the repeated -pe line asks the same.
    "sge-smp-hvmem-repeated-pe.sh": Want(cores=2, walltime=60, mem=2 * G, stdout="stdout", interpreter="/bin/sh"),
    # -l gpu=2: the usual site complex for GPUs; num_proc is not a limit; no -pe: one slot.  mem_free
    # is memory per slot in gsub(1), TIMES AND MEMORY (a site's choice in Grid Engine): 8G.
    "sge-gpu-queue.sh": Want(
        walltime=8 * HOUR, mem=8 * G, gpus=2, stdout="sge-gpu-queue.sh.o{id}", interpreter="/bin/bash"
    ),
    # "#! /bin/sh": a space after #! is allowed.  -pe gpu-titanx 2 with h_vmem=4G per slot.
    "sge-pe-gpu-space-shebang.sh": Want(
        cores=2,
        walltime=8 * HOUR,
        mem=8 * G,
        stdout="training_explore.o{id}",
        stderr="training_explore.e{id}",
        interpreter="/bin/sh",
    ),
    # The #! line comes after the directives, so -S chooses the shell; -wd /tmp is where the
    # files go; gpu=true is one GPU; tmem is a site resource.
    "sge-shebang-after-directives.sh": Want(
        walltime=1800, gpus=1, stdout="/tmp/unet.o{id}", stderr="/tmp/unet.e{id}", interpreter="/bin/bash"
    ),  # -- written here: PBS Pro, Torque and Grid Engine ------------------------------------------------
    "pbspro-gpu-training.sh": Want(
        cores=8, walltime=12 * HOUR, mem=16 * G, gpus=2, stdout="train.log", interpreter="/bin/bash"
    ),
    "pbspro-openmp-ompthreads.sh": Want(
        cores=4,
        walltime=HOUR,
        stdout="pbspro-openmp-ompthreads.sh.o{id}",
        stderr="pbspro-openmp-ompthreads.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # -J 1-9:2: subjobs 1, 3, 5, 7, 9, each with its own JOBNAME.oSEQ.INDEX.
    "pbspro-array-range-step.sh": Want(
        walltime=900,
        mem=500 * M,
        stdout="sweep.o{id}.1",
        stderr="sweep.e{id}.1",
        interpreter="/bin/bash",
        array=(1, 3, 5, 7, 9),
    ),
    # qsub: illegal -l value
    "pbspro-bad-walltime-word.sh": Refused(r"walltime"),
    "pbspro-bad-ncpus-word.sh": Refused(r"ncpus"),
    # 2 chunks of 4: 8 cores on one machine; place=scatter is warned of.
    "pbspro-mpiprocs-scatter.sh": Want(
        cores=8, walltime=1800, stdout="mpi_ring.o{id}", stderr="mpi_ring.e{id}", interpreter="/bin/bash"
    ),
    # #SBATCH lines after the #PBS ones: qsub reads only #PBS; gsub reads the first kind (a warning).
    "pbspro-then-slurm-lines.sh": Want(
        cores=4, walltime=600, mem=2 * G, stdout="mixed.o{id}", stderr="mixed.e{id}", interpreter="/bin/bash"
    ),
    # -t: each subjob's -o gets -INDEX; its -e is the default JOBNAME.eSEQ-INDEX.
    "torque-array-task-names.sh": Want(
        cores=2,
        walltime=1800,
        stdout="sweep.log-1",
        stderr="sweep.e{id}-1",
        interpreter="/bin/bash",
        array=(1, 2, 3, 4),
    ),
    # mem= is the job's memory; vmem only counts where mem= is not given.
    "torque-mem-and-vmem.sh": Want(
        cores=4,
        walltime=3 * HOUR,
        mem=2 * G,
        stdout="torque-mem-and-vmem.sh.o{id}",
        stderr="torque-mem-and-vmem.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # -j eo: standard output joins standard error, in the -e file.
    "torque-join-eo.sh": Want(walltime=300, stdout="job.err", interpreter="/bin/bash"),
    "torque-bad-ppn-word.sh": Refused(r"ppn"),
    # -t 2-10:4 with -j y: tasks 2, 6, 10; JOBNAME.oJOBID.TASKID in the -cwd directory.
    "sge-cwd-array-step.sh": Want(walltime=300, stdout="steps.o{id}.2", interpreter="/bin/bash", array=(2, 6, 10)),
    # No #! line: -S chooses the shell.
    "sge-smp-omp-no-shebang.sh": Want(
        cores=4,
        walltime=HOUR,
        stdout="sge-smp-omp-no-shebang.sh.o{id}",
        stderr="sge-smp-omp-no-shebang.sh.e{id}",
        interpreter="/bin/bash",
    ),
    # #$-N without a space is a directive.
    "sge-no-space-directives.sh": Want(
        walltime=600, stdout="tight.o{id}", stderr="tight.e{id}", interpreter="/bin/bash"
    ),
    # qsub: ERROR! ... h_rt
    "sge-bad-hrt-word.sh": Refused(r"h_rt"),
    # qsub: ERROR! -pe option must have range as 2nd argument
    "sge-bad-pe-range.sh": Refused(r"-pe|smp"),
    # #SBATCH lines after the #$ ones: qsub reads only #$; gsub reads the first kind (a warning).
    "sge-then-slurm-lines.sh": Want(walltime=1200, stdout="mix.o{id}", stderr="mix.e{id}", interpreter="/bin/bash"),
    # No -cwd or -wd: Grid Engine runs the job in the home directory and writes its files there.
    "sge-no-cwd-home.sh": Want(walltime=60, stdout="{home}/homejob.o{id}", interpreter="/bin/bash"),
    # Three resources in one -l; h_vmem is per slot: 2 slots of 2G.
    "sge-gpu-list-in-one-l.sh": Want(
        cores=2, walltime=2 * HOUR, mem=4 * G, gpus=1, stdout="gpu.out", stderr="gpu.err", interpreter="/bin/bash"
    ),
}

FIELDS = ("cores", "walltime", "mem", "gpus", "stdout", "stderr", "interpreter", "array")

# -- what today's gsub does not do yet ------------------------------------------------------------

XFAIL: dict[tuple[str, str], str] = {}


def expect_fail(reason: str, *cases: str) -> None:
    """Mark CASES (``script:field``, ``script:verdict``, or ``script:*`` for every field) with ``reason``."""
    for case in cases:
        name, _, what = case.partition(":")
        assert name in WANT and (what in (*FIELDS, "verdict", "*")), case
        XFAIL[(name, what)] = reason


def xfail_for(name: str, what: str) -> str | None:
    return XFAIL.get((name, what)) or XFAIL.get((name, "*"))


# -- submitting -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    stderr: str
    spec: dict[str, Any] | None
    submit_dir: Path


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def submit_dir(name: str, root: Path) -> tuple[Path, dict[str, str]]:
    """A fresh submit directory under ``root`` holding NAME, the configuration of :data:`MACHINE`, and the
    environment that selects them."""
    work = root / "submit"
    work.mkdir(parents=True)
    for d in WANT[name].mkdirs:
        (work / d).mkdir()
    shutil.copyfile(SCRIPTS / name, work / name)
    (root / "gridsched.toml").write_text(CONFIG)
    (root / "topology.toml").write_text(TOPOLOGY)
    return work, {"GRIDSCHED_CONFIG": str(root / "gridsched.toml"), "GRIDSCHED_SPOOL": str(root / "spool")}


def submit(name: str, root: Path) -> Outcome:
    """gsub NAME from a fresh submit directory under ``root``, with no daemon: the spec it wrote."""
    work, env = submit_dir(name, root)
    with environ(**env), contextlib.chdir(work):
        r = CliRunner().invoke(gsub.cli, [name], prog_name="gsub")
    specs = submitted(Spool(root / "spool"))
    return Outcome(r.exit_code, r.stderr, specs[0] if specs else None, work)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Each script submitted once (lazily) for the whole module."""
    root = tmp_path_factory.mktemp("corpus")

    class Lazy(dict[str, Outcome]):
        def __missing__(self, name: str) -> Outcome:
            self[name] = submit(name, root / name)
            return self[name]

    return Lazy()


# -- what the spec says ----------------------------------------------------------------------------


def login_shell() -> str:
    return pwd.getpwuid(os.getuid()).pw_shell


def interpreter_of(spec: dict[str, Any]) -> str:
    """The interpreter the job will run under, by the daemon's rule: a script starting with #! is
    executed (the kernel runs the #! line's interpreter); any other is run by the spec's ``shell``,
    else by /bin/sh."""
    text = spec["script"]
    if text.startswith("#!"):
        return " ".join(text.splitlines()[0][2:].split())
    return str(spec.get("shell") or "/bin/sh")


def gpus_of(spec: dict[str, Any]) -> int:
    for key in ("gpus", "ngpus"):
        if isinstance(spec.get(key), int):
            return int(spec[key])
    return sum(int(d["count"]) for d in spec.get("devices") or () if d.get("type") == "gpu")


def observed(out: Outcome, what: str) -> Any:
    spec = out.spec
    assert spec is not None, f"refused: {out.stderr.strip()}"
    indices = arrays.parse(spec["array"]).indices if spec.get("array") else None

    def path(p: str) -> str:
        return arrays.task_path(p, spec["id"], indices[0]) if indices else p

    return {
        "cores": lambda: spec["ncpus"],
        "walltime": lambda: spec["walltime"],
        "mem": lambda: spec["mem"],
        "gpus": lambda: gpus_of(spec),
        "stdout": lambda: path(spec["stdout"]),
        "stderr": lambda: path(spec["stderr"]),
        "interpreter": lambda: interpreter_of(spec),
        "array": lambda: indices,
    }[what]()


def expected(want: Want, what: str, out: Outcome) -> Any:
    job_id = out.spec["id"] if out.spec else 1

    def path(p: str) -> str:
        p = p.format(id=job_id, host=socket.gethostname().split(".")[0], home=pwd.getpwuid(os.getuid()).pw_dir)
        return p if p.startswith("/") else str(out.submit_dir / p)

    if what == "stdout":
        return path(want.stdout)
    if what == "stderr":
        return path(want.stdout if want.stderr == SAME else want.stderr)
    if what == "interpreter":
        return login_shell() if want.interpreter == LOGIN else want.interpreter
    return getattr(want, what)


# -- the tests --------------------------------------------------------------------------------------


def mark(name: str, what: str) -> list[pytest.MarkDecorator]:
    why = xfail_for(name, what)
    return [pytest.mark.xfail(strict=True, reason=why)] if why else []


def test_every_script_has_an_expectation_and_every_expectation_a_script():
    assert sorted(p.name for p in SCRIPTS.iterdir()) == sorted(WANT)


@pytest.mark.parametrize("name", [pytest.param(n, marks=mark(n, "verdict"), id=n) for n in sorted(WANT)])
def test_accepted_or_refused(outcomes, name):
    out, want = outcomes[name], WANT[name]
    if isinstance(want, Refused):
        assert out.code != 0 and out.spec is None, "accepted"
        # One error line; warnings about other directives may come before it.
        errors = [ln for ln in out.stderr.splitlines() if not ln.startswith("gsub: warning: ")]
        assert len(errors) == 1 and errors[0].startswith("gsub: error: "), out.stderr
        assert re.search(want.reason, errors[0]), errors[0]
    else:
        assert out.code == 0, out.stderr
        assert out.spec is not None


@pytest.mark.parametrize(
    "name, what",
    [
        pytest.param(n, w, marks=mark(n, w), id=f"{n}-{w}")
        for n in sorted(WANT)
        if isinstance(WANT[n], Want)
        for w in FIELDS
    ],
)
def test_read_as_the_original_system_reads_it(outcomes, name, what):
    out, want = outcomes[name], WANT[name]
    assert isinstance(want, Want)
    assert observed(out, what) == expected(want, what, out)


# -- real runs ----------------------------------------------------------------------------------------

HOSTNAME = socket.gethostname()
RUN_CONFIG = """
[scheduler]
policy = "fcfs"
[machine]
cores = 16
topology = "topology.toml"
[jobs]
kill_grace = "1s"
default_walltime = "1h"
max_walltime = "30d"
[daemon]
autostart = false
"""
ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")


@dataclass(frozen=True)
class Run:
    """A script run by the daemon: lines its standard output must hold (in order), and how it must end.
    For an array, the output of the task ``index`` is read."""

    name: str
    lines: tuple[str, ...]
    state: str = "COMPLETED"
    exit_code: int = 0
    index: int | None = None
    xfail: str = ""


RUNS = (
    Run("torque-indented-comments.sh", ("job begins", HOSTNAME, "job ends")),
    Run("torque-no-shebang.sh", (f"myjob runs on  {HOSTNAME}", "done")),
    # The line "PBS -l ..." fails as a command; the script goes on and its last command succeeds.
    Run("torque-directive-without-hash.sh", ("module load torque", "started")),
    Run("pbspro-select-mem.sh", ("ls \u2013lrt", "running on: ", HOSTNAME)),
    Run("slurm-dhhmm-bare-mem.sh", (HOSTNAME,)),
    Run("slurm-env-bash-hostname.sh", (HOSTNAME, "done")),
    Run("slurm-trailing-spaces-shebang.sh", (HOSTNAME, "main")),
    Run(
        "slurm-openmp-account.sh",
        ("omp threads: 4",),
    ),
    Run(
        "slurm-array-throttle.sh",
        ("task 3 times ten", "result 30"),
        index=3,
    ),
    # #!/bin/bash -l: this host's /etc/profile sets PATH anew; BASH_ENV puts the job's srun back first
    Run("slurm-hybrid-omp-mpi.sh", ("tasks=4 threads=4", "rank")),
    Run("slurm-partition-list-srun.sh", (HOSTNAME,)),
    Run("pbspro-no-shebang-shell-option.sh", ("bash arrays: 3",)),
    # place=pack:excl: the job holds all 16 cores of the machine and runs alone
    Run("pbspro-two-resource-options.sh", ("module load mpich-3.2", "gsa")),
    Run(
        "sge-smp-hvmem-repeated-pe.sh",
        ("threads 2", "run"),
    ),
    # Torque names subjob 2 of "sweep" sweep-2 (src/server/job_func.c, job_clone)
    Run("torque-array-task-names.sh", ("name sweep-2", "index 2"), index=2),
    Run("pbspro-openmp-ompthreads.sh", ("threads 4 cpus 4",)),
    Run("sge-cwd-array-step.sh", ("task 6 first 2 last 10 step 4",), index=6),
    Run("slurm-array-padded-index.sh", ("task 2 of 3",), index=2),
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gridsched]:
    """One real daemon for every run of the module."""
    gs = Gridsched(tmp_path_factory.mktemp("corpus-runs") / "gs", RUN_CONFIG)
    (gs.root / "topology.toml").write_text(TOPOLOGY)
    try:
        gs.start()
        yield gs
    finally:
        gs.cleanup()


def records(gs: Gridsched) -> list[dict[str, Any]]:
    r = gs.run("gstat", "-a", "--json", check=True)
    return list(json.loads(r.stdout)["jobs"])


@pytest.mark.daemon
@pytest.mark.parametrize(
    "run",
    [
        pytest.param(r, id=r.name, marks=[pytest.mark.xfail(strict=True, reason=r.xfail)] if r.xfail else [])
        for r in RUNS
    ],
)
def test_script_runs(daemon, run):
    work = daemon.work / run.name
    work.mkdir()
    want = WANT[run.name]
    assert isinstance(want, Want)
    for d in want.mkdirs:
        (work / d).mkdir()
    shutil.copyfile(SCRIPTS / run.name, work / run.name)
    r = subprocess.run(
        [str(BIN / "gsub"), run.name], cwd=work, env=daemon.env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    jid = int(r.stdout.split()[-1])

    def mine() -> list[dict[str, Any]]:
        return [j for j in records(daemon) if j["id"] == jid or j["array_id"] == jid]

    def ended() -> list[dict[str, Any]] | None:
        jobs = mine()
        tasks = [j for j in jobs if j["array_id"] == jid] if want.array else jobs
        return tasks if tasks and all(j["state"] in ENDED for j in tasks) else None

    jobs = wait_for(ended, 60, f"{run.name} to end")
    job = next(j for j in jobs if run.index is None or j["array_index"] == run.index)
    out = Path(job["stdout"]).read_text()
    assert (job["state"], job["exit_code"]) == (run.state, run.exit_code), out
    seen = [ln for ln in out.splitlines() if ln]
    at = 0
    for line in run.lines:  # each wanted line, in order, is (a part of) a line of the output
        found = [i for i in range(at, len(seen)) if line in seen[i]]
        assert found, f"{line!r} not in the output after line {at}:\n{out}"
        at = found[0] + 1


# -- the same scripts, translated back for Slurm ----------------------------------------------------

LOCAL_SLURM_MEM = 16000 * M  # RealMemory of the node of ../shared/tools/slurm-localhost (16 CPUs, no GRES)


def emitted(name: str, root: Path) -> tuple[int, str, str]:
    """``gsub --emit slurm NAME`` from a fresh submit directory, as :func:`submit` submits it."""
    work, env = submit_dir(name, root)
    with environ(**env), contextlib.chdir(work):
        r = CliRunner().invoke(gsub.cli, ["--emit", "slurm", name], prog_name="gsub")
    return r.exit_code, r.stdout, r.stderr


def local_max_array_size() -> int:
    r = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30)
    for line in r.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize" and value.strip().isdigit():
            return int(value.strip())
    return 1001  # Slurm's default


@pytest.mark.parametrize("name", sorted(n for n, w in WANT.items() if isinstance(w, Want)))
def test_sbatch_accepts_what_gsub_emits(tmp_path, slurm_cluster, name):
    """Every accepted script, written back by ``gsub --emit slurm``, is accepted by ``sbatch --test-only``
    of a real Slurm (where one answers).  The local Slurm's node has 16 CPUs, 16000 MB and no GRES:
    device lines are left out (they are checked as text in tests/cli/test_compat.py), and a job asking
    for more memory than that node has or an array index beyond its MaxArraySize is not sent (said in
    the skip reason)."""
    want = WANT[name]
    assert isinstance(want, Want)
    if want.mem is not None and want.mem > LOCAL_SLURM_MEM:
        pytest.skip(f"{name} asks for {want.mem // M} MB; the local Slurm's node has {LOCAL_SLURM_MEM // M} MB")
    if want.array is not None and max(want.array) >= local_max_array_size():
        pytest.skip(f"{name}: index {max(want.array)} is beyond the local Slurm's MaxArraySize")
    code, out, err = emitted(name, tmp_path)
    assert code == 0, err
    lines = [
        ln
        for ln in out.splitlines()
        if not ln.startswith(("#SBATCH --gres", "#SBATCH --gpus", "#SBATCH -G", "#SBATCH --gpu-bind"))
    ]
    (tmp_path / "e.sh").write_text("\n".join(lines) + "\n")
    s = subprocess.run(
        ["sbatch", "--test-only", str(tmp_path / "e.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path / "submit",
    )
    assert s.returncode == 0, f"{s.stderr}\n--- emitted:\n{out}"


@pytest.mark.parametrize("name", sorted(n for n in WANT if "-bad-" in n))
def test_a_refused_value_is_named_with_its_file_line_and_directive(outcomes, name):
    """A value the original system refuses (each ``*-bad-*`` script holds one) is refused in one line that
    names the script, the line and the directive as written there."""
    out = outcomes[name]
    [error] = [ln for ln in out.stderr.splitlines() if not ln.startswith("gsub: warning: ")]
    m = re.match(rf"gsub: error: {re.escape(name)}:(\d+): (#SBATCH|#PBS|#\$) (\S+)", error)
    assert m, error
    line = (SCRIPTS / name).read_text().splitlines()[int(m.group(1)) - 1]
    assert line.startswith(m.group(2)) and m.group(3).split("=")[0] in line, (line, error)


@pytest.mark.parametrize(
    "name, read, ignored",
    [
        ("slurm-then-pbs-lines.sh", "#SBATCH", "#PBS"),
        ("pbspro-then-slurm-lines.sh", "#PBS", "#SBATCH"),
        ("sge-then-slurm-lines.sh", "#$", "#SBATCH"),
    ],
)
def test_a_script_mixing_dialects_says_which_one_wins(outcomes, name, read, ignored):
    out = outcomes[name]
    assert out.spec is not None and out.spec["dialect"] == {"#SBATCH": "slurm", "#PBS": "pbs", "#$": "sge"}[read]
    warned = [ln for ln in out.stderr.splitlines() if "mixes" in ln]
    assert len(warned) == 1 and f"the {read} lines are read" in warned[0], out.stderr
    assert f"the {ignored} lines are ignored" in warned[0]
