"""``concurrent.futures`` on the batch queue: each call runs as a job, here or on a Slurm cluster.

    from gridsched.api.executor import GridschedExecutor
    with GridschedExecutor(ncpus=4, walltime="10m") as ex:
        print(ex.submit(sum, [1, 2, 3]).result())

The callable and its arguments are pickled with cloudpickle into a file in a
directory of the executor's own; the job runs ``python -m
gridsched.job.executor_worker IN OUT`` with the same interpreter; the result (or
the exception, with its traceback) comes back the same way.  A function or
class of an importable module goes by name; everything else, the functions
and classes of the script run as ``__main__`` included (whether or not its
code is under ``if __name__ == "__main__":``), lambdas, closures and nested
functions, goes by value, and the script is never run again in the job.
A callable with a ``checkpoint`` method (:class:`Checkpointable`, submitit's
protocol) is checkpointed when its job is preempted or requeued: the job gets
a signal, the worker pickles what ``checkpoint`` returns (a
:class:`DelayedSubmission`) and the job runs it again later.  :meth:`~GridschedExecutor.map`
and :meth:`~GridschedExecutor.map_array` submit one job array.
A background thread polls the jobs, at bounded
intervals, and completes the futures.  ``backend`` chooses where the jobs run:
``"local"``, this machine's gridsched daemon; ``"slurm"``, a Slurm cluster
through ``sbatch``, ``squeue`` and ``scontrol`` (:mod:`gridsched.api.slurm`);
``"auto"``, Slurm where ``sbatch`` answers, else the local daemon.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import shlex
import shutil
import sys
import tempfile
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from gridsched.api.client import Client, GridschedError
from gridsched.protocol.jobs import WAITING, JobState

POLL_FIRST, POLL_MAX = 0.05, 1.0  # seconds between polls of the jobs
BACKENDS = ("local", "slurm", "auto")


class JobFailed(GridschedError):
    """The job of a call ended without returning a result (killed, timed out, cancelled)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised inside a job: the ``__cause__`` of the exception
    :meth:`Future.result` raises (as :mod:`concurrent.futures.process` does)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return f'\n"""\n{self.tb}"""'


@dataclass(frozen=True, slots=True)
class JobStatus:
    """What a backend says of one job."""

    state: str  # the scheduler's word: PENDING, RUNNING, COMPLETED, TIMEOUT, ...
    running: bool
    done: bool
    exit_code: int | None = None
    exit_signal: int | None = None
    job_id: int | None = None  # an array task's own job id, where the backend tells it


class Backend(Protocol):
    """Where the executor's jobs run."""

    name: str

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
        """Submit a job (with ``array``, the array of those indices, ``%a`` in ``log`` and ``command`` being
        each task's index); ``checkpoint``: the job is checkpointed by signal, and with ``signal_delay`` also
        that many seconds before its walltime ends.  Its id (an array's id)."""
        ...

    def status(self, ids: list[int]) -> dict[int, JobStatus]:
        """The jobs of ``ids`` the backend knows now (one it cannot tell of this time is left out)."""
        ...

    def array_status(self, array_id: int, indices: list[int]) -> dict[int, JobStatus]:
        """The tasks of array ``array_id`` the backend knows now, by index (those of ``indices`` at least)."""
        ...

    def cancel_pending(self, job_id: int) -> bool:
        """Cancel the job if it has not started; True if it was."""
        ...

    def cancel_task(self, array_id: int, index: int, job_id: int | None) -> bool:
        """Cancel a task of an array (its own id ``job_id`` where known) if it has not started; True if it was."""
        ...

    def worker_checkpoint_args(self, stem: Path, signal_delay: int | None) -> list[str]:
        """The worker's options for a checkpointable call: the signals it catches, where it keeps the saved
        call and how its job runs again (``stem``: the call's files in the executor's directory, less their
        suffix; ``signal_delay``: the call is also warned of its walltime)."""
        ...


class LocalBackend:
    """This machine's gridsched daemon, through :class:`Client`: a checkpointable call is a ``checkpoint="signal"``
    job, which the daemon restarts itself once it has exited 75 (state kept in ``$GS_CHECKPOINT_DIR``)."""

    name = "local"

    def __init__(self, spool: str | None, config: str | None, options: dict[str, Any]) -> None:
        self.client = Client(spool, config)
        self.options = options

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
        options = dict(self.options)
        if checkpoint:
            options["checkpoint"] = "signal"
            if signal_delay is not None:
                options["signal"] = f"{self.warning_signal()}@{signal_delay}"
        job = self.client.submit(
            command=command,
            ncpus=ncpus,
            walltime=walltime,
            name=name,
            output=str(log),
            error=str(log),
            array=array,
            **options,
        )
        return job.id

    def status(self, ids: list[int]) -> dict[int, JobStatus]:
        out = {}
        for i in ids:
            try:
                j = self.client.status(i)
            except GridschedError:
                continue
            out[i] = _local_status(j)
        return out

    def array_status(self, array_id: int, indices: list[int]) -> dict[int, JobStatus]:
        try:
            tasks = self.client.array_tasks(array_id)
        except GridschedError:
            return {}
        return {i: _local_status(j) for i, j in tasks.items()}

    def cancel_pending(self, job_id: int) -> bool:
        try:
            if self.client.status(job_id).state not in WAITING:
                return False
            self.client.cancel(job_id)
        except GridschedError:
            return False
        return True

    def cancel_task(self, array_id: int, index: int, job_id: int | None) -> bool:
        if job_id is None:
            job = self.client.array_tasks(array_id).get(index)
            if job is None:  # not started yet: cancelled in its array's record
                return self.client.cancel_unmade(array_id, index)
            job_id = job.id
        return self.cancel_pending(job_id)

    def warning_signal(self) -> str:
        """The signal that warns a call of its walltime: not the checkpoint signal, so that the worker tells
        them apart (USR2, as submitit's, or USR1 where USR2 checkpoints)."""
        return "USR1" if self.client.config.checkpoint_signal == "USR2" else "USR2"

    def worker_checkpoint_args(self, stem: Path, signal_delay: int | None) -> list[str]:
        # preempted or requeued: saved in the job's checkpoint directory, run again by the daemon (exit 75) with
        # what is left of its walltime; warned of its walltime: saved in the executor's directory and
        # submitted again by the executor as a new job, with a whole walltime
        args = [f"--signal={self.client.config.checkpoint_signal}"]
        if signal_delay is not None:
            args += [f"--timeout-signal={self.warning_signal()}", f"--again={stem}.again"]
        return args


def _local_status(j: Any) -> JobStatus:
    return JobStatus(j.state, j.state == JobState.RUNNING, j.done, j.exit_code, j.exit_signal, j.id)


@functools.cache
def _pickler() -> type:
    """cloudpickle's Pickler, with each code object keeping the file it was written in."""
    import cloudpickle  # type: ignore[import-untyped]  # no type information shipped

    class CallPickler(cloudpickle.Pickler):  # type: ignore[misc]
        def __init__(self, file: io.BytesIO) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)

        def reducer_override(self, obj: object) -> Any:
            if isinstance(obj, types.CodeType):
                return _code_with_its_file(obj)
            return super().reducer_override(obj)

    return CallPickler


def _code_with_its_file(code: types.CodeType) -> Any:
    """cloudpickle's reduction of a code object, with the file it was written in: cloudpickle 3.1.3 and later name
    every function sent by value ``<dynamic-code>``, and a traceback from the job would no longer say where the
    failing line is."""
    from cloudpickle import cloudpickle as cp  # type: ignore[import-untyped]

    reduce = getattr(cp, "_code_reduce", None)
    if reduce is None:  # a cloudpickle without it: its own way
        return NotImplemented
    ctor, args = reduce(code)
    return ctor, tuple(code.co_filename if a == "<dynamic-code>" else a for a in args)


def dumps(obj: object) -> bytes:
    """``obj`` pickled with cloudpickle (what the job and the submitting process send each other)."""
    with io.BytesIO() as f:
        _pickler()(f).dump(obj)
        return f.getvalue()


def _what_cannot_be_sent(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """Which part of a call cannot be pickled: "argument 2 (lock)", "keyword argument 'x' (generator)", "the
    function: its variable 'conn' (Connection)" (a closure's variable or a global it uses), ..."""
    parts: list[tuple[str, object]] = [("the function", fn)]
    parts += [(f"argument {i}", a) for i, a in enumerate(args, 1)]
    parts += [(f"keyword argument {k!r}", v) for k, v in kwargs.items()]
    for label, part in parts:
        if _picklable(part):
            continue
        if not isinstance(part, types.FunctionType):
            return what_cannot_be_pickled(part, label)
        used: dict[str, object] = {}
        for var, cell in zip(part.__code__.co_freevars, part.__closure__ or ()):
            try:
                used[var] = cell.cell_contents
            except ValueError:  # a variable not yet bound
                continue
        used |= {n: part.__globals__[n] for n in part.__code__.co_names if n in part.__globals__}
        for var, value in used.items():
            if not _picklable(value):
                return f"{label}: its variable {var!r} ({type(value).__name__})"
        return label
    return "the call"


def what_cannot_be_pickled(obj: object, label: str, depth: int = 3) -> str:
    """``label`` and the type of ``obj``, or of the part of it that cannot be pickled: "the result: item 2
    (lock)", "the result: key 'conn' (socket)", "the result: its attribute 'f' (TextIOWrapper)"."""
    inner: list[tuple[str, object]] = []
    if depth > 0:
        if isinstance(obj, (tuple, list)):
            inner = [(f"item {i}", v) for i, v in enumerate(obj, 1)]
        elif isinstance(obj, dict):
            inner = [(f"key {k!r}", v) for k, v in obj.items()]
        elif isinstance(getattr(obj, "__dict__", None), dict) and not isinstance(obj, (type, types.ModuleType)):
            inner = [(f"its attribute {k!r}", v) for k, v in vars(obj).items()]
    for sub, value in inner:
        if not _picklable(value):
            return what_cannot_be_pickled(value, f"{label}: {sub}", depth - 1)
    return f"{label} ({type(obj).__name__})"


def _picklable(obj: object) -> bool:
    try:
        dumps(obj)
    except Exception:  # noqa: BLE001 - any failure means no
        return False
    return True


class DelayedSubmission:
    """A call to run again: ``fn(*args, **kwargs)``, what a checkpointable callable's ``checkpoint`` returns
    (submitit's ``helpers.DelayedSubmission``, whose shape, ``function``, ``args`` and ``kwargs``, is taken too)."""

    def __init__(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        self.function = function
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"DelayedSubmission({getattr(self.function, '__qualname__', self.function)!r}, ...)"


class Checkpointable:
    """A base for a callable whose call is checkpointed and resumed when its job is preempted, requeued or
    warned of its walltime (submitit's ``helpers.Checkpointable``).

    Keep the progress in ``self``: the default :meth:`checkpoint` resubmits the same object, with what it
    holds then, and the same arguments.  Override it to resubmit something else (progress saved to a
    file, a smaller remaining task)."""

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        return DelayedSubmission(cast("Callable[..., Any]", self), *args, **kwargs)


def checkpointable(fn: object) -> bool:
    """True when ``fn`` follows the checkpoint protocol: it has a callable ``checkpoint`` method."""
    return not isinstance(fn, (types.FunctionType, types.BuiltinFunctionType, type)) and callable(
        getattr(fn, "checkpoint", None)
    )


# True while a job's worker runs the submitting script as __mp_main__, for a call queued by an earlier
# release (gridsched.job.executor_worker's MAIN): an executor made then comes from top-level code that is
# not under `if __name__ == "__main__":`, and would submit the script's calls again from every job.
LOADING_MAIN = False
LOG_TAIL = 20  # lines of the log of a job that ended without a result, in the error
WORKER = "gridsched.job.executor_worker"
AGAIN = "again"  # the first item of a job's outcome whose call was saved, to run again as a new job


class GridschedExecutor(Executor):
    """An executor whose calls run as jobs of ``ncpus`` cores and ``walltime`` each.

    ``backend``: ``"local"`` (the default), ``"slurm"`` or ``"auto"`` (see the
    module's text).  ``spool`` and ``config`` select the local daemon (as for
    :class:`Client`); ``directory`` is where the pickled calls and the jobs'
    logs go (default: a new directory removed at shutdown, in the temporary
    directory for the local daemon, in the current directory for Slurm, whose
    nodes must see it); ``max_jobs`` is how many of its calls may run at once
    (as submitit's array parallelism: the calls of :meth:`submit` wait in the
    executor, those of :meth:`map_array` in the array's throttle);
    ``signal_delay_s``: a checkpointable call is told to checkpoint this many
    seconds before its walltime ends, and resumes in a new run (None: only when
    preempted or requeued); other keyword arguments are passed to
    :meth:`Client.submit` (local) or name sbatch options
    (:class:`gridsched.api.slurm.SlurmBackend`: ``mem``, ``gpus``, ``env``,
    ``partition``, ...).
    """

    def __init__(
        self,
        ncpus: int = 1,
        walltime: str | int | None = None,
        *,
        backend: str = "local",
        spool: str | None = None,
        config: str | None = None,
        directory: str | None = None,
        max_jobs: int | None = None,
        signal_delay_s: int | None = None,
        **submit_options: Any,
    ) -> None:
        if LOADING_MAIN:
            raise RuntimeError(
                "a GridschedExecutor was made while a job loaded the script that submitted it: put the "
                'script\'s top-level code under `if __name__ == "__main__":` (as for multiprocessing)'
            )
        if backend not in BACKENDS:
            raise ValueError(f"backend {backend!r}: one of {', '.join(BACKENDS)}")
        if max_jobs is not None and max_jobs < 1:
            raise ValueError(f"max_jobs {max_jobs}: must be at least 1")
        if signal_delay_s is not None and not 0 < signal_delay_s <= 65535:
            raise ValueError(f"signal_delay_s {signal_delay_s}: from 1 to 65535 seconds")
        if backend != "local":
            from gridsched.api import slurm

            if backend == "slurm" or slurm.available():
                if spool is not None or config is not None:
                    raise ValueError("spool and config select a local daemon: not with the slurm backend")
                self.backend: Backend = slurm.SlurmBackend(submit_options)
            else:
                backend = "local"
        if backend == "local":
            self.backend = LocalBackend(spool, config, submit_options)
        self.ncpus = ncpus
        self.walltime = walltime
        self.max_jobs = max_jobs
        self.signal_delay_s = signal_delay_s
        self._own_dir = directory is None
        where = None if self.backend.name == "local" else os.getcwd()
        self.dir = Path(directory or tempfile.mkdtemp(prefix="gridsched-exec-", dir=where))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._live: dict[int, _JobFuture] = {}
        self._arrays: dict[int, dict[int, _JobFuture]] = {}  # array id -> task index -> its future
        self._backlog: list[_JobFuture] = []  # made, not yet submitted (max_jobs)
        self._seq = 0
        self._shutdown = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="gridsched-executor", daemon=True)
        self._thread.start()

    @property
    def client(self) -> Client:
        """The local daemon's client (the local backend only)."""
        if not isinstance(self.backend, LocalBackend):
            raise AttributeError(f"the {self.backend.name} backend has no gridsched client")
        return self.backend.client

    def _next(self) -> int:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit after shutdown")
            self._seq += 1
            return self._seq

    def _pickled(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
        try:
            return dumps((fn, args, kwargs))
        except Exception as e:  # noqa: BLE001 - cloudpickle raises many kinds (TypeError, PicklingError, ...)
            what = _what_cannot_be_sent(fn, args, kwargs)
            raise pickle.PicklingError(
                f"the call of {getattr(fn, '__qualname__', fn)!r} cannot be sent to a job: {what}: {e} (a call is "
                "sent with cloudpickle: locks, open files and connections, generators and the like cannot be; "
                "make them inside the function)"
            ) from e

    def _command(self, stem: str, ckpt: bool, array: bool, src: Path | None = None) -> str:
        """The job's command: ``exec`` the worker (a signal then reaches the worker, not a shell it kills);
        ``src``: the call to run, when not ``stem.in`` (one saved at a walltime warning)."""
        src = src or self.dir / f"{stem}.in"
        argv = [sys.executable, "-m", WORKER, str(src), str(self.dir / f"{stem}.out")]
        if array:
            argv.append("--array")
        if ckpt:
            argv += self.backend.worker_checkpoint_args(self.dir / stem, self.signal_delay_s)
        return "exec " + " ".join(shlex.quote(x) for x in argv)

    def _job_options(self, ckpt: bool) -> dict[str, Any]:
        return {"checkpoint": ckpt, "signal_delay": self.signal_delay_s if ckpt else None}

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        n = self._next()
        data = self._pickled(fn, args, kwargs)
        (self.dir / f"call-{n}.in").write_bytes(data)
        ckpt = checkpointable(fn)
        fut = _JobFuture(self, _name_of(fn), self.dir / f"call-{n}.out", self.dir / f"call-{n}.log")
        fut.command, fut.ckpt, fut.stem = self._command(f"call-{n}", ckpt, False), ckpt, f"call-{n}"
        with self._lock:
            now = self.max_jobs is None or len(self._live) < self.max_jobs
            if not now:
                self._backlog.append(fut)
        if now:
            self._start(fut)  # a refusal is raised here, to the caller
        self._wake.set()
        return fut

    def map_array(self, fn: Callable[..., Any], *iterables: Any) -> list[Future[Any]]:
        """Run ``fn`` on each element of ``iterables`` (zipped, as :func:`map`) as the tasks of one job
        array, at most ``max_jobs`` at once; one future per element, in order (submitit's ``map_array``)."""
        calls = list(zip(*iterables))
        if not calls:
            return []
        n = self._next()
        for i, args in enumerate(calls):
            (self.dir / f"call-{n}-{i}.in").write_bytes(self._pickled(fn, args, {}))
        ckpt = checkpointable(fn)
        command = self._command(f"call-{n}-%a", ckpt, True)
        throttle = f"%{self.max_jobs}" if self.max_jobs is not None and self.max_jobs < len(calls) else ""
        array = f"0-{len(calls) - 1}{throttle}"
        futs: list[_JobFuture] = [
            _JobFuture(self, _name_of(fn), self.dir / f"call-{n}-{i}.out", self.dir / f"call-{n}-{i}.log")
            for i in range(len(calls))
        ]
        aid = self.backend.submit(
            command,
            _name_of(fn),
            self.dir / f"call-{n}-%a.log",
            self.ncpus,
            self.walltime,
            array=array,
            **self._job_options(ckpt),
        )
        for i, fut in enumerate(futs):
            fut.array_id, fut.index, fut.ckpt, fut.stem = aid, i, ckpt, f"call-{n}-{i}"
        with self._lock:
            self._arrays[aid] = dict(enumerate(futs))
        self._wake.set()
        return list[Future[Any]](futs)

    def map(
        self, fn: Callable[..., Any], *iterables: Any, timeout: float | None = None, chunksize: int = 1
    ) -> Iterator[Any]:
        """The results of ``fn`` on each element of ``iterables``, in order, as :meth:`Executor.map`; the
        calls run as one job array (:meth:`map_array`)."""
        import time
        from concurrent.futures import TimeoutError as FuturesTimeout

        futs = self.map_array(fn, *iterables)
        end = None if timeout is None else time.monotonic() + timeout

        def results() -> Iterator[Any]:
            try:
                for fut in futs:
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        raise FuturesTimeout()
                    yield fut.result(left)
            finally:
                for fut in futs:
                    fut.cancel()

        return results()

    def _start(self, fut: _JobFuture) -> None:
        fut.job_id = self.backend.submit(
            fut.command, fut.name, fut.log, self.ncpus, self.walltime, **self._job_options(fut.ckpt)
        )
        with self._lock:
            self._live[fut.job_id] = fut

    def _start_backlog(self) -> None:
        while True:
            with self._lock:
                if not self._backlog or (self.max_jobs is not None and len(self._live) >= self.max_jobs):
                    return
                fut = self._backlog.pop(0)
            if fut.cancelled():
                continue
            try:
                self._start(fut)
            except GridschedError as e:
                fut.set_exception(e)

    def _cancel_job(self, fut: _JobFuture) -> bool:
        """Cancel the job of a future if it has not started; True if it was (or was never submitted)."""
        with self._lock:
            if fut in self._backlog:
                self._backlog.remove(fut)
                return True
        if fut.array_id is not None:
            if not self.backend.cancel_task(fut.array_id, fut.index or 0, fut.job_id):
                return False
            self._drop_task(fut.array_id, fut.index or 0)
            return True
        if fut.job_id is None or not self.backend.cancel_pending(fut.job_id):
            return False
        with self._lock:
            self._live.pop(fut.job_id, None)
        return True

    def _finish(self, fut: _JobFuture, job: JobStatus) -> None:
        if fut.out.exists():
            # a call queued by an earlier release pickles what the script defines under the name it ran it as
            if "__main__" in sys.modules:
                sys.modules.setdefault("__mp_main__", sys.modules["__main__"])
            tb: list[Any] = []
            try:
                ok, value, *tb = pickle.loads(fut.out.read_bytes())
            except Exception as e:  # noqa: BLE001 - e.g. an exception class this process cannot import
                ok, value = False, JobFailed(f"job {fut.job_id}: its result cannot be loaded here: {e!r}")
            info = tb[1] if len(tb) > 1 and isinstance(tb[1], dict) else {}
            fut.restarts = fut.runs_before + int(info.get("restarts") or 0)
            if ok == AGAIN:
                self._again(fut, Path(value))
            elif ok:
                fut.set_result(value)
            else:
                if tb and tb[0] and isinstance(value, BaseException):
                    value.__cause__ = RemoteTraceback(tb[0])
                fut.set_exception(value)
        else:
            why = f"exit signal {job.exit_signal}" if job.exit_signal else f"exit code {job.exit_code}"
            msg = f"job {fut.job_id} ended {job.state} ({why}) without a result"
            try:
                with open(fut.log, "rb") as f:
                    tail = f.read()[-16384:].decode(errors="replace").splitlines()[-LOG_TAIL:]
            except OSError:
                tail = []
            if tail:
                msg += f"; the end of its log ({fut.log}):\n" + "\n".join(tail)
            fut.set_exception(JobFailed(msg))

    def _drop_task(self, array_id: int, index: int) -> None:
        """Watch task ``index`` of the array no more (and the array, once none of its tasks is left)."""
        with self._lock:
            left = self._arrays.get(array_id, {})
            left.pop(index, None)
            if not left:
                self._arrays.pop(array_id, None)

    def _again(self, fut: _JobFuture, saved: Path) -> None:
        """Submit the call that its job saved when warned of its walltime as a new job (a whole walltime)."""
        fut.runs_before = fut.restarts + 1
        fut.restarts = fut.runs_before
        fut.out.unlink(missing_ok=True)
        fut.command = self._command(fut.stem, True, False, saved)
        fut.array_id = None
        try:
            self._start(fut)
        except GridschedError as e:
            fut.set_exception(e)

    def _seen(self, fut: _JobFuture, job: JobStatus) -> bool:
        """Bring ``fut`` up to date with its job; True once that job is no longer the future's (the call is
        done, or was submitted again as another job)."""
        if fut.done():
            return True
        if job.running and not fut.running():
            fut.set_running_or_notify_cancel()
        if job.done:
            self._finish(fut, job)
            return True
        return False

    def _poll(self) -> None:
        delay = POLL_FIRST
        while True:
            self._start_backlog()
            with self._lock:
                live = dict(self._live)
                arrays = {aid: dict(tasks) for aid, tasks in self._arrays.items()}
                stop = self._shutdown and not live and not self._backlog and not arrays
            if stop:
                return
            seen = self.backend.status(list(live)) if live else {}
            for jid, fut in live.items():
                job = seen.get(jid)
                if job is not None and self._seen(fut, job):
                    with self._lock:
                        self._live.pop(jid, None)
                    delay = POLL_FIRST
            for aid, tasks in arrays.items():
                got = self.backend.array_status(aid, list(tasks))
                for index, task in got.items():
                    if index not in tasks:
                        continue
                    fut = tasks[index]
                    if task.job_id is not None:
                        fut.job_id = task.job_id
                    if self._seen(fut, task):
                        self._drop_task(aid, index)
                        delay = POLL_FIRST
            self._wake.wait(delay)
            self._wake.clear()
            delay = min(delay * 1.5, POLL_MAX)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            live = list(self._live.values()) + list(self._backlog)
            live += [f for tasks in self._arrays.values() for f in tasks.values()]
        if cancel_futures:
            for fut in live:
                fut.cancel()
        self._wake.set()
        if wait:
            self._thread.join()
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)


def _name_of(fn: object) -> str:
    """The job name of a call of ``fn``: its name, in characters any scheduler takes."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    name = name.strip("<>")
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "call"


class _JobFuture(Future):  # type: ignore[type-arg]
    """A future whose cancel also cancels its job while the job has not started."""

    def __init__(self, ex: GridschedExecutor, name: str, out: Path, log: Path) -> None:
        super().__init__()
        self._ex = ex
        self.name = name
        self.command = ""
        self.ckpt = False  # a checkpointable call
        self.job_id: int | None = None  # the job that runs the call, once submitted (or known, for a task)
        self.array_id: int | None = None  # the array it is a task of (map_array), and its index there
        self.index: int | None = None
        self.restarts = 0  # how many times the call started again after a checkpoint (or a requeue)
        self.runs_before = 0  # runs of the call in the jobs before its present one
        self.stem = ""  # its files in the executor's directory, less their suffix
        self.out = out
        self.log = log  # the job's output and errors

    def cancel(self) -> bool:
        if self.done():
            return False
        if not self._ex._cancel_job(self):
            return False
        return super().cancel()
