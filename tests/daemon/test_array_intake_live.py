"""A real daemon taking in a 20,000-task array keeps serving: another user's job runs to its end meanwhile,
``gschedd stop`` returns within two seconds, and the next start goes on with the array."""

from __future__ import annotations

import sqlite3
import time

from gridsched.protocol import requests as rq
from tests.conftest import wait_for

N = 20_000


def count(gs, aid: int) -> int:
    try:
        con = sqlite3.connect(f"file:{gs.spool / 'state.db'}?mode=ro", uri=True)
        try:
            q = "SELECT COUNT(*) FROM jobs WHERE json_extract(spec, '$.array_id') = ?"
            return int(con.execute(q, (aid,)).fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_the_daemon_serves_and_stops_while_a_large_array_is_taken_in(make_gs):
    gs = make_gs()
    aid = gs.gsub("--array", f"0-{N - 1}", "--hold", "--wrap", "true")
    request = gs.spool / "incoming" / rq.id_name(aid)
    wait_for(lambda: count(gs, aid) > 0, 15, "the array's first tasks")
    other = gs.gsub("--wrap", "true")
    gs.wait_state(other, "COMPLETED", timeout=15)
    assert request.exists(), "the array is still being taken in"
    t = time.monotonic()
    gs.run("gschedd", "stop", check=True, timeout=10)
    took = time.monotonic() - t
    assert took < 2.0, f"gschedd stop took {took:.1f}s"
    gs.proc = None
    had = count(gs, aid)
    assert 0 < had < N and request.exists()
    gs.start()
    wait_for(lambda: count(gs, aid) > had, 15, "the intake to go on after a restart")
