"""``srun``, ``mpirun`` and ``mpiexec`` inside a job: N copies of a command, each on its share of the job's cores.

Each job finds this launcher first on its ``PATH`` (``bin/`` of its private
directory, see :mod:`gridsched.daemon.jobtmp`), as ``srun`` always and as
``mpirun`` and ``mpiexec`` when the machine has no MPI of its own (where it
has one, that one runs, with the job's host file: see docs/compat.md).

``srun [-n N] [-c C] [--cpu-bind=none|cores|verbose,...] [-l] CMD [ARGS...]``
starts N copies of CMD (default: the job's tasks, ``GS_NTASKS``), copy i
pinned to the i-th share of the job's cores (C cores each; default: the
job's cores divided among the copies), with ``SLURM_PROCID`` and
``SLURM_LOCALID`` = i, ``SLURM_NODEID`` = 0, ``SLURM_STEP_ID`` (0, 1, ... for
each srun of the job), ``PMI_RANK`` and ``PMI_SIZE``; it waits for all of
them, forwards SIGTERM and SIGINT to them, and exits with the highest exit
status (128 + N for a copy killed by signal N).  More tasks than the job
has, or more cores than it has, are refused with one line.  ``mpirun`` and
``mpiexec`` (``-n``/``-np N``) do the same with ``OMPI_COMM_WORLD_RANK``,
``OMPI_COMM_WORLD_SIZE``, ``PMI_RANK`` and ``PMI_SIZE``; their default N is
the job's MPI ranks (the lines of its host file).

Standard library only: it starts inside every job step.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field

EXIT_USAGE = 2
EXIT_NOT_FOUND = 127


class Refused(Exception):
    """A request the launcher will not carry out; the message is one line."""


@dataclass
class Step:
    """What one launch asks for."""

    ntasks: int | None = None
    cpus_per_task: int | None = None
    bind: bool = True
    verbose: bool = False
    label: bool = False
    command: list[str] = field(default_factory=list)


# srun options that take a value and are accepted without effect (one machine, one job)
SRUN_IGNORED_VALUE = {
    "-J",
    "--job-name",
    "--mpi",
    "--export",
    "-o",
    "--output",
    "-e",
    "--error",
    "-t",
    "--time",
    "--mem",
    "--mem-per-cpu",
    "-p",
    "--partition",
    "-A",
    "--account",
    "--distribution",
    "-m",
    "--hint",
    "--gres",
    "--gpus",
    "-W",
    "--wait",
    "--ntasks-per-node",
    "--propagate",
    "--mem-bind",
    "--cpu-freq",
    "--gpus-per-task",
    "--gpu-bind",
    "--threads-per-core",
}
SRUN_IGNORED_FLAG = {
    "-K",
    "--kill-on-bad-exit",
    "-u",
    "--unbuffered",
    "--exclusive",
    "--overlap",
    "--overcommit",
    "--pty",
    "--whole",
    "-O",
    "-Q",
    "--quiet",
    "-v",
    "--verbose",
}
MPI_IGNORED_VALUE = {
    "--host",
    "-host",
    "-H",
    "--hostfile",
    "-hostfile",
    "--machinefile",
    "-machinefile",
    "-f",
    "--bind-to",
    "-bind-to",
    "--map-by",
    "-map-by",
    "--rank-by",
    "-x",
    "-ppn",
    "--npernode",
    "-npernode",
    "-wdir",
    "--wdir",
}
MPI_IGNORED_PAIR = {"--mca", "-mca", "-genv", "-env", "--gmca"}
MPI_IGNORED_FLAG = {"--oversubscribe", "-oversubscribe", "--allow-run-as-root", "--report-bindings", "-v"}


def _count(flag: str, text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise Refused(f"{flag} {text!r}: not a whole number") from None
    if n < 1:
        raise Refused(f"{flag} {text}: must be at least 1")
    return n


def _value(args: list[str], i: int, flag: str) -> tuple[str, int]:
    """The value of option ``args[i]`` (``--opt=V``, ``-nV`` or ``--opt V``) and the index after it."""
    a = args[i]
    if a.startswith("--") and "=" in a:
        return a.split("=", 1)[1], i + 1
    if not a.startswith("--") and len(a) > 2 and a[:2] == flag:
        return a[2:], i + 1
    if i + 1 >= len(args):
        raise Refused(f"{flag}: needs a value")
    return args[i + 1], i + 2


def parse_srun(args: list[str]) -> Step:
    st = Step()
    i = 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0] if a.startswith("--") else a[:2]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if name in ("-n", "--ntasks"):
            v, i = _value(args, i, name)
            st.ntasks = _count(name, v)
        elif name in ("-c", "--cpus-per-task"):
            v, i = _value(args, i, name)
            st.cpus_per_task = _count(name, v)
        elif name in ("-N", "--nodes"):
            v, i = _value(args, i, name)
            if v.split("-", 1)[0].strip() not in ("1", ""):
                raise Refused(f"{name} {v}: the job has one node")
        elif name in ("--cpu-bind", "--cpu_bind"):
            v, i = _value(args, i, name)
            words = v.lower().split(",")
            st.bind = "none" not in words and "no" not in words
            st.verbose = "verbose" in words or "v" in words
        elif name in ("-l", "--label"):
            st.label = True
            i += 1
        elif name in SRUN_IGNORED_FLAG or a in SRUN_IGNORED_FLAG:
            i += 1
        elif name in SRUN_IGNORED_VALUE:
            _, i = _value(args, i, name)
        else:
            raise Refused(f"{a}: not an option srun knows here")
    st.command = args[i:]
    if not st.command:
        raise Refused("no command to run")
    return st


def _mpi_value(args: list[str], i: int, name: str) -> tuple[str, int]:
    a = args[i]
    if "=" in a:
        return a.split("=", 1)[1], i + 1
    if i + 1 >= len(args):
        raise Refused(f"{name}: needs a value")
    return args[i + 1], i + 2


def parse_mpirun(args: list[str]) -> Step:
    st = Step()
    i = 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if name in ("-n", "-np", "--np", "--n", "-c"):
            v, i = _mpi_value(args, i, name)
            st.ntasks = _count(name, v)
        elif name in ("--cpus-per-rank", "--cpus-per-proc"):
            v, i = _mpi_value(args, i, name)
            st.cpus_per_task = _count(name, v)
        elif name in ("--tag-output", "-tag-output", "-l", "-prepend-rank"):
            st.label = True
            i += 1
        elif name in MPI_IGNORED_FLAG:
            i += 1
        elif name in MPI_IGNORED_VALUE:
            i += 1 if "=" in a else 2
        elif name in MPI_IGNORED_PAIR:
            i += 3
        else:
            raise Refused(f"{a}: not an option this mpirun knows (no MPI is installed on this machine)")
    st.command = args[i:]
    if not st.command:
        raise Refused("no command to run")
    return st


def shares(cpus: list[int], n: int, per: int | None) -> list[list[int]]:
    """Copy i's cores: the i-th run of ``per`` cores (default: the cores divided evenly among ``n``)."""
    if per is None:
        per = max(1, len(cpus) // n)
    return [[cpus[(i * per + k) % len(cpus)] for k in range(per)] for i in range(n)]


def _next_step(env: dict[str, str]) -> int:
    """The job's next step id (0 for its first srun), counted in its private directory."""
    nodefile = env.get("GS_NODEFILE")
    if not nodefile:
        return 0
    path = os.path.join(os.path.dirname(nodefile), "steps")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.read(fd, 32).strip()
        step = int(raw) if raw.isdigit() else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(step + 1).encode())
        return step
    finally:
        os.close(fd)


def _job_ranks(env: dict[str, str]) -> int:
    path = env.get("GS_MPI_HOSTS", "")
    try:
        with open(path) as f:
            n = sum(1 for line in f if line.strip())
    except OSError:
        n = 0
    return n or int(env.get("GS_NTASKS", "1") or 1)


def plan(prog: str, st: Step, env: dict[str, str], cpus: list[int]) -> tuple[int, list[list[int]]]:
    """How many copies and each one's cores; :class:`Refused` if the job has not that much."""
    mpi = prog != "srun"
    job_tasks = _job_ranks(env) if mpi else int(env.get("GS_NTASKS", "1") or 1)
    n = st.ntasks if st.ntasks is not None else job_tasks
    if n > job_tasks:
        what = "MPI ranks (its host file's slots)" if mpi else "tasks (gsub --ntasks, #SBATCH -n)"
        raise Refused(f"-n {n}: more than the job's {job_tasks} {what}")
    if st.cpus_per_task is not None and n * st.cpus_per_task > len(cpus):
        raise Refused(f"{n} tasks of {st.cpus_per_task} cores: more than the job's {len(cpus)} cores")
    return n, shares(cpus, n, st.cpus_per_task)


def _pump(src: int, dst: int, prefix: bytes) -> None:
    with os.fdopen(src, "rb", buffering=0) as f:
        buf = b""
        while True:
            chunk = f.read(65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if lines:
                os.write(dst, b"".join(prefix + line + b"\n" for line in lines))
        if buf:
            os.write(dst, prefix + buf + b"\n")


def run(prog: str, st: Step, env: dict[str, str]) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    n, cores = plan(prog, st, env, cpus)
    step = _next_step(env) if prog == "srun" else 0
    host = env.get("SLURMD_NODENAME") or os.uname().nodename.split(".", 1)[0]
    procs: list[subprocess.Popen[bytes]] = []
    pumps: list[threading.Thread] = []

    def forward(sig: int, _frame: object) -> None:
        for p in procs:
            if p.returncode is None:
                try:
                    p.send_signal(sig)
                except OSError:
                    pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for i in range(n):
            e = dict(env)
            e.update(
                SLURM_PROCID=str(i),
                SLURM_LOCALID=str(i),
                SLURM_NODEID="0",
                SLURM_STEP_ID=str(step),
                SLURM_STEPID=str(step),
                SLURM_STEP_NUM_TASKS=str(n),
                SLURM_STEP_NUM_NODES="1",
                SLURM_STEP_NODELIST=host,
                SLURM_STEP_TASKS_PER_NODE=str(n),
                SLURM_NTASKS=str(n),
                SLURM_NPROCS=str(n),
                PMI_RANK=str(i),
                PMI_SIZE=str(n),
                OMPI_COMM_WORLD_RANK=str(i),
                OMPI_COMM_WORLD_SIZE=str(n),
                OMPI_COMM_WORLD_LOCAL_RANK=str(i),
                OMPI_COMM_WORLD_LOCAL_SIZE=str(n),
                GS_TASK_RANK=str(i),
            )
            if st.cpus_per_task is not None:
                e["SLURM_CPUS_PER_TASK"] = str(st.cpus_per_task)
            mine = set(cores[i]) if st.bind else set(cpus)
            if st.verbose:
                shown = ",".join(map(str, sorted(mine)))
                os.write(2, f"{prog}: task {i} on {host}: cpus {shown}\n".encode())
            out = err = None
            if st.label:
                out, err = subprocess.PIPE, subprocess.PIPE
            try:
                p = subprocess.Popen(
                    st.command,
                    env=e,
                    stdout=out,
                    stderr=err,
                    preexec_fn=(lambda m=mine: os.sched_setaffinity(0, m)),  # noqa: PLW1509 - no threads yet
                )
            except FileNotFoundError:
                forward(signal.SIGTERM, None)
                raise Refused(f"{st.command[0]}: command not found") from None
            except PermissionError:
                forward(signal.SIGTERM, None)
                raise Refused(f"{st.command[0]}: permission denied") from None
            procs.append(p)
        if st.label:
            for i, p in enumerate(procs):
                for pipe, dst in ((p.stdout, 1), (p.stderr, 2)):
                    assert pipe is not None
                    t = threading.Thread(target=_pump, args=(os.dup(pipe.fileno()), dst, f"{i}: ".encode()))
                    pipe.close()
                    t.start()
                    pumps.append(t)
        worst = 0
        for p in procs:
            while True:
                try:
                    code = p.wait()
                    break
                except InterruptedError:
                    continue
            worst = max(worst, code if code >= 0 else 128 - code)
        for t in pumps:
            t.join()
        return worst
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv if argv is None else argv
    prog = os.path.basename(args[0]) if args else "srun"
    if prog not in ("srun", "mpirun", "mpiexec"):
        prog = "srun"
    env = dict(os.environ)
    if "GS_JOBID" not in env:
        os.write(
            2,
            f"{prog}: error: not inside a job: submit one with gsub (gsub --ntasks N --wrap '{prog} CMD')\n".encode(),
        )
        sys.exit(1)
    try:
        st = parse_srun(args[1:]) if prog == "srun" else parse_mpirun(args[1:])
        code = run(prog, st, env)
    except Refused as e:
        os.write(2, f"{prog}: error: {e}\n".encode())
        sys.exit(EXIT_NOT_FOUND if "not found" in str(e) else EXIT_USAGE)
    sys.exit(code)


if __name__ == "__main__":
    main()
