"""Further attacks of a second local user on the daemon's newest defences: entries that cannot leave
``incoming/``, floods of wake-ups, races for the ids of others' submissions, escapes from the job's cgroups,
and escapes from the walltime through yields (docs/security.md)."""

from __future__ import annotations

import os
import time

import psutil

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, check_intact, spawn_as

STUCK = 1100  # more entries than the daemon reads in one turn (intake.MAX_BATCH)


def _plant_files(inc: str, names: list[str]) -> int:
    """As B: a bad request file under each name (the daemon refuses and quarantines each)."""
    for n in names:
        fd = os.open(os.path.join(inc, n), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"x")
        os.close(fd)
    return len(names)


def _plant_dirs(inc: str, names: list[str]) -> int:
    """As B: a directory under each name, with a file in it."""
    for n in names:
        os.mkdir(os.path.join(inc, n))
        with open(os.path.join(inc, n, "f"), "w") as f:
            f.write("x")
    return len(names)


def test_entries_that_cannot_be_quarantined_do_not_starve_a(system, targets):
    """B has a bad request file of each of 1,100 names quarantined, then puts a directory (with a file in it)
    under each name again, sorting before every real submission: moving a directory onto the file of the same
    name in ``quarantine/`` fails, and a directory cannot be unlinked.  Each must still leave ``incoming/``,
    and A's job, submitted after them, must be taken in and run."""
    a, b = system.a, system.b
    inc = system.spool_dir / "incoming"
    stamp = time.time_ns()
    names = [f"submit-0000000000{i:05d}-{stamp}" for i in range(STUCK)]  # before every real id
    assert spawn_as(b, _plant_files, str(inc), names).result(120) == {"ok": STUCK}
    system.wake()
    wait_for(lambda: not any(os.path.lexists(inc / n) for n in names), 60, "B's files to be quarantined")
    assert spawn_as(b, _plant_dirs, str(inc), names).result(120) == {"ok": STUCK}
    system.wake()
    t0 = time.monotonic()
    jid = system.gsub(a, "-t", "1m", "--wrap", "echo ran")
    row = system.wait_state(jid, *TERMINAL, timeout=40)
    took = time.monotonic() - t0
    assert row["state"] == "COMPLETED", row
    print(f"A's job completed {took:.1f} s after B's {STUCK} directories")
    log = system.log().count("quarantined request submit-0000000000")
    wait_for(lambda: not any(os.path.lexists(inc / n) for n in names), 30, "B's directories to leave incoming/")
    assert system.log().count("quarantined request submit-0000000000") <= log + STUCK
    check_intact(system, targets)
