"""Dependencies between jobs in the daemon, in process (stub executor, driven clock).

The Slurm and PBS variables a real job sees are tested in test_depend.py.
"""

from __future__ import annotations

import pytest

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(DEFAULT_CONFIG))


def reason(dr: Driven, jid: int) -> str:
    dr.d.forecast()
    return dr.job(jid)["reason"]


def test_afterok_and_afterany_wait_for_their_job(dr):
    # a runs until the test lets it end, so b is seen waiting for it
    a = dr.gsub("--wrap", "wait for go; echo a >> order", work=None)
    b = dr.gsub("-d", f"afterok:{a}", "--wrap", "echo b >> order", work=0.1)
    c = dr.gsub("-d", f"afterany:{b}", "--wrap", "echo c >> order", work=0.1)
    assert dr.running(a)
    assert str(a) in reason(dr, b)
    assert dr.state(b) == "PENDING" and dr.state(c) == "PENDING"
    dr.run_to(1)
    dr.finish(a)
    dr.run_until(lambda: dr.state(c) == "COMPLETED", 10)
    assert [s.job_id for s in dr.d.ex.started] == [a, b, c]
    assert dr.job(b)["start_time"] >= dr.job(a)["end_time"]
    assert dr.job(c)["start_time"] >= dr.job(b)["end_time"]


def test_a_dependency_that_can_never_be_met_stays_pending_with_the_reason(dr):
    a = dr.gsub("--wrap", "exit 0")
    b = dr.gsub("-d", f"afternotok:{a}", "--wrap", "touch never")
    dr.run_until(lambda: dr.state(a) == "COMPLETED", 5)
    dr.run_to(1)
    assert "never satisfied" in reason(dr, b)
    assert dr.state(b) == "PENDING"
    after = dr.gsub("--wrap", "true")  # it blocks nobody
    dr.run_until(lambda: dr.state(after) == "COMPLETED", 5)
    assert b not in [s.job_id for s in dr.d.ex.started]


def test_never_satisfied_is_cancelled_when_configured(stub_daemon):
    dr = Driven(stub_daemon(DEFAULT_CONFIG.replace("[jobs]", "[jobs]\ncancel_never_satisfied = true")))
    a = dr.gsub("--wrap", "exit 1", work=None)
    b = dr.gsub("-d", f"afterok:{a}", "--wrap", "touch never")
    dr.finish(a, exit_code=1)
    dr.run_until(lambda: dr.state(b) == "CANCELLED", 10)
    assert "never satisfied" in dr.job(b)["reason"]
    assert b not in [s.job_id for s in dr.d.ex.started]


def test_singleton_runs_one_at_a_time(dr):
    ids = [dr.gsub("-N", "one", "-d", "singleton", "--wrap", "sleep 0.5", work=0.5) for _ in range(3)]
    dr.run_until(lambda: all(dr.state(j) == "COMPLETED" for j in ids), 10)
    rows = sorted((dr.job(j) for j in ids), key=lambda r: r["start_time"])
    for before, after in zip(rows, rows[1:], strict=False):
        assert after["start_time"] >= before["end_time"]  # start, end, start, end, start, end
