"""Run one call pickled by :class:`gridsched.api.executor.GridschedExecutor`, inside a job.

    python -m gridsched.job.executor_worker IN OUT [MAIN] [--array] [--signal=SIG]... [--state=FILE]
                                            [--requeue=slurm] [--timeout-signal=SIG --again=FILE]

IN holds ``(fn, args, kwargs)`` pickled with cloudpickle; OUT receives
``(True, result, "", info)`` or ``(False, exception, traceback text, info)``
(``info``: ``{"restarts": N}``, how many times the job ran again after a
checkpoint), pickled the same way and written atomically.  The exit status is 0
when OUT was written, whatever the call did.  A job whose OUT is written
already (an earlier run of it ended the call) ends at once.

``--array``: the job is a task of an array; ``%a`` in IN, OUT and the FILEs is
its index (``$GS_ARRAY_TASK_ID``, or ``$SLURM_ARRAY_TASK_ID`` on Slurm).

``--signal=SIG`` (a checkpointable call, one with a ``checkpoint`` method):
on SIG the worker calls ``fn.checkpoint(*args, **kwargs)``, pickles the call
it returns (a ``DelayedSubmission``: ``function``, ``args``, ``kwargs``)
atomically into the ``--state`` FILE (default ``$GS_CHECKPOINT_DIR/call.pkl``)
and exits 75, which tells the daemon to requeue the job; with
``--requeue=slurm`` it asks Slurm to requeue its job (``scontrol requeue
$SLURM_JOB_ID``) first.  On start, a call saved in that FILE is run instead of
IN's.  ``--timeout-signal=SIG``: the walltime is near; the call is
checkpointed the same way into the ``--again`` FILE and OUT says
``("again", FILE, "", info)``: the executor submits it as a new job.  A
checkpoint method that fails, or returns something that cannot be run again,
fails the call with the reason (in OUT).

MAIN, given only by calls queued by an earlier release, is the file the
submitting program ran as ``__main__``: it is run first as ``__mp_main__`` and
stands for ``__main__`` while the call is loaded, as :mod:`multiprocessing`
does for its "spawn" start method.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

from gridsched.protocol.jobs import EXIT_CHECKPOINTED

AGAIN = "again"  # the first item of an outcome whose call was saved for the executor to submit again
STATE_NAME = "call.pkl"  # the saved call, in the job's checkpoint directory
REQUEUE_WAIT = 120.0  # seconds a Slurm job that asked to be requeued waits for Slurm to end it
USAGE = (
    "usage: python -m gridsched.job.executor_worker IN OUT [MAIN] [--array] [--signal=SIG]... [--state=FILE] "
    "[--requeue=slurm] [--timeout-signal=SIG --again=FILE]"
)


def _main_module(path: str) -> None:
    """Run ``path`` as ``__mp_main__`` and let it stand for ``__main__`` (multiprocessing's way)."""
    import runpy
    import types

    from gridsched.api import executor

    executor.LOADING_MAIN = True
    try:
        ns = runpy.run_path(path, run_name="__mp_main__")
    finally:
        executor.LOADING_MAIN = False
    mod = types.ModuleType("__mp_main__")
    mod.__dict__.update(ns)
    sys.modules["__mp_main__"] = sys.modules["__main__"] = mod


def _load(src: str, main: str | None) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    try:
        if main:
            _main_module(main)
        with open(src, "rb") as f:
            fn, args, kwargs = pickle.load(f)  # cloudpickle's output needs only cloudpickle importable here
    except Exception as e:
        text = str(e)
        hint = ""
        if isinstance(e, ModuleNotFoundError) and e.name == "cloudpickle":
            hint = "; the job's Python must have cloudpickle (a dependency of gridsched) installed"
        elif isinstance(e, ImportError):
            hint = (
                "; a function or class of a module is sent by name: the module must be importable in the job "
                "(PYTHONPATH, or the executor's env=)"
            )
        elif "__mp_main__" in text or "__main__" in text:
            hint = (
                "; a function or class at the top level of the script is sent by name: the script that runs the "
                'executor must still define it, outside its `if __name__ == "__main__":` block'
            )
        raise RuntimeError(f"the call cannot be loaded in the job: {type(e).__name__}: {text}{hint}") from e
    return fn, args, kwargs


@dataclass
class Args:
    src: str
    dst: str
    main: str | None = None
    signals: list[int] = field(default_factory=list)
    state: str | None = None
    requeue: str | None = None
    timeout_signal: int | None = None
    again: str | None = None


def parse(argv: list[str]) -> Args | None:
    """The command line, or None when it is not one this worker takes."""
    pos: list[str] = []
    array = False
    signals: list[int] = []
    state = requeue = again = None
    timeout_signal = None
    for a in argv:
        if a == "--array":
            array = True
        elif a.startswith(("--signal=", "--timeout-signal=")):
            num = _signal_number(a.split("=", 1)[1])
            if num is None:
                return None
            if a.startswith("--signal="):
                signals.append(num)
            else:
                timeout_signal = num
        elif a.startswith("--again="):
            again = a.split("=", 1)[1]
        elif a.startswith("--state="):
            state = a.split("=", 1)[1]
        elif a.startswith("--requeue="):
            requeue = a.split("=", 1)[1]
        elif a.startswith("--"):
            return None
        else:
            pos.append(a)
    if len(pos) not in (2, 3):
        return None
    if state is None and signals and os.environ.get("GS_CHECKPOINT_DIR"):
        state = os.path.join(os.environ["GS_CHECKPOINT_DIR"], STATE_NAME)
    if (timeout_signal is None) != (again is None):
        return None
    paths = [pos[0], pos[1], state, again]
    if array:
        index = os.environ.get("GS_ARRAY_TASK_ID") or os.environ.get("SLURM_ARRAY_TASK_ID")
        if index is None:
            return None
        paths = [p.replace("%a", index) if p is not None else None for p in paths]
    main = pos[2] if len(pos) == 3 else None
    return Args(paths[0] or "", paths[1] or "", main, signals, paths[2], requeue, timeout_signal, paths[3])


def _signal_number(name: str) -> int | None:
    name = name.upper()
    if name.isdigit():
        return int(name)
    member = signal.Signals.__members__.get("SIG" + name.removeprefix("SIG"))
    return None if member is None else int(member)


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _dumps(obj: object) -> bytes:
    import cloudpickle  # type: ignore[import-untyped]  # no type information shipped

    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[no-any-return]


def restarts() -> int:
    """How many times this job has started again (the daemon's or Slurm's count)."""
    for name in ("GS_RESTART_COUNT", "SLURM_RESTART_COUNT"):
        try:
            return int(os.environ.get(name, ""))
        except ValueError:
            continue
    return 0


class Checkpointed(BaseException):
    """Raised in the call by the checkpoint signal: its state is saved (or it failed), the job ends with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Worker:
    def __init__(self, a: Args) -> None:
        self.a = a
        self.call: tuple[Any, tuple[Any, ...], dict[str, Any]] | None = None
        self.info = {"restarts": restarts()}

    def finish(self, outcome: tuple[Any, ...]) -> None:
        """Write ``outcome`` (with the info) to OUT; a result that cannot be pickled is named."""
        outcome = (*outcome, self.info)
        try:
            data = _dumps(outcome)
        except Exception as e:  # noqa: BLE001 - a result or an exception that cannot be pickled
            if outcome[0]:
                from gridsched.api.executor import what_cannot_be_pickled

                what = what_cannot_be_pickled(outcome[1], "the result")
                what = "result" if what == f"the result ({type(outcome[1]).__name__})" else what.removeprefix("the ")
            else:
                what = f"exception {type(outcome[1]).__name__}"
            err = RuntimeError(f"the {what} cannot be sent back from the job: {e}")
            data = pickle.dumps((False, err, outcome[2], self.info))
        _write(self.a.dst, data)

    def caught(self) -> list[int]:
        return [*self.a.signals, *([self.a.timeout_signal] if self.a.timeout_signal is not None else [])]

    def on_signal(self, signum: int, _frame: object) -> None:
        for s in self.caught():  # once: a repeated request while saving changes nothing
            signal.signal(s, signal.SIG_IGN)
        warned = signum == self.a.timeout_signal
        why = "its walltime is near" if warned else "checkpointing the call"
        sys.stderr.write(f"executor_worker: signal {signal.Signals(signum).name}: {why}\n")
        if self.call is None:  # not loaded yet: it runs again from IN (or the state it was loaded from)
            if warned:  # the call as it was loaded: a new job runs it
                self.finish((AGAIN, self.a.src, ""))
                raise Checkpointed(0)
            raise Checkpointed(self.requeue())
        fn, args, kwargs = self.call
        try:
            again = fn.checkpoint(*args, **kwargs)
            if again is None:
                raise TypeError("its checkpoint method returned None: nothing to run again")
            target = getattr(again, "function", None)
            if not callable(target):
                raise TypeError(
                    f"its checkpoint method returned a {type(again).__name__}, not a call to run again "
                    "(DelayedSubmission(fn, *args, **kwargs))"
                )
            saved = (target, tuple(getattr(again, "args", ())), dict(getattr(again, "kwargs", {})))
            data = _dumps(saved)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the caller
            text = traceback.format_exc()
            sys.stderr.write(text)
            err = RuntimeError(f"the call could not be checkpointed: {type(e).__name__}: {e}")
            err.__cause__ = e
            self.finish((False, err, text))
            raise Checkpointed(0) from None
        if warned and self.a.again is not None:  # saved for the executor, which submits it as a new job
            _write(self.a.again, data)
            self.finish((AGAIN, self.a.again, ""))
            raise Checkpointed(0)
        if self.a.state is None:
            why = "its job has no checkpoint directory ($GS_CHECKPOINT_DIR)"
            self.finish((False, RuntimeError(f"the call could not be checkpointed: {why}"), ""))
            raise Checkpointed(0)
        _write(self.a.state, data)
        raise Checkpointed(self.requeue())

    def requeue(self) -> int:
        """The exit status that asks for the job to run again (Slurm: after asking it to requeue the job)."""
        if self.a.requeue == "slurm":
            import subprocess
            import time

            jid = os.environ.get("SLURM_JOB_ID", "")
            r = subprocess.run(["scontrol", "requeue", jid], capture_output=True, text=True, check=False)
            if r.returncode != 0:
                msg = (r.stderr or r.stdout).strip() or f"exit status {r.returncode}"
                err = RuntimeError(
                    f"the call was checkpointed but its job could not be requeued: scontrol requeue {jid}: {msg}"
                )
                self.finish((False, err, ""))
                return 0
            # Slurm ends the job itself as it requeues it: a job that ended first would be seen failed for a moment
            sys.stderr.flush()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            deadline = time.monotonic() + REQUEUE_WAIT
            while time.monotonic() < deadline:
                time.sleep(1.0)
        return EXIT_CHECKPOINTED

    def run(self) -> int:
        if os.path.exists(self.a.dst):  # an earlier run of this job ended the call (a failed checkpoint, say)
            sys.stderr.write(f"executor_worker: the call has ended already ({self.a.dst}): nothing to run\n")
            return 0
        for s in self.caught():
            signal.signal(s, self.on_signal)
        try:
            try:
                src = self.a.src
                if self.a.state is not None and os.path.exists(self.a.state):
                    src = self.a.state  # saved by an earlier run of this job
                    sys.stderr.write(f"executor_worker: resuming the call saved in {src}\n")
                self.call = _load(src, self.a.main if src == self.a.src else None)
                fn, args, kwargs = self.call
                outcome: tuple[Any, ...] = (True, fn(*args, **kwargs), "")
            except Checkpointed:
                raise
            except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
                text = traceback.format_exc()
                sys.stderr.write(text)
                outcome = (False, e, text)
            for s in self.caught():  # done: a late request is too late to matter
                signal.signal(s, signal.SIG_IGN)
        except Checkpointed as c:
            sys.stderr.flush()
            return c.code
        self.finish(outcome)
        if self.a.state is not None and self.a.requeue is not None:
            try:
                os.unlink(self.a.state)  # the executor's own file: the call is done
            except OSError:
                pass
        return 0


def main(argv: list[str]) -> int:
    a = parse(argv)
    if a is None:
        print(USAGE, file=sys.stderr)
        return 2
    return Worker(a).run()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
