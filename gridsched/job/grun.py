"""The job side of grun: what a grun job runs on its cores.

``python -m gridsched.job.grun SOCKET -- CMD [ARGS...]`` connects to the Unix
socket grun listens on (in a directory of mode 0700 that only the user can
reach), receives the terminal or the standard streams as file descriptors
(:func:`socket.recv_fds`) and runs CMD on them as a child.  With a pseudo-terminal
CMD leads a session of its own whose controlling terminal is the pty's slave, so
^C typed at grun's raw terminal reaches its foreground process group as on a
real terminal.

Messages are lines of JSON.  grun sends the first one with the descriptors,
``{"pty": BOOL}``, then ``{"signal": N}`` to forward a signal to CMD.  This side
answers ``{"exit": STATUS}`` (128+N for a signal, as a shell reports it, with
``"error"`` when CMD could not be started) and exits with STATUS.  When the
socket closes before CMD has ended (grun died), CMD is ended: SIGHUP for a pty
(a terminal hang-up), SIGTERM otherwise, SIGKILL after :data:`GRACE` seconds.

Standard library only: it starts with every grun job.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys

GRACE = 10.0  # seconds CMD has to end after the hang-up before it is killed
MAX_MSG = 4096  # bytes of one message from grun
FORWARDED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2}


def status_of(returncode: int) -> int:
    """The exit status a shell reports for a child's ``returncode`` (128+N for signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def _send(sock: socket.socket, msg: dict[str, object]) -> None:
    try:
        sock.sendall(json.dumps(msg).encode() + b"\n")
    except OSError:
        pass


def _take_terminal() -> None:  # in the child, after setsid: fd 0 is the pty's slave
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m gridsched.job.grun SOCKET -- CMD [ARGS...]", file=sys.stderr)
        return 2
    path, cmd = argv[1], argv[3:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        msg, fds, _, _ = socket.recv_fds(sock, MAX_MSG, 3)
        first = json.loads(msg.split(b"\n", 1)[0])
        pty = bool(first.get("pty"))
    except (OSError, ValueError, AttributeError) as e:
        print(
            f"grun: error: cannot reach grun at {path}: {e} (has it ended? a grun job cannot be rerun)", file=sys.stderr
        )
        return 1
    if len(fds) != (1 if pty else 3):
        print("grun: error: grun sent no terminal", file=sys.stderr)
        return 1
    streams = (fds[0], fds[0], fds[0]) if pty else (fds[0], fds[1], fds[2])
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=streams[0],
            stdout=streams[1],
            stderr=streams[2],
            start_new_session=pty,
            preexec_fn=_take_terminal if pty else None,  # no threads here
            restore_signals=True,
        )
    except OSError as e:
        code = 127 if isinstance(e, FileNotFoundError) else 126
        why = "command not found" if code == 127 else (e.strerror or str(e))
        _send(sock, {"exit": code, "error": f"{cmd[0]}: {why}"})
        return code
    finally:
        for fd in set(fds):
            os.close(fd)
    # a SIGTERM of the job (gdel, walltime) reaches CMD from the daemon too; this side waits for it
    for ign in (signal.SIGINT, signal.SIGHUP):
        signal.signal(ign, signal.SIG_IGN)
    pidfd = os.pidfd_open(proc.pid)
    sel = selectors.DefaultSelector()
    sel.register(pidfd, selectors.EVENT_READ)
    sel.register(sock, selectors.EVENT_READ)
    buf = b""
    hung_up_at: float | None = None
    import time

    while True:
        timeout = None if hung_up_at is None else max(0.0, hung_up_at + GRACE - time.monotonic())
        events = sel.select(timeout)
        if not events and hung_up_at is not None:
            _signal(proc, pty, signal.SIGKILL)
            proc.wait()
            return status_of(proc.returncode)
        for key, _ in events:
            if key.fileobj == pidfd:
                status = status_of(proc.wait())
                if hung_up_at is None:
                    _send(sock, {"exit": status})
                return status
            try:
                data = sock.recv(MAX_MSG)
            except OSError:
                data = b""
            if not data:  # grun is gone: hang up
                sel.unregister(sock)
                hung_up_at = time.monotonic()
                _signal(proc, pty, signal.SIGHUP if pty else signal.SIGTERM)
                continue
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    n = int(json.loads(line).get("signal"))
                except (ValueError, TypeError, AttributeError):
                    continue
                if n in FORWARDED:
                    _signal(proc, pty, n)
            if len(buf) > MAX_MSG:
                buf = b""


def _signal(proc: subprocess.Popen[bytes], pty: bool, sig: int) -> None:
    """Send ``sig`` to CMD (with a pty: to its session's process group, as a terminal does)."""
    try:
        if pty:
            os.killpg(proc.pid, sig)
            if sig == signal.SIGHUP:
                os.killpg(proc.pid, signal.SIGCONT)
        else:
            proc.send_signal(sig)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
