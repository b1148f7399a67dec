"""System mode with two real users: what user B tries against user A must fail.

A system-mode daemon (root) serves a temporary spool; A and B are throwaway
users (see ``conftest.py``).  B works through the commands and by hand, in a
process switched to B's uid and groups.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, Targets, as_user, check_intact, spawn_as


def test_the_spool_is_shared_safely(system):
    st = {p: os.stat(system.spool_dir / p).st_mode & 0o7777 for p in ("incoming", "quarantine", "jobs", "state.db")}
    assert st == {"incoming": 0o1777, "quarantine": 0o711, "jobs": 0o711, "state.db": 0o644}
    assert os.stat(system.spool_dir).st_mode & 0o022 == 0


def test_nothing_in_the_spool_but_incoming_is_writable_by_others(system):
    """Every user may drop requests into incoming/ and wake the daemon; nothing else of the spool's is theirs
    to write (a file every user may write is one every user may spoil for the others)."""
    open_to_all = []
    for p in system.spool_dir.iterdir():
        st = os.lstat(p)
        if p.name in ("incoming", "gschedd.sock") or stat.S_ISLNK(st.st_mode):
            continue
        if st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != 0):
            open_to_all.append(f"{p.name} {oct(stat.S_IMODE(st.st_mode))}")
    assert not open_to_all, f"writable by other users: {open_to_all}"


def test_user_b_cannot_touch_user_a(system, targets):
    a, b = system.a, system.b
    home_a, home_b = a.home, b.home
    ja = system.gsub(a, "-t", "2m", "--wrap", "id -u > uid.$GS_JOBID; id -G > groups.$GS_JOBID; sleep 60")
    ra = system.wait_state(ja, "RUNNING")
    assert ra["uid"] == a.uid and ra["user"] == a.name
    wait_for(
        lambda: (home_a / f"groups.{ja}").exists() and (home_a / f"groups.{ja}").read_text(),
        10,
        "A's job to write its ids",
    )
    assert (home_a / f"uid.{ja}").read_text().split() == [str(a.uid)]  # it runs as A...
    assert "0" not in (home_a / f"groups.{ja}").read_text().split()  # ...without root's group

    # B can read the queue (state.db is readable by all)
    r = system.cmd(b, "gstat")
    assert r.rc == 0 and str(ja) in r.stdout, r

    # 1. cancel or hold A's job: the commands refuse; raw requests are refused by the daemon
    for tool in ("gdel", "ghold"):
        r = system.cmd(b, tool, str(ja))
        assert r.rc != 0 and "Traceback" not in r.stderr, r
    for kind in ("cancel", "hold"):
        system.put(b, f"{kind}-{time.time_ns()}-{os.getpid()}.json", {"type": kind, "jobs": [ja]})
    system.settle()
    assert system.job(ja)["state"] == "RUNNING"

    # 2. a request claiming A's uid, or root's group, never runs as A or with root's group
    probe = f"#!/bin/sh\nid -u > {home_b}/u.$GS_JOBID; id -G > {home_b}/g.$GS_JOBID\n"
    claim_uid = system.submit_as(b, record=False, uid=a.uid, user=a.name, script=probe)
    claim_gid = system.submit_as(b, record=False, gid=0, script=probe)
    system.settle()
    for jid in (claim_uid, claim_gid):
        row = system.job(jid)
        if row is not None:
            assert row["uid"] == b.uid, row
            system.wait_state(jid, *TERMINAL)
        u = home_b / f"u.{jid}"
        if u.exists():
            assert u.read_text().split() == [str(b.uid)], f"B's job {jid} ran as uid {u.read_text()}"
        g = home_b / f"g.{jid}"
        if g.exists():
            assert "0" not in g.read_text().split(), f"B's job ran with root's group: {g.read_text()}"
    assert not (home_a / "pwned").exists() and not (home_b / "pwned").exists()

    # 3. output to a root-only file: the file is opened as B, so the job fails and the file is untouched
    jo = system.submit_as(
        b, stdout=str(targets.shadow), stderr=str(targets.shadow), script="#!/bin/sh\necho overwritten\n"
    )
    jr = system.wait_state(jo, *TERMINAL)
    assert jr["state"] == "FAILED", jr
    targets.check()

    # 4. links planted in the spool: not followed, never written through
    planted = as_user(b, lambda: os.symlink(targets.shadow, system.spool_dir / "incoming" / "submit-0000099999.json"))
    assert "ok" in planted
    system.settle()
    assert system.job(99999) is None
    for target in ("seq", "state.db", "jobs/evil", "gschedd.pid", "gschedd.log", "quarantine/x.why"):
        r = as_user(b, lambda t=target: os.symlink(targets.shadow, system.spool_dir / t))
        assert "error" in r, target
    jh = system.gsub(b, "--hold", "-t", "1m", "--wrap", "echo fine")
    system.wait_state(jh, "HELD")
    jdir = system.spool_dir / "jobs" / str(jh)

    def plant(d: Path) -> int:
        n = 0
        for name in ["seg-1.pid", "seg-1.exit"] + [
            f".seg-1.{x}.{p}.tmp" for x in ("pid", "exit") for p in range(1, 2 << 10)
        ]:
            try:
                os.symlink(targets.shadow, d / name)
                n += 1
            except OSError:
                break
        return n

    print("links B planted in its held job's directory:", as_user(b, plant, jdir))
    assert system.cmd(b, "grls", str(jh)).rc == 0
    assert system.wait_state(jh, *TERMINAL)["exit_code"] == 0
    targets.check()
    assert not any(p.is_symlink() and p.name.startswith(("seg-", ".seg-")) for p in jdir.iterdir())

    # 5. A's job script, pending request and job directory listing are A's alone
    assert "error" in as_user(b, lambda: Path(system.spool_dir / "jobs" / str(ja) / "script").read_text())
    assert "error" in as_user(b, lambda: os.listdir(system.spool_dir / "jobs"))
    jp = system.gsub(a, "--hold", "-t", "1m", "--wrap", "echo secret-token")
    system.wait_state(jp, "HELD")
    assert "error" in as_user(b, lambda: (system.spool_dir / "jobs" / str(jp) / "script").read_text())

    # 6. A's environment, arguments and output paths: not in the job table all may read, and not shown to B
    je = system.gsub(a, "--hold", "-t", "1m", "--wrap", "true", extra_env={"A_TOKEN": "a-token-91f3"})
    system.wait_state(je, "HELD")
    spec = system.job(je)["spec"]
    assert "a-token-91f3" not in spec and str(home_a) not in spec, spec
    as_b = system.cmd(b, "gstat", "-f", str(je))
    assert as_b.rc == 0 and "a-token-91f3" not in as_b.stdout and str(home_a) not in as_b.stdout, as_b
    as_b = system.cmd(b, "gstat", "--json", "-a")
    assert as_b.rc == 0 and "a-token-91f3" not in as_b.stdout and str(home_a) not in as_b.stdout, as_b
    as_a = system.cmd(a, "gstat", "-f", str(je))
    assert as_a.rc == 0 and str(home_a) in as_a.stdout, as_a

    # A can still cancel A's own jobs
    r = system.cmd(a, "gdel", str(ja), str(jp), str(je))
    assert r.rc == 0, r
    for jid in (ja, jp, je):
        system.wait_state(jid, "CANCELLED")
    check_intact(system, targets)


def test_concurrent_users_never_share_a_job_id(system, targets):
    a, b = system.a, system.b
    results: dict[str, list] = {a.name: [], b.name: []}

    def many(u) -> None:
        for _ in range(15):
            r = system.cmd(u, "gsub", "--hold", "-t", "1m", "--wrap", "true")
            results[u.name].append(int(r.stdout.split()[-1]) if r.rc == 0 else str(r))

    threads = [threading.Thread(target=many, args=(u,)) for u in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    ids = results[a.name] + results[b.name]
    assert all(isinstance(i, int) for i in ids), ids
    assert len(set(ids)) == len(ids) == 30, sorted(ids)
    system.ids[a.name].update(results[a.name])
    system.ids[b.name].update(results[b.name])
    for jid in ids:
        system.wait_state(jid, "HELD")
    owners = {jid: system.job(jid)["uid"] for jid in ids}
    assert all(owners[j] == a.uid for j in results[a.name])
    assert all(owners[j] == b.uid for j in results[b.name])
    for u in (a, b):
        system.cmd(u, "gdel", *map(str, results[u.name]))
    check_intact(system, targets)


def test_a_job_runs_with_its_owner_s_groups_only(system, targets):
    """The groups of a job come from the group database for its owner, not from what the request says."""
    a, b = system.a, system.b
    jid = system.submit_as(
        b,
        record=True,
        script=f"#!/bin/sh\nid -G > {b.home}/groups.$GS_JOBID\n",
        groups=[0, a.gid],
        supplementary_groups=[0],
    )
    system.settle()
    row = system.job(jid)
    if row is not None:
        system.wait_state(jid, *TERMINAL)
        f = b.home / f"groups.{jid}"
        if f.exists():
            got = set(f.read_text().split())
            assert not got & {"0", str(a.gid)}, f"B's job ran with groups {got}"
    assert spawn_as(b, os.getgroups).result()["ok"] == [b.gid]
    check_intact(system, targets)


def test_a_group_taken_away_is_not_given_to_a_job_that_waited(fresh):
    """B submits a held job with the gid of a group B belongs to; the admin takes B out of that group; when
    the job is released it fails with the reason instead of running with the group."""
    import grp
    import subprocess

    system = fresh()
    b = system.b
    targets = Targets(system.base, system.a).snapshot()
    name = f"gsg{os.getpid() % 100000}"
    subprocess.run(["groupadd", name], check=True, capture_output=True)
    try:
        gid = grp.getgrnam(name).gr_gid
        subprocess.run(["gpasswd", "-a", b.name, name], check=True, capture_output=True)
        jid = system.submit_as(b, gid=gid, hold=True, script=f"#!/bin/sh\nid -G > {b.home}/groups.$GS_JOBID\n")
        assert system.wait_state(jid, "HELD")["uid"] == b.uid
        subprocess.run(["gpasswd", "-d", b.name, name], check=True, capture_output=True)
        assert system.cmd(b, "grls", str(jid)).rc == 0
        row = system.wait_state(jid, *TERMINAL)
        assert row["state"] == "FAILED" and "no longer a member of group" in row["reason"], row
        assert not (b.home / f"groups.{jid}").exists()
    finally:
        subprocess.run(["groupdel", name], capture_output=True)
    check_intact(system, targets)
