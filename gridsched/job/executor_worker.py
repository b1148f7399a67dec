"""Run one call pickled by :class:`gridsched.api.executor.GridschedExecutor`, inside a job.

    python -m gridsched.job.executor_worker IN OUT [MAIN]

IN holds ``(fn, args, kwargs)`` pickled with cloudpickle; OUT receives
``(True, result)`` or ``(False, exception, traceback text)``, pickled the same
way and written atomically.  The exit status is 0 when OUT was written,
whatever the call did.

MAIN, when given, is the file the submitting program ran as ``__main__``: it is
run first as ``__mp_main__`` and stands for ``__main__`` while the call is
loaded, as :mod:`multiprocessing` does for its "spawn" start method, so that
the functions and classes at the script's top level, which the executor sends
by name, are found (the script's top-level code must be under
``if __name__ == "__main__":``).
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback


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


def _load(src: str, main: str | None) -> tuple[object, tuple[object, ...], dict[str, object]]:
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


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python -m gridsched.job.executor_worker IN OUT [MAIN]", file=sys.stderr)
        return 2
    src, dst = argv[0], argv[1]
    main_file = argv[2] if len(argv) == 3 else None
    outcome: tuple[object, ...]
    try:
        fn, args, kwargs = _load(src, main_file)
        outcome = (True, fn(*args, **kwargs))  # type: ignore[operator]
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
        text = traceback.format_exc()
        sys.stderr.write(text)
        outcome = (False, e, text)
    try:
        import cloudpickle  # type: ignore[import-untyped]  # no type information shipped

        data = cloudpickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - a result or an exception that cannot be pickled
        what = "result" if outcome[0] else f"exception {type(outcome[1]).__name__}"
        text = outcome[2] if len(outcome) == 3 else ""
        data = pickle.dumps((False, RuntimeError(f"the {what} cannot be sent back from the job: {e}"), text))
    tmp = f"{dst}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, dst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
