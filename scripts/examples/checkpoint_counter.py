#!/usr/bin/env python3
"""A checkpointable job in Python: N units of work that survive preemption.

    gsub --checkpoint signal -t 10m scripts/examples/checkpoint_counter.py 100

Each unit appends ``unit K`` to $LEDGER (default ``units.log``).  On the
checkpoint signal (SIGUSR1 by default) the job finishes the unit in hand,
saves its progress in $GS_CHECKPOINT_DIR and exits with status 75 ("saved,
restart me"); started again, it resumes from the saved unit.
"""

import os
import signal
import sys
import time
from pathlib import Path

EXIT_CHECKPOINTED = 75


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    unit = float(os.environ.get("UNIT_SECONDS", "0.2"))
    ledger = Path(os.environ.get("LEDGER", "units.log"))
    state = Path(os.environ["GS_CHECKPOINT_DIR"]) / "progress"
    done = int(state.read_text()) if state.exists() else 0
    print(f"start at unit {done} (restart {os.environ.get('GS_RESTART_COUNT', '0')})", flush=True)

    stop = False

    def on_signal(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGUSR1, on_signal)
    while done < n:
        if stop:
            tmp = state.with_suffix(".tmp")
            tmp.write_text(str(done))
            tmp.rename(state)
            print(f"checkpointed at unit {done}", flush=True)
            return EXIT_CHECKPOINTED
        time.sleep(unit)
        done += 1
        with ledger.open("a") as f:
            f.write(f"unit {done}\n")
    state.unlink(missing_ok=True)
    print(f"done: {n} units", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
