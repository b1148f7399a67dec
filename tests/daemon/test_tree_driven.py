"""Parent-child job trees in the daemon, in process (stub executor, driven clock): parents that fill the
machine without yielding, which trees may use the cores a parent yields (yield_affinity), a resume that waits
for the task on the core, the walltime of a parent that lends its cores or keeps them, the subtree of a parent
that fails (cancelled, or held until gresume-tree), and parents refused at submission.  gwait, gyield, gresume
and gsub run in process as they do inside a job (GS_JOBID and GS_SPOOL set), or their requests are written as
they write them.

Trees with real jobs calling gsub, gwait, gyield and gresume from inside are in test_tree.py.
"""

from __future__ import annotations

import os

import pytest

from gridsched.protocol.tree import TreeError, submit_keys
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


def test_a_parent_lending_all_its_cores_is_not_charged_walltime_for_that_time(stub_daemon, caplog):
    caplog.set_level("INFO", logger="gschedd")
    dr = Driven(stub_daemon(config()))
    p = dr.submit(None, ncpus=2, walltime=6)  # 6 s of walltime; its child works 8 s on its cores
    assert dr.running(p)
    kid = dr.submit(8, name="kid", parent=p, ncpus=2, walltime=60)
    assert dr.state(kid) == "PENDING"
    dr.request("yield", job=p, until=[kid])  # as gwait --yield
    assert dr.running(kid) and dr.job(kid)["cores"] == dr.job(p)["cores"]
    dr.run_until(lambda: dr.state(kid) != "RUNNING", 30)
    assert dr.state(kid) == "COMPLETED"
    dr.run_until(lambda: p not in dr.d.trees.yielded, 30)
    dr.run_to(dr.now - dr.t0 + 1)  # it goes on a second after gwait returns
    assert dr.running(p)  # past its 6 s: the time it lent its cores was not counted
    dr.finish(p)
    j = dr.job(p)
    assert j["state"] == "COMPLETED" and j["end_time"] - j["start_time"] > 8.0
    assert f"job {p} resumed on its cores" in caplog.text


def test_a_parent_that_keeps_its_cores_is_killed_at_its_walltime(stub_daemon, caplog):
    caplog.set_level("INFO", logger="gschedd")
    dr = Driven(stub_daemon(config()))
    p = dr.submit(None, walltime=6)  # waits for its child without yielding: its core stays its own
    kid = dr.submit(8, name="kid", parent=p, walltime=60)
    assert dr.running(kid)  # on the other core
    dr.run_until(lambda: dr.state(p) != "RUNNING", 30)
    j = dr.job(p)
    assert j["state"] == "TIMEOUT"
    assert j["end_time"] - j["start_time"] < 8.0
    dr.run_until(lambda: dr.state(kid) == "CANCELLED", 15)  # its subtree goes with it
    assert f"job {p} TIMEOUT: cancelling its subtree (1 jobs)" in caplog.text


def test_failed_parent_cancels_its_running_and_pending_subtree(stub_daemon):
    dr = Driven(stub_daemon(config()))
    p = dr.submit(None, walltime=120)
    k1 = dr.submit(None, name="long", parent=p, walltime=60)
    k2 = dr.submit(None, name="long", parent=p, walltime=60)
    assert dr.running(k1)  # on the second core
    assert dr.state(k2) == "PENDING"
    dr.run_to(0.5)
    dr.finish(p, exit_code=7)
    j = dr.job(p)
    assert (j["state"], j["exit_code"]) == ("FAILED", 7)
    dr.run_until(lambda: all(dr.state(k) == "CANCELLED" for k in (k1, k2)), 15)
    assert f"parent {p} ended FAILED" in dr.job(k1)["reason"] or dr.job(k1)["reason"] == "cancelled"
    assert dr.job(k2)["reason"] == f"parent {p} ended FAILED"


def test_recoverable_parent_keeps_its_subtree_held_until_gresume_tree(stub_daemon):
    dr = Driven(stub_daemon(config()))
    p = dr.submit(None, walltime=120, recoverable=True)
    k1 = dr.submit(None, name="kid", parent=p, walltime=60)
    k2 = dr.submit(0.2, name="kid", parent=p, walltime=60)
    assert dr.running(k1) and dr.state(k2) == "PENDING"
    dr.finish(p, exit_code=7)
    assert dr.state(p) == "FAILED"
    dr.run_until(lambda: dr.state(k2) == "HELD", 15)
    assert dr.job(k2)["reason"].startswith(f"parent {p} ended FAILED")
    assert dr.running(k1)  # a running child goes on
    r = dr.command("gresume-tree", str(p))
    assert f"job {k2}: releasing" in r.stdout
    dr.run_until(lambda: dr.state(k2) == "COMPLETED", 15)
    dr.request("cancel", jobs=[k1])
    dr.run_until(lambda: dr.state(k1) == "CANCELLED", 15)


def test_resume_waits_for_the_task_on_the_core_and_the_parent_keeps_its_cores(stub_daemon):
    dr = Driven(stub_daemon(config()))
    p = dr.submit(None, walltime=120)
    blocker = dr.submit(None, walltime=120)  # the other core is taken
    assert dr.running(p) and dr.running(blocker)
    cores = dr.job(p)["cores"]
    dr.run_to(0.5)
    kid = dr.submit(None, name="kid", parent=p, walltime=60)
    assert dr.state(kid) == "PENDING"
    assert dr.command("gyield", env=inside(dr, p)).exit_code == 0
    assert dr.running(kid) and dr.job(kid)["cores"] == cores  # the child backfills the yielded core
    dr.request("resume", job=p)  # as gresume
    assert dr.d.trees.yielded[p].resuming
    dr.run_to(3)  # the child still runs there: the parent is not resumed
    assert p in dr.d.trees.yielded and dr.running(kid)
    dr.finish(kid)
    assert p not in dr.d.trees.yielded  # resumed once the child has ended
    resumed = dr.now
    assert resumed >= dr.job(kid)["end_time"]
    assert dr.running(p) and dr.job(p)["cores"] == cores
    assert [s.job_id for s in dr.d.ex.started].count(p) == 1  # it kept its process and its cores
    dr.finish(p)
    dr.request("cancel", jobs=[blocker])


def inside(dr: Driven, jid: int) -> dict[str, str]:
    """The variables a command run inside job ``jid`` sees."""
    return {"GS_JOBID": str(jid), "GS_SPOOL": str(dr.d.spool.root)}


def test_bad_input(stub_daemon):
    dr = Driven(stub_daemon(config()))
    for cmd in ("gwait", "gyield", "gresume"):
        r = dr.command(cmd, check=False, env={"GS_JOBID": "", "GS_SPOOL": ""})
        assert r.exit_code == 1 and r.stderr.count("\n") == 1
        assert r.stderr.startswith(f"{cmd}: error: not inside a job"), r.stderr
    done = dr.gsub("-t", "1m", "--wrap", "true")
    assert dr.state(done) == "COMPLETED"
    r = dr.command("gsub", "--parent", str(done), "--wrap", "true", check=False)
    assert (
        r.exit_code == 1
        and r.stderr == f"gsub: error: parent {done}: already COMPLETED, only a running job can be a parent\n"
    )
    r = dr.command("gsub", "--parent", "999", "--wrap", "true", check=False)
    assert r.exit_code == 1 and "parent 999: no such job" in r.stderr
    r = dr.command("gsub", "--parent", str(done), "--no-parent", "--wrap", "true", check=False)
    assert r.exit_code == 2 and "exclude each other" in r.stderr
    # a child asking for more cores than its root has: refused at submit, from inside the job
    p = dr.gsub("-n", "1", "-t", "1m", "--wrap", "gsub -n 2 --wrap true", work=None)
    r = dr.command("gsub", "-n", "2", "--wrap", "true", check=False, env=inside(dr, p))
    assert r.exit_code == 1
    assert r.stderr == f"gsub: error: job can never run: it asks for 2 cores, its tree (root job {p}) has 1\n"
    dr.finish(p)


def test_another_users_parent_is_refused(stub_daemon):
    dr = Driven(stub_daemon(config()))
    p = dr.submit(None, walltime=60)
    assert dr.running(p)
    spool = dr.d.spool
    assert submit_keys(spool, 1, os.getuid(), parent=p) == {"parent": p}
    with pytest.raises(TreeError, match=f"parent {p}: owned by .*, not you"):
        submit_keys(spool, 1, os.getuid() + 1, parent=p)
    # the daemon checks again: a hand-written request naming a job that does not exist fails with the reason
    jid = dr.submit(0, parent=10_000)  # written by hand: gsub would refuse it
    j = dr.job(jid)
    assert (j["state"], j["reason"]) == ("FAILED", "parent 10000: no such job")
    dr.finish(p)
