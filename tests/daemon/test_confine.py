"""Signals reach only a job's processes; each job has a process cap and its cores where the host allows it.

The daemon signals the members of a job's cgroups and the processes below
its live shepherd, each through a pidfd after checking it is one of them; it
never signals a process group by a number it remembered (after a restart,
that number may name anybody's group).  Real processes and, where named, a
real daemon on a temporary spool.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from gridsched.daemon import confine, procs
from gridsched.protocol import config
from tests.conftest import DEFAULT_CONFIG, wait_for


def _gone_or_zombie(p: subprocess.Popen[bytes]) -> bool:
    return p.poll() is not None


def _alive_and_running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_STOPPED, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


@pytest.fixture
def foreign():
    """A process group that is no job's: a sleep leading a session of its own."""
    p = subprocess.Popen(["sleep", "3001"], start_new_session=True)
    yield p
    p.kill()
    p.wait(10)


def test_a_job_s_signal_never_reaches_a_group_named_by_its_remembered_number(foreign):
    """A job whose recorded leader is now another process (its number reused, in a group of its own): its
    signals go to the processes below its shepherd only; the other group gets nothing, and the job's batch
    shell signal is not sent to it either (wrong parent, wrong start time)."""
    shepherd = subprocess.Popen(["sh", "-c", "sleep 3002 & sleep 3003 & wait"], start_new_session=True)
    try:
        wait_for(lambda: len(procs.tree(shepherd.pid)) == 2, 10, "the shepherd's two children")
        kids = [p.pid for p in procs.tree(shepherd.pid)]
        job = procs.Job(
            shepherd.pid,
            shepherd_ticks=procs.start_ticks(shepherd.pid),
            leader=foreign.pid,
            leader_ticks=(procs.start_ticks(foreign.pid) or 0) + 1,
        )
        assert not procs.signal_shell(job, signal.SIGTERM)
        same_ticks = procs.Job(shepherd.pid, leader=foreign.pid, leader_ticks=procs.start_ticks(foreign.pid))
        assert not procs.signal_shell(same_ticks, signal.SIGTERM)  # not the shepherd's child
        assert procs.signal_job(job, signal.SIGTERM) == 2
        wait_for(lambda: not any(_alive_and_running(k) for k in kids), 10, "the job's processes to end")
        assert foreign.poll() is None and _alive_and_running(foreign.pid)
    finally:
        shepherd.kill()
        shepherd.wait(10)


def test_a_dead_shepherd_s_number_leads_to_nothing(foreign):
    """Once the shepherd has ended, its pid names nobody the daemon may signal: nothing is sent, even though a
    process (the foreign one) is recorded as the job's leader."""
    gone = subprocess.Popen(["true"])
    ticks = procs.start_ticks(gone.pid)
    gone.wait(10)
    job = procs.Job(gone.pid, shepherd_ticks=ticks, leader=foreign.pid, leader_ticks=procs.start_ticks(foreign.pid))
    assert procs.signal_job(job, signal.SIGKILL) == 0
    assert not procs.signal_shell(job, signal.SIGKILL)
    assert foreign.poll() is None


def test_cgroup_members_are_signalled_only_while_they_are_in_the_job_s_cgroup(tmp_path, foreign):
    """A cgroup listing (here a plain file standing for one) that names a process outside the job's cgroup
    does not get it signalled: each member is checked in /proc/PID/cgroup after its pidfd is opened."""
    fake = tmp_path / "gridsched-0123456789ab-1"
    fake.mkdir()
    (fake / "cgroup.procs").write_text(f"{foreign.pid}\n")
    job = procs.Job(1 << 30, cgroups=(str(fake),))  # a shepherd that does not exist
    assert procs.signal_job(job, signal.SIGTERM) == 0
    assert foreign.poll() is None


def test_without_cgroups_the_host_s_reasons_are_given(monkeypatch, tmp_path):
    """Where no cgroup file system can be used, each part says why, the process cap says it falls back to
    RLIMIT_NPROC (shared with the user's other processes), and a job gets no cgroup (it is still started)."""
    monkeypatch.setattr(confine, "V2_MOUNTS", (str(tmp_path / "none"),))
    monkeypatch.setattr(confine, "V1_ROOT", str(tmp_path / "none"))
    s = confine.find()
    assert s.track is None and s.pids is None and s.cpuset is None
    lines = s.lines(2048)
    assert lines[0].startswith("job processes: by their shepherd only (")
    assert "no pids cgroup" in lines[1] and "RLIMIT_NPROC" in lines[1] and "plus 2048" in lines[1]
    assert lines[2].startswith("cores: pinned by CPU affinity only")
    assert all(s.track_why and s.pids_why and s.cpuset_why for _ in [0])
    assert confine.create(s, "gridsched-x-1", frozenset({0}), 2048) == ([], [])
    assert "none (jobs.max_processes = 0)" in confine.Setup().lines(0)[1]


def _fork_many(uid: int, cap: int, tries: int) -> int:
    """In a child: cap as the job's process is capped, drop to ``uid``, start ``tries`` sleeping children;
    how many could be started (the exit status)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        started = 0
        try:
            confine.cap_by_rlimit(uid, cap)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            kids = []
            for _ in range(tries):
                try:
                    k = os.fork()
                except OSError:
                    break
                if k == 0:
                    signal.pause()
                    os._exit(0)
                kids.append(k)
            started = len(kids)
            for k in kids:
                os.kill(k, signal.SIGKILL)
                os.waitpid(k, 0)
        finally:
            os._exit(min(started, 255))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_without_a_pids_cgroup_rlimit_nproc_caps_the_job():
    """The fallback cap: a job of a user who runs nothing else may have ``max_processes`` processes (itself
    included), and a fork beyond fails in the job alone."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the cap is set before the job drops to its owner")
    uid = 65534  # nobody: runs nothing here
    if confine.user_tasks(uid):
        pytest.skip(f"uid {uid} runs processes on this host: the cap would be shared with them")
    started = _fork_many(uid, 10, 40)
    assert started == 9, f"{started} children started under a cap of 10 (the job's own process is one)"


def test_only_job_cgroups_are_read_back_from_a_pid_file():
    assert confine.valid("/sys/fs/cgroup/pids/gridsched-0123456789ab-1")
    for bad in ("/etc/passwd", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/pids/user.slice", 5, None, "/sys/fs/cgroup/../x"):
        assert not confine.valid(bad), bad


def test_max_processes_is_checked():
    assert config.parse({}).max_processes == 2048
    assert config.parse({"jobs": {"max_processes": 0}}).max_processes == 0
    for bad in (-1, "many", True, 1.5, 5_000_000):
        with pytest.raises(config.ConfigError, match="jobs.max_processes"):
            config.parse({"jobs": {"max_processes": bad}})


# -- a real daemon -------------------------------------------------------------------------------


def _pid_file(gs, jid: int) -> Path:
    return gs.spool / "jobs" / str(jid) / "seg-1.pid"


def _info(gs, jid: int) -> dict | None:
    try:
        info = json.loads(_pid_file(gs, jid).read_text())
    except (OSError, ValueError):
        return None
    return info if procs.alive(info.get("job", 0), info.get("job_ticks")) else None


def test_a_restarted_daemon_does_not_signal_a_group_its_job_no_longer_leads(make_gs, foreign):
    """After a restart the daemon adopts a running job whose pid file names, as the job's process group, a
    group that is now another's (its number reused).  Cancelling the job ends it, and that group gets no
    signal: neither SIGTERM nor the SIGKILL after the grace."""
    gs = make_gs()
    jid = gs.gsub("-t", "5m", "--wrap", "sleep 300")
    gs.wait_state(jid, "RUNNING")
    info = wait_for(lambda: _info(gs, jid), 15, "the job's pid file")
    gs.stop()  # SIGTERM: the daemon goes, its jobs go on
    info["pgid"] = info["job"] = foreign.pid  # the number the job had, now a group of someone else's
    tmp = _pid_file(gs, jid).with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, _pid_file(gs, jid))
    gs.start()
    wait_for(lambda: "1 running jobs adopted" in gs.log(), 15, "the job to be adopted")
    gs.run("gdel", str(jid), check=True)
    row = gs.wait_state(jid, "CANCELLED", timeout=30)
    assert row["state"] == "CANCELLED"
    assert foreign.poll() is None and _alive_and_running(foreign.pid), "the foreign group was signalled"


def _skip_without(part: str) -> confine.Setup:
    s = confine.setup()
    if getattr(s, part) is None:
        why = getattr(s, f"{part}_why")
        print(f"skipped: no {part} cgroup here: {why}")
        pytest.skip(f"no {part} cgroup here: {why}")
    return s


def test_a_job_runs_in_cgroups_with_its_process_cap_and_cores(make_gs):
    """Each job's pids cgroup has pids.max = jobs.max_processes and its cpuset cgroup the job's host CPUs;
    both are removed when it ends; the daemon's log and gctl info say how jobs are confined."""
    s = _skip_without("pids")
    _skip_without("cpuset")
    gs = make_gs(DEFAULT_CONFIG.replace("[jobs]\n", "[jobs]\nmax_processes = 77\n"))
    script = (
        "for c in $(cut -d: -f3 /proc/self/cgroup | sort -u); do\n"
        "  for f in pids.max cpuset.cpus; do\n"
        "    for m in /sys/fs/cgroup/*; do [ -f $m$c/$f ] && echo $f $(cat $m$c/$f); done\n"
        "  done\n"
        "done | sort -u > where.out\n"
        'echo "$GS_HOST_CPUS" > cpus.out\n'
        "grep -o 'gridsched-[0-9a-f]*-[0-9]*' /proc/self/cgroup | sort -u > names.out\n"
    )
    jid = gs.gsub("-t", "1m", "--wrap", script)
    row = gs.wait_state(jid, "COMPLETED", "FAILED")
    assert row["state"] == "COMPLETED", gs.log()
    got = (gs.work / "where.out").read_text().splitlines()
    assert "pids.max 77" in got, got
    cpus = (gs.work / "cpus.out").read_text().strip()
    assert any(line.startswith("cpuset.cpus ") and _same_cpus(line.split()[1], cpus) for line in got), got
    names = (gs.work / "names.out").read_text().split()
    assert names, "the job ran in no cgroup of its own"
    for place in {s.track, s.pids, s.cpuset} - {None}:
        assert place is not None
        for n in names:
            assert not (place.base / n).exists(), f"{place.base / n} left behind"
    log = gs.log()
    assert "process cap: 77 processes and threads per job" in log and "cores: each job confined" in log
    out = gs.run("gctl", "info", check=True).stdout
    assert "process cap: 77" in out and "job processes:" in out


def _same_cpus(a: str, b: str) -> bool:
    from gridsched.core import cpuset

    return cpuset.parse(a) == cpuset.parse(b)


def test_a_job_cpuset_made_now_gets_its_parent_s_memory_nodes_and_the_job_s_cores(tmp_path):
    """Written in one call each (no read of the new cgroup's own files first): a cpuset v1 made for a job has the
    memory nodes of the cpuset it was made in and the job's CPUs; one that could not be made is said why."""
    s = _skip_without("cpuset")
    assert s.cpuset is not None
    if s.cpuset.version != 1:
        pytest.skip("cpusets are cgroup v2 here: no memory nodes to copy")
    cpus = frozenset(os.sched_getaffinity(0))
    name = f"gridsched-confine-test-{os.getpid()}"
    paths, notes = confine.create(s, name, cpus, 0)
    try:
        path = s.cpuset.base / name
        assert path in paths and notes == [], notes
        assert (path / "cpuset.mems").read_text().strip() == confine._mems_of(s.cpuset.base) != ""
        assert _same_cpus((path / "cpuset.cpus").read_text().strip(), confine._fmt(cpus))
    finally:
        for p in paths:
            p.rmdir()
