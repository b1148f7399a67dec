"""``concurrent.futures`` on the batch queue: each call runs as a job, here or on a Slurm cluster.

    from gridsched.api.executor import GridschedExecutor
    with GridschedExecutor(ncpus=4, walltime="10m") as ex:
        print(ex.submit(sum, [1, 2, 3]).result())

The callable and its arguments are pickled with cloudpickle into a file in a
directory of the executor's own; the job runs ``python -m
gridsched.job.executor_worker IN OUT`` with the same interpreter; the result (or
the exception, with its traceback) comes back the same way.  A function or
class that the job can find by name goes by name: one of an importable module,
or one at the top level of the script that runs the executor (the job runs
that script first, as ``__mp_main__``, as multiprocessing's "spawn" start
method does).  Everything else (lambdas, closures, nested functions, functions
defined under the script's ``if __name__ == "__main__":`` guard or in an
interactive session) goes by value.  A background thread polls the jobs, at bounded
intervals, and completes the futures.  ``backend`` chooses where the jobs run:
``"local"``, this machine's gridsched daemon; ``"slurm"``, a Slurm cluster
through ``sbatch``, ``squeue`` and ``scontrol`` (:mod:`gridsched.api.slurm`);
``"auto"``, Slurm where ``sbatch`` answers, else the local daemon.
"""

from __future__ import annotations

import ast
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
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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


class Backend(Protocol):
    """Where the executor's jobs run."""

    name: str

    def submit(self, command: str, name: str, log: Path, ncpus: int, walltime: str | int | None) -> int: ...

    def status(self, ids: list[int]) -> dict[int, JobStatus]:
        """The jobs of ``ids`` the backend knows now (one it cannot tell of this time is left out)."""
        ...

    def cancel_pending(self, job_id: int) -> bool:
        """Cancel the job if it has not started; True if it was."""
        ...


class LocalBackend:
    """This machine's gridsched daemon, through :class:`Client`."""

    name = "local"

    def __init__(self, spool: str | None, config: str | None, options: dict[str, Any]) -> None:
        self.client = Client(spool, config)
        self.options = options

    def submit(self, command: str, name: str, log: Path, ncpus: int, walltime: str | int | None) -> int:
        job = self.client.submit(
            command=command, ncpus=ncpus, walltime=walltime, name=name, output=str(log), error=str(log), **self.options
        )
        return job.id

    def status(self, ids: list[int]) -> dict[int, JobStatus]:
        out = {}
        for i in ids:
            try:
                j = self.client.status(i)
            except GridschedError:
                continue
            out[i] = JobStatus(j.state, j.state == JobState.RUNNING, j.done, j.exit_code, j.exit_signal)
        return out

    def cancel_pending(self, job_id: int) -> bool:
        try:
            if self.client.status(job_id).state not in WAITING:
                return False
            self.client.cancel(job_id)
        except GridschedError:
            return False
        return True


def _main_file() -> str | None:
    """The file this program runs as ``__main__``, for the job to load first (None: none, or not a file)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or spec is not None:  # `python -m pkg.mod`: its functions are importable by name
        return None
    path = os.path.abspath(path)
    return path if path.endswith(".py") and os.path.isfile(path) else None


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
        isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
    )


def _bound_at_top(body: list[ast.stmt]) -> set[str]:
    """The names the statements bind when they run as a module, leaving out what runs only under the guard."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            names |= _bound_at_top(node.orelse)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        for block in ("body", "orelse", "finalbody"):
            names |= _bound_at_top(getattr(node, block, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            names |= _bound_at_top(handler.body)
    return names


@functools.lru_cache(maxsize=8)
def _script_names(path: str, mtime_ns: int) -> frozenset[str]:
    """The top-level names the script at ``path`` binds when a job runs it as ``__mp_main__``."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(_bound_at_top(tree.body))


def _by_name_in_script(obj: object, names: frozenset[str]) -> bool:
    """True when ``obj`` is a function or class the job finds by name in the script it runs first."""
    if not isinstance(obj, (types.FunctionType, type)) or getattr(obj, "__module__", None) != "__main__":
        return False
    qualname = getattr(obj, "__qualname__", "")
    if "<" in qualname or qualname.split(".")[0] not in names:
        return False
    found: object = sys.modules.get("__main__")
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is obj


@functools.cache
def _pickler() -> type:
    """cloudpickle's Pickler, but a function or class of the script's top level goes by name (see the module)."""
    import cloudpickle  # type: ignore[import-untyped]  # no type information shipped

    class CallPickler(cloudpickle.Pickler):  # type: ignore[misc]
        def __init__(self, file: io.BytesIO, script: frozenset[str]) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.script = script

        def reducer_override(self, obj: object) -> Any:
            if isinstance(obj, types.CodeType):
                return _code_with_its_file(obj)
            if self.script and _by_name_in_script(obj, self.script):
                return NotImplemented  # pickle's own way: __main__.NAME, found in the script the job runs
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


def dumps(obj: object, main: str | None = None) -> bytes:
    """``obj`` pickled with cloudpickle; with ``main`` (the running script), its top-level functions by name."""
    script: frozenset[str] = frozenset()
    if main is not None:
        try:
            script = _script_names(main, os.stat(main).st_mtime_ns)
        except OSError:
            pass
    with io.BytesIO() as f:
        _pickler()(f, script).dump(obj)
        return f.getvalue()


def _what_cannot_be_sent(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], main: str | None
) -> str:
    """Which part of a call cannot be pickled: "argument 2 (lock)", "keyword argument 'x' (generator)", "the
    function: its variable 'conn' (Connection)" (a closure's variable or a global it uses), ..."""
    parts: list[tuple[str, object]] = [("the function", fn)]
    parts += [(f"argument {i}", a) for i, a in enumerate(args, 1)]
    parts += [(f"keyword argument {k!r}", v) for k, v in kwargs.items()]
    for label, part in parts:
        if _picklable(part, main):
            continue
        if not isinstance(part, types.FunctionType):
            return f"{label} ({type(part).__name__})"
        used: dict[str, object] = {}
        for var, cell in zip(part.__code__.co_freevars, part.__closure__ or ()):
            try:
                used[var] = cell.cell_contents
            except ValueError:  # a variable not yet bound
                continue
        used |= {n: part.__globals__[n] for n in part.__code__.co_names if n in part.__globals__}
        for var, value in used.items():
            if not _picklable(value, main):
                return f"{label}: its variable {var!r} ({type(value).__name__})"
        return label
    return "the call"


def _picklable(obj: object, main: str | None) -> bool:
    try:
        dumps(obj, main)
    except Exception:  # noqa: BLE001 - any failure means no
        return False
    return True


# True while a job's worker runs the submitting script as __mp_main__ (gridsched.job.executor_worker): an
# executor made then comes from top-level code that is not under `if __name__ == "__main__":`, and
# would submit the script's calls again from every job.
LOADING_MAIN = False
LOG_TAIL = 20  # lines of the log of a job that ended without a result, in the error


class GridschedExecutor(Executor):
    """An executor whose calls run as jobs of ``ncpus`` cores and ``walltime`` each.

    ``backend``: ``"local"`` (the default), ``"slurm"`` or ``"auto"`` (see the
    module's text).  ``spool`` and ``config`` select the local daemon (as for
    :class:`Client`); ``directory`` is where the pickled calls and the jobs'
    logs go (default: a new directory removed at shutdown, in the temporary
    directory for the local daemon, in the current directory for Slurm, whose
    nodes must see it); ``max_jobs`` is how many of its calls may be submitted
    at once (as submitit's array parallelism: the rest wait in the executor);
    other keyword arguments are passed to :meth:`Client.submit` (local) or
    name sbatch options (:class:`gridsched.api.slurm.SlurmBackend`: ``mem``,
    ``gpus``, ``env``, ``partition``, ...).
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
        self._own_dir = directory is None
        where = None if self.backend.name == "local" else os.getcwd()
        self.dir = Path(directory or tempfile.mkdtemp(prefix="gridsched-exec-", dir=where))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._live: dict[int, _JobFuture] = {}
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

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit after shutdown")
            self._seq += 1
            n = self._seq
        src, dst = self.dir / f"call-{n}.in", self.dir / f"call-{n}.out"
        main = _main_file()
        try:
            data = dumps((fn, args, kwargs), main)
        except Exception as e:  # noqa: BLE001 - cloudpickle raises many kinds (TypeError, PicklingError, ...)
            what = _what_cannot_be_sent(fn, args, kwargs, main)
            raise pickle.PicklingError(
                f"the call of {getattr(fn, '__qualname__', fn)!r} cannot be sent to a job: {what}: {e} (a call is "
                "sent with cloudpickle: locks, open files and connections, generators and the like cannot be; "
                "make them inside the function)"
            ) from e
        src.write_bytes(data)
        argv = [sys.executable, "-m", "gridsched.job.executor_worker", str(src), str(dst)]
        if main is not None:
            argv.append(main)
        name = getattr(fn, "__name__", "call").strip("<>")
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "call"
        fut = _JobFuture(self, " ".join(shlex.quote(x) for x in argv), name, dst, self.dir / f"call-{n}.log")
        with self._lock:
            now = self.max_jobs is None or len(self._live) < self.max_jobs
            if not now:
                self._backlog.append(fut)
        if now:
            self._start(fut)  # a refusal is raised here, to the caller
        self._wake.set()
        return fut

    def _start(self, fut: _JobFuture) -> None:
        fut.job_id = self.backend.submit(fut.command, fut.name, fut.log, self.ncpus, self.walltime)
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
        if fut.job_id is None or not self.backend.cancel_pending(fut.job_id):
            return False
        with self._lock:
            self._live.pop(fut.job_id, None)
        return True

    def _finish(self, fut: _JobFuture, job: JobStatus) -> None:
        if fut.out.exists():
            # the job pickles what the script defines under the name it ran it as (multiprocessing does the same)
            if "__main__" in sys.modules:
                sys.modules.setdefault("__mp_main__", sys.modules["__main__"])
            try:
                ok, value, *tb = pickle.loads(fut.out.read_bytes())
            except Exception as e:  # noqa: BLE001 - e.g. an exception class this process cannot import
                ok, value, tb = False, JobFailed(f"job {fut.job_id}: its result cannot be loaded here: {e!r}"), []
            if ok:
                fut.set_result(value)
            else:
                if tb and isinstance(value, BaseException):
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

    def _poll(self) -> None:
        delay = POLL_FIRST
        while True:
            self._start_backlog()
            with self._lock:
                live = dict(self._live)
                stop = self._shutdown and not live and not self._backlog
            if stop:
                return
            seen = self.backend.status(list(live)) if live else {}
            for jid, fut in live.items():
                job = seen.get(jid)
                if job is None:
                    continue
                if fut.done():
                    with self._lock:
                        self._live.pop(jid, None)
                    continue
                if job.running and not fut.running():
                    fut.set_running_or_notify_cancel()
                if job.done:
                    with self._lock:
                        self._live.pop(jid, None)
                    self._finish(fut, job)
                    delay = POLL_FIRST
            self._wake.wait(delay)
            self._wake.clear()
            delay = min(delay * 1.5, POLL_MAX)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            live = list(self._live.values()) + list(self._backlog)
        if cancel_futures:
            for fut in live:
                fut.cancel()
        self._wake.set()
        if wait:
            self._thread.join()
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)


class _JobFuture(Future):  # type: ignore[type-arg]
    """A future whose cancel also cancels its job while the job has not started."""

    def __init__(self, ex: GridschedExecutor, command: str, name: str, out: Path, log: Path) -> None:
        super().__init__()
        self._ex = ex
        self.command, self.name = command, name
        self.job_id: int | None = None  # the job that runs the call, once submitted
        self.out = out
        self.log = log  # the job's output and errors

    def cancel(self) -> bool:
        if self.done():
            return False
        if not self._ex._cancel_job(self):
            return False
        return super().cancel()
