"""Hostile request files in a system daemon's spool: refused, never fatal, never read as someone else's.

Huge, binary, truncated and deeply nested files, a file growing while it is
read, FIFOs, hard links to another user's file.  After each the daemon is
alive and still runs A's jobs, and nothing was taken in as another user.
"""

from __future__ import annotations

import json
import os
import time

from tests.security.conftest import check_intact, spawn_as


def test_huge_binary_truncated_and_nested_files_are_refused(system, targets):
    b = system.b
    jid = system.next_id()
    files = {
        f"submit-{jid:010d}.json": b" " * (9 << 20),
        f"submit-{jid + 1:010d}.json": os.urandom(4096),
        f"submit-{jid + 2:010d}.json": b'{"type": "submit", "job": {"id": 903, "name": "x"',
        f"cancel-{time.time_ns()}-1.json": b"[" * 200_000,
        f"hold-{time.time_ns()}-1.json": b'{"type": "hold", "jobs": ' + b"[" * 100_000 + b"]}",
        f"hold-{time.time_ns()}-2.json": b'{"type": "hold", "jobs": [1e999999, -1e999999, 1' + b"0" * 5000 + b"]}",
        f"cancel-{time.time_ns()}-2.json": b'{"type": "cancel", "type": "submit", "jobs": [1]}',
        f"cancel-{time.time_ns()}-3.json": b"\xef\xbb\xbf" + json.dumps({"type": "cancel", "jobs": [1]}).encode(),
        f"cancel-{time.time_ns()}-4.json": b'{"type": "cancel", "jobs": ["\xed\xa0\x80"]}',  # a lone surrogate
    }
    system.last_id = jid + 2
    for name, data in files.items():
        assert "ok" in system.put(b, name, None, raw=data)
    system.settle(timeout=30)
    for j in (jid, jid + 1, jid + 2):
        assert system.job(j) is None
    check_intact(system, targets)


def test_a_file_growing_while_it_is_read(system, targets):
    """B keeps appending to a request after publishing it: the daemon reads a bounded amount and goes on."""
    b = system.b
    inc = system.spool_dir / "incoming"
    name = f"cancel-{time.time_ns()}-grow.json"

    def grow() -> int:
        fd = os.open(inc / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b'{"type": "cancel", "jobs": [')
        n = 0
        deadline = time.monotonic() + 4
        try:
            while time.monotonic() < deadline and n < (24 << 20):
                n += os.write(fd, b"1, " * 65536)
        except OSError:
            pass
        os.close(fd)
        return n

    wrote = spawn_as(b, grow).result(60)
    print("B wrote", wrote)
    system.settle(timeout=30)
    check_intact(system, targets)


def test_fifos_do_not_block_the_daemon(system, targets):
    b = system.b
    jid = system.next_id()
    names = [f"submit-{jid:010d}.json", f"cancel-{time.time_ns()}-fifo.json"]
    assert spawn_as(b, lambda: [os.mkfifo(system.spool_dir / "incoming" / n) for n in names] and 2).result()
    system.wake()
    system.settle()
    check_intact(system, targets)


def test_a_hard_link_to_another_users_file_is_not_read_as_theirs(system, targets):
    """A valid submission of A's, kept in A's home, hard-linked into incoming/ by someone else.

    The kernel forbids B this link here (protected_hardlinks); root makes it
    instead, standing for B on a host that allows it.  The file's owner is A,
    but A never submitted it: it must not run as A.
    """
    a = system.a
    spec = system.spec(a, script=f"#!/bin/sh\ntouch {a.home}/ran-as-a\n")
    victim = a.home / "kept-request.json"
    victim.write_text(json.dumps({"type": "submit", "job": spec}))
    os.chown(victim, a.uid, a.gid)
    os.link(victim, system.spool_dir / "incoming" / f"submit-{spec['id']:010d}.json")
    system.wake()
    system.settle()
    row = system.job(spec["id"])
    assert row is None, f"a second link to A's file was taken in as A's job: {row}"
    assert not (a.home / "ran-as-a").exists()
    check_intact(system, targets)


def test_atomic_write_never_writes_through_a_planted_link(tmp_path):
    import _thread

    from gridsched.protocol.spool import atomic_write

    target = tmp_path / "precious"
    target.write_text("keep\n")
    path = tmp_path / "seg-1.exit"
    os.symlink(target, tmp_path / f".seg-1.exit.{os.getpid()}.{_thread.get_ident()}.tmp")  # its exact temp name
    os.symlink(target, path)
    atomic_write(path, b'{"end": 1}')
    assert target.read_text() == "keep\n"
    assert not path.is_symlink() and path.read_text() == '{"end": 1}'
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_b_spoiling_what_it_can_write_of_the_id_state(system, targets):
    """Whatever of the spool's id bookkeeping B can write (a counter file, in some versions), B writes garbage,
    zero and a huge number into it: A's next ids are still new, distinct and A's."""
    a, b = system.a, system.b
    first = system.gsub(a, "-t", "1m", "--wrap", "true")
    system.wait_state(first, "COMPLETED")

    def spoil(text: str) -> dict[str, str]:
        out = {}
        for name in sorted(os.listdir(system.spool_dir)):
            p = system.spool_dir / name
            if os.path.islink(p) or not os.path.isfile(p) or not os.access(p, os.W_OK):
                continue
            try:
                with open(p, "w") as f:
                    f.write(text)
                out[name] = "written"
            except OSError as e:
                out[name] = e.strerror
        return out

    ids = []
    for text in ("garbage\n", "0\n", "99999999999999999999\n", "-5\n"):
        print(f"B wrote {text!r} into:", spawn_as(b, spoil, text).result())
        ids.append(system.gsub(a, "-t", "1m", "--wrap", "true"))
    assert len(set(ids + [first])) == 5, ids
    for jid in ids:
        row = system.wait_state(jid, "COMPLETED", "FAILED", timeout=15)
        assert row["uid"] == a.uid and row["state"] == "COMPLETED", row
    check_intact(system, targets)
