"""A large array is taken in a slice per turn, in process (the stub executor): each turn is bounded, other
requests are served between slices, a cancel stops the intake, a restart goes on from the last committed slice,
and a submission is refused whole before any task is written.  Large cancels are done in slices too."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from gridsched.daemon import arrays, slices
from gridsched.daemon.loop import Daemon
from gridsched.daemon.spawn import Stub
from gridsched.protocol import requests as rq
from gridsched.protocol.arrays import task_path
from tests.fuzz.test_requests import valid_job

CONFIG = """
[scheduler]
policy = "fcfs"
[machine]
cores = 8
[daemon]
autostart = false
"""

SLICE = 400  # jobs a turn, for these tests (the time bound is lifted, so the count decides)
N = 2000  # tasks of the array in these tests: five slices and more


@pytest.fixture(autouse=True)
def small_slices(monkeypatch):
    monkeypatch.setattr(slices, "SLICE_MAX", SLICE)
    monkeypatch.setattr(slices, "SLICE_TIME", 1e9)


def submit(d: Daemon, now: float, uid: int | None = None, **fields: object) -> int:
    nid = d.spool.next_id()
    job = {**valid_job(nid), "submit_time": now, "stdout": "/tmp/o-%j-%a", **fields}
    if uid is not None:
        job.update(uid=uid, gid=uid, user="nobody")
    p = d.spool.incoming / rq.id_name(nid)
    p.write_text(json.dumps({"type": "submit", "job": job}))
    if uid is not None:
        os.chown(p, uid, -1)
    return nid


def request(d: Daemon, kind: str, **fields: object) -> None:
    p = d.spool.incoming / f"{kind}-{time.time_ns()}-1.json"
    p.write_text(json.dumps({"type": kind, **fields}))


def tasks(d: Daemon, first: int) -> list[dict]:
    return d.db.by_spec("array_id", first)


def state(d: Daemon, jid: int) -> str:
    rec = d.table.jobs.get(jid)
    return rec.state.value if rec is not None else d.db.job(jid)["state"]


def claims(d: Daemon) -> int:
    """The ids the daemon holds claimed now (its empty files in incoming/)."""
    return sum(1 for p in d.spool.incoming.iterdir() if p.name.startswith("submit-") and p.stat().st_size == 0)


def turns_until(d: Daemon, t: float, cond, most: int = 50) -> list[int]:
    """Turn until ``cond()``; the number of the array's tasks each turn added."""
    added = []
    for k in range(most):
        before = d.db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        d.turn(t + k * 0.01, scan=True)
        added.append(d.db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] - before)
        if cond():
            return added
    raise AssertionError(f"not done after {most} turns: {added}")


def check_whole(d: Daemon, first: int, n: int) -> None:
    """Every index once, with the ids claimed in order from the array's own and its own output paths."""
    rows = tasks(d, first)
    by_index = {r["spec"]["array_index"]: r for r in rows}
    assert len(rows) == n and sorted(by_index) == list(range(n)), "each task once"
    assert [by_index[i]["id"] for i in range(n)] == list(range(first, first + n)), "ids as they would have been"
    for i in (0, n // 2, n - 1):
        r = by_index[i]
        assert d.table.spec(r["id"]).stdout == task_path("/tmp/o-%j-%a", r["id"], i) == f"/tmp/o-{r['id']}-{i}"


def test_a_large_array_is_taken_in_over_bounded_turns_and_others_are_served_between(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    first = submit(d, t, array=f"0-{N - 1}", hold=True)
    req = d.spool.incoming / rq.id_name(first)
    d.turn(t, scan=True)
    got = len(tasks(d, first))
    assert 1 < got <= SLICE + 1, "the first task with the request, then one slice"
    assert req.exists() and first in d.intakes, "the request stays until the whole array is in"
    assert claims(d) <= slices.SLICE_MAX, "ids claimed a slice at a time"
    other = submit(d, t, uid=65534, ncpus=2)  # another user, while the array is taken in
    d.turn(t + 0.01, scan=True)
    assert state(d, other) == "RUNNING", "served in the very next turn"
    assert first in d.intakes
    added = turns_until(d, t + 0.02, lambda: first not in d.intakes)
    assert max(added) <= SLICE and len(added) >= 2, added
    d.settle(time.time(), force=True)
    assert not req.exists() and claims(d) == 0
    assert d.db.meta().get(arrays.META + str(first)) is None
    rows = tasks(d, first)
    assert {r["state"] for r in rows} == {"HELD"}
    assert other not in {r["id"] for r in rows}
    by_index = {r["spec"]["array_index"]: r["id"] for r in rows}
    assert len(by_index) == N and len(set(by_index.values())) == N
    assert by_index[0] == first and all(by_index[i] < by_index[i + 1] for i in range(N - 1))


def test_a_cancel_while_the_array_is_taken_in_stops_it_and_cancels_what_came_in(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    first = submit(d, t, array=f"0-{N - 1}")
    d.turn(t, scan=True)
    d.turn(t + 0.01, scan=True)
    request(d, "cancel", jobs=[], arrays=[first])
    came = len(tasks(d, first))
    assert came < N
    added = turns_until(d, t + 0.02, lambda: not d.sweeps)
    assert max(added) == 0, "no task is made after the cancel"
    rows = tasks(d, first)
    assert len(rows) == came and first not in d.intakes
    running = [r["id"] for r in rows if r["state"] == "RUNNING"]
    for jid in running:  # the stub's running tasks were signalled: they end now
        assert (jid, signal.SIGTERM) in d.ex.signals
        rec = d.table.jobs[jid]
        d.ex.end(jid, rec.segment, end=t + 1, signal=15)
        d.job_ended(jid)
    assert {state(d, r["id"]) for r in rows} == {"CANCELLED"}
    d.settle(time.time(), force=True)
    assert not (d.spool.incoming / rq.id_name(first)).exists()
    assert d.db.meta().get(arrays.META + str(first)) is None


def test_a_hold_while_the_array_is_taken_in_holds_the_tasks_still_to_come(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    first = submit(d, t, array=f"0-{N - 1}", ncpus=8)
    d.turn(t, scan=True)
    request(d, "hold", jobs=[], arrays=[first])
    turns_until(d, t + 0.01, lambda: first not in d.intakes and not d.sweeps)
    states = [r["state"] for r in tasks(d, first)]
    assert len(states) == N and states.count("RUNNING") == 1 and states.count("HELD") == N - 1


def restart(d: Daemon, crash: bool) -> Daemon:
    """The daemon stopped (``crash``: killed, what it had not committed lost) and started again on its spool."""
    if crash:
        d.db.conn.rollback()
        d.db.close()
        os.close(d.lock_fd)
        d.sel.close()
    else:
        d.close()
    d.close = lambda: None  # type: ignore[method-assign]  # the fixture's teardown: closed here already
    again = Daemon(d.spool, d.file_cfg, d.config_path, executor=Stub())
    again.lock()
    again.open()
    return again


@pytest.mark.parametrize("crash", [False, True])
def test_a_daemon_stopped_or_killed_while_an_array_is_taken_in_goes_on_at_its_next_start(stub_daemon, crash):
    d = stub_daemon(CONFIG)
    t = time.time()
    first = submit(d, t, array=f"0-{N - 1}", hold=True)
    d.turn(t, scan=True)
    d.turn(t + 0.01, scan=True)
    committed = len(tasks(d, first))
    if crash:  # a slice written, never committed
        d.table.begin()
        slices.advance(d)
        assert d.table.claims
    d2 = restart(d, crash)
    try:
        assert len(tasks(d2, first)) == committed
        assert (d2.spool.incoming / rq.id_name(first)).exists()
        turns_until(d2, t + 1, lambda: first not in d2.intakes)
        d2.settle(time.time(), force=True)
        check_whole(d2, first, N)
        assert not (d2.spool.incoming / rq.id_name(first)).exists() and claims(d2) == 0
        d2.turn(t + 2, scan=True)
        assert len(tasks(d2, first)) == N, "the request is not taken in again"
    finally:
        d2.close()


def test_an_array_over_a_limit_is_refused_whole_before_any_task_is_written(stub_daemon):
    d = stub_daemon(CONFIG + "[limits]\nmax_submit_jobs_per_user = 1500\n")
    t = time.time()
    big = submit(d, t, array=f"0-{N - 1}")
    small = submit(d, t, array="0-999", hold=True)
    d.turn(t, scan=True)
    assert tasks(d, big) == [] and not (d.spool.jobs / str(big)).exists()
    assert "max_submit_jobs_per_user" in d.db.id_record(big)["refused"]
    turns_until(d, t + 0.01, lambda: not d.intakes)
    assert len(tasks(d, small)) == 1000
    again = submit(d, t, array="0-999")  # 1000 + 1000 would be over the limit, counted as the first came in
    d.turn(t + 1, scan=True)
    assert tasks(d, again) == [] and d.db.id_record(again)["refused"]
    d.settle(time.time(), force=True)
    assert (d.spool.quarantine / rq.id_name(big)).exists()


def test_a_large_cancel_is_done_in_slices_and_no_task_it_will_end_starts_meanwhile(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    first = submit(d, t, array=f"0-{N - 1}", ncpus=8)
    turns_until(d, t, lambda: first not in d.intakes)
    assert state(d, first) == "RUNNING"
    request(d, "cancel", jobs=[], arrays=[first])
    d.turn(t + 1, scan=True)
    left = [r for r in tasks(d, first) if r["state"] != "CANCELLED"]
    assert N - SLICE - 1 <= len(left) < N, "one slice this turn"
    rec = d.table.jobs[first]
    d.ex.end(first, rec.segment, end=t + 1, signal=15)  # the running task goes: its cores are free
    d.job_ended(first)
    added = turns_until(d, t + 2, lambda: not d.sweeps)
    assert max(added) == 0
    assert {state(d, r["id"]) for r in tasks(d, first)} == {"CANCELLED"}
    assert len(d.ex.started) == 1, "no task the cancel was to end started"


def test_small_arrays_are_taken_in_whole_with_their_requests_within_a_turn_s_share(stub_daemon, monkeypatch):
    """Arrays of a few tasks show whole at once (all their tasks in the turn of the request); once a turn's
    share of such tasks is spent, the next small array begins with its first task alone and goes on a slice
    per turn."""
    monkeypatch.setattr(slices, "SLICE_MAX", 5)
    d = stub_daemon(CONFIG)
    t = time.time()
    small = [submit(d, t, array=f"0-{arrays.WHOLE_PER_TURN // 4 - 1}", hold=True) for _ in range(5)]
    d.turn(t, scan=True)
    sizes = [len(tasks(d, a)) for a in small]
    assert sizes[:4] == [arrays.WHOLE_PER_TURN // 4] * 4, sizes
    assert sizes[4] < arrays.WHOLE_PER_TURN // 4, "over the turn's share: begun, and a slice per turn"
    for k in range(1, 20):
        d.turn(t + k, scan=True)
    assert len(tasks(d, small[4])) == arrays.WHOLE_PER_TURN // 4


def test_an_arrays_tasks_share_one_spec_and_each_reads_as_its_own(stub_daemon):
    """The records of an array's tasks hold its one spec (a large array costs one), before and after a restart;
    each task's spec, as read and written back, is its own (id, index)."""
    d = stub_daemon(CONFIG)
    t = time.time()
    first = submit(d, t, array="0-9:3", hold=True)
    turns_until(d, t, lambda: first not in d.intakes)
    for k in range(2):
        again = d if k == 0 else restart(d, False)
        recs = [r for r in again.table.jobs.values() if r.array_id == first]
        assert len(recs) == 4 and len({id(r.spec) for r in recs}) == 1
        for r in recs:
            assert (r.job.id, r.job.array_index) == (r.id, r.array_index)
            assert r.job.stored()[0] == again.db.job(r.id)["spec"]
        assert sorted(r.array_index for r in recs) == [0, 3, 6, 9]
