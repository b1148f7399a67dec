"""Paths B writes into a request are never looked through by the root daemon: a PATH of link chains does not
hold up A's jobs, and a ``shell`` in A's private directory gets the same answer whether it is there or not."""

from __future__ import annotations

import os
import time

from tests.daemon.test_user_paths import hostile_path
from tests.security.conftest import TERMINAL, check_intact, spawn_as

SERVED_WITHIN = 8.0  # seconds from A's gsub to A's job running, with B's jobs starting beside it


def test_b_s_jobs_with_a_path_of_link_chains_do_not_hold_up_a_s_job(system, targets):
    """B submits two jobs whose PATH has 1,000 entries through 39-deep chains of links (looking an ``mpirun``
    up in it takes several seconds each), and A a trivial job right after: A's job runs within 8 s.  The
    lookup is done by B's jobs themselves, as B: they run, and find gridsched's own mpirun."""
    a, b = system.a, system.b
    links = b.home / "links"
    built = spawn_as(b, hostile_path, links, 1000).result(120)
    assert "ok" in built, built
    path = built["ok"]
    home = str(b.home)
    jobs = [
        system.submit_as(
            b,
            env={"PATH": path, "HOME": home},
            script="#!/bin/sh\ncommand -v mpirun\n",
            stdout=f"{home}/paths.o{i}",
            stderr=f"{home}/paths.e{i}",
        )
        for i in range(2)
    ]
    t0 = time.monotonic()
    jid = system.gsub(a, "-t", "1m", "--wrap", "true")
    system.wait_state(jid, "RUNNING", *TERMINAL, timeout=SERVED_WITHIN + 30)
    took = time.monotonic() - t0
    print(f"A's job ran {took:.1f} s after gsub, beside B's jobs with a PATH of link chains")
    assert took < SERVED_WITHIN, f"A's job waited {took:.1f} s for B's jobs with a PATH of link chains"
    for i, j in enumerate(jobs):
        row = system.wait_state(j, *TERMINAL, timeout=120)
        assert row["state"] == "COMPLETED" and row["uid"] == b.uid, row
        found = (b.home / f"paths.o{i}").read_text().strip()
        assert found.endswith("/bin/mpirun") and "/gridsched." in found, found  # no MPI on that PATH: gridsched's
    check_intact(system, targets)


def test_a_shell_in_a_s_private_directory_gets_the_same_answer_whether_it_exists_or_not(system, targets):
    """B names as the shell of a script without #! a file that exists in A's 0700 directory, and one that does
    not: gsub (as B) refuses both in the same words, and hand-written requests are both taken in and both end
    FAILED with the same reason (the job, as B, may not look there); nothing of A's is touched."""
    a, b = system.a, system.b
    private = a.home / "private"  # A's, 0700 (Targets)
    there = private / "ksh"
    there.write_text("#!/bin/sh\necho a-shell\n")
    os.chown(there, a.uid, a.gid)
    os.chmod(there, 0o755)
    absent = private / "nosuch"
    script = b.home / "plain.sh"
    script.write_text("echo no shebang\n")
    os.chown(script, b.uid, b.gid)
    targets.snapshot()  # with the shell in place

    def same(text: str, p: os.PathLike[str]) -> str:
        return text.replace(str(p), "SHELL")

    said = {p: system.cmd(b, "gsub", "--shell", str(p), str(script)) for p in (there, absent)}
    for r in said.values():
        assert r.one_line_error("gsub") is None, r
    assert same(said[there].stderr, there) == same(said[absent].stderr, absent), said
    jobs = {p: system.submit_as(b, shell=str(p), script="echo no shebang\n") for p in (there, absent)}
    rows = {p: system.wait_state(j, *TERMINAL) for p, j in jobs.items()}
    for row in rows.values():
        assert row["state"] == "FAILED" and row["uid"] == b.uid, row
    assert same(rows[there]["reason"], there) == same(rows[absent]["reason"], absent), rows
    assert same(rows[there]["reason"], there) == (
        "could not start: shell SHELL: permission denied (not an executable file the job's owner may run)"
    )
    assert "a-shell" not in (b.home / f"hand.o{jobs[there]}").read_text()
    check_intact(system, targets)
