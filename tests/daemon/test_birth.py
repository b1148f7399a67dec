"""A shepherd born in its job's cgroup v2 (``clone3`` with ``CLONE_INTO_CGROUP``): it never moves into it, its job
runs there from its first instruction, the shepherd leaves it, and cgroups made for a start that never ran are
removed."""

from __future__ import annotations

import json
import os
import selectors
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gridsched.daemon import birth, cgroup, confine, launch
from gridsched.daemon.spawn import Processes
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState
from tests.conftest import wait_for
from tests.daemon.launches import job_launch, spawn_now
from tests.fuzz.test_requests import valid_job


def _v2_track() -> confine.Place:
    s = confine.setup()
    if s.track is None or s.track.version != 2:
        pytest.skip(f"no job cgroup v2 here: {s.track_why or 'tracking is cgroup v1'}")
    return s.track


def _cgroup_v2_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return ""


def test_a_child_forked_into_a_cgroup_v2_is_there_from_its_first_instruction():
    place = _v2_track()
    path = place.base / f"gridsched-birth-test-{os.getpid()}"
    path.mkdir()
    try:
        r, w = os.pipe()
        pid = birth.fork_into(path)
        if pid == 0:  # the child: says where it is, before anything could have moved it
            os.write(w, _cgroup_v2_of(os.getpid()).encode())
            os._exit(0)
        os.close(w)
        if pid < 0:
            os.close(r)
            pytest.skip("clone3 into a cgroup is refused here (kernel or sandbox)")
        where = os.read(r, 4096).decode()
        os.close(r)
        os.waitpid(pid, 0)
        assert where.endswith("/" + path.name), where
    finally:
        assert cgroup.remove(path, timeout=5.0)


JOB = """#!/bin/sh
cut -d: -f3- /proc/self/cgroup > cgroups.txt
while [ ! -e go ]; do sleep 0.01; done
"""


def test_the_shepherd_never_moves_into_its_job_s_cgroup_v2_and_leaves_it(tmp_path, monkeypatch):
    """The shepherd moves only into the job's cgroup v1 ones (``tasks``: no wait for the kernel) and out of them
    all; its job is in every cgroup of the job from its first instruction, the shepherd leaves them all once it
    has spawned the job, and none is left after the end."""
    place = _v2_track()
    moves = tmp_path / "moves"
    real = cgroup.join

    def join(path: Path, pid: int = 0) -> None:  # runs in the shepherd, a fork of this process
        with open(moves, "a") as f:
            f.write(f"{path}\n")
        real(path, pid)

    monkeypatch.setattr(cgroup, "join", join)
    spec = job_launch(tmp_path, JOB, job_id=8, max_processes=50)
    work = Path(spec.workdir)
    name = cgroup.job_name(str(tmp_path), 1)
    born = place.base / name
    shepherd = launch.spawn(spec)
    try:

        def named() -> dict | None:
            try:
                info = json.loads(launch.pid_file(tmp_path, 1).read_text())
            except (FileNotFoundError, ValueError):
                return None
            return info if "job" in info else None

        info = wait_for(named, 20, "the pid file to name the job")
        seen = wait_for(lambda: (work / "cgroups.txt").exists() and (work / "cgroups.txt").read_text(), 20, "the job")
        assert str(born) in info["cgroups"]
        assert seen.count(f"/{name}") >= len(info["cgroups"]), seen
        for path in info["cgroups"]:
            assert str(info["job"]) in Path(path, "cgroup.procs").read_text().split(), path

        def left() -> bool:
            return not any(str(shepherd) in Path(p, "cgroup.procs").read_text().split() for p in info["cgroups"])

        wait_for(left, 20, "the shepherd to leave its job's cgroups")
    finally:
        (work / "go").touch()
        os.waitpid(shepherd, 0)
    joined = moves.read_text().split()
    if str(born) in joined:
        assert birth._refused, joined  # only where clone3 into a cgroup is refused here
    else:
        assert str(born.parent) in joined  # left after the job was spawned
    assert json.loads(launch.exit_file(tmp_path, 1).read_text())["exit_code"] == 0
    s = confine.setup()
    for p in {s.track, s.pids, s.cpuset} - {None}:
        assert p is not None
        assert not (p.base / name).exists(), f"{p.base / name} left behind"


def test_where_clone3_is_refused_the_shepherd_enters_its_cgroup_v2_as_before(tmp_path, monkeypatch):
    """An older kernel or a sandbox: the shepherd is forked and moves into the job's cgroup v2 itself; the job
    runs in every cgroup of the job and nothing is left."""
    place = _v2_track()
    monkeypatch.setattr(birth, "fork_into", lambda path: -1)
    moves = tmp_path / "moves"
    real = cgroup.join

    def join(path: Path, pid: int = 0) -> None:
        with open(moves, "a") as f:
            f.write(f"{path}\n")
        real(path, pid)

    monkeypatch.setattr(cgroup, "join", join)
    spec = _marking_launch(tmp_path)
    shepherd = launch.spawn(spec)
    os.waitpid(shepherd, 0)
    assert (tmp_path / "ran").exists()
    assert str(place.base / cgroup.job_name(str(tmp_path), 1)) in moves.read_text().split()
    assert [p for p in _left(tmp_path)[:-2] if os.path.exists(p)] == []


def test_cgroups_made_for_a_shepherd_that_never_ran_its_job_are_removed(tmp_path):
    """Made before the fork of a shepherd that died unarmed (with its starter): the daemon removes them."""
    _v2_track()
    name = cgroup.job_name(str(tmp_path), 3)
    paths, _notes, _born = birth.ahead(name, frozenset(os.sched_getaffinity(0)), 50)
    assert paths and all(p.exists() for p in paths)
    ex = Processes(selectors.DefaultSelector())
    ex.unstarted(str(tmp_path), 3)
    assert not any(p.exists() for p in paths), paths


CONFIG = """
[scheduler]
policy = "fcfs"
[machine]
cores = 2
[daemon]
autostart = false
"""


def test_a_start_a_kill_undid_has_its_cgroups_removed_at_recovery(stub_daemon, monkeypatch):
    d = stub_daemon(CONFIG)
    jid = d.spool.next_id()
    (d.spool.incoming / rq.id_name(jid)).write_text(json.dumps({"type": "submit", "job": valid_job(jid)}))
    d.turn(time.time(), scan=True)
    assert d.table.jobs[jid].state is JobState.RUNNING
    d.table.commit()
    undone: list[tuple[str, int]] = []
    monkeypatch.setattr(type(d.ex), "unstarted", lambda self, job_dir, segment: undone.append((job_dir, segment)))
    d = stub_daemon.restart(d, crash=True)  # no pid file: its shepherd died unarmed
    assert d.table.jobs[jid].state is JobState.PENDING
    assert undone == [(str(d.spool.job_dir(jid)), 1)]


def _marking_launch(tmp_path: Path, segment: int = 1) -> launch.Launch:
    return job_launch(
        tmp_path, "#!/bin/sh\ntouch ran\n", job_id=9, segment=segment, workdir=str(tmp_path), stdout="/dev/null",
        stderr="/dev/null", max_processes=50,
    )  # fmt: skip


def _left(tmp_path: Path, segment: int = 1) -> list[str]:
    s = confine.setup()
    name = cgroup.job_name(str(tmp_path), segment)
    found = [str(p.base / name) for p in (s.track, s.pids, s.cpuset) if p is not None and (p.base / name).exists()]
    return found + [str(p) for p in (launch.pid_file(tmp_path, segment), launch.exit_file(tmp_path, segment))]


@pytest.mark.parametrize("word", [b"n", b""], ids=["no", "unsaid"])
def test_a_shepherd_the_daemon_does_not_tell_go_runs_nothing_and_leaves_nothing(tmp_path, word):
    """The daemon says no (the job's private directory could not be made), or dies before its word: the shepherd
    writes no pid file, runs nothing, and removes the cgroups made for it."""
    r, w = os.pipe2(os.O_CLOEXEC)
    shepherd = launch.spawn(_marking_launch(tmp_path), r)
    os.close(r)
    if word:
        os.write(w, word)
    os.close(w)
    _, status = os.waitpid(shepherd, 0)
    assert os.WIFEXITED(status)
    assert not (tmp_path / "ran").exists()
    assert [p for p in _left(tmp_path) if os.path.exists(p)] == []


def test_a_shepherd_told_go_runs_its_job(tmp_path):
    r, w = os.pipe2(os.O_CLOEXEC)
    shepherd = launch.spawn(_marking_launch(tmp_path), r)
    os.close(r)
    os.write(w, b"g")
    os.close(w)
    os.waitpid(shepherd, 0)
    assert (tmp_path / "ran").exists()
    assert json.loads(launch.exit_file(tmp_path, 1).read_text())["exit_code"] == 0


def test_a_private_directory_that_cannot_be_made_fails_the_start_and_its_shepherd_runs_nothing(tmp_path):
    """The directory is made while the starter forks the shepherd: when it cannot be, the start fails with why and
    the shepherd, told no, runs nothing and leaves nothing."""
    base = tmp_path / "base"
    base.mkdir()
    ex = Processes(selectors.DefaultSelector())
    ex.start()
    try:
        private = ex.make_private(str(base), 9, os.getuid(), os.getgid(), "h", 1, 1)
        base.rmdir()  # gone between the start's decision and its launch
        spec = _marking_launch(tmp_path)
        with pytest.raises(OSError, match="cannot make its private directory"):
            spawn_now(ex, replace(spec, private=private.root))
        wait_for(lambda: not any(os.path.exists(p) for p in _left(tmp_path)), 10, "the shepherd's cgroups to go")
        assert not (tmp_path / "ran").exists()
    finally:
        assert ex.starter is not None
        ex.starter.stop()
