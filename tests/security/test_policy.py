"""Denial of service through shared resources: B may not reserve the machine, and B's job backfilled on a
too-short estimate does not hold A's head job back (docs/security.md).

The harness lets A reserve (``reservations.users``) and not B; root is the admin.
"""

from __future__ import annotations

import json
import time

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, check_intact


def test_b_cannot_reserve_the_machine_and_a_s_job_runs(system, targets):
    """B's ``gresv create -n 4 -t 7d`` is refused in one line; the same request written by hand is recorded as
    refused and holds nothing; A's one-core job runs at once."""
    a, b = system.a, system.b
    r = system.cmd(b, "gresv", "create", "-n", "4", "-t", "7d")
    assert r.rc == 1, f"B's gresv create: {r}"
    assert r.stderr.count("\n") == 1 and "may not create reservations" in r.stderr and "Traceback" not in r.stderr
    rid = system.next_id()
    resv = {"id": rid, "user": b.name, "uid": b.uid, "ncpus": 4, "duration": 7 * 86400, "create_time": time.time()}
    system.put(b, f"submit-{rid:010d}.json", {"type": "resv_create", "resv": resv})

    def b_resv() -> dict | None:
        out = system.cmd(b, "gresv", "list", "-a", "--json")
        assert out.rc == 0, out
        return next((x for x in json.loads(out.stdout)["reservations"] if x["id"] == rid), None)

    row = wait_for(b_resv, 15, "B's hand-written reservation to be taken in")
    assert row["state"] == "ENDED" and "may not create reservations" in row["reason"], row
    t0 = time.time()
    job = system.gsub(a, "-n", "1", "-t", "1m", "--wrap", "true")
    system.wait_state(job, "COMPLETED", timeout=20)
    assert time.time() - t0 < 20
    check_intact(system, targets)


def test_b_s_job_overrunning_its_estimate_does_not_delay_a_s_head(fresh):
    """Four cores under easy.  A's job holds one core for a few seconds and A's four-core job waits for it (the
    head).  B's one-hour job says it needs 2 s (--estimate), is backfilled on that, and sleeps on: when the head's
    time comes it is ended (TIMEOUT, with the reason) and A's head job runs, within seconds, not an hour."""
    system = fresh({"scheduler": {"policy": "easy"}})
    a, b = system.a, system.b
    blocker = system.gsub(a, "-n", "1", "-t", "20s", "--wrap", "sleep 4")
    system.wait_state(blocker, "RUNNING", timeout=15)
    head = system.gsub(a, "-n", "4", "-t", "1m", "--wrap", "true")
    t0 = time.time()
    hog = system.gsub(b, "-n", "1", "-t", "1h", "--estimate", "2s", "--wrap", "sleep 3600")
    done = system.wait_state(head, "COMPLETED", timeout=40)
    assert time.time() - t0 < 40
    row = system.job(hog)
    assert row is not None and row["start_time"] is not None
    if row["start_time"] < done["start_time"]:  # backfilled (unless the machine was too slow to start it in time)
        row = system.wait_state(hog, *TERMINAL, timeout=15)
        assert row["state"] == "TIMEOUT" and "overran the estimate it was backfilled on" in row["reason"], row
    else:
        system.cmd(b, "gdel", str(hog))
        system.wait_state(hog, *TERMINAL, timeout=15)
    check_intact(system)
