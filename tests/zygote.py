"""A fork server for the test harness's real daemons: one process that has imported the daemon's code forks a daemon
per start, so a test does not pay a fresh interpreter's start and the daemon's imports each time.

The forked daemon is a real separate process, as ``gschedd run`` started by the harness was: a session of its own,
its output appended to a log file, standard input ``/dev/null``, no other file descriptor, the test's environment
(``os.environ`` replaced, the cached temporary directory and time zone read again), the working directory the
harness had, the default disposition of every signal a fresh interpreter leaves at its default, the console script's
interpreter, ``sys.path`` and ``sys.argv`` (the server runs the script's own lines up to its call of ``main``, and
the daemon makes that call).  What differs: its parent is the fork server (which reaps it and reports its exit
status), and what ``/proc/PID/environ`` and ``/proc/PID/cmdline`` show is the fork server's (its environment is the
test process's without any ``GRIDSCHED_*`` or ``GS_*`` variable).  The server is single-threaded when it forks
(checked).  A daemon whose environment says something else to the interpreter as it starts (``PYTHON*``, the locale)
is started as a process of its own.  The tests of ``gschedd start`` itself run the real command
(:meth:`Gridsched.run`), tests/daemon/test_harness.py compares a forked daemon with one started as a process, and
``GRIDSCHED_TEST_FORK=0`` makes the harness start every daemon as a process of its own again."""

from __future__ import annotations

import json
import os
import select
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The fork server's program: it reads one request a line ({"args", "env", "cwd", "log"}) and answers the
# daemon's pid ("pid N" or "error WHY"); "exit N CODE" when one of its daemons has ended (CODE as
# Popen.returncode says it: -SIGNAL for a signal).
SERVER = r"""
import json, os, runpy, signal, sys
sys.path[0] = BIN
sys.argv = [BIN + "/gschedd"]
import gridsched.cli.gschedd, gridsched.daemon.loop, gridsched.daemon.handlers
import gridsched.daemon.launch, gridsched.daemon.spawn

# the console script's own lines, run up to its call of main (the import path and sys.argv as it sets them)
class Here(BaseException):
    pass

def here():
    raise Here

main, gridsched.cli.gschedd.main = gridsched.cli.gschedd.main, here
try:
    runpy.run_path(BIN + "/gschedd", run_name="__main__")
except Here:
    pass
finally:
    gridsched.cli.gschedd.main = main
script_argv0 = sys.argv[0]

sock = FD
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
os.set_blocking(wake_r, False)
signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
signal.signal(signal.SIGCHLD, lambda *a: None)

def send(line):
    os.write(sock, (line + "\n").encode())

def child(req):
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    import tempfile, time
    tempfile.tempdir = None
    time.tzset()
    sys.argv = [script_argv0, *req["args"]]
    # as the console script ends: what main raises or returns leaves the interpreter the way it leaves a process
    # of its own (the server's loop is not gone back to: nothing catches it on the way out), its exit handlers
    # and the finalizers of what it left open (its database connections) run
    sys.exit(main())

buf = b""
while True:
    ready, _, _ = select.select([sock, wake_r], [], [])
    if wake_r in ready:
        try:
            while os.read(wake_r, 512):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            send(f"exit {pid} {os.waitstatus_to_exitcode(status)}")
    if sock in ready:
        data = os.read(sock, 1 << 20)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            if len(os.listdir("/proc/self/task")) != 1:
                send("error the fork server has more than one thread")
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pid = os.fork()
            except OSError as e:
                send(f"error fork: {e}")
                continue
            if pid == 0:
                child(req)
            send(f"pid {pid}")
"""


PIP_SH = "'''exec' "  # how the second line of pip's console script for a long interpreter path starts
INTERPRETER_VARS = ("PYTHON", "LC_", "LANG")  # what an interpreter reads from its environment as it starts


class ForkServer:
    """The pytest process's end of the fork server: started on first use, again if it has died."""

    def __init__(self, bin_dir: Path, env: dict[str, str] | None = None) -> None:
        """A server for ``BIN_DIR/gschedd`` (the console script whose lines it runs, and whose interpreter it
        is), in ``env`` (default: the environment as it is now) without any ``GRIDSCHED_*`` or ``GS_*``."""
        self.bin = bin_dir
        self.env = dict(os.environ if env is None else env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.buf = b""
        self.ended: dict[int, int] = {}  # pid -> exit code, of the daemons it has reaped
        self.errlog: Path | None = None

    def _start(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {k: v for k, v in self.env.items() if not k.startswith(("GRIDSCHED_", "GS_"))}
        code = f"import select\nBIN = {str(self.bin)!r}\nFD = {theirs.fileno()}\n" + SERVER
        fd, name = tempfile.mkstemp(prefix="gridsched-forkserver-", suffix=".log")
        self.errlog = Path(name)
        try:
            self.proc = subprocess.Popen(
                [self.interpreter(), "-c", code],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                env=env,
                cwd="/",
                start_new_session=True,
            )
        finally:
            os.close(fd)
            theirs.close()
        self.sock = mine
        self.buf = b""

    def interpreter(self) -> str:
        """The interpreter the ``gschedd`` console script names (its ``sys.executable``: that of the daemon's
        starter and jobs' launchers)."""
        try:
            first, second = ((self.bin / "gschedd").read_bytes().decode().split("\n", 2) + ["", ""])[:2]
        except (OSError, UnicodeDecodeError):
            return sys.executable
        named = first[2:].strip() if first.startswith("#!") else ""
        if named == "/bin/sh" and second.startswith(PIP_SH):  # pip's form for a long path: sh execs it
            try:
                named = shlex.split(second[len(PIP_SH) :])[0]
            except (ValueError, IndexError):
                named = ""
        ok = Path(named).name.startswith("python") and os.access(named, os.X_OK)
        return named if ok else sys.executable

    def can_fork(self, env: dict[str, str]) -> bool:
        """Whether a daemon in ``env`` may be forked from the server: the variables that the interpreter reads
        as it starts (``PYTHON*``, the locale's) are those the server started with."""

        def read_at_start(e: dict[str, str]) -> dict[str, str]:
            return {k: v for k, v in e.items() if k.startswith(INTERPRETER_VARS)}

        return read_at_start(env) == read_at_start(self.env)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def fork(self, args: list[str], env: dict[str, str], log: Path, cwd: str | None = None) -> ForkedDaemon:
        """Fork ``gschedd ARGS`` in ``env`` and ``cwd`` (default: this process's), its output appended to
        ``log``."""
        if not self.alive():
            self.close()
            self._start()
        assert self.sock is not None
        req = {"args": args, "env": env, "cwd": cwd or os.getcwd(), "log": str(log)}
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        deadline = time.monotonic() + 60  # the first fork waits for the server's imports
        while True:
            for line in self._lines(min(1.0, max(0.0, deadline - time.monotonic()))):
                word, _, rest = line.partition(" ")
                if word == "pid":
                    return ForkedDaemon(self, int(rest), args)
                if word == "error":
                    raise AssertionError(f"the daemons' fork server: {rest}")
            if not self.alive():
                raise AssertionError(f"the daemons' fork server exited: {self.errors()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the daemons' fork server did not answer in 60 s: {self.errors()}")

    def errors(self) -> str:
        try:
            return self.errlog.read_text() if self.errlog else ""
        except OSError:
            return ""

    def _lines(self, timeout: float) -> list[str]:
        """The lines the server has sent within ``timeout`` seconds (at most); exit reports are kept aside."""
        assert self.sock is not None
        out: list[str] = []
        if select.select([self.sock], [], [], timeout)[0]:
            data = self.sock.recv(1 << 16)
            if not data:
                self.close()
                return out
            self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            text = line.decode()
            if text.startswith("exit "):
                _, pid, code = text.split()
                self.ended[int(pid)] = int(code)
            else:
                out.append(text)
        return out

    def collect(self, timeout: float = 0.0) -> None:
        """Read the exit reports that came (waiting up to ``timeout`` seconds for one)."""
        if self.sock is not None:
            self._lines(timeout)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.errlog is not None:
            self.errlog.unlink(missing_ok=True)
            self.errlog = None


class ForkedDaemon:
    """A daemon the fork server started: what the harness and its tests use of :class:`subprocess.Popen`."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]) -> None:
        self.server = server
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            if self.server.sock is None:  # the server is gone: it cannot say; the process's existence can
                if not Path(f"/proc/{self.pid}").exists():
                    self.returncode = -9
                return self.returncode
            self.server.collect()
            self.returncode = self.server.ended.pop(self.pid, None)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.05 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(["gschedd", *self.args], timeout or 0)
            if self.server.sock is None:
                time.sleep(min(left, 0.05))
            else:
                self.server.collect(min(left, 0.05))
                self.returncode = self.server.ended.pop(self.pid, None)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(9)

    def terminate(self) -> None:
        self.send_signal(15)
