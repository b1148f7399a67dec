"""One request file of B's must not kill or wedge the system daemon, now or at its next start.

Each case is a submission or a reservation with one field out of range or of
the wrong kind (what Python's json writes for NaN and Infinity included).
After it the daemon must still run, A's ``gstat``, ``gstat -r`` and ``gresv
list`` must work, the daemon must stop and start again on the same spool, and
A's next job must run.  A case whose daemon dies leaves it dead: the next
case gets a new one on a fresh spool.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import wait_for
from tests.security.conftest import check_intact

NAN, INF = float("nan"), float("inf")

SUBMITS = {
    "place nowhere": [{"place": "nowhere"}],
    "threads_per_core 'x'": [{"threads_per_core": "x"}, {"place": "pack", "threads_per_core": "x"}],
    "dependency id of 5000 digits": [{"depend": "afterok:" + "9" * 5000}, {"depend": "afterany:1:" + "7" * 5000}],
    "ncpus 10**30": [{"ncpus": 10**30}],
    "walltime -1, 1e308, 'x'": [{"walltime": -1}, {"walltime": 1e308}, {"walltime": "x"}],
    "NaN and Infinity": [
        {"walltime": NAN},
        {"ncpus": INF},
        {"submit_time": NAN},
        {"submit_time": 1e308},
        {"mem": INF},
        {"reservation": NAN},
        {"parent": NAN},
    ],
}
RESVS = {
    "reservation start NaN": [{"start": NAN}],
    "reservation start 1e308": [{"start": 1e308}],
    "reservation start -1e308": [{"start": -1e308}],
    "reservation of a huge duration": [{"duration": 10**30}, {"duration": 1e308}, {"duration": NAN}],
    "reservation created at NaN, 1e308": [{"create_time": NAN}, {"create_time": 1e308}, {"ncpus": INF}],
}


def resv(system, u, rid: int, **changes) -> dict:
    r = {
        "id": rid,
        "name": f"R{rid}",
        "user": u.name,
        "uid": u.uid,
        "ncpus": 1,
        "resources": {},
        "duration": 600,
        "start": None,
        "users": [],
        "kill": True,
        "create_time": time.time(),
    }
    r.update(changes)
    return r


@pytest.mark.parametrize("case", list(SUBMITS) + list(RESVS))
def test_one_request_does_not_kill_or_wedge_the_daemon(system, targets, case):
    a, b = system.a, system.b
    names = []
    if case in SUBMITS:
        for changes in SUBMITS[case]:
            jid = system.next_id()
            names.append(f"submit-{jid:010d}.json")
            system.put(b, names[-1], {"type": "submit", "job": system.spec(b, jid=jid, **changes)})
    else:
        for changes in RESVS[case]:
            # named as a submission that brings a new id, and as the older commands named it
            rid = system.next_id()
            names.append(f"submit-{rid:010d}.json")
            system.put(b, names[-1], {"type": "resv_create", "resv": resv(system, b, rid, **changes)})
            rid = system.next_id()
            names.append(f"resv_create-{time.time_ns()}-{rid}.json")
            system.put(b, names[-1], {"type": "resv_create", "resv": resv(system, b, rid, **changes)})
    try:
        problems = []
        inc = system.spool_dir / "incoming"
        try:
            wait_for(
                lambda: not system.alive() or not any((inc / n).exists() for n in names),
                15,
                "the daemon to take the requests out of incoming/",
            )
        except AssertionError:
            problems.append(
                f"the daemon left {[n for n in names if (inc / n).exists()]} in incoming/ for 15 s (wedged?)"
            )
        if system.alive():
            try:
                system.turn(10)
            except AssertionError:
                problems.append("the daemon does not serve requests any more (wedged)")
        if not system.alive():
            problems.append(f"the daemon died: {system.why_dead()}")
        for args in (("gstat",), ("gstat", "-a"), ("gstat", "-r"), ("gresv", "list"), ("gresv", "list", "-a")):
            r = system.cmd(a, *args, timeout=10)
            if r.rc != 0 or "Traceback" in r.stderr:
                problems.append(f"as A: {r}")
        # a clean restart on the same spool
        rc = system.stop(10)
        if rc not in (0, None) and not any("died" in p for p in problems):
            problems.append(f"the daemon exited with status {rc} when stopped")
        try:
            system.start(20)
        except AssertionError as e:
            problems.append(f"the daemon does not start again on the same spool: {str(e)[-1500:]}")
        assert not problems, f"{case}:\n" + "\n".join(problems)
        check_intact(system, targets, probe_timeout=15)
    except BaseException:
        system.stop(3)  # the next case gets a daemon of its own
        raise
