"""The executor's Slurm backend: calls run as batch jobs of a Slurm cluster.

Jobs are submitted with ``sbatch --parsable --wrap``, watched with ``squeue``
and, once they have left the queue, ``scontrol show job`` (Slurm keeps a
finished job there for ``MinJobAge``, 300 s by default) or ``sacct`` where the
cluster keeps accounting.  The pickled calls and the logs are in the
executor's directory, which the cluster's nodes must see (as for submitit);
the job runs the same Python as the submitting process.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from gridsched.api.client import GridschedError
from gridsched.api.executor import JobStatus
from gridsched.core.units import UnitError, parse_duration, parse_size
from gridsched.protocol.jobs import JobState

# sbatch's options the executor takes as keyword arguments (name -> sbatch's long option)
OPTIONS = {
    "partition": "--partition",
    "account": "--account",
    "qos": "--qos",
    "constraint": "--constraint",
    "reservation": "--reservation",
    "gpus": "--gpus",
    "mem": "--mem",
}
RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT", "SUSPENDED", "RESIZING"}
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "SPECIAL_EXIT",
    "REVOKED",
}
CHECKPOINT_SIGNAL = "USR1"  # what tells a checkpointable call to save itself (submitit's is USR2)
UNKNOWN_AFTER = 3  # polls in which no Slurm command knows a job before it counts as ended
TIMEOUT = 30.0  # seconds a Slurm command may take


def unavailable() -> str | None:
    """Why no Slurm can take jobs from here, or None when ``sbatch`` is on PATH and ``sinfo`` answers."""
    missing = [c for c in ("sbatch", "squeue", "scontrol", "sinfo") if shutil.which(c) is None]
    if missing:
        return f"{', '.join(missing)} not on PATH"
    try:
        r = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"sinfo: {e}"
    if r.returncode != 0:
        last = (r.stderr.strip() or r.stdout.strip() or f"exit status {r.returncode}").splitlines()[-1]
        return f"sinfo: {last}"
    return None


def available() -> bool:
    """True when ``sbatch`` is on PATH and the cluster answers (``sinfo``)."""
    return unavailable() is None


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise GridschedError(f"{argv[0]}: {e}") from None


def time_limit(walltime: str | int) -> str:
    """sbatch's --time for a walltime as gsub takes it (or seconds): ``D-HH:MM:SS``."""
    seconds = walltime if isinstance(walltime, int) else parse_duration(walltime)
    if seconds <= 0:
        raise GridschedError(f"walltime {walltime!r}: must be positive")
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02}:{m:02}:{s:02}"


def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    try:
        return int(code), int(sig) or None
    except ValueError:
        return None, None


class SlurmBackend:
    """Submit to, watch and cancel on the Slurm cluster that ``sbatch`` talks to."""

    name = "slurm"

    def __init__(self, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - set(OPTIONS) - {"env", "sbatch_args"})
        if unknown:
            raise TypeError(
                f"the slurm backend takes no option {', '.join(unknown)} "
                f"(it takes {', '.join(sorted([*OPTIONS, 'env', 'sbatch_args']))})"
            )
        self.args: list[str] = []
        for key, value in options.items():
            if key in ("env", "sbatch_args") or value is None:
                continue
            if key == "mem":
                try:
                    size = value if isinstance(value, int) else parse_size(str(value))
                except UnitError as e:
                    raise GridschedError(str(e)) from None
                value = f"{max(1, math.ceil(size / 2**20))}M"
            self.args.append(f"{OPTIONS[key]}={value}")
        self.args += [str(a) for a in options.get("sbatch_args") or ()]
        env = options.get("env")
        self.env = {**os.environ, **env} if env is not None else None
        self._unknown: dict[int, int] = {}
        why = unavailable()
        if why:
            raise GridschedError(f"backend slurm: no Slurm answers here ({why})")

    def submit(
        self,
        command: str,
        name: str,
        log: Path,
        ncpus: int,
        walltime: str | int | None,
        *,
        array: str | None = None,
        checkpoint: bool = False,
        signal_delay: int | None = None,
    ) -> int:
        argv = ["sbatch", "--parsable", "--export=ALL", f"--job-name={name}", f"--output={log}", f"--error={log}"]
        argv += ["--ntasks=1", f"--cpus-per-task={ncpus}", f"--chdir={os.getcwd()}"]
        if walltime is not None:
            try:
                argv.append(f"--time={time_limit(walltime)}")
            except UnitError as e:
                raise GridschedError(str(e)) from None
        if array is not None:
            argv.append(f"--array={array}")
        if checkpoint:
            # the job requeues itself after saving its call; its log goes on where the last run stopped
            argv += ["--requeue", "--open-mode=append"]
            if signal_delay is not None:  # to the batch shell, which the job's exec made the worker
                argv.append(f"--signal=B:{CHECKPOINT_SIGNAL}@{signal_delay}")
        r = _run([*argv, *self.args, f"--wrap={command}"], self.env)
        if r.returncode != 0:
            raise GridschedError(f"sbatch: {(r.stderr or r.stdout).strip() or f'exit status {r.returncode}'}")
        try:
            return int(r.stdout.strip().split(";")[0])
        except ValueError:
            raise GridschedError(f"sbatch: no job id in its answer {r.stdout.strip()!r}") from None

    def worker_checkpoint_args(self, stem: Path, signal_delay: int | None) -> list[str]:
        # preempted (the cluster sends the --signal signal at preemption where preempt_send_user_signal is set),
        # warned of its time limit, or signalled by hand: the call is saved in the executor's directory (Slurm
        # jobs have no checkpoint directory) and the job requeues itself, as submitit's do
        return [f"--signal={CHECKPOINT_SIGNAL}", f"--state={stem}.ckpt", "--requeue=slurm"]

    def array_status(self, array_id: int, indices: list[int]) -> dict[int, JobStatus]:
        """The tasks of the array as ``scontrol show job`` lists them (a started or ended task on a line of
        its own, the pending ones on one line), else as ``sacct`` does; a task that neither knows for
        :data:`UNKNOWN_AFTER` polls counts as ended."""
        out: dict[int, JobStatus] = {}
        pending = False
        r = _run(["scontrol", "-o", "show", "job", str(array_id)])
        for line in r.stdout.splitlines() if r.returncode == 0 else ():
            fields = dict(f.partition("=")[::2] for f in line.split())
            task, state = fields.get("ArrayTaskId", ""), fields.get("JobState", "")
            if not task.isdigit():
                pending = pending or bool(task)  # "3-19%2": tasks not started yet
                continue
            code, sig = _exit(fields.get("ExitCode", ""))
            jid = fields.get("JobId", "")
            out[int(task)] = JobStatus(
                state, state in RUNNING, state in ENDED, code, sig, int(jid) if jid.isdigit() else None
            )
        missing = [i for i in indices if i not in out]
        if missing and not pending:
            r = _run(["sacct", "-n", "-P", "-X", "-j", str(array_id), "-o", "JobID,State,ExitCode,JobIDRaw"])
            for line in r.stdout.splitlines() if r.returncode == 0 else ():
                jobid, state, code_text, raw = (line.split("|") + ["", "", ""])[:4]
                _, _, task = jobid.partition("_")
                if task.isdigit() and int(task) not in out:
                    state = state.split(" ")[0]
                    code, sig = _exit(code_text)
                    out[int(task)] = JobStatus(
                        state, state in RUNNING, state in ENDED, code, sig, int(raw) if raw.isdigit() else None
                    )
            for i in missing:
                key = -(array_id * 1_000_000 + i + 1)  # the unknown counts of tasks, apart from those of jobs
                if i in out:
                    self._unknown.pop(key, None)
                    continue
                self._unknown[key] = self._unknown.get(key, 0) + 1
                if self._unknown[key] >= UNKNOWN_AFTER:
                    self._unknown.pop(key, None)
                    out[i] = JobStatus("UNKNOWN", False, True)
        return out

    def cancel_task(self, array_id: int, index: int, job_id: int | None) -> bool:
        st = self.array_status(array_id, [index]).get(index)
        if st is not None and st.state != "PENDING":
            return False
        return _run(["scancel", f"{array_id}_{index}"]).returncode == 0

    def status(self, ids: list[int]) -> dict[int, JobStatus]:
        out: dict[int, JobStatus] = {}
        r = _run(["squeue", "-h", "-o", "%i|%T", "-j", ",".join(map(str, ids))])
        for line in r.stdout.splitlines() if r.returncode == 0 else ():
            text, _, state = line.strip().partition("|")
            if text.isdigit() and int(text) in ids and state not in ENDED:
                out[int(text)] = JobStatus(state, state in RUNNING, False)
        for jid in ids:
            if jid in out:
                continue
            st = self._ended(jid)
            if st is None:
                self._unknown[jid] = self._unknown.get(jid, 0) + 1
                if self._unknown[jid] < UNKNOWN_AFTER:
                    continue
                st = JobStatus("UNKNOWN", False, True)
            self._unknown.pop(jid, None)
            out[jid] = st
        return out

    def _ended(self, jid: int) -> JobStatus | None:
        """A job no longer in squeue, as scontrol or else sacct tells it; None if neither does."""
        r = _run(["scontrol", "-o", "show", "job", str(jid)])
        if r.returncode == 0:
            fields = dict(f.partition("=")[::2] for f in r.stdout.split())
            state = fields.get("JobState", "")
            if state:
                code, sig = _exit(fields.get("ExitCode", ""))
                return JobStatus(state, state in RUNNING, state in ENDED, code, sig)
        r = _run(["sacct", "-n", "-P", "-X", "-j", str(jid), "-o", "State,ExitCode"])
        if r.returncode == 0 and r.stdout.strip():
            state, _, code_text = r.stdout.splitlines()[0].partition("|")
            state = state.split(" ")[0]
            code, sig = _exit(code_text)
            return JobStatus(state, state in RUNNING, state in ENDED, code, sig)
        return None

    def cancel_pending(self, job_id: int) -> bool:
        st = self.status([job_id]).get(job_id)
        if st is None or st.state != JobState.PENDING:
            return False
        return _run(["scancel", str(job_id)]).returncode == 0
