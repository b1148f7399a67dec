"""The backfill order in the daemon (in process: stub executor, driven clock): the shipped configuration fills
a hole shortest walltime first."""

from __future__ import annotations

import pytest

from tests.daemon.driven import Driven

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
def test_the_hole_goes_to_the_shortest_job_unless_the_queue_order_is_asked(stub_daemon, order, first):
    # 4 cores.  Submitted while the daemon is down, so that its first pass sees them all: A (2 cores,
    # 1 h) starts; B (4 cores) is the head, its reservation at A's end; C (2 cores, 50 min) and D
    # (2 cores, 10 min) both end before it, but the 2 free cores hold one.  Shortest first (the shipped
    # order, when the configuration does not say) D gets them; in queue order C does.
    dr = Driven(stub_daemon(CONFIG.format(order=order)))
    a = dr.submit(600, turn=False, name="A", ncpus=2, walltime=3600)
    b = dr.submit(600, turn=False, name="B", ncpus=4, walltime=600)
    c = dr.submit(600, turn=False, name="C", ncpus=2, walltime=3000)
    d = dr.submit(600, turn=False, name="D", ncpus=2, walltime=600)
    dr.turn()
    assert dr.running(a)
    started = {"C": c, "D": d}[first]
    other = {"C": d, "D": c}[first]
    dr.run_to(1)
    assert dr.running(started)
    assert dr.state(other) == "PENDING"
    assert dr.state(b) == "PENDING"
