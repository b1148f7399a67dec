"""Paths a user wrote are never looked through by the daemon: a job's PATH and its ``shell``.

A job's PATH may name thousands of directories, each reached through a chain
of links: looking an ``mpirun`` up in it costs seconds.  The daemon leaves
that lookup to the job's own process (as its owner, after the fork), so a turn
of its loop that starts such a job costs what any start costs.  A ``shell``
is checked at the boundary for its form only (absolute, bounded, no NUL), so
whether it exists is never told to the sender; the job's process finds out,
as its owner, when it runs it.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from gridsched.daemon import jobtmp
from gridsched.daemon.loop import Daemon
from gridsched.protocol import requests as rq
from tests.conftest import wait_for

CONFIG = """
[scheduler]
policy = "fcfs"
[machine]
cores = 8
[daemon]
autostart = false
"""

TURN_BOUND = 0.1  # seconds: a turn that starts a job, whatever its PATH


def hostile_path(root: Path, entries: int = 300, depth: int = 38) -> str:
    """A PATH of ``entries`` directories, each a link to a chain of ``depth`` more links (39 in all, within the
    kernel's 40), each link's target a run of 1,900 ``./`` before the next: every name looked up in any entry
    walks about 75,000 components.  It costs ``entries + depth`` links to make, and stays short (an entry is
    ``ROOT/H7``)."""
    root.mkdir()
    (root / "real").mkdir()
    pad = "./" * 1900
    for k in range(depth):
        os.symlink(pad + (f"L{k + 1}" if k + 1 < depth else "real"), root / f"L{k}")
    for i in range(entries):
        os.symlink(pad + "L0", root / f"H{i}")
    return ":".join(f"{root}/H{i}" for i in range(entries))


def submit(d: Daemon, **fields: object) -> int:
    from tests.fuzz.test_requests import valid_job

    nid = d.spool.next_id()
    job = {**valid_job(nid), "submit_time": time.time(), **fields}
    (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
    return nid


def test_a_turn_that_starts_a_job_with_a_hostile_path_stays_short(stub_daemon, tmp_path):
    """Three jobs of the whole machine with a PATH of 300 entries through 39-deep chains of links (an
    ``mpirun`` lookup in it takes seconds): each turn that starts one of them takes under 100 ms; the
    lookup is left to the job's process, which is handed the PATH to look in."""
    path = hostile_path(tmp_path / "links")
    assert os.path.isdir(path.split(":")[0])  # the chain leads somewhere: every lookup walks all of it
    d = stub_daemon(CONFIG)
    jobs = [submit(d, ncpus=8, env={"PATH": path, "HOME": "/tmp"}) for _ in range(3)]
    d.turn(time.time(), scan=True)  # takes the three in, starts the first
    assert [s.job_id for s in d.ex.started] == jobs[:1]
    took = []
    for prev, nxt in zip(jobs, jobs[1:]):
        rec = d.table.jobs[prev]
        d.ex.end(prev, rec.segment, end=time.time(), exit_code=0)
        d.job_ended(prev)
        t0 = time.perf_counter()
        d.turn(time.time())
        took.append(time.perf_counter() - t0)
        assert d.ex.started[-1].job_id == nxt
    assert statistics.median(took) < TURN_BOUND, f"turns that started a job took {took}"
    launch = d.ex.started[-1]
    assert launch.mpi_path == path  # the job's process looks there, as its owner
    assert launch.env["PATH"].endswith(path)
    assert not {"OMPI_MCA_orte_default_hostfile", "HYDRA_HOST_FILE"} & set(launch.env)


def test_the_job_s_process_takes_gridsched_s_mpirun_away_only_for_an_installed_one(tmp_path):
    """What the job's process does with the PATH it is handed: an ``mpirun`` on it takes gridsched's own out
    of the private directory's bin/; without one (or with only another job's bin/), they stay."""
    root = tmp_path / f"{jobtmp.PREFIX}7.abc"
    (root / "bin").mkdir(parents=True)
    for n in jobtmp.MPI_NAMES:
        (root / "bin" / n).write_text("#!/bin/sh\n")
        (root / "bin" / n).chmod(0o755)
    other = tmp_path / f"{jobtmp.PREFIX}6.def" / "bin"  # a parent job's, inherited by a job submitted from it
    other.mkdir(parents=True)
    (other / "mpirun").write_text("#!/bin/sh\n")
    (other / "mpirun").chmod(0o755)
    from gridsched.job.env import own_path

    assert not jobtmp.use_installed_mpi(str(root), own_path(f"{root}/bin:{other}:/nonexistent"))
    assert sorted(os.listdir(root / "bin")) == sorted(jobtmp.MPI_NAMES)
    mpi = tmp_path / "mpi" / "bin"
    mpi.mkdir(parents=True)
    (mpi / "mpiexec").write_text("#!/bin/sh\n")
    (mpi / "mpiexec").chmod(0o755)
    assert jobtmp.use_installed_mpi(str(root), own_path(f"{root}/bin:{mpi}"))
    assert os.listdir(root / "bin") == []


def test_the_boundary_answers_the_same_for_a_shell_that_exists_and_one_that_does_not(stub_daemon, tmp_path):
    """A ``shell`` is checked for its form only: an existing one, a missing one and one in a directory the
    daemon may enter but others may not are taken in alike; a relative one is refused, in words that do not
    depend on the file system."""
    secret = tmp_path / "private"
    secret.mkdir(mode=0o700)
    (secret / "sh").write_text("#!/bin/sh\n")
    (secret / "sh").chmod(0o755)
    sender = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), False)
    from tests.fuzz.test_requests import valid_job

    def parse(shell: str) -> str:
        try:
            rq.parse({"type": "submit", "job": {**valid_job(5), "shell": shell}}, rq.id_name(5), sender)
            return "accepted"
        except rq.Refused as e:
            return str(e)

    answers = {s: parse(s) for s in ("/bin/sh", str(secret / "sh"), str(secret / "none"), "/no/such/shell")}
    assert set(answers.values()) == {"accepted"}, answers
    assert parse("sh") == parse("bin/sh") == "job: field 'shell' must be an absolute path"
    d = stub_daemon(CONFIG)
    jobs = [submit(d, shell=s, script="echo no shebang\n") for s in answers]
    d.turn(time.time(), scan=True)
    assert [d.table.jobs[j].state.value for j in jobs] == ["RUNNING"] * 4
    assert [s.script for s in d.ex.started] == list(answers)  # each runs its script with the shell it named


def test_the_loop_does_not_wait_for_a_private_directory_its_owner_filled(stub_daemon, tmp_path, monkeypatch):
    """A job's private directory lies in a directory every user may write: its owner may put it back, filled
    with as much as they like, after the shepherd removed it and before the daemon collects the job.  The
    turn that collects the job leaves its removal to a process nobody waits for (here one that takes 3 s,
    unless the test lets it go on once the turn is over): it takes well under those 3 s, and the directory
    is gone soon after."""
    real = jobtmp._rmtree
    go = tmp_path / "go"

    def slow(root: str) -> None:
        deadline = time.monotonic() + 3
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        real(root)

    monkeypatch.setattr(jobtmp, "_rmtree", slow)  # in the process that removes it, forked after this
    monkeypatch.setattr(jobtmp, "LINGER", 0.0)  # the daemon looks at once, not when a shepherd would have removed it
    d = stub_daemon(CONFIG + f'[jobs]\ntmpdir = "{tmp_path}"\n')
    jid = submit(d)
    d.turn(time.time(), scan=True)
    private = Path(d.ex.started[0].private)
    (private / "tmp").mkdir(parents=True)
    (private / "tmp" / "f").write_text("x")
    rec = d.table.jobs[jid]
    d.ex.end(jid, rec.segment, end=time.time(), exit_code=0)
    t0 = time.perf_counter()
    d.job_ended(jid)
    d.turn(time.time())
    took = time.perf_counter() - t0
    assert d.db.job(jid)["state"] == "COMPLETED"
    # a turn that waited for the removal would take its 3 s: half of that tells the two apart on a loaded machine
    assert took < 1.5, f"collecting the job took {took:.2f} s"
    go.touch()
    wait_for(lambda: not private.exists(), 30, "the private directory to be removed")
