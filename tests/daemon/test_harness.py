"""The harness's daemons: one forked from the fork server (tests/zygote.py) is the process that ``gschedd run``
started as a process of its own is, in everything the daemon and its jobs could tell apart."""

from __future__ import annotations

import os
import re
import signal
import sys

import psutil

from tests.conftest import FORK_SERVER, wait_for
from tests.zygote import ForkServer


def seen_from_outside(gs) -> dict:
    """What the daemon's process is, with the test's own paths taken out."""
    pid = gs.proc.pid

    def status() -> dict[str, str] | None:
        # read while it blocks no signal: it blocks them all for a moment as it spawns a process
        s = {k: v.strip() for k, v in (line.split(":", 1) for line in open(f"/proc/{pid}/status"))}
        return s if int(s["SigBlk"], 16) == 0 else None

    signals = wait_for(status, 15, "the daemon to block no signal")
    p = psutil.Process(pid)
    # the shepherds' starter, started as the daemon opens its table: its command line names the daemon's
    # interpreter and import path, its environment is the daemon's
    starter = wait_for(lambda: p.children(), 15, "the daemon's starter")[0]

    def mine(text: str) -> str:  # the test's paths and the inodes of sockets and pipes taken out
        return re.sub(r":\[\d+\]$", "", text.replace(str(gs.root), "ROOT"))

    return {
        "signals": {k: signals[k] for k in ("SigIgn", "SigCgt", "Threads", "Umask")},
        "session leader": os.getsid(pid) == pid and os.getpgid(pid) == pid,
        "cwd": p.cwd(),
        "files": sorted((int(fd), mine(os.readlink(f"/proc/{pid}/fd/{fd}"))) for fd in os.listdir(f"/proc/{pid}/fd")),
        "nice": p.nice(),
        "limits": [p.rlimit(r) for r in (psutil.RLIMIT_NOFILE, psutil.RLIMIT_NPROC, psutil.RLIMIT_CORE)],
        "starter": [mine(a) for a in starter.cmdline()[:-1]],  # the last: the daemon's pid
        "starter environment": {k: mine(v) for k, v in starter.environ().items()},
    }


def test_a_forked_daemon_is_the_process_a_started_one_is(make_gs):
    started = make_gs(start=False)
    started.start(fork=False)
    forked = make_gs(start=False)
    forked.start(fork=True)
    assert psutil.Process(forked.proc.pid).ppid() == FORK_SERVER.proc.pid  # it was forked
    assert psutil.Process(started.proc.pid).ppid() == os.getpid()
    # each read at a quiet moment: what it holds open changes for a moment as it works (its starter's socket,
    # its table's files), the same way in both
    try:
        wait_for(lambda: seen_from_outside(started) == seen_from_outside(forked), 15, "the same processes")
    except AssertionError:
        assert seen_from_outside(started) == seen_from_outside(forked)
    # it ends as the other does, and the harness is told how; it leaves its spool as the other does (its
    # database closed the same way: no write-ahead log left behind by one alone)
    for gs in (started, forked):
        gs.proc.send_signal(signal.SIGTERM)
        assert gs.proc.wait(15) == 0
    left = [sorted(p.relative_to(gs.spool).as_posix() for p in gs.spool.rglob("*")) for gs in (started, forked)]
    assert left[0] == left[1]


def test_the_fork_server_runs_the_interpreter_the_console_script_names(tmp_path):
    python = tmp_path / "env" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text("")
    python.chmod(0o755)
    script = python.parent / "gschedd"
    pip_sh = "'" * 3 + "exec' "
    for text, named in (
        (f"#!{python}\nimport sys\n", str(python)),
        # pip's form where the interpreter's path is too long for a #! line
        (f'#!/bin/sh\n{pip_sh}"{python}" "$0" "$@"\n' + "' " + "'" * 3 + "\nimport sys\n", str(python)),
        ("#!/bin/sh\necho not a console script\n", sys.executable),  # else: this interpreter
    ):
        script.write_text(text)
        assert ForkServer(python.parent).interpreter() == named, text
