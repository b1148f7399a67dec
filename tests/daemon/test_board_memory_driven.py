"""Memory per board in the plan: the head's reservation, its predicted start and the jobs backfilled before
it count each board's memory, in process (the stub executor, a driven clock).

A declared machine of two boards of 4 cores and 8 GiB each (tests/daemon/test_memory_driven.py's
``two_boards``): a job's memory is taken from the boards of its cores, in proportion to its cores on each.
"""

from __future__ import annotations

import pytest

from tests.daemon.driven import Driven
from tests.daemon.test_memory_driven import GIB, boards_of, two_boards


@pytest.mark.parametrize("policy", ["easy", "checkpoint-backfill", "conservative"])
def test_the_heads_predicted_start_waits_for_a_board_with_its_memory(stub_daemon, tmp_path, policy):
    """A (2 cores, 6 GiB, walltime 20) is packed on one board, B (2 cores, 6 GiB, walltime 40) on the other,
    C (2 cores, 4 GiB, walltime 10) takes a core and 2 GiB of each.  H (1 core, 3 GiB) fits in the machine's
    pool once C ends (4 GiB free then), but no board has 3 GiB free before A ends: H is predicted to start at
    A's end, and starts then."""
    dr = Driven(stub_daemon(two_boards(tmp_path, policy)))
    a = dr.submit(19, name="A", ncpus=2, walltime=20, mem=6 * GIB)
    b = dr.submit(39, name="B", ncpus=2, walltime=40, mem=6 * GIB)
    c = dr.submit(9, name="C", ncpus=2, walltime=10, mem=4 * GIB)
    assert dr.running(a) and dr.running(b) and dr.running(c)
    on_a = boards_of(dr, a)
    assert boards_of(dr, c) == {0, 1} and len(on_a) == 1 and on_a != boards_of(dr, b)
    h = dr.submit(5, name="H", ncpus=1, walltime=60, mem=3 * GIB)
    assert dr.state(h) == "PENDING"
    ja, jc = dr.job(a), dr.job(c)
    assert dr.job(h)["predicted_start"] == pytest.approx(ja["start_time"] + 20, abs=0.01), (
        f"C ends at {jc['start_time'] + 10 - dr.t0:.1f}, A at {ja['start_time'] + 20 - dr.t0:.1f}"
    )
    dr.run_until(lambda: dr.state(c) == "COMPLETED", 20)
    dr.run_to(dr.now - dr.t0 + 1)
    assert dr.state(h) == "PENDING", "C's memory came free on both boards, 2 GiB on each"
    dr.run_until(lambda: dr.state(h) != "PENDING", 30)
    assert dr.job(h)["start_time"] >= dr.job(a)["end_time"] - 0.01
    assert boards_of(dr, h) == on_a


@pytest.mark.parametrize("policy", ["easy", "checkpoint-backfill", "conservative"])
def test_a_job_is_not_backfilled_into_the_board_memory_the_head_needs(stub_daemon, tmp_path, policy):
    """A (2 cores, 6 GiB, walltime 10) is packed on one board, B (2 cores, 6 GiB, walltime 40) on the other.
    The head H (2 cores, 7 GiB) is reserved at A's end, on A's board, the only one that will have 7 GiB.  E
    (2 cores, 3 GiB, running past A's end) fits now, a core and 1.5 GiB on each board, and in the machine's
    pool beside H at A's end (16 - 6 - 3 = 7 GiB): but it would leave A's board 6.5 GiB then, too little for
    H, which would wait for E or B.  E is not started; H starts at A's end."""
    dr = Driven(stub_daemon(two_boards(tmp_path, policy)))
    a = dr.submit(9, name="A", ncpus=2, walltime=10, mem=6 * GIB)
    b = dr.submit(39, name="B", ncpus=2, walltime=40, mem=6 * GIB)
    on_a = boards_of(dr, a)
    assert dr.running(a) and dr.running(b) and len(on_a) == 1 and on_a != boards_of(dr, b)
    h = dr.submit(5, name="H", ncpus=2, walltime=60, mem=7 * GIB)
    e = dr.submit(30, name="E", ncpus=2, walltime=60, mem=3 * GIB)
    assert dr.state(h) == "PENDING"
    assert dr.state(e) == "PENDING", "E would take the memory H needs on A's board"
    assert dr.job(e)["reason"].startswith("Priority")
    dr.run_until(lambda: dr.state(h) != "PENDING", 20)
    assert dr.job(h)["start_time"] <= dr.job(a)["end_time"] + 1
    assert boards_of(dr, h) == on_a


def test_preemption_frees_the_board_memory_the_head_needs(stub_daemon, tmp_path):
    """checkpoint-backfill: E (2 cores, 3 GiB, checkpointable) is backfilled on its shortened estimate, a core
    and 1.5 GiB on each board.  When the head H's time comes (A's walltime end), the machine's pool and the
    cores would take H, but A's board has 6.5 GiB of the 7 H needs there: E is checkpointed, and H starts on
    time, not at E's end."""
    dr = Driven(stub_daemon(two_boards(tmp_path, "checkpoint-backfill")))
    a = dr.submit(11, name="A", ncpus=2, walltime=12, mem=6 * GIB)
    b = dr.submit(59, name="B", ncpus=2, walltime=60, mem=6 * GIB)
    on_a = boards_of(dr, a)
    assert dr.running(a) and dr.running(b) and len(on_a) == 1 and on_a != boards_of(dr, b)
    dr.run_to(0.2)
    h = dr.submit(2, name="H", ncpus=2, walltime=60, mem=7 * GIB)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="signal", mem=3 * GIB)
    assert dr.state(h) == "PENDING" and dr.running(e) and dr.job(e)["backfilled"]
    assert boards_of(dr, e) == {0, 1}
    dr.run_until(lambda: dr.state(h) in ("RUNNING", "COMPLETED"), 40)
    jh, ja = dr.job(h), dr.job(a)
    assert jh["start_time"] <= ja["start_time"] + 12 + 4, "H did not wait for E's end"
    assert boards_of(dr, h) == on_a
    assert dr.job(e)["preemptions"] == 1


def test_a_suspended_job_keeps_its_memory_on_its_boards(stub_daemon, tmp_path):
    """checkpoint-backfill: E (2 cores, 6 GiB, suspend mode) is backfilled on the board A leaves free and
    suspended for the head C (7 cores), keeping its 6 GiB on that board.  F (1 core, 4 GiB) fits in the
    machine's pool (10 GiB free) and the one free core is on E's board, where only 2 GiB are free: F waits.
    When C ends, E is continued on its own board (its memory never left it), and F runs on the other."""
    dr = Driven(stub_daemon(two_boards(tmp_path, "checkpoint-backfill")))
    a = dr.submit(11, name="A", ncpus=4, walltime=12)
    dr.run_to(0.2)
    c = dr.submit(2, name="C", ncpus=7, walltime=60)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="suspend", mem=6 * GIB)
    assert dr.running(a) and dr.state(c) == "PENDING" and dr.running(e)
    on_e = boards_of(dr, e)
    assert len(on_e) == 1 and on_e != boards_of(dr, a)
    dr.run_until(lambda: dr.state(c) == "RUNNING", 40)
    assert dr.state(e) == "SUSPENDED"
    free = set(range(8)) - set(dr.d.table.jobs[c].cores)
    assert {k // 4 for k in free} == on_e, "the free core is on E's board"
    f = dr.submit(2, name="F", ncpus=1, walltime=60, mem=4 * GIB)
    assert dr.state(f) == "PENDING", "E keeps 6 GiB of its board's 8"
    dr.run_to(dr.now - dr.t0 + 1)
    assert dr.state(f) == "PENDING" and dr.state(e) == "SUSPENDED"
    dr.run_until(lambda: dr.state(e) == "RUNNING", 40)
    assert dr.state(c) == "COMPLETED"
    assert boards_of(dr, e) == on_e, "continued where its memory lies"
    dr.run_until(lambda: dr.state(f) != "PENDING", 20)
    assert boards_of(dr, f) == {0, 1} - on_e


def test_an_active_reservation_holds_its_memory_on_its_boards(stub_daemon, tmp_path):
    """R (2 cores, 6 GiB) is activated on one board.  A (2 cores, 4 GiB) would be packed on the 2 cores left
    beside it, where 2 GiB of the board's 8 are outside R: it runs on the other board.  B (2 cores, 2 GiB)
    then fits beside R, and a job bound to R runs on R's memory."""
    dr = Driven(stub_daemon(two_boards(tmp_path)))
    rid = dr.resv_create(2, 600, resources={"mem": 6 * 1024})
    dr.run_to(0.5)
    assert dr.resv(rid)["state"] == "ACTIVE"
    on_r = {c // 4 for c in dr.d.book.resvs[rid].cores}
    assert len(on_r) == 1
    a = dr.submit(30, name="A", ncpus=2, walltime=60, mem=4 * GIB)
    assert dr.running(a) and boards_of(dr, a) == {0, 1} - on_r, "R's memory is not free to A"
    b = dr.submit(30, name="B", ncpus=2, walltime=60, mem=2 * GIB)
    assert dr.running(b) and boards_of(dr, b) == on_r
    inside = dr.submit(30, name="in", ncpus=2, walltime=60, mem=6 * GIB, reservation=rid)
    assert dr.running(inside) and boards_of(dr, inside) == on_r


def test_a_restarted_daemon_knows_where_a_suspended_job_keeps_its_memory(stub_daemon, tmp_path):
    """As above, the daemon restarted while E is suspended: it reads E's boards from E's record, and F still
    waits for memory on another board."""
    dr = Driven(stub_daemon(two_boards(tmp_path, "checkpoint-backfill")))
    a = dr.submit(11, name="A", ncpus=4, walltime=12)
    dr.run_to(0.2)
    c = dr.submit(2, name="C", ncpus=7, walltime=60)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="suspend", mem=6 * GIB)
    assert dr.running(a) and dr.running(e)
    on_e = boards_of(dr, e)
    dr.run_until(lambda: dr.state(c) == "RUNNING", 40)
    assert dr.state(e) == "SUSPENDED"
    f = dr.submit(2, name="F", ncpus=1, walltime=60, mem=4 * GIB, turn=False)  # taken in by the next daemon
    dr.restart(stub_daemon)
    assert dr.state(e) == "SUSPENDED" and dr.state(f) == "PENDING", "E keeps 6 GiB of its board's 8"
    dr.run_until(lambda: dr.state(e) == "RUNNING", 40)
    assert boards_of(dr, e) == on_e
