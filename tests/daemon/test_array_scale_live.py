"""A real daemon with a million-task array: it takes it in at once and keeps serving (another job runs to its
end, gstat answers and shows the array as one row), ``gschedd stop`` returns within two seconds, a kill -9 and
a restart keep every task once, and a cancel of the whole array is served at once."""

from __future__ import annotations

import sqlite3
import time

from gridsched.protocol.arrays import Indices
from tests.conftest import wait_for

N = 1_000_000


def record(gs, aid: int) -> dict[str, str] | None:
    try:
        con = sqlite3.connect(f"file:{gs.spool / 'state.db'}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT pending, held, cancelled FROM arrays WHERE id = ?", (aid,)).fetchone()
            made = con.execute("SELECT COUNT(*) FROM jobs WHERE json_extract(spec, '$.array_id') = ?", (aid,))
            n = int(made.fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    return {"pending": row[0], "held": row[1], "cancelled": row[2], "made": str(n)}


def test_a_million_task_array_is_taken_in_at_once_and_the_daemon_serves_and_stops(make_gs):
    gs = make_gs()
    aid = gs.gsub("--array", f"0-{N - 1}", "--hold", "--wrap", "true")
    wait_for(lambda: record(gs, aid) is not None, 15, "the array's record")
    rec = record(gs, aid)
    assert rec is not None and rec["made"] == "1" and len(Indices.from_text(rec["held"])) == N - 1
    other = gs.gsub("--wrap", "true")
    gs.wait_state(other, "COMPLETED", timeout=15)
    out = gs.run("gstat", check=True).stdout
    assert f"{aid}_[0-{N - 1}]" in out and f"{N} held" in out, out
    t = time.monotonic()
    gs.run("gschedd", "stop", check=True, timeout=10)
    took = time.monotonic() - t
    assert took < 2.0, f"gschedd stop took {took:.1f}s"
    gs.proc = None
    gs.start()
    gs.run("grls", str(aid), check=True)
    wait_for(lambda: int((record(gs, aid) or {}).get("made", 0)) > 2, 15, "tasks made once released")
    gs.kill9()
    gs.start()
    gs.run("gdel", str(aid), check=True)
    wait_for(lambda: (record(gs, aid) or {}).get("pending") == "", 15, "the cancel")
    rec = record(gs, aid)
    assert rec is not None
    made, cancelled = int(rec["made"]), len(Indices.from_text(rec["cancelled"]))
    assert made + cancelled == N and rec["held"] == "", rec
