"""A dependency on an array's id, run by a real Slurm 22.05 and by gridsched side by side: which of the jobs
waiting on an array with one failing task run, and which wait for ever (Slurm's DependencyNeverSatisfied).

The Slurm and gridsched of :mod:`tests.compat.test_slurm_oracle` (its fixtures); where no Slurm answers and
none can be started here (as in CI), the test is skipped with the reason printed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.compat.test_slurm_oracle import Slurm, gs, gsub, slurm  # noqa: F401  (the fixtures)
from tests.conftest import Gridsched, wait_for

ARRAY = '#!/bin/bash\n#SBATCH -J arr\nsleep 1\n[ "$SLURM_ARRAY_TASK_ID" = 2 ] && exit 1\nexit 0\n'
AFTER = "#!/bin/bash\n#SBATCH -J dep\necho ran\n"
KINDS = ("afterok", "afternotok", "afterany", "after")


def slurm_waits(s: Slurm, jid: int) -> str | None:
    """The reason Slurm's job ``jid`` waits, or None once it is not pending."""
    r = subprocess.run(["squeue", "-h", "-j", str(jid), "-o", "%T %r"], env=s.env, capture_output=True, text=True)
    got = r.stdout.split()
    return got[1] if got and got[0] == "PENDING" else None


@pytest.mark.daemon
def test_dependencies_on_an_array_with_a_failed_task(slurm, gs: Gridsched, tmp_path: Path):  # noqa: F811
    seen: dict[str, dict[str, str]] = {}
    for system in ("slurm", "gridsched"):
        work = tmp_path / system
        work.mkdir()
        (work / "a.sh").write_text(ARRAY)
        (work / "b.sh").write_text(AFTER)
        if system == "slurm":
            aid = slurm.sbatch(work, "a.sh", "--array=0-3", "-t", "1")
            deps = {k: slurm.sbatch(work, "b.sh", "-t", "1", f"--dependency={k}:{aid}") for k in KINDS}
        else:
            aid = gsub(gs, work, "--array=0-3", "-t", "1", "a.sh")
            deps = {k: gsub(gs, work, "-t", "1", f"--dependency={k}:{aid}", "b.sh") for k in KINDS}

        def ran(work: Path = work, deps: dict[str, int] = deps) -> bool:
            return all((work / f"slurm-{deps[k]}.out").exists() for k in ("afternotok", "afterany", "after"))

        wait_for(ran, 90, f"the {system} jobs that may run to run")
        states: dict[str, str] = {}
        for k, jid in deps.items():
            out = work / f"slurm-{jid}.out"
            if out.exists() and out.read_text().strip() == "ran":
                states[k] = "ran"
            elif system == "slurm":
                states[k] = slurm_waits(slurm, jid) or "gone"
                subprocess.run(["scancel", str(jid)], env=slurm.env)
            else:
                j = gs.job(jid)
                never = j["state"] == "PENDING" and re.search(r"never", j.get("reason") or "")
                states[k] = "DependencyNeverSatisfied" if never else f"{j['state']}: {j.get('reason')}"
                gs.run("gdel", str(jid))
        seen[system] = states
    assert seen["gridsched"] == seen["slurm"]
    assert seen["slurm"]["afterok"] == "DependencyNeverSatisfied"
