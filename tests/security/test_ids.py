"""Job ids: B tries to take the id of A's submission, to collide with A's jobs, and to use the ids up.

Whatever B does, every id A's ``gsub`` prints must be a job of A's, new and
distinct, and it must run.
"""

from __future__ import annotations

import json
import os

from tests.security.conftest import TERMINAL, Targets, check_intact, spawn_as


def a_submits_and_runs(system, n: int = 3) -> list[int]:
    """A submits ``n`` jobs with gsub: their ids, checked to be new, distinct, A's, and to complete."""
    a = system.a
    before = set(system.rows())
    ids = [system.gsub(a, "-t", "1m", "--wrap", "true") for _ in range(n)]
    assert len(set(ids)) == n, f"gsub printed the same id twice: {ids}"
    assert not set(ids) & before, f"gsub printed ids of jobs that already existed: {sorted(set(ids) & before)}"
    for jid in ids:
        row = system.wait_state(jid, *TERMINAL, timeout=15)
        assert row["uid"] == a.uid and row["user"] == a.name, f"job {jid} that A's gsub printed is not A's: {row}"
        assert row["state"] == "COMPLETED", row
    return ids


def test_b_cannot_take_the_id_of_a_waiting_submission(fresh):
    """The daemon is down, so A's submission waits in incoming/; B tries to replace it, to write the same id
    under other names (spellings that sort before it), and to link it."""
    system = fresh()
    a, b = system.a, system.b
    targets = Targets(system.base, a).snapshot()
    warm = system.gsub(a, "-t", "1m", "--wrap", "true")
    system.wait_state(warm, "COMPLETED")
    system.stop()
    r = system.cmd(a, "gsub", "-t", "1m", "-N", "victim", "--wrap", "echo victim-ran")
    assert r.rc == 0, r
    victim = int(r.stdout.split()[-1])
    assert victim != warm, f"with the daemon down, A's gsub printed the id of A's earlier job {warm}"
    system.ids[a.name].add(victim)
    inc = system.spool_dir / "incoming"
    mine = f"submit-{victim:010d}.json"
    assert (inc / mine).exists(), sorted(os.listdir(inc))
    spec = system.spec(b, jid=victim, name="stolen", script="#!/bin/sh\necho stolen\n")
    payload = json.dumps({"type": "submit", "job": spec}).encode()
    claim_a = json.dumps(
        {"type": "submit", "job": system.spec(b, jid=victim, uid=a.uid, user=a.name, gid=a.gid)}
    ).encode()

    def attack() -> dict[str, str]:
        out = {}

        def attempt(what, fn):
            try:
                fn()
                out[what] = "done"
            except OSError as e:
                out[what] = e.strerror or str(e)

        def write_new(name, data=payload):
            fd = os.open(inc / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, data)
            os.close(fd)

        def overwrite():
            fd = os.open(inc / mine, os.O_WRONLY | os.O_TRUNC)
            os.write(fd, payload)
            os.close(fd)

        def rename_over():
            write_new(".b-tmp")
            os.rename(inc / ".b-tmp", inc / mine)

        attempt("create the same name", lambda: write_new(mine))
        attempt("open it for writing", overwrite)
        attempt("rename a file over it", rename_over)
        attempt("remove it", lambda: os.unlink(inc / mine))
        attempt(
            "hard-link it under a name that sorts first", lambda: os.link(inc / mine, inc / "submit-0000000000.json")
        )
        for name in (
            f"submit-{victim}.json",
            f"submit-{victim:05d}.json",
            "submit-0000000001.json",
            "submit-0000000000.json",
            f"submit-{victim:011d}.json",
            f"submit-{victim:010d}.json.json",
            f"cancel-0-{victim}.json",
        ):
            attempt(f"write {name}", lambda n=name: write_new(n))
        attempt("write a claim of A's uid", lambda: write_new("submit-0000000002.json", claim_a))
        return out

    res = spawn_as(b, attack).result()
    print("B's attempts:", res.get("ok", res))
    system.start()
    system.settle()
    row = system.wait_state(victim, *TERMINAL, timeout=15)
    assert row["uid"] == a.uid and row["user"] == a.name, f"A's job {victim} is not A's: {row}"
    assert row["name"] == "victim" and row["state"] == "COMPLETED", row
    assert (a.home / f"victim.o{victim}").read_text().strip() == "victim-ran"
    for r in system.rows().values():
        assert r["name"] != "stolen" or r["uid"] == b.uid, r
    a_submits_and_runs(system)
    check_intact(system, targets)


def test_b_cannot_collide_with_a_s_jobs_or_use_the_ids_up(system, targets):
    """B writes submissions with the id of a job A has, and with ids 2**62-1, 2**63, 2**53, 0, -1 and a
    number of 30 digits (in the file's name too): A's job stays A's, and A's later ids are good ones."""
    a, b = system.a, system.b
    mine = system.gsub(a, "-t", "1m", "-N", "mine", "--wrap", "true")
    system.wait_state(mine, "COMPLETED")
    held = system.gsub(a, "-t", "1m", "-N", "held", "--hold", "--wrap", "true")
    system.wait_state(held, "HELD")
    for jid in (mine, held):
        spec = system.spec(b, jid=jid, name="collide")
        system.put(b, f"submit-{jid:010d}.json", {"type": "submit", "job": spec})
        system.wait_taken(f"submit-{jid:010d}.json")
    for jid in (2**62 - 1, 2**63, 2**53, 2**53 - 1, 10**16 - 1, 0, -1, 10**30):
        spec = system.spec(b, jid=jid, name="extreme")
        name = f"submit-{jid:010d}.json" if jid >= 0 else f"submit-{jid}.json"
        system.put(b, name, {"type": "submit", "job": spec})
    system.settle()
    for jid in (mine, held):
        row = system.job(jid)
        assert row["uid"] == a.uid and row["user"] == a.name and row["name"] in ("mine", "held"), row
    assert system.job(held)["state"] == "HELD"
    a_submits_and_runs(system)
    system.cmd(a, "gdel", str(held))
    check_intact(system, targets)
