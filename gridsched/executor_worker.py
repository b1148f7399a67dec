"""Run one call pickled by :class:`gridsched.executor.GridschedExecutor`, inside a job.

    python -m gridsched.executor_worker IN OUT [MAIN]

IN holds ``pickle((fn, args, kwargs))``; OUT receives ``pickle((True, result))``
or ``pickle((False, exception, traceback text))``, written atomically.  The exit
status is 0 when OUT was written, whatever the call did.

MAIN, when given, is the file the submitting program ran as ``__main__``: it is
run first as ``__mp_main__`` and stands for ``__main__`` while the call is
loaded, as :mod:`multiprocessing` does for its "spawn" start method, so that
functions defined in a script can be sent (the script's top-level code must be
under ``if __name__ == "__main__":``).
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

    from . import executor

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
            fn, args, kwargs = pickle.load(f)
    except Exception as e:
        hint = ""
        if "__main__" in str(e) or "<lambda>" in str(e) or "<locals>" in str(e):
            hint = (
                "; a function must be importable by name in the job: defined at the top level of a module, or of the "
                'script that runs the executor (under `if __name__ == "__main__":` guard), not a lambda or a '
                "closure (pickle sends functions by name)"
            )
        raise RuntimeError(f"the call cannot be loaded in the job: {type(e).__name__}: {e}{hint}") from e
    return fn, args, kwargs


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python -m gridsched.executor_worker IN OUT [MAIN]", file=sys.stderr)
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
        data = pickle.dumps(outcome)
    except Exception as e:  # noqa: BLE001 - a result or an exception that cannot be pickled
        text = outcome[2] if len(outcome) == 3 else ""
        data = pickle.dumps((False, RuntimeError(f"the result cannot be pickled: {e!r}"), text))
    tmp = f"{dst}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, dst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
