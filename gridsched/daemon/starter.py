"""The shepherds' starter: a small process, started once by the daemon, that forks each job's shepherd.

Forking the daemon for every job costs in proportion to the daemon's size: its
page tables are copied at the fork, and every page the shepherd (and the job's
first process, a fork of the shepherd) or the daemon then writes is copied
again while they share it.  The starter is a fresh interpreter that imports
only :mod:`.launch` and what it needs, so the same fork costs a fraction of
that, and none of it is the daemon's.

The daemon sends a :class:`~gridsched.daemon.launch.Launch` on a private
socket pair (a length and a pickle: both ends are the daemon's own code, of
the same installation), after what the daemon found of the host (how jobs are
confined: each shepherd inherits it, as it did from the daemon) and the write end of the daemon's pipe of ends (on
which each shepherd tells the daemon its job's end); the starter forks the shepherd, opens a pidfd on it,
and sends back its pid and start time with the pidfd attached (so the daemon
watches exactly that process, whoever reaps it), or why it could not.  The
starter reaps the shepherds that have ended, after each request and every
second.

It dies with the daemon (``PR_SET_PDEATHSIG``), and a shepherd dies with the
starter until it has written its pid file (:func:`~gridsched.daemon.launch.spawn`
arms it against its parent, which is now the starter): a daemon killed before
a shepherd was armed leaves no job running that a restarted daemon cannot know
of, as before.  It ignores the signals a terminal or an admin sends to the
daemon's process group; the daemon decides when to stop, and its end is the
starter's.
"""

from __future__ import annotations

import array
import os
import pickle
import select
import signal
import socket
import struct
import sys

HEADER = struct.Struct("!I")
MAX_REQUEST = 64 << 20  # a launch holds the job's environment: never this large


def read_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``; EOFError at its end."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def send_message(sock: socket.socket, data: bytes, fds: list[int] | None = None) -> None:
    """A length, then ``data``; ``fds`` ride along with the first byte."""
    msg = HEADER.pack(len(data)) + data
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = sock.sendmsg([msg], anc)
    if sent < len(msg):
        sock.sendall(msg[sent:])


def recv_message(sock: socket.socket) -> tuple[bytes, list[int]]:
    """What :func:`send_message` sent: the data and the descriptors that came with it."""
    fds = array.array("i")
    head, anc, _flags, _addr = sock.recvmsg(HEADER.size, socket.CMSG_SPACE(fds.itemsize))
    got: list[int] = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
            got.extend(fds)
    if not head:
        raise EOFError
    if len(head) < HEADER.size:
        head += read_exact(sock, HEADER.size - len(head))
    (n,) = HEADER.unpack(head)
    if n > MAX_REQUEST:
        raise ValueError(f"a message of {n} bytes")
    return read_exact(sock, n), got


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def serve(sock: socket.socket) -> None:
    """Start a shepherd for each launch that comes on ``sock``, until the daemon closes it."""
    from gridsched.daemon import confine, devcgroup, launch
    from gridsched.daemon.procs import start_ticks

    # first, what the daemon found of this host (how jobs are confined, whether device nodes can be refused):
    # each shepherd inherits it, as it would from the daemon itself, instead of probing again
    try:
        data, fds = recv_message(sock)
    except (EOFError, ConnectionError):
        return
    found = pickle.loads(data)
    confine._found = found["confine"]
    devcgroup._found = found["devices"]
    if fds:  # the write end of the daemon's pipe of ends: each shepherd tells the daemon its job's end on it
        os.set_inheritable(fds[0], False)  # forked shepherds keep it; the jobs they start do not
        launch.NOTIFY = fds[0]
        for fd in fds[1:]:
            os.close(fd)
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    while True:
        if not poller.poll(1000):
            _reap()
            continue
        try:
            data, fds = recv_message(sock)
        except (EOFError, ConnectionError):
            return
        go = fds[0] if fds else -1  # the daemon's word to the shepherd: go once the private directory is made
        for fd in fds[1:]:
            os.close(fd)
        pidfd = -1
        try:
            if go >= 0:
                os.set_inheritable(go, False)  # the shepherd's, never its job's
            spec = pickle.loads(data)
            launch.mark("st_recv", spec.job_id)
            pid = launch.spawn(spec, go)
            launch.mark("st_forked", spec.job_id)
            pidfd = os.pidfd_open(pid)
            reply: dict[str, object] = {"pid": pid, "ticks": start_ticks(pid)}
        except OSError as e:
            reply = {"errno": e.errno or 0, "error": e.strerror or str(e)}
        finally:
            if go >= 0:
                os.close(go)
        try:
            send_message(sock, pickle.dumps(reply), [pidfd] if pidfd >= 0 else None)
        except OSError:
            return
        finally:
            if pidfd >= 0:
                os.close(pidfd)
        _reap()


def main() -> None:
    """``python -m gridsched.daemon.starter FD DAEMON_PID``: serve the daemon ``DAEMON_PID`` on socket ``FD``."""
    fd, daemon = int(sys.argv[1]), int(sys.argv[2])
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    from gridsched.daemon import launch

    launch.ignore_signals()  # the shepherd's dispositions (the same): each shepherd inherits them
    if launch._libc is not None:
        launch._libc.prctl(launch.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != daemon:
        return  # the daemon is gone already
    sock = socket.socket(fileno=fd)
    import gc

    gc.collect()
    gc.freeze()  # what is loaded now stays where it is: fewer pages written after each fork
    serve(sock)


if __name__ == "__main__":
    main()
