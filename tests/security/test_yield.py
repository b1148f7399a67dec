"""Escaping the walltime by yielding: B's jobs call gyield with no child, or with a child they hold so that it
never runs, and write yield requests by hand; they are still killed at their walltime, and A's job, waiting
for their cores, runs once their time is up."""

from __future__ import annotations

import os
import time

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, check_intact

WALLTIME = 4  # seconds: B's jobs' walltime
SLACK = 8.0  # seconds the daemon and the loaded machine may take beyond the walltime and the kill grace

NOTHING = "cannot yield: it has no live child, so there is nothing to lend its cores to"

NO_CHILD = """#!/bin/sh
gyield 2> "$HOME/nochild.err"
echo $? > "$HOME/nochild.rc"
sleep 60
"""

HELD_CHILD = """#!/bin/sh
gsub --hold -N kid -t 1m --wrap true > "$HOME/kid" || exit 3
gyield 2> "$HOME/held.err"
echo $? > "$HOME/held.rc"
sleep 60
"""


def test_b_cannot_escape_its_walltime_by_yielding(system, targets):
    a, b = system.a, system.b
    grace = 1.0  # jobs.kill_grace of the harness's config
    scripts = {}
    for name, text in (("nochild.sh", NO_CHILD), ("held.sh", HELD_CHILD)):
        p = b.home / name
        p.write_text(text)
        os.chown(p, b.uid, b.gid)
        p.chmod(0o755)
        scripts[name] = p
    # the two jobs of B's fill the machine's 4 cores
    lone = system.gsub(b, "-n", "2", "-t", f"{WALLTIME}s", str(scripts["nochild.sh"]))
    holder = system.gsub(b, "-n", "2", "-t", f"{WALLTIME}s", str(scripts["held.sh"]))
    system.wait_state(lone, "RUNNING", *TERMINAL)
    system.wait_state(holder, "RUNNING", *TERMINAL)
    # past gyield: a yield request written by hand, for the job with no child
    name = f"yield-{time.time_ns()}-1.json"
    system.put(b, name, {"type": "yield", "job": lone})
    submitted = time.time()
    victim = system.gsub(a, "-n", "4", "-t", "1m", "--wrap", "true")

    # gyield refuses in one line where it can tell; the daemon refuses the hand-written request
    wait_for(lambda: (b.home / "nochild.rc").exists(), 15, "B's first gyield")
    assert (b.home / "nochild.rc").read_text().strip() == "1"
    err = (b.home / "nochild.err").read_text()
    assert err == f"gyield: error: job {lone} {NOTHING}\n"
    system.wait_taken(name)
    assert system.wait_why(name) == f"job {lone} {NOTHING}\n"

    # both of B's jobs are killed at their walltime: the held child earns its parent nothing
    for jid in (lone, holder):
        row = system.wait_state(jid, *TERMINAL, timeout=WALLTIME + grace + SLACK + 10)
        assert row["state"] == "TIMEOUT", f"B's job {jid} ended {row['state']}: {row['reason']!r}"
        ran = row["end_time"] - row["start_time"]
        assert ran <= WALLTIME + grace + SLACK, f"B's job {jid} ran {ran:.1f}s on a walltime of {WALLTIME}s"
    assert (b.home / "held.rc").read_text().strip() == "0"  # it had a child: the yield itself was accepted
    kid = int((b.home / "kid").read_text())
    system.ids[b.name].add(kid)
    system.wait_state(kid, "CANCELLED", timeout=15)  # it went with its parent

    # A's job waited for the cores B's jobs held, and ran once their time was up
    row = system.wait_state(victim, *TERMINAL, timeout=30)
    assert row["state"] == "COMPLETED", f"A's job ended {row['state']}: {row['reason']!r}"
    latest = max(system.job(j)["start_time"] for j in (lone, holder))
    assert row["start_time"] <= latest + WALLTIME + grace + SLACK, "A's job waited past B's walltimes"
    assert row["start_time"] - submitted <= WALLTIME + grace + SLACK + 5
    check_intact(system, targets)
