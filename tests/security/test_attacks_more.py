"""Further attacks of a second local user on the daemon's newest defences: entries that cannot leave
``incoming/``, floods of wake-ups, races for the ids of others' submissions, escapes from the job's cgroups,
and escapes from the walltime through yields (docs/security.md)."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, check_intact, spawn_as

STUCK = 1100  # more entries than the daemon reads in one turn (intake.MAX_BATCH)


def _plant_files(inc: str, names: list[str]) -> int:
    """As B: a bad request file under each name (the daemon refuses and quarantines each)."""
    for n in names:
        fd = os.open(os.path.join(inc, n), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"x")
        os.close(fd)
    return len(names)


def _plant_dirs(inc: str, names: list[str]) -> int:
    """As B: a directory under each name, with a file in it (made under a hidden name and renamed into
    place whole: the daemon may take a directory in as soon as it appears, before its file is written)."""
    for n in names:
        tmp = os.path.join(inc, f".{n}.tmp")
        os.mkdir(tmp)
        with open(os.path.join(tmp, "f"), "w") as f:
            f.write("x")
        os.rename(tmp, os.path.join(inc, n))
    return len(names)


def test_entries_that_cannot_be_quarantined_do_not_starve_a(system, targets):
    """B has a bad request file of each of 1,100 names quarantined, then puts a directory (with a file in it)
    under each name again, sorting before every real submission: moving a directory onto the file of the same
    name in ``quarantine/`` fails, and a directory cannot be unlinked.  Each must still leave ``incoming/``,
    and A's job, submitted after them, must be taken in and run."""
    a, b = system.a, system.b
    inc = system.spool_dir / "incoming"
    stamp = time.time_ns()
    names = [f"submit-0000000000{i:05d}-{stamp}" for i in range(STUCK)]  # before every real id
    assert spawn_as(b, _plant_files, str(inc), names).result(120) == {"ok": STUCK}
    system.wake()
    wait_for(lambda: not any(os.path.lexists(inc / n) for n in names), 60, "B's files to be quarantined")
    assert spawn_as(b, _plant_dirs, str(inc), names).result(120) == {"ok": STUCK}
    system.wake()
    t0 = time.monotonic()
    jid = system.gsub(a, "-t", "1m", "--wrap", "echo ran")
    row = system.wait_state(jid, *TERMINAL, timeout=40)
    took = time.monotonic() - t0
    assert row["state"] == "COMPLETED", row
    print(f"A's job completed {took:.1f} s after B's {STUCK} directories")
    log = system.log().count("quarantined request submit-0000000000")
    wait_for(lambda: not any(os.path.lexists(inc / n) for n in names), 30, "B's directories to leave incoming/")
    assert system.log().count("quarantined request submit-0000000000") <= log + STUCK
    check_intact(system, targets)


def _front_run(spool: str, release: str, seconds: float) -> int:
    """As B: watch ``incoming/`` and, the moment a submitter's hidden temporary file appears (it is about to
    take an id), take the next ids first: the 16 after the highest id in the published table and the names
    waiting.  How many ids were taken so."""
    import re
    import sqlite3

    inc = os.path.join(spool, "incoming")
    seen: set[str] = set()
    taken = 0
    deadline = time.monotonic() + seconds
    while not os.path.exists(release) and time.monotonic() < deadline:
        names = os.listdir(inc)
        fresh = [n for n in names if n.startswith(".") and n not in seen]
        if not fresh:
            continue
        seen.update(fresh)
        best = 0
        for n in names:
            m = re.fullmatch(r"submit-([0-9]{1,18})\.json", n)
            if m and int(m.group(1)) < 10**12:
                best = max(best, int(m.group(1)))
        try:
            con = sqlite3.connect(f"file:{os.path.join(spool, 'state.db')}?mode=ro", uri=True)
            for table in ("jobs", "reservations", "ids"):
                best = max(best, int(con.execute(f"SELECT MAX(id) FROM {table}").fetchone()[0] or 0))
            con.close()
        except sqlite3.Error:
            pass
        for nid in range(best + 1, best + 17):
            try:
                fd = os.open(os.path.join(inc, f"submit-{nid:010d}.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(fd, b"x")
                os.close(fd)
                taken += 1
            except OSError:
                pass
    return taken


def test_b_cannot_front_run_the_ids_of_a_s_submissions(system, targets):
    """B watches ``incoming/`` and, each time a submitter's temporary file appears, takes the next 16 ids: A's
    gsub must still submit (its temporary file does not name its id, and each retry takes a random step past
    the next free id) and A's job run."""
    a, b = system.a, system.b
    release = system.shared / f"release-{time.time_ns()}"
    racer = spawn_as(b, _front_run, str(system.spool_dir), str(release), 60.0)
    try:
        r = system.cmd(a, "gsub", "-t", "1m", "--wrap", "echo ran", timeout=60)
    finally:
        release.touch()
        got = racer.result(30)
    print(f"B took {got.get('ok')} ids ahead of A; A's gsub: {r}")
    assert r.rc == 0, f"A's gsub: {r}"
    jid = int(r.stdout.strip().splitlines()[-1])
    system.ids[a.name].add(jid)
    assert system.wait_state(jid, *TERMINAL, timeout=30)["state"] == "COMPLETED"
    system.settle()
    check_intact(system, targets)


def _flood(spool: str, release: str, seconds: float, first_id: int) -> dict:
    """As B, until ``release`` exists (at most ``seconds``): wake the daemon without pause, drop a bad
    request under a new canonical id now and then (each refused one is recorded, so the table changes and the
    daemon publishes a new copy), and keep every published copy of the table open.  What it did, and the
    disk the copies it holds pin."""
    import socket as _socket

    inc = os.path.join(spool, "incoming")
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    s.setblocking(False)
    held: dict[int, int] = {}  # inode -> size
    fds = []
    wakes = bad = 0
    nid = first_id
    deadline = time.monotonic() + seconds
    while not os.path.exists(release) and time.monotonic() < deadline:
        for _ in range(50):
            try:
                s.sendto(b"!", os.path.join(spool, "gschedd.sock"))
                wakes += 1
            except OSError:
                pass
        try:
            fd = os.open(os.path.join(inc, f"submit-{nid:010d}.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"{}")
            os.close(fd)
            bad += 1
        except OSError:
            pass
        nid += 1
        try:
            fd = os.open(os.path.join(spool, "state.db"), os.O_RDONLY)
            st = os.fstat(fd)
            if st.st_ino in held:
                os.close(fd)
            else:
                held[st.st_ino] = st.st_size
                fds.append(fd)
        except OSError:
            pass
    for fd in fds:
        os.close(fd)
    return {"wakes": wakes, "bad": bad, "copies": len(held), "pinned": sum(held.values())}


def test_a_flood_of_wake_ups_and_publications_does_not_delay_a(system, targets):
    """B wakes the daemon without pause, makes it publish a new copy of the table again and again (bad
    requests under new ids, each recorded) and holds every copy open.  A's job, submitted meanwhile, is taken
    in and completes within seconds; the daemon's CPU time and the disk B's copies pin are printed."""
    a, b = system.a, system.b
    release = system.shared / f"release-{time.time_ns()}"
    daemon = psutil.Process(system.proc.pid)  # type: ignore[union-attr]
    cpu0, t0 = sum(daemon.cpu_times()[:2]), time.monotonic()
    flooder = spawn_as(b, _flood, str(system.spool_dir), str(release), 30.0, system.next_id() + 10)
    try:
        wait_for(
            lambda: (
                (system.spool_dir / "quarantine").exists() and len(os.listdir(system.spool_dir / "quarantine")) > 20
            ),
            15,
            "B's flood to be under way",
        )
        s0 = time.monotonic()
        jid = system.gsub(a, "-t", "1m", "--wrap", "echo ran")
        row = system.wait_state(jid, *TERMINAL, timeout=20)
        took = time.monotonic() - s0
        assert row["state"] == "COMPLETED", row
    finally:
        release.touch()
        got = flooder.result(30)
    cpu = (sum(daemon.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0)
    print(f"flood {got}; A's job completed {took:.2f} s after gsub; daemon CPU {cpu:.0%} of a core")
    assert "ok" in got, got
    assert took < 10, f"A's job took {took:.1f} s under B's flood"
    system.settle(timeout=60)
    check_intact(system, targets)


LEAVE_CGROUPS = r"""
for line in $(cat /proc/self/cgroup); do
  c=$(echo "$line" | cut -d: -f2); p=$(echo "$line" | cut -d: -f3)
  case "$c" in pids|cpuset) m=/sys/fs/cgroup/$c ;; "") m=/sys/fs/cgroup/unified ;; *) continue ;; esac
  [ -d "$m$p" ] || continue
  k=${c:-unified}
  echo "$k before $p"
  (echo $$ > "$m/cgroup.procs") 2>/dev/null && echo "$k root moved" || echo "$k root refused"
  (echo $$ > "$m$(dirname "$p")/cgroup.procs") 2>/dev/null && echo "$k parent moved" || echo "$k parent refused"
  (echo $$ > "$m$p/cgroup.procs") 2>/dev/null && echo "$k own rewritten" || echo "$k own refused"
  mkdir "$m$p/esc" 2>/dev/null && echo "$k mkdir made" || echo "$k mkdir refused"
  (echo max > "$m$p/pids.max") 2>/dev/null && echo "$k pids.max raised" || echo "$k pids.max refused"
  (echo 0-1023 > "$m$p/cpuset.cpus") 2>/dev/null && echo "$k cpus widened" || echo "$k cpus refused"
  (setsid sh -c 'cat /proc/self/cgroup' | grep -q ":$c:$p\$") && echo "$k setsid stays" || echo "$k setsid left"
  echo "$k after $(grep ":$c:" /proc/self/cgroup | cut -d: -f3)"
done
"""


def test_b_s_job_cannot_leave_or_widen_its_cgroups(system, targets):
    """B's job writes its pid into the root and parent cgroups' ``cgroup.procs`` (pids, cpuset, the tracking
    cgroup), makes a cgroup below its own, raises its ``pids.max`` and widens its ``cpuset.cpus``: every write
    is refused, a ``setsid`` child stays in the job's cgroups, and A's job runs."""
    b = system.b
    jid = system.gsub(b, "-t", "1m", "-N", "esc", "--wrap", LEAVE_CGROUPS)
    row = system.wait_state(jid, *TERMINAL, timeout=30)
    assert row["state"] == "COMPLETED", row
    out = (b.home / f"esc.o{jid}").read_text()
    print(out)
    lines = out.splitlines()
    kinds = {line.split()[0] for line in lines if " before " in line}
    if not kinds:
        print("skipped: the job is in no cgroup of the daemon's here")
        pytest.skip("no job cgroups on this host")
    for k in kinds:
        got = {" ".join(line.split()[1:2]): line.split(None, 2)[2] for line in lines if line.split()[0] == k}
        assert got["before"] == got["after"], (k, got)
        for what in ("root", "parent", "mkdir", "pids.max", "cpus"):
            assert got[what] == "refused", (k, what, got)
        assert got["setsid"] == "stays", (k, got)
    check_intact(system, targets)


STRETCH = """#!/bin/sh
gsub -n 1 -t 1m -N kid --wrap 'sleep 50' > "$HOME/stretch.kid" || exit 3
gyield 2> "$HOME/stretch.err"
echo $? > "$HOME/stretch.rc"
sleep 50
"""


def test_b_s_backfilled_job_cannot_stretch_its_walltime_by_yielding(fresh):
    """Four cores under easy.  A's job holds one core for a few seconds and A's four-core job waits for it (the
    head).  B's one-core job of 3 s fits before the head's start and is backfilled on its walltime; it then
    submits a one-minute child, yields its core to it and sleeps on, earning walltime credit while the child
    runs.  A's head job must still start when the blocker ends, not a minute later."""
    system = fresh({"scheduler": {"policy": "easy"}})
    a, b = system.a, system.b
    script = b.home / "stretch.sh"
    script.write_text(STRETCH)
    os.chown(script, b.uid, b.gid)
    script.chmod(0o755)
    blocker = system.gsub(a, "-n", "1", "-t", "20s", "--wrap", "sleep 5")
    system.wait_state(blocker, "RUNNING", timeout=15)
    head = system.gsub(a, "-n", "4", "-t", "1m", "--wrap", "true")
    parent = system.gsub(b, "-n", "1", "-t", "3s", str(script))
    try:
        system.wait_state(parent, "RUNNING", *TERMINAL, timeout=15)
        wait_for(lambda: (b.home / "stretch.rc").exists(), 15, "B's gyield")
        kid = int((b.home / "stretch.kid").read_text())
        system.ids[b.name].add(kid)
        done = system.wait_state(head, *TERMINAL, timeout=15)
        assert done["state"] == "COMPLETED", done
        end_blocker = system.job(blocker)["end_time"]
        print(f"A's head started {done['start_time'] - end_blocker:.1f} s after the blocker ended")
        assert done["start_time"] - end_blocker < 10
    finally:
        system.cmd(b, "gdel", str(parent))
        system.wait_state(parent, *TERMINAL, timeout=20)
    check_intact(system)


def test_b_s_split_job_and_array_stay_within_the_per_user_cores(fresh):
    """Under ``[limits] max_cpus_per_user = 2`` on four cores, B submits a splittable job of 8 one-core
    sub-tasks and an array of 4 one-core tasks, each task sleeping: B's running jobs never hold more than 2
    cores together, and A's two-core job submitted after them runs at once."""
    system = fresh({"limits": {"max_cpus_per_user": 2}})
    a, b = system.a, system.b
    split = system.cmd(b, "gsub", "-n", "1", "--split", "8", "--task-time", "20s", "--wrap", "sleep 4")
    arr = system.cmd(b, "gsub", "-n", "1", "--array", "0-3", "-t", "20s", "--wrap", "sleep 4")
    bs = []
    for r in (split, arr):
        if r.rc == 0:
            bs.append(int(r.stdout.strip().splitlines()[-1]))
            system.ids[b.name].add(bs[-1])
        else:
            assert r.one_line_error("gsub") is None, r
    most = 0

    def b_cores() -> int:
        return sum(r["ncpus"] for r in system.rows().values() if r["uid"] == b.uid and r["state"] == "RUNNING")

    def done() -> dict | None:
        nonlocal most
        most = max(most, b_cores())
        j = system.job(jid)
        return j if j and j["state"] in TERMINAL else None

    try:
        wait_for(lambda: b_cores() > 0, 15, "B's tasks to start")
        t0 = time.monotonic()
        jid = system.gsub(a, "-n", "2", "-t", "1m", "--wrap", "sleep 2")
        row = wait_for(done, 15, "A's job to end")
        assert row["state"] == "COMPLETED", row
        assert most <= 2, f"B's running jobs held {most} cores under max_cpus_per_user = 2"
        print(f"B held at most {most} cores; A's job completed {time.monotonic() - t0:.1f} s after gsub")
    finally:
        for j in bs:
            system.cmd(b, "gdel", str(j))
    check_intact(system)


def _lure_beyond_the_window(inc: str, far: str, release: str, seconds: float) -> bool:
    """As B: keep ``far`` (the highest id a submitter still counts) in ``incoming/`` and remove it the moment
    another submitter's temporary file appears, before the daemon reads it: the submitter took the id above
    it, beyond what the daemon accepts."""
    path = os.path.join(inc, far)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"x")
    os.close(fd)
    deadline = time.monotonic() + seconds
    while not os.path.exists(release) and time.monotonic() < deadline:
        if any(n.startswith("..submit-") for n in os.listdir(inc)):
            os.unlink(path)
            return True
    os.unlink(path)
    return False


def test_b_cannot_lure_a_s_submission_beyond_the_id_window(system, targets):
    """B puts a request name at the farthest id the daemon accepts and removes it as A's gsub writes, before the
    daemon reads it: A's gsub does not take the id above it (which the daemon would drop as too far), and A's
    job, which gsub reported submitted, is taken in and runs."""
    from gridsched.protocol.requests import ID_WINDOW, id_name
    from gridsched.protocol.spool import Spool

    a, b = system.a, system.b
    system.settle()
    far = id_name(Spool(system.spool_dir).highest_id() + ID_WINDOW)
    release = system.shared / f"release-{time.time_ns()}"
    lure = spawn_as(b, _lure_beyond_the_window, str(system.spool_dir / "incoming"), far, str(release), 30.0)
    try:
        wait_for(lambda: (system.spool_dir / "incoming" / far).exists(), 15, "B's name at the window's edge")
        jid = system.gsub(a, "-t", "1m", "--wrap", "echo ran")
    finally:
        release.touch()
        got = lure.result(30)
    print(f"B's lure: {got}; A's job {jid}")
    row = system.wait_state(jid, *TERMINAL, timeout=10)
    assert row["state"] == "COMPLETED", row
    check_intact(system, targets)
