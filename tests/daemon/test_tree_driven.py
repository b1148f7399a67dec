"""Parent-child job trees in the daemon, in process (stub executor, driven clock): parents that fill the
machine without yielding, and which trees may use the cores a parent yields (yield_affinity).

The same trees with real jobs calling gsub, gwait, gyield and gresume from inside are in test_tree.py.
"""

from __future__ import annotations

from tests.daemon.driven import Driven
from tests.daemon.test_tree import config


def test_two_parents_filling_the_machine_deadlock_without_yield(stub_daemon):
    dr = Driven(stub_daemon(config()))
    a, b = dr.submit(None, walltime=120), dr.submit(None, walltime=120)
    assert dr.running(a) and dr.running(b)
    dr.run_to(0.5)
    # both parents hold a core before any child is submitted; they wait for their children without yielding
    kids = [dr.submit(0.5, name="child", parent=p, walltime=60) for p in (a, a, b, b)]
    dr.run_to(5.5)  # the bound: for 5 s nothing may progress
    assert all(dr.state(k) == "PENDING" for k in kids), {k: dr.state(k) for k in kids}
    assert dr.state(a) == dr.state(b) == "RUNNING"
    # cancelling a parent cancels its subtree
    dr.request("cancel", jobs=[a, b])
    dr.run_until(lambda: all(dr.state(k) == "CANCELLED" for k in kids), 20)
    for k in kids:
        j = dr.job(k)
        assert j["reason"].startswith("parent ") and "CANCELLED" in j["reason"]
    assert not dr.job(kids[0])["segments"]  # never ran


def other_tree_case(dr: Driven) -> tuple[int, int, dict]:
    """A parent on core 0 with a held child yields (gyield) and holds; a job of another tree waits for core 0
    or 1."""
    parent = dr.submit(None, walltime=120)
    assert dr.running(parent)
    blocker = dr.submit(60, walltime=120)
    assert dr.running(blocker)
    dr.run_to(0.5)
    kid = dr.submit(None, name="kid", parent=parent, hold=True, walltime=60)
    name = dr.request("yield", job=parent)
    assert dr.refusal(name) is None and parent in dr.d.trees.yielded
    other = dr.submit(0.2, walltime=60)
    return parent, other, {"blocker": blocker, "kid": kid}


def test_descendant_affinity_keeps_other_trees_off_yielded_cores(stub_daemon):
    dr = Driven(stub_daemon(config("descendant")))
    parent, other, extra = other_tree_case(dr)
    dr.run_to(3.5)
    assert dr.state(other) == "PENDING"
    dr.request("resume", job=parent)
    assert parent not in dr.d.trees.yielded
    dr.finish(parent)
    assert dr.state(parent) == "COMPLETED"
    dr.request("cancel", jobs=[extra["blocker"], extra["kid"]])
    dr.run_until(lambda: dr.state(other) == "COMPLETED", 20)


def test_none_affinity_lets_another_tree_use_a_yielded_core(stub_daemon):
    dr = Driven(stub_daemon(config("none")))
    parent, other, extra = other_tree_case(dr)
    dr.run_until(lambda: dr.state(other) == "COMPLETED", 10)
    assert dr.job(other)["cores"] == dr.job(parent)["cores"]  # it ran on the parent's core
    dr.request("resume", job=parent)
    dr.run_until(lambda: parent not in dr.d.trees.yielded, 10)
    dr.finish(parent)
    assert dr.state(parent) == "COMPLETED"
    dr.request("cancel", jobs=[extra["blocker"], extra["kid"]])
