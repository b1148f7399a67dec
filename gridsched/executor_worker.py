"""Run one call pickled by :class:`gridsched.executor.GridschedExecutor`, inside a job.

    python -m gridsched.executor_worker IN OUT

IN holds ``pickle((fn, args, kwargs))``; OUT receives ``pickle((True, result))``
or ``pickle((False, exception))``, written atomically.  The exit status is 0
when OUT was written, whatever the call did.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m gridsched.executor_worker IN OUT", file=sys.stderr)
        return 2
    src, dst = argv
    with open(src, "rb") as f:
        fn, args, kwargs = pickle.load(f)
    try:
        outcome: tuple[bool, object] = (True, fn(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
        traceback.print_exc()
        outcome = (False, e)
    try:
        data = pickle.dumps(outcome)
    except Exception as e:  # noqa: BLE001 - a result that cannot be pickled
        data = pickle.dumps((False, RuntimeError(f"result cannot be pickled: {e!r}")))
    tmp = f"{dst}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, dst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
