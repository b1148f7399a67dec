"""An array is one record until its tasks start, in process (the stub executor): taken in whole in one turn
whatever its size, its tasks made a few at a time as the machine can start them, held, released and cancelled
in the record, every task made exactly once across restarts and crashes, and a submission refused whole."""

from __future__ import annotations

import json
import os
import time

import pytest

from gridsched.daemon import arrays, contexts, slices
from gridsched.daemon.loop import Daemon
from gridsched.daemon.spawn import Stub
from gridsched.protocol import requests as rq
from gridsched.protocol.arrays import Indices, task_path
from gridsched.protocol.jobs import JobState
from tests.fuzz.test_requests import valid_job

CORES = 8
CONFIG = f"""
[scheduler]
policy = "fcfs"
[machine]
cores = {CORES}
[daemon]
autostart = false
"""
BIG = 1_000_000


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


def rows(d: Daemon, aid: int) -> list[dict]:
    return d.db.by_spec("array_id", aid)


def rest_row(d: Daemon, aid: int) -> dict:
    (row,) = d.db.array_rests([aid])
    return row


def end_running(d: Daemon, now: float) -> int:
    """Let every running job of the stub executor end well; how many did."""
    n = 0
    for rec in list(d.table.jobs.values()):
        if rec.state.value == "RUNNING":
            assert isinstance(d.ex, Stub)
            d.ex.end(rec.id, rec.segment, exit_code=0, end=now)
            d.job_ended(rec.id)
            n += 1
    return n


def accounted(d: Daemon, aid: int, total: int) -> dict[str, int]:
    """Every index of the array exactly once: as a job row or in the record; the count of each state (the
    record's parts counted as the runs they are, not index by index)."""
    seen: dict[int, str] = {}
    for r in rows(d, aid):
        i = r["spec"]["array_index"]
        assert i not in seen, f"task {aid}_{i} made twice"
        seen[i] = r["state"]
    out: dict[str, int] = {}
    for s in seen.values():
        out[s] = out.get(s, 0) + 1
    every = Indices.of(seen)
    for row in d.db.array_rests([aid]):
        for col in ("pending", "held", "cancelled"):
            part = Indices.from_text(row[col])
            if not part:
                continue
            assert not part.only(every), f"tasks of {aid} both made or elsewhere in the record and in {col}"
            every = every.union(part)
            out[f"rest-{col}"] = len(part)
    assert every == Indices((range(total),)), "each index once"
    return out


def test_a_million_task_array_is_taken_in_whole_in_one_turn_and_only_what_can_start_is_made(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array=f"0-{BIG - 1}")
    d.turn(t, scan=True)
    d.settle(time.time(), force=True)
    assert not (d.spool.incoming / rq.id_name(aid)).exists(), "the request is served whole"
    counts = accounted(d, aid, BIG)
    made = len(rows(d, aid))
    assert CORES <= made <= CORES + arrays.window(d.rests[aid], CORES), made
    assert counts["RUNNING"] == CORES and counts["rest-pending"] == BIG - made
    assert d.db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == made
    # as tasks end, the next are made and started, in index order
    for k in range(1, 4):
        assert end_running(d, t + k) == CORES
        d.turn(t + k, scan=True)
    got = sorted(r["spec"]["array_index"] for r in rows(d, aid) if r["state"] in ("COMPLETED", "RUNNING"))
    assert got == list(range(4 * CORES))
    assert accounted(d, aid, BIG)["COMPLETED"] == 3 * CORES


def test_tasks_made_later_keep_their_array_s_place_before_jobs_submitted_after_it(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-99", ncpus=CORES)
    later = submit(d, t + 1, ncpus=1)
    d.turn(t + 2, scan=True)
    for k in range(3):  # FCFS: the array's tasks start one after another, the later job waits behind them all
        assert d.table.jobs[later].state.value == "PENDING"
        end_running(d, t + 3 + k)
        d.turn(t + 3 + k, scan=True)
    done = [r for r in rows(d, aid) if r["state"] == "COMPLETED"]
    assert sorted(r["spec"]["array_index"] for r in done) == [0, 1, 2]
    assert max(r["id"] for r in rows(d, aid)) > later, "tasks made after the later job have newer ids"


def test_hold_release_and_cancel_of_a_whole_array_change_the_record_at_once(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array=f"0-{BIG - 1}")
    d.turn(t, scan=True)
    request(d, "hold", jobs=[], arrays=[aid])
    d.turn(t + 1, scan=True)
    counts = accounted(d, aid, BIG)
    assert counts["RUNNING"] == CORES and counts.get("PENDING", 0) == 0
    assert counts["HELD"] + counts["rest-held"] == BIG - CORES and "held by its owner" in rest_row(d, aid)["reason"]
    end_running(d, t + 2)
    d.turn(t + 2, scan=True)
    assert not any(r.state.value == "RUNNING" for r in d.table.jobs.values()), "nothing held starts"
    request(d, "release", jobs=[], arrays=[aid])
    d.turn(t + 3, scan=True)
    d.turn(t + 3.1, scan=True)
    counts = accounted(d, aid, BIG)
    assert counts["RUNNING"] == CORES and counts.get("rest-held", 0) == 0 and counts.get("HELD", 0) == 0
    request(d, "cancel", jobs=[], arrays=[aid])
    for k in range(3):
        d.turn(t + 4 + k, scan=True)
    counts = accounted(d, aid, BIG)
    assert counts.get("PENDING", 0) == counts.get("rest-pending", 0) == 0
    assert counts["rest-cancelled"] + counts.get("CANCELLED", 0) + counts["COMPLETED"] + counts.get("RUNNING", 0) == BIG
    assert aid not in d.rests
    assert all(s.value != "PENDING" for s in (r.state for r in d.table.jobs.values()))


def test_tasks_named_by_index_are_acted_on_in_the_record(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-999")
    d.turn(t, scan=True)
    request(d, "cancel", jobs=[], tasks=[[aid, "500-599"]])
    request(d, "hold", jobs=[], tasks=[[aid, "700,702"]])
    d.turn(t + 1, scan=True)
    row = rest_row(d, aid)
    assert row["cancelled"] == "500-599" and row["held"] == "700,702"
    request(d, "release", jobs=[], tasks=[[aid, "702"]])
    d.turn(t + 2, scan=True)
    assert rest_row(d, aid)["held"] == "700"
    counts = accounted(d, aid, 1000)
    assert counts["rest-cancelled"] == 100 and counts["rest-held"] == 1


def test_a_task_named_for_a_change_is_made_and_changed_alone(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-999", hold=True)
    d.turn(t, scan=True)
    request(d, "alter", jobs=[], tasks=[[aid, "900"]], changes={"name": "odd"})
    request(d, "alter", jobs=[], arrays=[aid], changes={"walltime": 77})
    d.turn(t + 1, scan=True)
    (made,) = [r for r in rows(d, aid) if r["spec"]["array_index"] == 900]
    assert made["name"] == "odd" and made["state"] == "HELD" and made["walltime"] == 77
    assert rest_row(d, aid)["walltime"] == 77 and d.rests[aid].job.walltime == 77
    request(d, "release", jobs=[], arrays=[aid])
    d.turn(t + 2, scan=True)
    d.turn(t + 2.1, scan=True)
    assert {r["walltime"] for r in rows(d, aid)} == {77}, "tasks made later take the change"
    accounted(d, aid, 1000)


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
def test_every_task_exists_once_after_a_stop_or_a_kill(stub_daemon, crash):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array=f"0-{BIG - 1}")
    d.turn(t, scan=True)
    d.settle(time.time(), force=True)
    request(d, "cancel", jobs=[], tasks=[[aid, "10-19"]])
    if crash:  # the cancel served and tasks made, never committed
        d.ingest()
        d.table.begin()
        end_running(d, t + 1)
        d.timers(t + 1)
    d2 = restart(d, crash)
    try:
        for k in range(3):
            d2.turn(t + 2 + k, scan=True)
        counts = accounted(d2, aid, BIG)
        assert counts["rest-cancelled"] == 10
        assert aid in d2.rests and len(d2.rests[aid].pending) == counts["rest-pending"]
    finally:
        d2.close()


def test_an_array_an_earlier_release_was_taking_in_goes_on_as_a_record(stub_daemon):
    """The progress an earlier release kept (meta ``intake-ID``, its request still in incoming/) is read: the
    tasks it made stay, the others become the array's record."""
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-99", hold=True)
    req = d.spool.incoming / rq.id_name(aid)
    text = req.read_text()
    d.turn(t, scan=True)
    # as the earlier release left it: tasks 0-29 made, the rest to come
    d.table.begin()
    d.db.conn.execute("DELETE FROM arrays")
    d.db.conn.execute("DELETE FROM jobs WHERE id != ?", (aid,))
    ids = d.new_ids(29)
    base = d.table.spec(aid)
    for k, tid in enumerate(ids, start=1):
        d.take_in(
            base._replace(id=tid, array_index=k, stdout=task_path("/tmp/o-%j-%a", tid, k)),
            "me",
            JobState.HELD,
            "held",
            {"script": "#!/bin/sh\n"},
        )
    d.db.set_meta(
        arrays.OLD_INTAKE + str(aid),
        json.dumps({"name": req.name, "done": 30, "link": aid, "last": ids[-1], "state": "HELD", "reason": "held"}),
    )
    d.table.commit()
    req.write_text(text)
    d2 = restart(d, False)
    try:
        d2.turn(t + 1, scan=True)
        counts = accounted(d2, aid, 100)
        assert counts["HELD"] == 30 and counts["rest-held"] == 70
        assert arrays.OLD_INTAKE + str(aid) not in d2.db.meta()
    finally:
        d2.close()


def test_an_array_over_a_limit_is_refused_whole(stub_daemon):
    d = stub_daemon(CONFIG + "[limits]\nmax_submit_jobs_per_user = 1500\n")
    t = time.time()
    ok = submit(d, t, array="0-999")
    over = submit(d, t, array="0-999")
    d.turn(t, scan=True)
    accounted(d, ok, 1000)
    assert rows(d, over) == [] and d.db.array_rests([over]) == []
    assert "1500" in d.db.id_record(over)["refused"]


def test_tasks_made_share_one_spec_and_each_reads_as_its_own(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-9:3", hold=True)
    d.turn(t, scan=True)
    request(d, "alter", jobs=[], tasks=[[aid, "0-9:3"]], changes={"nice": 5})
    d.turn(t + 1, scan=True)
    for k in range(2):
        again = d if k == 0 else restart(d, False)
        recs = [r for r in again.table.jobs.values() if r.array_id == aid]
        assert sorted(r.array_index for r in recs) == [0, 3, 6, 9]
        for r in recs:
            assert (r.job.id, r.job.array_index) == (r.id, r.array_index)
            assert r.job.stored()[0] == again.db.job(r.id)["spec"]
            assert r.job.stdout == "" or "%" not in r.job.stdout
        d = again


def test_a_window_larger_than_a_turn_s_slice_is_made_over_the_next_turns_at_once(stub_daemon, monkeypatch):
    from gridsched.daemon import slices

    monkeypatch.setattr(slices, "SLICE_MAX", 5)
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-999", hold=True)
    d.turn(t, scan=True)
    request(d, "release", jobs=[], arrays=[aid])
    d.turn(t + 1, scan=True)
    assert d.more_tasks and slices.pending(d.sweeps, d.more_tasks), "the loop comes back at once"
    assert d.next_timeout() == 0.0
    for k in range(10):
        if not d.more_tasks:
            break
        d.turn(t + 1 + k * 0.01)
    assert not d.more_tasks
    made = [r for r in d.table.jobs.values() if r.array_id == aid]
    running = sum(r.state.value == "RUNNING" for r in made)
    assert running == CORES and len(made) - running == arrays.window(d.rests[aid], CORES)


# -- the commands, on tasks not started yet (in process, against the stub daemon) -------------------------------
def test_commands_show_and_act_on_tasks_not_started_yet(stub_daemon):
    from tests.daemon.driven import Driven

    g = Driven(stub_daemon(CONFIG))
    g.default_work = None  # its tasks run until stopped
    aid = g.gsub("--array", "0-99999", "--wrap", "true", work=None)
    d = g.d
    out = g.command("gstat").stdout
    assert f"{aid}_[0-99999]" in out and f"{100000 - CORES} pending" in out and f"{CORES} running" in out, out
    recs = json.loads(g.command("gstat", "--json", turn=False).stdout)["jobs"]
    rest = [r for r in recs if r.get("array_tasks")]
    made = [r for r in recs if r["array_index"] is not None]
    assert len(rest) == 1 and rest[0]["state"] == "PENDING" and rest[0]["array_id"] == aid
    assert rest[0]["tasks"] + len(made) == 100000 and len(Indices.from_text(rest[0]["array_tasks"])) == rest[0]["tasks"]
    r = g.command("gdel", f"{aid}_[500-599]")
    assert f"job {aid}_[500-599]: cancelling" in r.stdout, r.stdout
    g.command("ghold", f"{aid}_700")
    assert rest_row(d, aid)["cancelled"] == "500-599" and rest_row(d, aid)["held"] == "700"
    tasks = g.command("gstat", "-t").stdout
    assert f"{aid}_[700]" in tasks and "1 tasks not started yet" in tasks, tasks
    r = g.command("gdel", f"{aid}_700", check=False)
    assert r.exit_code == 0 and rest_row(d, aid)["held"] == "" and "500-599,700" == rest_row(d, aid)["cancelled"]
    r = g.command("galter", "-N", "renamed", f"{aid}_[900-901]")
    made = {x["spec"]["array_index"]: x for x in rows(d, aid)}
    assert made[900]["name"] == made[901]["name"] == "renamed"
    r = g.command("galter", "-N", "x", f"{aid}_[1000-9999]", check=False)
    assert r.exit_code == 1 and "more than 1000 tasks not started yet" in r.stderr, r.stderr
    r = g.command("gstat", "-f", f"{aid}_5000", check=False)
    assert r.exit_code == 1 and "pending, not started yet" in r.stderr, r.stderr
    g.command("gdel", str(aid))
    counts = accounted(d, aid, 100000)
    assert counts.get("rest-pending", 0) == 0 and counts["rest-cancelled"] == 100000 - len(rows(d, aid))


@pytest.mark.parametrize(
    "tasks, why",
    [
        ("x", "must be a list"),
        ([[1, "0-9"], [1, "20"]], "array 1 is named twice"),
        ([[1, 5]], "pairs"),
        ([[0, "1"]], "job ids"),
        ([[1, "0-9%2"]], "not a range of indices"),
        ([[1, "0-4000000,1-4000000"]], "overlap"),
        ([[1, "0-999999:3"]], "too scattered"),
        ([[k, "1"] for k in range(1, 100_002)], "too scattered"),
    ],
)
def test_array_tasks_named_in_a_request_are_checked_at_the_boundary(tasks, why):
    sender = rq.Sender(1000, "u", frozenset(), False)
    with pytest.raises(rq.Refused) as e:
        rq.parse({"type": "cancel", "jobs": [], "tasks": tasks}, "cancel-1-1.json", sender)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_a_record_cut_too_fine_is_refused_and_left_as_it_was(stub_daemon, monkeypatch):
    monkeypatch.setattr(arrays, "MAX_RUNS", 10)
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-999", hold=True)
    d.turn(t, scan=True)
    request(d, "release", jobs=[], tasks=[[aid, "100-140:2"]])
    d.turn(t + 1, scan=True)
    assert rest_row(d, aid)["pending"] == "" and rest_row(d, aid)["held"] == "1-999"
    request(d, "release", jobs=[], tasks=[[aid, "100-102:2"]])
    d.turn(t + 2, scan=True)
    assert rest_row(d, aid)["held"] == "1-99,101,103-999"


def test_another_user_cannot_act_on_an_array_or_its_tasks_not_made_yet(stub_daemon):
    """Requests written by another user (the file's owner is who the daemon believes) naming the array whole
    and its tasks by index change nothing of its record or its tasks."""
    if os.geteuid() != 0:
        pytest.skip("writing a request file owned by another user needs root")
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-999", hold=True)
    d.turn(t, scan=True)
    before = rest_row(d, aid)
    for kind in ("cancel", "release", "hold"):
        for fields in ({"arrays": [aid]}, {"tasks": [[aid, "0-999"]]}):
            p = d.spool.incoming / f"{kind}-{time.time_ns()}-1.json"
            p.write_text(json.dumps({"type": kind, "jobs": [], **fields}))
            os.chown(p, 65534, 65534)
    p = d.spool.incoming / f"alter-{time.time_ns()}-1.json"
    p.write_text(json.dumps({"type": "alter", "jobs": [], "tasks": [[aid, "5"]], "changes": {"name": "x"}}))
    os.chown(p, 65534, 65534)
    d.turn(t + 1, scan=True)
    after = rest_row(d, aid)
    assert (after["pending"], after["held"], after["cancelled"]) == (before["pending"], before["held"], "")
    assert [r["state"] for r in rows(d, aid)] == ["HELD"] and len(rows(d, aid)) == 1, "no task made for them"


def end_all(d: Daemon, now: float, code: int = 0, which: set[int] | None = None) -> None:
    """End every running job (of ``which``, if given) with ``code``, then a turn."""
    for rec in list(d.table.jobs.values()):
        if rec.state.value == "RUNNING" and (which is None or rec.array_index in which):
            d.ex.end(rec.id, rec.segment, exit_code=code, end=now)  # type: ignore[attr-defined]
            d.job_ended(rec.id)
    d.turn(now, scan=True)


def state(d: Daemon, jid: int) -> str:
    rec = d.table.jobs.get(jid)
    return rec.state.value if rec is not None else d.db.job(jid)["state"]


def test_a_dependency_on_an_array_s_id_waits_for_every_task_as_slurm_s_does(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array=f"0-{3 * CORES - 1}")  # three rounds of the machine, most tasks not made yet
    d.turn(t, scan=True)
    ok = submit(d, t + 1, depend=f"afterok:{aid}")
    any_ = submit(d, t + 1, depend=f"afterany:{aid}")
    after = submit(d, t + 1, depend=f"after:{aid}")
    d.turn(t + 1, scan=True)
    assert state(d, aid) == "RUNNING", "the array's own first task runs"
    for k in range(2):  # the first task's end, and then most of the array's, start none of them
        end_all(d, t + 2 + k)
        assert {state(d, j) for j in (ok, any_, after)} == {"PENDING"}, k
        assert "dependency" in d.table.jobs[ok].reason
    assert state(d, aid) == "COMPLETED"
    d.turn(t + 4, scan=True)
    # the last round has started: nothing of the array waits, so after: may start (the machine is full)
    assert not d.rests.get(aid) or not d.rests[aid].live
    end_all(d, t + 5)
    assert {state(d, j) for j in (ok, any_, after)} == {"RUNNING"}, "every task completed"


def test_one_failed_task_makes_afterok_of_the_array_never_and_afternotok_run(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-3")
    d.turn(t, scan=True)
    ok = submit(d, t + 1, depend=f"afterok:{aid}")
    notok = submit(d, t + 1, depend=f"afternotok:{aid}")
    d.turn(t + 1, scan=True)
    end_all(d, t + 2, code=0, which={0, 1, 3})
    assert state(d, notok) == "PENDING" and state(d, ok) == "PENDING", "task 2 still runs"
    end_all(d, t + 3, code=1)
    d.turn(t + 4, scan=True)
    assert state(d, notok) == "RUNNING"
    assert state(d, ok) == "PENDING" and "never" in d.table.jobs[ok].reason
    assert "FAILED" in d.table.jobs[ok].reason


def test_tasks_cancelled_before_they_were_made_count_for_a_dependency_on_the_array(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array=f"0-{BIG - 1}")
    d.turn(t, scan=True)
    ok = submit(d, t + 1, depend=f"afterok:{aid}")
    any_ = submit(d, t + 1, depend=f"afterany:{aid}")
    request(d, "cancel", jobs=[], tasks=[[aid, f"{CORES}-{BIG - 1}"]])  # all but the running ones
    d.turn(t + 1, scan=True)
    assert state(d, any_) == "PENDING", "the running tasks have not ended"
    end_all(d, t + 2)
    d.turn(t + 3, scan=True)
    assert state(d, any_) == "RUNNING"
    assert state(d, ok) == "PENDING" and "CANCELLED" in d.table.jobs[ok].reason


def test_the_state_of_an_ended_array_is_read_again_after_a_restart(stub_daemon):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-3")
    d.turn(t, scan=True)
    end_all(d, t + 1, code=0, which={0, 1, 2})
    end_all(d, t + 2, code=3)
    d.settle(time.time(), force=True)
    d = restart(d, crash=False)
    ok = submit(d, t + 3, depend=f"afterok:{aid}")
    notok = submit(d, t + 3, depend=f"afternotok:{aid}")
    d.turn(t + 3, scan=True)
    assert state(d, notok) == "RUNNING" and state(d, ok) == "PENDING"
    assert d.arrays_ended == {aid: "FAILED"}
    # a finished task requeued makes the array live again: the remembered state is dropped
    (failed,) = [r["id"] for r in rows(d, aid) if r["state"] == "FAILED"]
    request(d, "requeue", jobs=[failed])
    d.turn(t + 4, scan=True)
    d.turn(t + 4.1, scan=True)
    assert aid not in d.arrays_ended
    end_all(d, t + 5)
    d.turn(t + 6, scan=True)
    assert state(d, ok) == "RUNNING", "every task has now completed"
    d.close()


def test_gacct_shows_the_tasks_cancelled_before_they_started_as_one_record(stub_daemon, monkeypatch):
    from click.testing import CliRunner

    from gridsched.cli import gacct

    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array=f"0-{BIG - 1}")
    d.turn(t, scan=True)
    request(d, "cancel", jobs=[], tasks=[[aid, f"100-{BIG - 1}"]])
    d.turn(t + 5, scan=True)
    end_all(d, t + 6)
    d.settle(time.time(), force=True)
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(d.spool.root))
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(d.config_path))

    def gacct_(*args: str) -> str:
        r = CliRunner().invoke(gacct.cli, list(args), catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r.output

    got = {j["jobid"]: j for j in json.loads(gacct_("--json"))["jobs"]}
    whole = f"{aid}_[100-{BIG - 1}]"
    assert got[whole]["state"] == "CANCELLED" and got[whole]["tasks"] == BIG - 100
    assert got[whole]["start_time"] is None and got[whole]["end_time"] == pytest.approx(t + 5)
    assert sorted(k for k in got if k != whole) == sorted(f"{aid}_{i}" for i in range(CORES)), "the tasks that ran"
    lines = gacct_("-j", f"{aid}_[7-200]", "-n").splitlines()
    assert [ln.split()[0] for ln in lines] == [whole, f"{aid}_7"], "by id: the record has the array's"
    assert gacct_("-s", "CD", "-n").count(whole) == 0
    assert [ln.split()[0] for ln in gacct_("-s", "CA", "-n").splitlines()] == [whole]
    trace = [ln for ln in gacct_("--swf").splitlines() if not ln.startswith(";")]
    assert len(trace) == CORES, "a trace has the jobs that ran"


@pytest.mark.parametrize("kill_at", ["before the commit", "after the commit, the request not yet let go"])
@pytest.mark.parametrize("what", ["submit", "release", "cancel"])
def test_a_kill_in_the_middle_of_taking_in_releasing_or_cancelling_a_million_tasks(stub_daemon, what, kill_at):
    """The daemon killed while it serves a request on a whole array of a million tasks (the request read, the
    record changed, its tasks made, before or after its transaction commits, before the request file is let
    go): after a restart, each task exists exactly once, in the state the request gives it."""
    d = stub_daemon(CONFIG)
    t = time.time()
    if what == "submit":
        aid = submit(d, t, array=f"0-{BIG - 1}", hold=True)
    else:
        aid = submit(d, t, array=f"0-{BIG - 1}", hold=what == "release")
        d.turn(t, scan=True)
        d.settle(time.time(), force=True)
        request(d, what, jobs=[], arrays=[aid])
    d.ingest(settle=False)
    slices.advance(contexts.for_slices(d))
    if kill_at != "before the commit":
        d.table.commit()
    d = restart(d, crash=True)
    try:
        for k in range(3):
            d.turn(t + 1 + k, scan=True)
        d.settle(time.time(), force=True)
        assert not list(d.spool.incoming.glob("*.json")), "every request served"
        counts = accounted(d, aid, BIG)
        if what == "submit":
            assert counts["HELD"] + counts["rest-held"] == BIG, counts
        elif what == "release":
            assert counts["RUNNING"] == CORES and counts.get("rest-held", 0) == 0 and counts.get("HELD", 0) == 0
        else:
            assert counts["rest-cancelled"] + counts.get("CANCELLED", 0) + counts.get("RUNNING", 0) == BIG, counts
            assert counts.get("rest-pending", 0) == counts.get("PENDING", 0) == 0, counts
    finally:
        d.close()


def test_an_arrays_table_written_before_it_kept_cancel_times_gets_the_column(tmp_path):
    import sqlite3

    from gridsched.protocol.state import StateDB

    path = tmp_path / "state.db"
    con = sqlite3.connect(path)
    con.execute(  # the table as the release before kept it
        "CREATE TABLE arrays (id INTEGER PRIMARY KEY, user TEXT NOT NULL, uid INTEGER NOT NULL, name TEXT NOT NULL,"
        " ncpus INTEGER NOT NULL, walltime INTEGER NOT NULL, submit_time REAL NOT NULL, total INTEGER NOT NULL,"
        " pending TEXT NOT NULL DEFAULT '', held TEXT NOT NULL DEFAULT '', cancelled TEXT NOT NULL DEFAULT '',"
        " reason TEXT NOT NULL DEFAULT '', spec TEXT NOT NULL)"
    )
    con.execute("INSERT INTO arrays VALUES (7, 'u', 1, 'n', 1, 60, 1.0, 10, '1-9', '', '', '', '{}')")
    con.commit()
    con.close()
    (row,) = StateDB(path).array_rests()  # a reader before the daemon added the column
    assert row["pending"] == "1-9" and row["cancel_time"] is None
    db = StateDB(path, write=True)
    (row,) = db.array_rests()
    assert row["pending"] == "1-9" and row["cancel_time"] is None
    db.close()
