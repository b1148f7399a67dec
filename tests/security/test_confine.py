"""A job's processes and nothing else: signals after a restart, a cap on processes, and the job's cores.

- Root must not signal a process group by a number it remembered: after a
  restart the job's group number may name another user's group (the job's
  script ended and its number was reused).  Signals go to the job's cgroups
  and to the processes below its live shepherd, each checked through a pidfd.
- A fork bomb is held to ``jobs.max_processes`` by the job's pids cgroup.
- ``taskset`` inside a job cannot move it off its cores: its cpuset cgroup
  holds only them.
"""

from __future__ import annotations

import json
import os
import subprocess

import psutil
import pytest

from gridsched.daemon import confine, procs
from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, Targets, check_intact


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_STOPPED, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def _need(part: str) -> None:
    s = confine.setup()
    if getattr(s, part) is None:
        why = getattr(s, f"{part}_why")
        print(f"skipped: no {part} cgroup on this host: {why}")
        pytest.skip(f"no {part} cgroup on this host: {why}")


def _procs_of(uid: int, tag: str) -> list[int]:
    out = []
    for p in psutil.process_iter(["cmdline", "uids"]):
        try:
            if p.info["uids"].real == uid and tag in " ".join(p.info["cmdline"] or ()):
                out.append(p.pid)
        except (psutil.Error, TypeError):
            pass
    return out


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_a_restarted_daemon_does_not_signal_b_s_group_by_a_s_old_number(fresh):
    """A's job runs; the daemon restarts and adopts it, its pid file naming as the job's process group a group
    that is now B's (the number A's script had, reused).  A cancels the job: it ends CANCELLED, and B's group
    gets neither the SIGTERM nor the SIGKILL after the grace."""
    system = fresh()
    a, b = system.a, system.b
    targets = Targets(system.base, a).snapshot()
    jid = system.gsub(a, "-t", "5m", "--wrap", "sleep 3010")
    system.wait_state(jid, "RUNNING", timeout=30)
    pid_file = system.spool_dir / "jobs" / str(jid) / "seg-1.pid"

    def info() -> dict | None:
        try:
            got = json.loads(pid_file.read_text())
        except (OSError, ValueError):
            return None
        return got if procs.alive(got.get("job", 0), got.get("job_ticks")) else None

    recorded = wait_for(info, 15, "the job's pid file")
    bs = subprocess.Popen(
        ["sleep", "3011"], user=b.uid, group=b.gid, extra_groups=b.groups, start_new_session=True, cwd="/"
    )
    try:
        assert os.getpgid(bs.pid) == bs.pid
        system.stop()  # SIGTERM: the daemon goes, A's job goes on
        recorded["pgid"] = recorded["job"] = bs.pid
        tmp = pid_file.with_name(".seg-1.pid.tmp")
        tmp.write_text(json.dumps(recorded))
        os.replace(tmp, pid_file)
        system.start()
        wait_for(lambda: "1 running jobs adopted" in system.log(), 15, "A's job to be adopted")
        r = system.cmd(a, "gdel", str(jid))
        assert r.rc == 0, r
        row = system.wait_state(jid, *TERMINAL, timeout=30)
        assert row["state"] == "CANCELLED", row
        assert bs.poll() is None and _running(bs.pid), f"B's process group was signalled: {bs.poll()}"
        wait_for(lambda: not _procs_of(a.uid, "sleep 3010"), 10, "A's job's sleep to be gone")
    finally:
        bs.kill()
        bs.wait(10)
        _kill(_procs_of(a.uid, "sleep 3010"))
    check_intact(system, targets)


def test_a_fork_bomb_is_held_to_the_job_s_process_cap(fresh):
    """A job starts 3000 sleeps in a loop under jobs.max_processes = 50: it gets at most 50 processes in all
    (the fork fails beyond), runs on, and A's other jobs still run; cancelling it leaves nothing behind."""
    _need("pids")
    system = fresh({"jobs": {"max_processes": 50}})
    a = system.a
    targets = Targets(system.base, a).snapshot()
    bomb = (
        "sh -c 'i=0; while [ $i -lt 3000 ]; do sleep 3020 & i=$((i+1)); done' 2> bomb.err\n"
        "echo capped > bomb.done\n"
        "exec sleep 3021\n"
    )
    jid = system.gsub(a, "-t", "5m", "-N", "bomb", "--wrap", bomb)
    try:
        system.wait_state(jid, "RUNNING", timeout=30)
        done = a.home / "bomb.done"
        wait_for(lambda: done.exists(), 60, "the bomb's loop to stop")
        wait_for(lambda: _procs_of(a.uid, "sleep 3021"), 15, "the bomb's script to go on")
        sleeps = _procs_of(a.uid, "sleep 3020")
        assert 0 < len(sleeps) <= 50, f"{len(sleeps)} processes in a job capped at 50"
        assert "fork" in (a.home / "bomb.err").read_text().lower(), (a.home / "bomb.err").read_text()
        assert system.job(jid)["state"] == "RUNNING"
        check_intact(system, targets)  # A's probe job runs and completes beside the bomb
        r = system.cmd(a, "gdel", str(jid))
        assert r.rc == 0, r
        row = system.wait_state(jid, *TERMINAL, timeout=30)
        assert row["state"] == "CANCELLED", row
        wait_for(lambda: not _procs_of(a.uid, "sleep 302"), 15, "the bomb's processes to be gone")
    finally:
        _kill(_procs_of(a.uid, "sleep 302"))


def test_taskset_cannot_move_a_job_off_its_cores(fresh):
    """A one-core job asks taskset to put it on a host CPU that is not its own: refused (its cpuset holds only
    its own); asked for every host CPU, it keeps its own alone."""
    _need("cpuset")
    host = sorted(os.sched_getaffinity(0))
    if len(host) < 2:
        print(f"skipped: one host CPU ({host}): no other core to move to")
        pytest.skip("one host CPU")
    system = fresh()
    a = system.a
    targets = Targets(system.base, a).snapshot()
    allowed = "grep Cpus_allowed_list /proc/$$/status | cut -f2"
    script = (
        f"for c in {' '.join(map(str, host))}; do\n"
        '  case ",$GS_HOST_CPUS," in *",$c,"*) ;; *) OTHER=$c; break ;; esac\n'
        "done\n"
        'echo "mine $GS_HOST_CPUS"\n'
        f'echo "before $({allowed})"\n'
        'taskset -pc "$OTHER" $$ > /dev/null 2>&1; echo "other $?"\n'
        f'echo "after-other $({allowed})"\n'
        f"taskset -pc {','.join(map(str, host))} $$ > /dev/null 2>&1\n"
        f'echo "after-all $({allowed})"\n'
    )
    jid = system.gsub(a, "-n", "1", "-t", "1m", "-N", "ts", "--wrap", script)
    row = system.wait_state(jid, *TERMINAL, timeout=30)
    assert row["state"] == "COMPLETED", row
    out = dict(line.split(" ", 1) for line in (a.home / f"ts.o{jid}").read_text().splitlines())
    assert out["other"] != "0", f"taskset moved the job to another core: {out}"
    assert out["before"] == out["after-other"] == out["after-all"] == out["mine"], out
    check_intact(system, targets)
