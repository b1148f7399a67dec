"""ghold and grls against a real daemon: hold a pending job, refuse the wrong states, release it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.daemon

ONE_CORE = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
[machine]
cores = 1
[daemon]
autostart = false
"""


def test_hold_and_release(make_gs):
    gs = make_gs(ONE_CORE)
    blocker = gs.gsub("--wrap", "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")
    later = gs.gsub("--wrap", "echo ran")
    gs.wait_state(blocker, "RUNNING")

    r = gs.run("ghold", str(blocker), str(later), "999")
    assert r.returncode == 1
    assert r.stdout == f"job {later}: holding\n"
    assert r.stderr.splitlines() == [
        f"ghold: error: job {blocker}: is RUNNING, only pending jobs can be held",
        "ghold: error: job 999: no such job",
    ]
    gs.wait_state(later, "HELD")

    r = gs.run("grls", str(blocker))
    assert r.returncode == 1
    assert r.stderr == f"grls: error: job {blocker}: is RUNNING, only held jobs can be released\n"

    (gs.work / "go").touch()
    gs.wait_state(blocker, "COMPLETED")
    assert gs.job(later)["state"] == "HELD"  # the core is free, but a held job does not start

    r = gs.run("grls", str(later))
    assert r.returncode == 0 and r.stdout == f"job {later}: releasing\n"
    j = gs.wait_state(later, "COMPLETED")
    assert open(j["stdout"]).read() == "ran\n"


def test_submit_held_then_release(gs):
    jid = gs.gsub("--hold", "--wrap", "true")
    gs.wait_state(jid, "HELD")
    r = gs.run("ghold", str(jid))
    assert r.returncode == 1 and r.stderr == f"ghold: error: job {jid}: is HELD, only pending jobs can be held\n"
    assert gs.run("grls", str(jid)).returncode == 0
    gs.wait_state(jid, "COMPLETED")


def test_bad_ids_are_usage_errors(gs):
    r = gs.run("ghold", "x")
    assert (
        r.returncode == 2
        and r.stderr
        == "ghold: error: 'x': not a job id (a positive whole number, or ARRAYID_INDEX for an array task)\n"
    )
