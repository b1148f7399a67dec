"""gtail follows a job's output file while it runs and ends with the job."""

from __future__ import annotations

import os
import select
import subprocess
import time

import pytest

from tests.conftest import BIN, wait_for


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs: the module's daemon serves them all."""
    return shared_gs


def read_until(proc: subprocess.Popen[bytes], fd: int, text: bytes, timeout: float = 30) -> bytes:
    """What ``proc`` wrote on ``fd`` until ``text`` appeared (bounded by ``timeout``)."""
    out = b""
    deadline = time.monotonic() + timeout
    while text not in out:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} after {timeout}s: {out!r}"
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            data = os.read(fd, 4096)
            assert data, f"EOF before {text!r}: {out!r} (exit {proc.poll()})"
            out += data
    return out


def test_gtail_waits_while_held_follows_and_exits_with_the_job(gs):
    go = gs.work / "go"
    script = f"echo first; i=0; while [ ! -e {go} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo second"
    jid = gs.gsub("-t", "60s", "--hold", "--wrap", script)
    proc = subprocess.Popen(
        [str(BIN / "gtail"), str(jid)], env=gs.env, cwd=gs.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        err = read_until(proc, proc.stderr.fileno(), b"waiting for it to start")
        assert f"gtail: job {jid} is HELD: waiting for it to start".encode() in err
        gs.run("grls", str(jid), check=True)
        out = read_until(proc, proc.stdout.fileno(), b"first\n")
        assert proc.poll() is None  # the job still runs: gtail follows it
        go.touch()
        rest, err2 = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert (out + rest) == b"first\nsecond\n"
    assert proc.returncode == 0
    assert f"gtail: job {jid} ended: COMPLETED (exit status 0)".encode() in err + err2


def test_gtail_n_shows_the_last_lines_of_an_ended_job_and_its_status(gs):
    jid = gs.gsub("--wrap", "seq 1 500; echo oops >&2; exit 3")
    gs.wait_state(jid, "FAILED")
    r = gs.run("gtail", "-n", "2", str(jid))
    assert r.stdout == "499\n500\n"
    assert r.returncode == 3
    assert r.stderr.strip() == f"gtail: job {jid} ended: FAILED (exit status 3)"
    e = gs.run("gtail", "-e", "-n", "5", str(jid))
    assert e.stdout == "oops\n"
    z = gs.run("gtail", "-n", "0", str(jid))
    assert z.stdout == ""
    f = gs.run("gtail", "-f", "-n", "2", str(jid))  # tail's habit: -f is what gtail does anyway
    assert (f.stdout, f.returncode) == ("499\n500\n", 3)


def test_gtail_of_an_unknown_job_is_one_line(gs):
    r = gs.run("gtail", "4242")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ["gtail: error: job 4242: no such job"]
    r = gs.run("gtail", "x1")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1


def test_gtail_does_not_follow_a_link_or_block_on_a_fifo_the_job_planted(gs):
    secret = gs.root / "secret"
    secret.write_text("SECRET-CONTENT\n")
    for plant, why in ((f"ln -s {secret} $OUT", "a symbolic link"), ("mkfifo $OUT", "not a regular file")):
        ready = gs.work / "planted"
        ready.unlink(missing_ok=True)
        jid = gs.gsub(
            "-t", "60s", "-o", "out.%j", "--wrap", f"OUT=out.$GS_JOBID; rm -f $OUT; {plant}; touch {ready}; sleep 60"
        )
        wait_for(ready.exists, 30, "the job to plant its file")
        r = gs.run("gtail", str(jid), timeout=20)
        assert r.returncode == 1, r.stderr
        assert "SECRET" not in r.stdout
        assert r.stderr.startswith(f"gtail: error: job {jid}: ") and why in r.stderr, r.stderr
        gs.run("gdel", str(jid), check=True)
        gs.wait_state(jid, "CANCELLED")
