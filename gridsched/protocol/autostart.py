"""Starting a personal daemon from a command (the configuration's ``daemon.autostart``), once.

Commands started together on a spool where no daemon runs (a shell loop that puts each ``gsub`` in the
background, a script's parallel submissions) would each start a daemon: every one but the first finds the
spool taken and exits, after importing the daemon for nothing, and each command would say it started one.
So the command that starts one holds ``autostart.lock`` in the spool until the daemon has taken the
spool's own lock (a bounded wait, about the daemon's start-up); the others wait on it, find the daemon
running, and start none.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gridsched.protocol.spool import Spool

WAIT = 5.0  # seconds: at most, for another command's daemon to take the spool, or for ours to
POLL = 0.01


def autostart(spool: Spool, config_file: str | None) -> bool:
    """Start a personal daemon on ``spool`` unless one runs or another command has just started one;
    whether this call started it."""
    from gridsched.protocol.spool import spawn_daemon

    spool.ensure()
    try:
        fd = os.open(spool.root / "autostart.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:  # a spool this user may not write in: the daemon's own lock decides alone
        if spool.daemon_info() is not None:
            return False
        spawn_daemon(spool, config_file)
        return True
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False  # another command is still starting one
                time.sleep(POLL)
        if spool.daemon_info() is not None:
            return False  # started by the command that held the lock before us
        proc = spawn_daemon(spool, config_file)
        deadline = time.monotonic() + WAIT
        while spool.daemon_info() is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(POLL)
        return True
    finally:
        os.close(fd)
