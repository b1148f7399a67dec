"""The backfill order in a real daemon: the shipped configuration fills a hole shortest walltime first."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.daemon

CONFIG = """
[scheduler]
policy = "checkpoint-backfill"
{order}
[machine]
cores = 4
[jobs]
kill_grace = "1s"
[daemon]
autostart = false
"""


@pytest.mark.parametrize(
    "order, first", [("", "D"), ('backfill_order = "shortest"', "D"), ('backfill_order = "queue"', "C")]
)
def test_the_hole_goes_to_the_shortest_job_unless_the_queue_order_is_asked(make_gs, order, first):
    # 4 cores.  Submitted while the daemon is down, so that its first pass sees them all: A (2 cores,
    # 1 h) starts; B (4 cores) is the head, its reservation at A's end; C (2 cores, 50 min) and D
    # (2 cores, 10 min) both end before it, but the 2 free cores hold one.  Shortest first (the shipped
    # order, when the configuration does not say) D gets them; in queue order C does.
    gs = make_gs(CONFIG.format(order=order), start=False)
    a = gs.gsub("-N", "A", "-n", "2", "-t", "1h", "--wrap", "sleep 600")
    b = gs.gsub("-N", "B", "-n", "4", "-t", "10m", "--wrap", "sleep 600")
    c = gs.gsub("-N", "C", "-n", "2", "-t", "50m", "--wrap", "sleep 600")
    d = gs.gsub("-N", "D", "-n", "2", "-t", "10m", "--wrap", "sleep 600")
    gs.start()
    gs.wait_state(a, "RUNNING")
    started = {"C": c, "D": d}[first]
    other = {"C": d, "D": c}[first]
    gs.wait_state(started, "RUNNING")
    assert gs.job(other)["state"] == "PENDING"
    assert gs.job(b)["state"] == "PENDING"
