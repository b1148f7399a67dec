"""A replay with times that are not whole numbers ends (histories from the daemon's clock, sacct, ...).

A running job's end counted by the core (start + estimate) may fall a hair before the end event the
replay computes in floating point; a head reservation at that time once made every later step of the
replay a pass at the same instant, for ever.  The replay runs in a child process, so that a relapse fails
the test instead of hanging it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import random
    from gridsched.core.params import Params, Policy
    from gridsched.sim.engine import simulate
    from gridsched.sim.metrics import compute
    from gridsched.sim.swf import Trace

    r = random.Random(1)
    tr = Trace("floats", 64, 64, None)
    t, t0 = 0.0, None
    for k in range(300):
        t += r.expovariate(1 / 120)
        t0 = t if t0 is None else t0
        run = r.choice([60, 300, 900, 3600, 7200]) * r.uniform(0.5, 1.5)
        tr.ids.append(k + 1); tr.submit.append(t - t0); tr.size.append(r.choice([1, 2, 4, 8, 16, 32]))
        tr.walltime.append(run); tr.run.append(run); tr.user.append(f"u{r.randrange(5)}")
    res = simulate(tr, Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=1800.0))
    m = compute(res)
    print(m.jobs, res.passes)
""")


def test_a_replay_with_fractional_times_ends():
    r = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    jobs, passes = map(int, r.stdout.split())
    assert jobs == 300 and passes < 5000  # about 400 passes; it looped at one instant before
