"""gstat --watch and --gantt."""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from gridsched.cli import gstat
from gridsched.cli.gstat_live import gantt
from tests.conftest import wait_for


def test_gantt_places_bars_by_time(make_row):
    now = 1_000_000.0
    running = make_row(1, state="RUNNING", name="run", start_time=now - 1800, walltime=3600, ncpus=2)
    pending = make_row(2, state="PENDING", name="next", predicted_start=now + 3600, walltime=7200)
    unknown = make_row(3, state="PENDING", name="later")  # no prediction: not drawn
    text = gantt([running, pending, unknown], now, hours=4, width=60)  # 240 s a column
    lines = text.splitlines()
    bars = {ln.split()[0]: ln for ln in lines[2:4]}
    run_cells = bars["1"][len("1 run".ljust(8)) + 2 :][:60]
    next_cells = bars["2"][len("2 next".ljust(8)) + 2 :][:60]
    assert run_cells == "#" * 7 + " " * 53  # until now + 1800 s = column 7.5
    assert next_cells == " " * 15 + "." * 30 + " " * 15  # from now + 3600 s (col 15) to + 10800 s (col 45)
    assert "running 2c, ends +00:30:00" in bars["1"] and "pending 1c, ends +03:00:00" in bars["2"]
    assert "3 later" not in text


def test_gantt_marks_jobs_that_go_past_the_horizon(make_row):
    now = 0.0
    long = make_row(1, state="RUNNING", start_time=now, walltime=86400)
    line = gantt([long], now, hours=1, width=10).splitlines()[2]
    assert "##########>" in line


def test_watch_prints_count_snapshots_off_a_terminal(env, run, put_rows, make_row):
    put_rows(make_row(1), make_row(2, state="COMPLETED"))
    r = run(gstat.cli, ["--watch", "0.1", "--count", "3"])
    assert r.exit_code == 0
    stamps = [ln for ln in r.stdout.splitlines() if ln.startswith("# ")]
    heads = [ln for ln in r.stdout.splitlines() if ln.startswith("ID")]
    assert len(stamps) == 3 and len(heads) == 3
    assert "COMPLETED" not in r.stdout  # the same selection as gstat without -a


def test_gantt_and_watch_refuse_json(env, run):
    r = run(gstat.cli, ["--gantt", "--json"])
    assert r.exit_code == 2
    assert r.stderr == "gstat: error: --watch and --gantt go with neither --full nor --json\n"


def test_ctrl_c_ends_watch_quietly_on_a_terminal(env):
    import pty

    pid, fd = pty.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell's background job starts with it ignored
            os.execve(sys.executable, [sys.executable, "-m", "gridsched.cli.gstat", "--watch", "0.2"], dict(os.environ))
        finally:
            os._exit(127)
    out = b""
    try:

        def seen_table() -> bool:
            nonlocal out
            if select.select([fd], [], [], 0.2)[0]:
                out += os.read(fd, 65536)
            return b"STATE" in out

        wait_for(seen_table, 30, "the live table")
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], 0.2)[0]:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        status = None
        for _ in range(100):  # bounded: never hang on a child that did not stop
            wpid, st = os.waitpid(pid, os.WNOHANG)
            if wpid:
                status = st
                break
            time.sleep(0.1)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("gstat --watch did not stop on SIGINT")
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"interrupted" not in out and b"Traceback" not in out
