"""Jobs of a system daemon as their owner sees them: requeued, their leftovers, the modes of their files."""

from __future__ import annotations

import os
import stat
import time

import psutil

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, Targets, as_user, check_intact

REQUEUE = {"scheduler": {"policy": "checkpoint-backfill", "p": 0.25, "threshold": "5s"}, "machine": {"cores": 8}}


def test_requeue_and_restart_as_a_system_daemon(fresh):
    """A long requeue-mode job is backfilled ahead of a wide head job, preempted at the head's reservation
    (requeued), and must run again to its end; the daemon must not crash on the way."""
    system = fresh(REQUEUE)
    a = system.a
    targets = Targets(system.base, a).snapshot()
    j1 = system.gsub(a, "-n4", "-t10s", "--wrap", "sleep 8")
    j2 = system.gsub(a, "-n8", "-t10s", "--wrap", "sleep 1")
    # longer than what is left of j1, so j1's end (the head's start) preempts it; run again (GS_RESTART_COUNT),
    # it ends after a second: that it runs again to its end is the check, not how long
    again = 'if [ "$GS_RESTART_COUNT" -gt 0 ]; then sleep 1; else sleep 12; fi'
    j3 = system.gsub(a, "-n4", "-t24s", "--checkpoint", "requeue", "--wrap", again)
    system.wait_state(j3, "RUNNING", timeout=15)  # backfilled: it counts as 0.25 x 24 s = 6 s < ~9 s of j1 left
    for jid, timeout in ((j1, 30), (j2, 30)):
        row = system.wait_state(jid, *TERMINAL, timeout=timeout)
        assert system.alive(), system.why_dead()
        assert row["state"] == "COMPLETED", row
    r3 = system.job(j3)
    assert r3["preemptions"] >= 1 or r3["restarts"] >= 1, f"job {j3} was never requeued: {r3}"
    row = system.wait_state(j3, *TERMINAL, timeout=60)
    assert system.alive(), system.why_dead()
    assert row["state"] == "COMPLETED", f"the requeued job did not run again to its end: {row}"
    assert row["restarts"] >= 1, row
    check_intact(system, targets)


def test_background_child_of_a_finished_script_is_killed(system, targets):
    """The script exits while a child it put in the background lives on: the job ends COMPLETED within a few
    seconds and the leftover is killed."""
    a = system.a
    t0 = time.monotonic()
    jid = system.gsub(a, "-t30s", "--wrap", 'sh -c "sleep 1004; :" & sleep 1; exit 0')
    row = system.wait_state(jid, *TERMINAL, timeout=15)
    took = time.monotonic() - t0
    assert row["state"] == "COMPLETED", row
    assert took < 8, f"the job took {took:.1f} s to end (its script exits after 1 s)"

    def leftovers() -> list[int]:
        out = []
        for p in psutil.process_iter(["cmdline", "uids"]):
            try:
                if p.info["uids"].real == a.uid and "1004" in " ".join(p.info["cmdline"] or ()):
                    out.append(p.pid)
            except (psutil.Error, TypeError):
                pass
        return out

    try:
        wait_for(lambda: not leftovers(), 5, "the leftover 'sleep 1004' to be killed")
    finally:
        for pid in leftovers():
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    check_intact(system, targets)


def test_files_of_a_job_submitted_with_umask_077(system, targets):
    """A submits with umask 077: the job's output and a file it creates in its checkpoint directory are
    private to A (mode 0600 or stricter), and B cannot read them."""
    a, b = system.a, system.b
    jid = system.gsub(
        a, "-N", "private", "--wrap", 'echo secret-output; echo secret > "$GS_CHECKPOINT_DIR/state"', umask=0o077
    )
    row = system.wait_state(jid, *TERMINAL)
    assert row["state"] == "COMPLETED", row
    out = a.home / f"private.o{jid}"
    ckpt = system.spool_dir / "jobs" / str(jid) / "checkpoint" / "state"
    modes = {}
    for p in (out, ckpt):
        try:
            modes[str(p)] = oct(stat.S_IMODE(os.stat(p).st_mode))
        except OSError as e:
            modes[str(p)] = e.strerror
    print("modes:", modes)
    bad = []
    for p in (out, ckpt):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            continue  # a checkpoint directory removed at the end of the job: nothing left to read
        if st.st_mode & 0o077:
            bad.append(f"{p}: mode {oct(stat.S_IMODE(st.st_mode))} (umask 077 asks for no access by others)")
        r = as_user(b, lambda q=str(p): open(q).read())
        if "ok" in r:
            bad.append(f"{p}: B read it: {r['ok']!r}")
    assert not bad, "\n".join(bad)
    check_intact(system, targets)
