"""Hostile request files in a real daemon's spool: refused or quarantined, logged, never fatal.

Huge, binary, truncated and deeply nested files, symbolic links, FIFOs, hard
links to another user's file, and floods of requests.  After each the daemon
is alive and still runs jobs, nothing was read as another user, and every bad
file sits in ``quarantine/`` with a ``.why``.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from gridsched.config import load
from gridsched.spool import Spool
from gridsched.state import StateDB
from gridsched.submit import Options, Script, build_spec
from tests.conftest import wait_for

NOBODY = 65534


def why(gs, name: str, timeout: float = 15) -> str:
    p = gs.spool / "quarantine" / (name + ".why")
    wait_for(p.exists, timeout, f"{name} to be quarantined")
    return p.read_text()


def still_serves(gs) -> None:
    jid = gs.gsub("--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
    assert gs.alive()


def uids_in_table(gs) -> set[int]:
    db = StateDB(gs.spool / "state.db")
    try:
        return {j["uid"] for j in db.jobs()}
    finally:
        db.close()


def test_huge_binary_truncated_and_nested_files_are_quarantined(gs):
    inc = gs.spool / "incoming"
    (inc / "submit-0000000901.json").write_bytes(b" " * (9 << 20))
    (inc / "submit-0000000902.json").write_bytes(os.urandom(4096))
    (inc / "submit-0000000903.json").write_bytes(b'{"type": "submit", "job": {"id": 903, "name": "x"')
    (inc / "cancel-1-1.json").write_bytes(b"[" * 200_000)
    (inc / "hold-1-1.json").write_bytes(b'{"type": "hold", "jobs": ' + b"[" * 100_000 + b"]}")
    assert "too large" in why(gs, "submit-0000000901.json")
    assert "JSON" in why(gs, "submit-0000000902.json")
    assert "JSON" in why(gs, "submit-0000000903.json")
    assert "JSON" in why(gs, "cancel-1-1.json")
    assert "JSON" in why(gs, "hold-1-1.json")
    still_serves(gs)
    assert gs.log().count("quarantined request") >= 5


def test_a_fifo_does_not_block_the_daemon(gs):
    fifo = gs.spool / "incoming" / "submit-0000000950.json"
    os.mkfifo(fifo)  # nobody ever writes to it: a blocking open would hang the daemon
    assert "not a regular file" in why(gs, fifo.name)
    still_serves(gs)


def test_a_symlink_is_not_followed(gs, tmp_path):
    secret = tmp_path / "secret.json"
    spec = {"type": "cancel", "jobs": [1]}
    secret.write_text(json.dumps(spec))
    os.chown(secret, NOBODY, NOBODY)  # a request someone else wrote, elsewhere
    os.symlink(secret, gs.spool / "incoming" / "cancel-2-2.json")
    assert "cannot open" in why(gs, "cancel-2-2.json")
    assert secret.exists()  # the target is untouched
    still_serves(gs)


def test_a_hard_link_to_another_users_file_is_not_read_as_theirs(gs):
    if os.getuid() != 0:
        pytest.skip("needs root to make a file owned by another user")
    victim = gs.spool / "victim.json"
    sp = Spool(gs.spool)
    cfg = load(str(gs.cfgfile))
    job = build_spec(sp, cfg, Script("#!/bin/sh\ntouch ran-as-nobody\n", "x", "x"), Options(), cwd=gs.work)
    job["uid"], job["gid"], job["user"] = NOBODY, NOBODY, "nobody"
    victim.write_text(json.dumps({"type": "submit", "job": job}))
    os.chown(victim, NOBODY, NOBODY)
    name = f"submit-{job['id']:010d}.json"
    os.link(victim, gs.spool / "incoming" / name)
    assert "more than one link" in why(gs, name)
    still_serves(gs)
    assert NOBODY not in uids_in_table(gs)
    assert not (gs.work / "ran-as-nobody").exists()


def test_a_request_claiming_another_uid_or_group_is_quarantined(gs):
    if os.getuid() != 0:
        pytest.skip("needs root to make a file owned by another user")
    sp = Spool(gs.spool)
    cfg = load(str(gs.cfgfile))
    names = {}
    for claim in ("uid", "gid"):
        job = build_spec(sp, cfg, Script("#!/bin/sh\ntrue\n", "x", "x"), Options(), cwd=gs.work)
        if claim == "uid":
            job["uid"], job["gid"] = 0, NOBODY  # written by nobody, claims root
        else:
            job["uid"], job["gid"] = NOBODY, 0  # nobody's own uid, root's group
        name = f"submit-{job['id']:010d}.json"
        tmp = gs.spool / "incoming" / f".{name}.tmp"
        tmp.write_text(json.dumps({"type": "submit", "job": job}))
        os.chown(tmp, NOBODY, NOBODY)
        os.rename(tmp, gs.spool / "incoming" / name)
        names[claim] = name
    assert "claims uid 0" in why(gs, names["uid"])
    assert "claims gid 0" in why(gs, names["gid"])
    still_serves(gs)
    assert uids_in_table(gs) == {os.getuid()}


def test_a_flood_of_requests_is_served_without_stalling(gs):
    sp = Spool(gs.spool)
    cfg = load(str(gs.cfgfile))
    n = 1500
    ids = []
    t0 = time.monotonic()
    for i in range(n):
        spec = build_spec(sp, cfg, Script("#!/bin/sh\ntrue\n", "f", "f"), Options(hold=True), cwd=gs.work, env={})
        sp.submit(spec)
        ids.append(spec["id"])
        (gs.spool / "incoming" / f"cancel-{i}-junk.json").write_bytes(b"\x00junk")
    took = time.monotonic() - t0
    # a job submitted behind the flood still runs, and its walltime is still enforced meanwhile
    probe = gs.gsub("-t", "2", "--wrap", "sleep 60")
    gs.wait_state(probe, "TIMEOUT", timeout=60)
    db = StateDB(gs.spool / "state.db")
    try:
        wait_for(lambda: len(db.jobs(states=["HELD"])) == n, 60, f"all {n} held jobs to be taken in")
    finally:
        db.close()
    wait_for(lambda: len(list((gs.spool / "quarantine").glob("*.why"))) == n, 60, "the junk to be quarantined")
    assert not [p for p in (gs.spool / "incoming").iterdir() if not p.name.startswith(".")]
    assert gs.alive()
    print(f"{n} submits and {n} junk files written in {took:.1f} s")


def test_atomic_write_never_writes_through_a_planted_link(tmp_path):
    import _thread

    from gridsched.spool import atomic_write

    target = tmp_path / "precious"
    target.write_text("keep\n")
    path = tmp_path / "seg-1.exit"
    os.symlink(target, tmp_path / f".seg-1.exit.{os.getpid()}.{_thread.get_ident()}.tmp")  # its exact temp name
    os.symlink(target, path)
    atomic_write(path, b'{"end": 1}')
    assert target.read_text() == "keep\n"
    assert not path.is_symlink() and path.read_text() == '{"end": 1}'
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_next_id_survives_a_rolled_back_counter(gs):
    first = gs.gsub("--hold", "--wrap", "true")
    gs.wait_state(first, "HELD")
    (gs.spool / "seq").write_text("garbage\n")  # spoiled: the table decides
    second = gs.gsub("--hold", "--wrap", "true")
    assert second == first + 1
    gs.wait_state(second, "HELD")
