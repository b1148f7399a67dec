"""What a careful attacker tries next: odd names and shapes of requests, claims of root, B acting on A's
jobs and reservations by hand, request files readable by others, and a flood."""

from __future__ import annotations

import json
import os
import stat
import time

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, check_intact, spawn_as


def test_odd_names_and_shapes_of_requests(system, targets):
    """Job names with '..', '/', newlines and 4 KiB; file names of 255 bytes and with '..'; kinds that do not
    exist; unknown fields; a request that is a JSON array, a number, a string, null; a submit without a job.
    Each is refused or harmless; nothing appears outside the spool and no job runs as anyone but B."""
    b = system.b
    names = ["../../../../etc/cron.d/gridsched", "a/b", "..", ".", "x\ny", "n" * 4096, "-rf", "$(id)"]
    jobs = [system.submit_as(b, record=False, name=n, hold=True) for n in names]
    stamp = time.time_ns()
    odd = {
        f"cancel-{stamp}-{'z' * 200}.json": {"type": "cancel", "jobs": [1]},
        f"..cancel-{stamp}.json": {"type": "cancel", "jobs": [1]},
        f"cancel-{stamp}-...json": {"type": "cancel", "jobs": [1]},
        f"nosuch-{stamp}.json": {"type": "nosuch"},
        f"x-{stamp}-1.json": {"type": "__init__"},
        f"x-{stamp}-2.json": {"type": "ingest"},
        f"x-{stamp}-3.json": {"type": "submit"},
        f"x-{stamp}-4.json": {"type": "submit", "job": [1, 2]},
        f"x-{stamp}-5.json": {"type": "cancel", "jobs": 5},
        f"x-{stamp}-6.json": {"type": "cancel", "jobs": [1], "unknown": {"x": 1}, "uid": 0},
        f"x-{stamp}-7.json": [1, 2, 3],
        f"x-{stamp}-8.json": 5,
        f"x-{stamp}-9.json": "submit",
        f"x-{stamp}-10.json": None,
        f"x-{stamp}-11.json": {"type": ["submit"]},
        f"x-{stamp}-12.json": {"type": "submit", "job": {}},
    }
    odd["n" * 250 + ".json"] = {"type": "hold", "jobs": [1]}
    for name, payload in odd.items():
        system.put(b, name, payload)
    jid = system.next_id()
    system.put(
        b,
        f"submit-{jid:010d}.json",
        {"type": "submit", "job": system.spec(b, jid=jid, hold=True), "unknown": 1, "uid": 0},
    )
    system.settle()
    rows = system.rows()
    for j in jobs + [jid]:
        r = rows.get(j)
        assert r is None or r["uid"] == b.uid, r
    for j in jobs + [jid]:
        if j in rows and rows[j]["state"] == "HELD":
            system.cmd(b, "gdel", str(j))
    assert not os.path.exists("/etc/cron.d/gridsched")
    check_intact(system, targets)


def test_requests_readable_by_others_and_gsub_s_own_mode(fresh):
    """A request file of A's with mode 0644 is still A's (the mode decides nothing); what gsub writes is
    0600, so B cannot read A's waiting submission (its script and environment)."""
    system = fresh()
    a, b = system.a, system.b
    system.stop()
    r = system.cmd(a, "gsub", "-t", "1m", "--wrap", "echo a-secret-script", extra_env={"A_TOKEN": "a-token-91f3"})
    assert r.rc == 0, r
    jid = int(r.stdout.split()[-1])
    system.ids[a.name].add(jid)
    waiting = [p for p in (system.spool_dir / "incoming").iterdir() if not p.name.startswith(".")]
    assert waiting, "gsub left no request in incoming/"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in waiting}
    assert all(m & 0o077 == 0 for m in modes.values()), f"A's waiting request is readable by others: {modes}"
    peek = spawn_as(b, lambda: [open(p, "rb").read(100).decode(errors="replace") for p in waiting]).result()
    assert "ok" not in peek, f"B read A's waiting request: {peek}"
    loose = system.submit_as(a, mode=0o644, hold=True)
    system.start()
    system.settle()
    assert system.wait_state(jid, *TERMINAL)["uid"] == a.uid
    assert system.wait_state(loose, "HELD")["uid"] == a.uid
    system.cmd(a, "gdel", str(loose))
    check_intact(system)


def test_a_request_of_b_s_claiming_root(system, targets):
    """B's submission claiming uid 0, gid 0 and user root; B's reservation claiming root; B's control requests
    claiming root.  No job or reservation of root's appears; nothing of root's is touched."""
    a, b = system.a, system.b
    victim = system.gsub(a, "--hold", "-t", "1m", "--wrap", "true")
    system.wait_state(victim, "HELD")
    ids = [
        system.submit_as(
            b, record=False, uid=0, gid=0, user="root", hold=True, script=f"#!/bin/sh\nid > {targets.dir}/pwned\n"
        ),
        system.submit_as(b, record=False, uid=0, user="root", hold=True),
        system.submit_as(b, record=False, gid=0, hold=True),
    ]
    rid = system.next_id()
    resv = {
        "id": rid,
        "name": "root's",
        "user": "root",
        "uid": 0,
        "ncpus": 1,
        "resources": {},
        "duration": 600,
        "start": None,
        "users": [],
        "kill": True,
        "create_time": time.time(),
    }
    system.put(b, f"submit-{rid:010d}.json", {"type": "resv_create", "resv": resv})
    system.put(b, f"cancel-{time.time_ns()}-1.json", {"type": "cancel", "jobs": [victim], "uid": 0, "user": "root"})
    system.settle()
    rows = system.rows()
    for j in ids:
        r = rows.get(j)
        assert r is None or (r["uid"] == b.uid and r["user"] == b.name), f"B's claim of root became: {r}"
    r = system.cmd(a, "gresv", "list", "-a", "--json")
    assert r.rc == 0, r
    root_resvs = [x for x in json.loads(r.stdout)["reservations"] if x.get("uid") == 0 or x.get("user") == "root"]
    assert not root_resvs, f"B made a reservation of root's: {root_resvs}"
    assert system.job(victim)["state"] == "HELD", "B's cancel claiming root cancelled A's job"
    assert not (targets.dir / "pwned").exists()
    for j in ids:
        if j in rows and rows[j]["state"] == "HELD":
            system.cmd(b, "gdel", str(j))
    system.cmd(a, "gdel", str(victim))
    check_intact(system, targets)


def test_b_cannot_cancel_hold_release_or_yield_a_s_jobs(system, targets):
    """By hand-written requests, by id and by array: A's held job, running job and array stay as they are."""
    a, b = system.a, system.b
    held = system.gsub(a, "--hold", "-t", "1m", "--wrap", "true")
    running = system.gsub(a, "-t", "1m", "--wrap", "sleep 60")
    array = system.gsub(a, "--hold", "-t", "1m", "--array", "0-2", "--wrap", "true")
    system.wait_state(held, "HELD")
    system.wait_state(running, "RUNNING")
    system.wait_state(array, "HELD")
    tasks = sorted(j for j, r in system.rows().items() if r["uid"] == a.uid and r["state"] == "HELD" and j >= array)
    system.ids[a.name].update(tasks)
    before = {j: system.job(j)["state"] for j in [held, running, *tasks]}
    n = time.time_ns()
    for kind in ("cancel", "hold", "release"):
        system.put(b, f"{kind}-{n}-1.json", {"type": kind, "jobs": [held, running, *tasks]})
        system.put(b, f"{kind}-{n}-2.json", {"type": kind, "jobs": [], "arrays": [array]})
    system.put(b, f"yield-{n}-3.json", {"type": "yield", "job": running, "until": [held]})
    system.put(b, f"resume-{n}-4.json", {"type": "resume", "job": running})
    for tool in ("gdel", "ghold", "grls"):
        r = system.cmd(b, tool, str(held), str(running), str(array))
        assert r.rc != 0, f"B's {tool} of A's jobs said it worked: {r}"
        assert "Traceback" not in r.stderr, r
    system.settle()
    after = {j: system.job(j)["state"] for j in before}
    assert after == before, f"B changed A's jobs: before {before}, after {after}"
    system.cmd(a, "gdel", str(held), str(running), str(array))
    system.wait_state(running, *TERMINAL, timeout=20)
    check_intact(system, targets)


def test_b_cannot_delete_a_s_reservation(system, targets):
    a, b = system.a, system.b
    r = system.cmd(a, "gresv", "create", "-n", "1", "-t", "1h", "--start", "+2h")
    assert r.rc == 0, r
    rid = int(r.stdout.split()[-1])

    def state() -> str:
        out = system.cmd(a, "gresv", "list", "-a", "--json")
        assert out.rc == 0, out
        for row in json.loads(out.stdout)["reservations"]:
            if row["id"] == rid:
                return row["state"]
        return "missing"

    wait_for(lambda: state() == "WAITING", 15, "A's reservation to be taken in")
    system.put(b, f"resv_delete-{time.time_ns()}-1.json", {"type": "resv_delete", "id": rid, "release": True})
    r = system.cmd(b, "gresv", "delete", str(rid))
    assert r.rc != 0 and "Traceback" not in r.stderr, f"B's gresv delete of A's reservation: {r}"
    system.settle()
    assert state() == "WAITING", f"B deleted A's reservation {rid}: it is {state()}"
    assert system.cmd(a, "gresv", "delete", str(rid)).rc == 0
    check_intact(system, targets)


def test_a_flood_of_tiny_bad_requests(system, targets):
    """B drops 5,000 tiny bad requests at once; A's job submitted right after must start within 30 s."""
    a, b = system.a, system.b
    inc = system.spool_dir / "incoming"

    def flood() -> int:
        n = 0
        for i in range(5000):
            fd = os.open(inc / f"cancel-{i}-flood.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"x")
            os.close(fd)
            n += 1
        return n

    assert spawn_as(b, flood).result(120) == {"ok": 5000}
    t0 = time.monotonic()
    jid = system.gsub(a, "-t", "1m", "--wrap", "true")
    system.wait_state(jid, "RUNNING", *TERMINAL, timeout=30)
    print(f"A's job started {time.monotonic() - t0:.1f} s after the flood")
    system.settle(timeout=120)
    check_intact(system, targets)


def test_only_the_owner_moves_a_reservation_and_only_root_raises_it(system, targets):
    """gresv update on a system daemon: B cannot move A's waiting flexible reservation, by the command or a
    request written by hand; A may lower it but not raise it (the command refuses, the daemon too); root may."""
    a, b = system.a, system.b
    blocker = system.gsub(a, "-n", "4", "-t", "10:00", "--wrap", "sleep 300")  # the whole machine: it waits
    system.wait_state(blocker, "RUNNING")
    r = system.cmd(a, "gresv", "create", "-n", "2", "-t", "1h")
    assert r.rc == 0, r
    rid = int(r.stdout.split()[-1])

    def mine() -> dict:
        out = system.cmd(a, "gresv", "list", "-a", "--json")
        assert out.rc == 0, out
        return next((x for x in json.loads(out.stdout)["reservations"] if x["id"] == rid), {})

    wait_for(lambda: mine().get("state") == "WAITING", 15, "A's flexible reservation to be taken in")

    r = system.cmd(b, "gresv", "update", str(rid), "--nice", "100")
    assert r.one_line_error("gresv") is None and "owned by" in r.stderr, r
    for fields in ({"nice": 100}, {"nice": -100}, {"priority": 1}, {"unset_priority": True}):
        system.put(b, f"resv_alter-{time.time_ns()}-{os.getpid()}.json", {"type": "resv_alter", "id": rid, **fields})
    for args in (("--nice", "-5"), ("--priority", "900"), ("--no-priority",)):
        r = system.cmd(a, "gresv", "update", str(rid), *args)
        assert r.rc != 0 and r.one_line_error("gresv") is None and "only an admin" in r.stderr, r
    name = f"resv_alter-{time.time_ns()}-{os.getpid()}.json"
    system.put(a, name, {"type": "resv_alter", "id": rid, "priority": 900})
    system.settle()
    assert "only an admin may set a reservation's priority" in system.wait_why(name)
    assert (mine()["nice"], mine().get("priority")) == (0, None), mine()

    assert system.cmd(a, "gresv", "update", str(rid), "--nice", "20").rc == 0
    wait_for(lambda: mine()["nice"] == 20, 15, "the owner's lower place")
    assert system.cmd(None, "gresv", "update", str(rid), "--priority", "500").rc == 0
    wait_for(lambda: mine().get("priority") == 500, 15, "root's priority")
    assert system.cmd(a, "gresv", "delete", str(rid)).rc == 0
    assert system.cmd(a, "gdel", str(blocker)).rc == 0
    system.wait_state(blocker, *TERMINAL, timeout=20)
    check_intact(system, targets)
