"""gdel, ghold and grls (and gctl's requests) on a full or read-only spool: one error line, nothing written.

The real commands run on a spool on a small tmpfs filled to the last byte,
then remounted read-only (root only: elsewhere those tests are skipped with the
reason printed); the same refusals are also checked in-process, with the
spool's write made to fail as a full disk makes it fail.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gridsched.cli import gctl, gdel, ghold, grls
from gridsched.protocol import spool as spoolmod
from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB
from tests.cli.conftest import job_row, write_rows
from tests.conftest import fill_disk

BIN = Path(sys.executable).parent
COMMANDS = [("gdel", "cancel", "1"), ("ghold", "hold", "1"), ("grls", "release", "2")]


def requests_in(spool: Spool) -> list[str]:
    """Every file in incoming/, hidden temporary files included."""
    try:
        return sorted(os.listdir(spool.incoming))
    except FileNotFoundError:
        return []


# -- in-process: the spool's write fails as on a full or read-only disk ----------------------------


@pytest.fixture
def failing_write(monkeypatch: pytest.MonkeyPatch):
    """Make every request write fail with the errno the test sets (ENOSPC by default)."""
    state = {"errno": errno.ENOSPC}

    def refuse(path: Path, data: bytes, mode: int = 0o644, fsync: bool = True) -> None:
        raise OSError(state["errno"], os.strerror(state["errno"]))

    monkeypatch.setattr(spoolmod, "atomic_write", refuse)
    return state


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EACCES], ids=errno.errorcode.get)
def test_job_commands_refuse_in_one_line_when_the_request_cannot_be_written(
    env, spool, run, put_rows, failing_write, err
):
    put_rows(job_row(1), job_row(2, state="HELD"))
    failing_write["errno"] = err
    for prog, kind, jid in COMMANDS:
        cmd = {"gdel": gdel.cli, "ghold": ghold.cli, "grls": grls.cli}[prog]
        r = run(cmd, [jid])
        assert r.exit_code == 1
        assert r.stdout == ""  # no "job 1: cancelling" for a request that was never written
        assert r.stderr == f"{prog}: error: cannot write the {kind} request to {spool.root}: {os.strerror(err)}\n"
        assert requests_in(spool) == []


def test_gctl_requests_refuse_in_one_line_when_the_request_cannot_be_written(env, spool, run, failing_write):
    spool.ensure()
    for args, kind in ((["drain", "0-1"], "drain"), (["resume", "0-1"], "undrain")):
        r = run(gctl.cli, args)
        assert r.exit_code == 1
        assert r.stderr == f"gctl: error: cannot write the {kind} request to {spool.root}: No space left on device\n"
        assert r.stdout == ""
    assert requests_in(spool) == []


# -- the real commands on a real full, then read-only, file system -----------------------------------


@pytest.fixture
def small_spool():
    """A spool with a pending job 1 and a held job 2 on a 4 MiB tmpfs; the environment to reach it."""
    if os.geteuid() != 0:
        print("full-spool tests skipped: mounting a tmpfs needs root")
        pytest.skip("needs root to mount a tmpfs")
    where = Path(tempfile.mkdtemp(prefix="gs-jobctl-full-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        where.rmdir()
        why = f"mount -t tmpfs failed: {r.stderr.strip()}"
        print(f"full-spool tests skipped: {why}")
        pytest.skip(why)
    try:
        (where / "cfg.toml").write_text("[daemon]\nautostart = false\n[machine]\ncores = 4\n")
        spool = Spool(where / "spool")
        write_rows(spool, job_row(1), job_row(2, state="HELD"))
        # the job table stays open for writing, as a running daemon keeps it (with its -wal and -shm files,
        # which readers need)
        daemon_db = StateDB(spool.db, write=True)
        env = {**os.environ, "GRIDSCHED_SPOOL": str(spool.root), "GRIDSCHED_CONFIG": str(where / "cfg.toml")}
        try:
            yield where, spool, env, daemon_db
        finally:
            daemon_db.close()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(where)], capture_output=True)
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        where.rmdir()


def command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], env=env, capture_output=True, text=True, timeout=60)


def test_full_then_read_only_spool(small_spool):
    where, spool, env, daemon_db = small_spool
    filler = where / "filler"
    fill_disk(filler)
    for prog, kind, jid in COMMANDS:
        r = command(env, prog, jid)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert r.stderr == f"{prog}: error: cannot write the {kind} request to {spool.root}: No space left on device\n"
        assert r.stdout == ""
    assert requests_in(spool) == []  # not even a temporary file is left behind
    r = command(env, "gstat", "--json")  # the state is still readable
    assert [j["state"] for j in json.loads(r.stdout)["jobs"]] == ["PENDING", "HELD"]

    daemon_db.close()  # as the daemon stops: a file system with open files cannot be made read-only
    assert subprocess.run(["mount", "-o", "remount,ro", str(where)]).returncode == 0
    try:
        for prog, kind, jid in COMMANDS:
            r = command(env, prog, jid)
            assert r.returncode == 1, (r.stdout, r.stderr)
            assert r.stderr == (
                f"{prog}: error: cannot write the {kind} request to {spool.root}: Read-only file system\n"
            )
        r = command(env, "gctl", "drain", "0")
        assert r.returncode == 1
        assert r.stderr == f"gctl: error: cannot write the drain request to {spool.root}: Read-only file system\n"
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(where)], check=True)
    assert requests_in(spool) == []

    filler.unlink()  # room again: the same command works
    r = command(env, "gdel", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "job 1: cancelling\n"
    names = requests_in(spool)
    assert len(names) == 1 and names[0].startswith("cancel-")
