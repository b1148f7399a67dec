"""Links, FIFOs, sockets and directories that user B plants in ``incoming/``.

``incoming/`` is writable by everyone (mode 1777).  Whatever B puts there, the
root daemon must never write, read or chown through it, must not block on it,
and must go on serving user A; and A's (or root's) ``gstat`` must not hang on it.
"""

from __future__ import annotations

import json
import os
import socket
import time

from tests.security.conftest import check_intact, spawn_as

BAD = b'{"type": "submit", "job": '  # truncated JSON: quarantined with a reason file


def test_reason_files_are_not_written_through_planted_links(system, targets):
    """B plants links named like the reason file of a request, then sends that (bad) request.

    The daemon moves a refused request to ``quarantine/NAME`` and writes
    ``NAME.why`` beside it; a link B planted as ``incoming/NAME.why`` was
    itself quarantined (moved) there first.  Writing the reason must not
    follow it into the file it names.
    """
    b = system.b
    inc = system.spool_dir / "incoming"
    stem = f"cancel-{time.time_ns()}-evil"
    long_name = "cancel-" + "L" * 240 + ".json"  # its reason file gets a shortened name
    bad = [f"{stem}.json", f"{stem}b.json", long_name, f"{stem}c"]
    links = {
        f"{stem}.json.why": targets.shadow,
        f"{stem}.why": targets.crontab,
        f"{stem}b.json.why": targets.crontab,
        f"{stem}b.why": targets.shadow,
        f"{stem}c.why": targets.shadow,
        long_name[:120] + "....why": targets.shadow,
        long_name[:-5] + ".why": targets.crontab,
        f".{stem}.json.why": targets.shadow,  # hidden names the daemon might derive for temporary files
        f".{stem}.json.why.tmp": targets.shadow,
        f"{stem}.json.why.tmp": targets.crontab,
        f"{stem}.json.tmp": targets.crontab,
    }

    def plant() -> int:
        n = 0
        for name, target in links.items():
            os.symlink(target, inc / name)
            n += 1
        return n

    assert as_ok(spawn_as(b, plant).result()) == len(links)
    system.settle()  # the links themselves are refused and moved to quarantine/ first

    def send() -> int:
        for name in bad:
            fd = os.open(inc / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, BAD)
            os.close(fd)
        return len(bad)

    assert as_ok(spawn_as(b, send).result()) == len(bad)
    system.wake()
    system.settle()
    targets.check()
    q = system.spool_dir / "quarantine"
    # the bad requests were refused (their reasons are somewhere, not in the targets)
    assert not any(os.path.lexists(inc / n) for n in bad)
    assert any(p.name.startswith(stem) for p in q.iterdir())
    check_intact(system, targets)


def test_links_named_like_requests_are_not_followed(system, targets):
    """Symbolic links named like requests, pointing at a request of A's, at A's files and at root's."""
    a, b = system.a, system.b
    inc = system.spool_dir / "incoming"
    victim = system.gsub(a, "--hold", "--wrap", "true")
    system.wait_state(victim, "HELD")
    # a request A keeps in A's home (say, a copy of one A wrote): valid, and A's
    spec = system.spec(a, hold=True)
    req = a.home / "my-request.json"
    req.write_text(json.dumps({"type": "submit", "job": spec}))
    os.chown(req, a.uid, a.gid)
    os.chmod(req, 0o644)
    cancel = a.home / "my-cancel.json"
    cancel.write_text(json.dumps({"type": "cancel", "jobs": [victim]}))
    os.chown(cancel, a.uid, a.gid)
    plan = {
        f"submit-{spec['id']:010d}.json": req,
        f"cancel-{time.time_ns()}-1.json": cancel,
        f"submit-{spec['id'] + 1:010d}.json": targets.shadow,
        f"release-{time.time_ns()}-1.json": targets.rootjson,
        f"resv_create-{time.time_ns()}-1.json": targets.a_secret,
    }

    def plant() -> int:
        for name, target in plan.items():
            os.symlink(target, inc / name)
        return len(plan)

    assert as_ok(spawn_as(b, plant).result()) == len(plan)
    system.wake()
    system.settle()
    row = system.job(spec["id"])
    assert row is None or row["uid"] != a.uid, f"a link of B's was taken in as A's submission: {row}"
    assert system.job(victim)["state"] == "HELD", "a link of B's to A's cancel request cancelled A's job"
    targets.check()
    check_intact(system, targets)
    system.cmd(a, "gdel", str(victim))


def test_a_hard_link_to_a_root_file(system, targets):
    """B tries to hard-link root's files into incoming/ (the kernel may refuse; if not, the daemon must)."""
    b = system.b
    inc = system.spool_dir / "incoming"

    def link() -> dict[str, str]:
        out = {}
        for i, t in enumerate((targets.shadow, targets.crontab, targets.rootjson)):
            try:
                os.link(t, inc / f"submit-{9_000_000 + i:010d}.json")
                out[str(t)] = "linked"
            except OSError as e:
                out[str(t)] = e.strerror
        return out

    res = as_ok(spawn_as(b, link).result())
    print("hard links by B:", res)
    system.wake()
    system.settle()
    linked = [t for t, r in res.items() if r == "linked"]
    targets.check(ignore_nlink=bool(linked))  # a link B could make adds a name, nothing else
    for jid in range(9_000_000, 9_000_003):
        row = system.job(jid)
        assert row is None or row["uid"] == b.uid, f"a hard link of B's became a job of uid {row['uid']}"
    check_intact(system, targets)


def test_fifos_sockets_and_directories_in_incoming(system, targets):
    """B keeps planting FIFOs, sockets, directories and links to FIFOs in incoming/ while A and root run gstat.

    Nothing may block: the daemon (it must still serve A) nor A's or root's
    ``gstat``, ``gstat -r`` and ``gresv list`` (each given 10 s).
    """
    a, b = system.a, system.b
    inc = system.spool_dir / "incoming"
    fifo_home = b.home / "fifo"
    os.mkfifo(fifo_home)
    os.chown(fifo_home, b.uid, b.gid)
    stop = system.base / "stop-planting"

    def plant() -> dict[str, int]:
        n = {"fifo": 0, "socket": 0, "dir": 0, "link": 0, "errors": 0}
        socks = []
        deadline = time.monotonic() + 25
        i = 0
        while not stop.exists() and time.monotonic() < deadline:
            i += 1
            kinds = [
                ("fifo", f"submit-{99_000 + i % 50:010d}.json"),
                ("fifo", f"resv_create-{i}-f.json"),
                ("fifo", f"cancel-{i}-f.json"),
                ("socket", f"hold-{i}-s.json"),
                ("dir", f"release-{i}-d.json"),
                ("link", f"submit-{99_100 + i % 50:010d}.json"),
                ("link", f"resv_create-{i}-l.json"),
            ]
            for kind, name in kinds:
                p = inc / name
                try:
                    if kind == "fifo":
                        os.mkfifo(p)
                    elif kind == "socket":
                        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        s.bind(str(p))
                        socks.append(s)
                    elif kind == "dir":
                        os.mkdir(p)
                    else:
                        os.symlink(fifo_home, p)
                    n[kind] += 1
                except OSError:
                    n["errors"] += 1
            time.sleep(0.05)
        for s in socks:
            s.close()
        return n

    child = spawn_as(b, plant)
    hung = []
    try:
        time.sleep(0.5)  # let the first ones land
        for _ in range(2):
            for who, args in (
                (a, ("gstat",)),
                (None, ("gstat",)),
                (a, ("gstat", "-r")),
                (a, ("gresv", "list")),
                (None, ("gstat", "-a", "--json")),
            ):
                r = system.cmd(who, *args, timeout=10)
                if r.rc != 0 or "Traceback" in r.stderr:
                    hung.append(f"as {'root' if who is None else who.name}: {r}")
    finally:
        stop.touch()
        planted = child.result(60)
    print("planted by B:", planted)
    assert not hung, "\n".join(hung)
    assert system.alive(), system.why_dead()
    system.settle(timeout=30)
    check_intact(system, targets)


def as_ok(r: dict) -> object:
    assert "ok" in r, r
    return r["ok"]
