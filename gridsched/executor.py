"""``concurrent.futures`` on the batch queue: each call runs as a job.

    from gridsched.executor import GridschedExecutor
    with GridschedExecutor(ncpus=4, walltime="10m") as ex:
        print(ex.submit(sum, [1, 2, 3]).result())

The callable and its arguments are pickled into a file in a directory of the
executor's own; the job runs ``python -m gridsched.executor_worker IN OUT``
with the same interpreter; the result (or the exception) comes back pickled.
A background thread polls the state db, at bounded intervals, and completes
the futures.
"""

from __future__ import annotations

import os
import pickle
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

from .client import Client, GridschedError, Job

POLL_FIRST, POLL_MAX = 0.05, 1.0  # seconds between polls of the state db


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


def _main_file() -> str | None:
    """The file this program runs as ``__main__``, for the job to load first (None: none, or not a file)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or spec is not None:  # `python -m pkg.mod`: its functions are importable by name
        return None
    path = os.path.abspath(path)
    return path if path.endswith(".py") and os.path.isfile(path) else None


# True while a job's worker runs the submitting script as __mp_main__ (gridsched.executor_worker): an
# executor made then comes from top-level code that is not under `if __name__ == "__main__":`, and
# would submit the script's calls again from every job.
LOADING_MAIN = False
LOG_TAIL = 20  # lines of the log of a job that ended without a result, in the error


class GridschedExecutor(Executor):
    """An executor whose calls run as gridsched jobs of ``ncpus`` cores and ``walltime`` each.

    ``spool`` and ``config`` select the daemon (as for :class:`Client`);
    ``directory`` is where the pickled calls go (default: a new temporary
    directory, removed at shutdown); other keyword arguments are passed to
    :meth:`Client.submit`.
    """

    def __init__(
        self,
        ncpus: int = 1,
        walltime: str | int | None = None,
        *,
        spool: str | None = None,
        config: str | None = None,
        directory: str | None = None,
        **submit_options: Any,
    ) -> None:
        if LOADING_MAIN:
            raise RuntimeError(
                "a GridschedExecutor was made while a job loaded the script that submitted it: put the "
                'script\'s top-level code under `if __name__ == "__main__":` (as for multiprocessing)'
            )
        self.client = Client(spool, config)
        self.ncpus = ncpus
        self.walltime = walltime
        self.options = submit_options
        self._own_dir = directory is None
        self.dir = Path(directory or tempfile.mkdtemp(prefix="gridsched-exec-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._live: dict[int, _JobFuture] = {}
        self._seq = 0
        self._shutdown = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="gridsched-executor", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit after shutdown")
            self._seq += 1
            n = self._seq
        src, dst = self.dir / f"call-{n}.in", self.dir / f"call-{n}.out"
        src.write_bytes(pickle.dumps((fn, args, kwargs)))
        argv = [sys.executable, "-m", "gridsched.executor_worker", str(src), str(dst)]
        main = _main_file()
        if main is not None:
            argv.append(main)
        cmd = " ".join(shlex.quote(x) for x in argv)
        name = getattr(fn, "__name__", "call")
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "call"
        job = self.client.submit(
            command=cmd,
            ncpus=self.ncpus,
            walltime=self.walltime,
            name=name,
            output=str(self.dir / f"call-{n}.log"),
            error=str(self.dir / f"call-{n}.log"),
            **self.options,
        )
        fut = _JobFuture(self, job.id, dst, self.dir / f"call-{n}.log")
        with self._lock:
            self._live[job.id] = fut
        self._wake.set()
        return fut

    def _cancel_job(self, job_id: int) -> bool:
        """Cancel the job of a future if it has not started; True if the request went out."""
        try:
            job = self.client.status(job_id)
            if job.state not in ("PENDING", "HELD"):
                return False
            self.client.cancel(job_id)
        except GridschedError:
            return False
        with self._lock:
            self._live.pop(job_id, None)
        return True

    def _finish(self, fut: _JobFuture, job: Job) -> None:
        if fut.out.exists():
            try:
                ok, value, *tb = pickle.loads(fut.out.read_bytes())
            except Exception as e:  # noqa: BLE001 - e.g. an exception class this process cannot import
                ok, value, tb = False, JobFailed(f"job {job.id}: its result cannot be loaded here: {e!r}"), []
            if ok:
                fut.set_result(value)
            else:
                if tb and isinstance(value, BaseException):
                    value.__cause__ = RemoteTraceback(tb[0])
                fut.set_exception(value)
        else:
            why = f"exit signal {job.exit_signal}" if job.exit_signal else f"exit code {job.exit_code}"
            msg = f"job {job.id} ended {job.state} ({why}) without a result"
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
            with self._lock:
                live = dict(self._live)
                stop = self._shutdown and not live
            if stop:
                return
            for jid, fut in live.items():
                try:
                    job = self.client.status(jid)
                except GridschedError:
                    continue
                if fut.done():
                    with self._lock:
                        self._live.pop(jid, None)
                    continue
                if job.state == "RUNNING" and not fut.running():
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
            live = list(self._live.items())
        if cancel_futures:
            for _, fut in live:
                fut.cancel()
        self._wake.set()
        if wait:
            self._thread.join()
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)


class _JobFuture(Future):  # type: ignore[type-arg]
    """A future whose cancel also cancels its job while the job has not started."""

    def __init__(self, ex: GridschedExecutor, job_id: int, out: Path, log: Path) -> None:
        super().__init__()
        self._ex = ex
        self.job_id = job_id  # the job that runs the call
        self.out = out
        self.log = log  # the job's output and errors

    def cancel(self) -> bool:
        if self.done():
            return False
        if not self._ex._cancel_job(self.job_id):
            return False
        return super().cancel()
