"""The harness of the attack suite: a real system daemon (root), two real users, and what must not change.

Every test here runs a system-mode daemon (``gschedd run --system``, as root)
on a temporary spool, with two throwaway users made with ``useradd``: A, the
victim, and B, the attacker.  B acts either through the commands (run as B,
with B's uid, gid and groups) or through a process forked from the test that
has switched to B's ids (:func:`as_user`, :func:`spawn_as`) and then plants
files, links and requests by hand.

After an attack a test checks, besides what the attack aimed at:

- :class:`Targets`: files outside the spool standing for ``/etc/shadow``, a
  crontab, a JSON file of root's and a private file of A's keep their
  content, owner and mode, and nothing new appears beside them;
- :func:`check_intact`: no job of A's is lost or given to someone else, no job
  runs as root, the daemon still runs, and a job A submits with ``gsub``
  completes.

Where the tests cannot run (not root, no ``useradd``, no way to give the
users a Python they may execute) they are skipped with the reason printed.
"""

from __future__ import annotations

import ctypes
import errno  # noqa: F401 - loaded for the forked children, which may not be able to read the stdlib
import grp  # noqa: F401
import hashlib
import json
import os
import pwd
import re
import select
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import FORK, wait_for
from tests.zygote import ForkedDaemon, ForkServer

# A child forked from the test and switched to an unprivileged user may not be able to read the
# interpreter's own files (here they live under /root): what the children run is loaded now.
for _m in ("gridsched.queue", "gridsched.protocol.state", "gridsched.submission.submit", "gridsched.api.client"):
    try:
        __import__(_m)
    except ImportError:  # pragma: no cover - only the older tests' children used them
        pass

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
COMMANDS = (
    "gsub",
    "gstat",
    "gdel",
    "ghold",
    "grls",
    "gctl",
    "gresv",
    "gschedd",
    "gacct",
    "gwait",
    "galter",
    "grequeue",
    "grun",
    "gtail",
)
CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]")  # control bytes other than newline
ESC_C1 = re.compile("[\x80-\x9f]")  # C1 controls (as text)


def need_root() -> None:
    if os.geteuid() != 0:
        print("security tests skipped: they need root (they create users and run a system daemon)")
        pytest.skip("needs root: creates two users and runs a system daemon")
    for tool in ("useradd", "userdel"):
        if shutil.which(tool) is None:
            print(f"security tests skipped: no {tool} on this host")
            pytest.skip(f"no {tool}")


# -- users ---------------------------------------------------------------------------------


@dataclass
class User:
    """A throwaway local user; ``pw_*`` as in :mod:`pwd` for the older tests."""

    name: str
    uid: int
    gid: int
    groups: list[int]
    home: Path = Path("/nonexistent")

    @property
    def pw_name(self) -> str:
        return self.name

    @property
    def pw_uid(self) -> int:
        return self.uid

    @property
    def pw_gid(self) -> int:
        return self.gid


def kill_user_processes(uid: int) -> None:
    for p in psutil.process_iter():
        try:
            if p.uids().real == uid or p.uids().effective == uid:
                p.kill()
        except psutil.Error:
            pass


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS = 0x00020000


REPO = Path(__file__).resolve().parents[2]


def _python_for(users: list[User], tmp: Path) -> tuple[str, str, Callable[[], None]]:
    """An interpreter path every user may execute, the PYTHONPATH it needs, and how to undo what making it took.

    When the interpreter lives where the users cannot go (under /root), its
    prefix is bind-mounted on a directory they can reach, in a mount
    namespace of the test process's own when it can have one (so nothing
    outside this test run sees the mount).
    """

    def works(py: str, path: str) -> bool:
        u = users[0]
        try:
            r = subprocess.run(
                [py, "-c", "import gridsched.cli.gsub, click, rich, psutil"],
                user=u.uid,
                group=u.gid,
                extra_groups=u.groups,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path},
                cwd="/",
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return r.returncode == 0

    site = [p for p in sys.path if p.endswith("site-packages")]
    if works(sys.executable, ":".join([str(REPO), *site])):
        return sys.executable, ":".join([str(REPO), *site]), lambda: None
    # the interpreter proper (a virtual environment's python is a link to it) and every site-packages
    # directory outside its prefix (a virtual environment's) are bind-mounted where the users can go
    exe = Path(sys.executable).resolve()
    prefix = next(
        (p for p in (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()) if exe.is_relative_to(p)), None
    )
    if prefix is None:
        pytest.skip(f"{sys.executable} is under neither {sys.prefix} nor {sys.base_prefix}")
    own_ns = _libc.unshare(CLONE_NEWNS) == 0
    if own_ns:
        subprocess.run(["mount", "--make-rprivate", "/"], capture_output=True)
    mounts: list[Path] = []

    def bind(src: Path, name: str) -> Path:
        dst = tmp / name
        dst.mkdir()
        r = subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True, text=True)
        if r.returncode != 0:
            undo()
            print(
                f"security tests skipped: the test users cannot run {sys.executable} and {src} cannot be "
                f"bind-mounted where they can ({r.stderr.strip()})"
            )
            pytest.skip("no interpreter the test users may run")
        mounts.append(dst)
        return dst

    def undo() -> None:
        for m in reversed(mounts):
            subprocess.run(["umount", "-l", str(m)], capture_output=True)

    mnt = bind(prefix, "py")
    py = str(mnt / exe.relative_to(prefix))
    # the users' interpreter may not find its site-packages by itself: name them, and the source tree
    dirs = [str(REPO)]
    for k, p in enumerate(site):
        rp = Path(p).resolve()
        if not rp.is_dir():
            continue
        dirs.append(str(mnt / rp.relative_to(prefix)) if rp.is_relative_to(prefix) else str(bind(rp, f"site{k}")))
    path = ":".join(dirs)
    if not works(py, path):
        undo()
        pytest.skip(f"the test users cannot run {py} either")
    return py, path, undo


@dataclass
class Env:
    """The session's users and the interpreter and command wrappers they run."""

    a: User
    b: User
    python: str
    pythonpath: str
    bindir: Path
    base: Path


@pytest.fixture(scope="session")
def env() -> Iterable[Env]:
    need_root()
    # under /var/tmp where there is one: other test runs on the machine tidy /tmp by name patterns
    base = Path(tempfile.mkdtemp(prefix="gridsched-sec-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    os.chmod(base, 0o755)
    made: list[str] = []
    undo: Callable[[], None] = lambda: None  # noqa: E731
    try:
        tag = os.getpid() % 100000
        for letter in ("a", "b"):
            name = f"gss{letter}{tag}"
            r = subprocess.run(["useradd", "-M", "-U", "-s", "/bin/sh", name], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"security tests skipped: useradd {name} failed: {r.stderr.strip()}")
                pytest.skip(f"useradd failed: {r.stderr.strip()}")
            made.append(name)
        users = []
        for name in made:
            pw = pwd.getpwnam(name)
            users.append(User(name, pw.pw_uid, pw.pw_gid, os.getgrouplist(name, pw.pw_gid)))
        python, pythonpath, undo = _python_for(users, base)
        bindir = base / "bin"
        bindir.mkdir()
        mods = {"gyield": ("gwait", "yield_main"), "gresume": ("gwait", "resume_main")}
        for cmd in (*COMMANDS, *mods):
            mod, fn = mods.get(cmd, (cmd, "main"))
            p = bindir / cmd
            p.write_text(
                f"#!{python}\nimport sys\nsys.path[:0] = {pythonpath.split(':')!r}\n"
                f"from gridsched.cli.{mod} import {fn}\nsys.exit({fn}())\n"
            )
            os.chmod(p, 0o755)
        yield Env(users[0], users[1], python, pythonpath, bindir, base)
    finally:
        for server in _servers.values():
            server.close()
        _servers.clear()
        for name in made:
            try:
                kill_user_processes(pwd.getpwnam(name).pw_uid)
            except KeyError:
                pass
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
            subprocess.run(["groupdel", name], capture_output=True)  # when userdel left the group
        undo()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def users(env: Env) -> list[User]:
    """[A, B]: the victim and the attacker."""
    return [env.a, env.b]


# -- running as a user -------------------------------------------------------------------------


def _switch(u: User) -> None:
    os.setgroups(u.groups)
    os.setgid(u.gid)
    os.setuid(u.uid)


class Child:
    """A process forked from the test, switched to a user, running a Python function."""

    def __init__(self, u: User | None, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            os.close(r)
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                if u is not None:
                    _switch(u)
                out = {"ok": fn(*args, **kwargs)}
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                out = {"error": f"{type(e).__name__}: {e}"}
            try:
                data = json.dumps(out, default=str).encode()
            except (TypeError, ValueError) as e:
                data = json.dumps({"error": f"result not JSON: {e}"}).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(w, view) :]
            os._exit(0)
        os.close(w)
        self.pid = pid
        self.fd = r

    def result(self, timeout: float = 60) -> dict[str, Any]:
        """``{"ok": value}``, ``{"error": text}``, or ``{"error": "timeout"}`` (the child is killed)."""
        data = b""
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    return {"error": f"timeout after {timeout}s"}
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(self.fd)
        os.waitpid(self.pid, 0)
        try:
            return json.loads(data)
        except ValueError:
            return {"error": f"the child died without a result ({data[:200]!r})"}


def spawn_as(u: User | None, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Child:
    """Start ``fn(*args, **kwargs)`` as ``u`` in a forked child (None: as root); collect with ``.result()``."""
    return Child(u, fn, args, kwargs)


def as_user(u: User | Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``fn(*args, **kwargs)`` run as ``u`` in a forked child: ``{"ok": result}`` or ``{"error": "Type: message"}``."""
    if not isinstance(u, User):  # a pwd entry (the older tests)
        u = User(u.pw_name, u.pw_uid, u.pw_gid, os.getgrouplist(u.pw_name, u.pw_gid))
    return Child(u, fn, args, kwargs).result(120)


@dataclass
class Result:
    """How a command ended: ``rc`` is None when it was killed at its timeout."""

    argv: list[Any]
    rc: int | None
    out: bytes
    err: bytes

    @property
    def stdout(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")

    def __str__(self) -> str:
        args = " ".join(a.decode("utf-8", "backslashreplace") if isinstance(a, bytes) else str(a) for a in self.argv)
        rc = "timed out" if self.rc is None else f"exit {self.rc}"
        return f"`{args}`: {rc}; stdout {self.stdout[-800:]!r}; stderr {self.stderr[-1500:]!r}"

    __repr__ = __str__

    def one_line_error(self, prog: str) -> str | None:
        """Why this is not a clean refusal (non-zero exit, exactly one line ``PROG: error: ...``), or None."""
        if self.rc is None:
            return f"{self}: hung"
        if self.rc == 0:
            return f"{self}: accepted"
        lines = self.stderr.splitlines()
        if "Traceback" in self.stderr:
            return f"{self}: a traceback"
        if len(lines) != 1 or not lines[0].startswith(f"{prog}: error: "):
            return f"{self}: not one line '{prog}: error: ...'"
        return None


def run_cmd(
    argv: list[Any],
    u: User | None,
    env: dict[str, str],
    cwd: str | Path,
    timeout: float = 30,
    umask: int = -1,
    input: bytes | None = None,
) -> Result:
    kw: dict[str, Any] = {}
    if u is not None:
        kw.update(user=u.uid, group=u.gid, extra_groups=u.groups)
    try:
        p = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            umask=umask,
            **kw,
        )
    except OSError as e:  # the exec itself failed (E2BIG, ...): as a shell reports it
        return Result(argv, 126, b"", f"{argv[0]}: {e.strerror}\n".encode())
    try:
        out, err = p.communicate(input, timeout=timeout)
        return Result(argv, p.returncode, out, err)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
        return Result(argv, None, out, err)


# -- files that must not change ------------------------------------------------------------------


def fingerprint(p: Path) -> tuple[Any, ...]:
    st = os.lstat(p)
    digest = ""
    if stat.S_ISREG(st.st_mode):
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    elif stat.S_ISLNK(st.st_mode):
        digest = "-> " + os.readlink(p)
    return (digest, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), stat.S_IFMT(st.st_mode), st.st_nlink)


class Targets:
    """Files outside the spool that an attack might try to write, chown or read.

    ``shadow`` (root, 0600) stands for /etc/shadow, ``crontab`` (root, 0644)
    for /etc/crontab, ``rootjson`` (root, 0600) for a root-only file that
    parses as JSON, and ``a_secret`` (A's, 0600) for a private file of A's.
    :meth:`check` compares them, and the listing of their directories, with
    the state they had at :meth:`snapshot`; the system's own /etc/shadow and
    /etc/passwd keep their owner and mode.
    """

    def __init__(self, base: Path, a: User) -> None:
        self.dir = base / "targets"
        self.dir.mkdir(mode=0o755, exist_ok=True)
        os.chown(self.dir, 0, 0, follow_symlinks=False)  # root's again, whatever an earlier attack did
        os.chmod(self.dir, 0o755)
        self.shadow = self.dir / "shadow"
        self.crontab = self.dir / "crontab"
        self.rootjson = self.dir / "root.json"
        private = a.home / "private"
        private.mkdir(exist_ok=True)
        os.chown(private, a.uid, a.gid)
        os.chmod(private, 0o700)
        self.a_secret = private / "secret"
        self.a = a
        self.write(self.shadow, "root:$6$gridsched-test$not-a-real-hash:19000:0:99999:7:::\n", 0, 0o600)
        self.write(
            self.crontab,
            "# m h dom mon dow user command\n17 * * * * root cd / && run-parts /etc/cron.hourly\n",
            0,
            0o644,
        )
        self.write(
            self.rootjson,
            json.dumps(
                {
                    "env": {"PATH": "/usr/bin:/bin", "ROOT_TOKEN": "root-token-5ac2"},
                    "args": [],
                    "workdir": "/",
                    "stdout": "/dev/null",
                    "stderr": "/dev/null",
                    "submit_dir": "/",
                }
            )
            + "\n",
            0,
            0o600,
        )
        self.write(self.a_secret, "A's secret a-token-91f3\n", a.uid, 0o600, a.gid)
        self.files = [self.shadow, self.crontab, self.rootjson, self.a_secret]
        self.before: dict[str, Any] = {}

    @staticmethod
    def write(p: Path, text: str, uid: int, mode: int, gid: int = 0) -> None:
        if p.is_symlink() or p.exists():
            p.unlink()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            os.write(fd, text.encode())
            os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p in self.files:
            try:
                out[str(p)] = fingerprint(p)
            except OSError as e:
                out[str(p)] = f"missing: {e.strerror}"
        for d in (self.dir, self.a_secret.parent):
            out[f"listing of {d}"] = sorted(os.listdir(d))
            out[f"stat of {d}"] = fingerprint(d)[1:5]
        for real in ("/etc/shadow", "/etc/passwd", "/etc/crontab", "/etc/cron.d"):
            try:
                st = os.lstat(real)
                out[real] = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
            except OSError:
                pass
        return out

    def snapshot(self) -> Targets:
        self.before = self.state()
        return self

    def changes(self, ignore_nlink: bool = False) -> list[str]:
        now = self.state()
        out = []
        for k, v in self.before.items():
            w = now.get(k)
            if ignore_nlink and isinstance(v, tuple) and isinstance(w, tuple) and len(v) == 6 == len(w):
                v, w = v[:5], w[:5]
            if w != v:
                out.append(f"{k}: was {v}, now {w}")
        return out

    def check(self, ignore_nlink: bool = False) -> None:
        ch = self.changes(ignore_nlink)
        assert not ch, "files outside the spool changed:\n" + "\n".join(ch)


# -- the system daemon ----------------------------------------------------------------------------

BASE_CONFIG = {
    "scheduler": {"policy": "fcfs"},
    "jobs": {"kill_grace": "1s", "checkpoint_grace": "2s"},
    "machine": {"cores": 4},
    "daemon": {"autostart": False, "system": True},
}


def toml(cfg: dict[str, dict[str, Any]]) -> str:
    lines = []
    for table, kv in cfg.items():
        lines.append(f"[{table}]")
        for k, v in kv.items():
            lines.append(f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}")
    return "\n".join(lines) + "\n"


class DaemonDied(AssertionError):
    pass


def daemon_env(env: Env) -> dict[str, str]:
    """The system daemon's environment, but for its configuration file."""
    return {
        "PATH": f"{env.bindir}:/usr/bin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": env.pythonpath,
    }


_servers: dict[Path, ForkServer] = {}  # the fork server of the session's system daemons (by their bin directory)


def fork_server(env: Env) -> ForkServer:
    """The fork server of the system daemons of ``env`` (its console scripts, interpreter and import path)."""
    if env.bindir not in _servers:
        _servers[env.bindir] = ForkServer(env.bindir, daemon_env(env))
    return _servers[env.bindir]


class System:
    """A system-mode daemon (root) on a temporary spool, and the two users' commands on it.

    ``ids[name]`` holds the job ids gsub printed to each user (each must be a
    job of that user's), ``wrote[name]`` the ids of the requests they wrote by
    hand (the daemon may refuse those, but a job with such an id is theirs);
    :func:`check_intact` holds the job table to both.
    """

    def __init__(
        self, env: Env, config: dict[str, dict[str, Any]] | None = None, tag: str = "", parent: Path | None = None
    ) -> None:
        self.env_ = env
        self.a, self.b = env.a, env.b
        self.base = Path(tempfile.mkdtemp(prefix=f"{tag or 'spool'}-", dir=parent or env.base))
        os.chmod(self.base, 0o755)
        self.spool_dir = self.base / "spool"
        self.cfg = self.base / "gridsched.toml"
        merged = {k: dict(v) for k, v in BASE_CONFIG.items()}
        merged["reservations"] = {"users": [self.a.name]}  # A may reserve (root is the admin); B may not
        for k, v in (config or {}).items():
            merged.setdefault(k, {}).update(v)
        self.cfg.write_text(toml(merged))
        os.chmod(self.cfg, 0o644)
        self.shared = self.base / "shared"  # a world-writable directory, as /tmp
        self.shared.mkdir()
        os.chmod(self.shared, 0o1777)
        for u in (self.a, self.b):
            self.home(u)
        self.proc: subprocess.Popen[bytes] | ForkedDaemon | None = None
        self.ids: dict[str, set[int]] = {self.a.name: set(), self.b.name: set()}  # told by gsub: must be jobs
        self.wrote: dict[str, set[int]] = {self.a.name: set(), self.b.name: set()}  # by hand: may be refused
        self.starts = 0
        self.last_id = 0
        self.known: set[tuple[int, str]] = set()  # table problems an earlier test reported (a shared daemon)

    # -- homes and environment -------------------------------------------------
    def home(self, u: User) -> Path:
        d = self.base / f"home-{u.name}"
        if not d.exists():
            d.mkdir()
            os.chown(d, u.uid, u.gid)
            os.chmod(d, 0o755)
        u.home = d
        return d

    def user_env(self, u: User | None) -> dict[str, str]:
        home = str(u.home) if u is not None else str(self.base)
        name = u.name if u is not None else "root"
        return {
            "PATH": f"{self.env_.bindir}:/usr/bin:/bin",
            "HOME": home,
            "USER": name,
            "LOGNAME": name,
            "GRIDSCHED_SPOOL": str(self.spool_dir),
            "GRIDSCHED_CONFIG": str(self.cfg),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": self.env_.pythonpath,
        }

    # -- the daemon ------------------------------------------------------------------
    def daemon_argv(self) -> list[str]:
        return [
            str(self.env_.bindir / "gschedd"),
            "run",
            "--system",
            "--spool",
            str(self.spool_dir),
            "--config",
            str(self.cfg),
        ]

    def start(self, timeout: float = 30) -> None:
        # the socket a stopped daemon left would pass for this one's before it has opened (or taken over) its
        # table, which comes first: the test's first read of the table would race that (a read of an earlier
        # release's table as it is taken over makes its WAL index again, as root, beside the published copy)
        (self.spool_dir / "gschedd.sock").unlink(missing_ok=True)
        env = {**daemon_env(self.env_), "GRIDSCHED_CONFIG": str(self.cfg)}
        if FORK:  # forked from the fork server of this suite's daemons (tests/zygote.py)
            self.proc = fork_server(self.env_).fork(self.daemon_argv()[1:], env, self.base / "daemon.out", cwd="/")
        else:
            out = open(self.base / "daemon.out", "ab")
            self.proc = subprocess.Popen(
                self.daemon_argv(),
                env=env,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/",
            )
            out.close()
        self.starts += 1
        wait_for(self._up, timeout, "the system daemon to start")

    def _up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the system daemon exited with status {self.proc.returncode}:\n{self.log_tail()}")
        try:
            meta = json.loads((self.spool_dir / "gschedd.pid").read_text())
        except (OSError, ValueError):
            return False
        return meta.get("pid") == self.proc.pid and (self.spool_dir / "gschedd.sock").exists()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def why_dead(self) -> str:
        if self.proc is None:
            return "never started"
        if self.proc.poll() is None:
            return "alive"
        return f"exited with status {self.proc.returncode}; log:\n{self.log_tail()}"

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; the exit status (None if it was not running)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        rc = self.proc.returncode
        self.proc = None
        return rc

    def restart(self) -> None:
        self.stop()
        self.start()

    def hup(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGHUP)

    def wake(self) -> None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.setblocking(False)
                s.sendto(b"!", str(self.spool_dir / "gschedd.sock"))
        except OSError:
            pass

    def cleanup(self) -> None:
        self.stop(5)
        for p in psutil.process_iter():
            try:
                e = p.environ()
                if e.get("GS_SPOOL") == str(self.spool_dir) or e.get("GRIDSCHED_SPOOL") == str(self.spool_dir):
                    p.kill()
            except (psutil.Error, OSError):
                pass
        shutil.rmtree(self.base, ignore_errors=True)

    # -- the log ------------------------------------------------------------------------
    def log(self) -> str:
        out = ""
        for p in (self.spool_dir / "gschedd.log", self.base / "daemon.out"):
            try:
                out += p.read_text(errors="replace")
            except OSError:
                pass
        return out

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-n:])

    # -- the job table ------------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        con = sqlite3.connect(f"file:{self.spool_dir / 'state.db'}?mode=ro", uri=True, timeout=10)
        con.row_factory = sqlite3.Row
        return con

    def rows(self) -> dict[int, dict[str, Any]]:
        if not (self.spool_dir / "state.db").exists():
            return {}
        con = self._db()
        try:
            return {r["id"]: dict(r) for r in con.execute("SELECT * FROM jobs")}
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return {}  # the daemon has not made its tables yet
            raise
        finally:
            con.close()

    def job(self, jid: int) -> dict[str, Any] | None:
        if not (self.spool_dir / "state.db").exists():
            return None
        con = self._db()
        try:
            r = con.execute("SELECT * FROM jobs WHERE id = ?", (jid,)).fetchone()
            return dict(r) if r else None
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return None
            raise
        except OverflowError:
            return None  # an id no table holds
        finally:
            con.close()

    def meta(self) -> dict[str, str]:
        con = self._db()
        try:
            return {k: v for k, v in con.execute("SELECT key, value FROM meta")}
        except sqlite3.Error:
            return {}
        finally:
            con.close()

    def wait_state(self, jid: int, *states: str, timeout: float = 30) -> dict[str, Any]:
        states = states or TERMINAL

        def ok() -> dict[str, Any] | None:
            j = self.job(jid)
            if j and j["state"] in states:
                return j
            if self.proc is not None and self.proc.poll() is not None:
                raise DaemonDied(
                    f"job {jid} is {j and j['state']}, not {'/'.join(states)}: the daemon died: {self.why_dead()}"
                )
            return None

        try:
            return wait_for(ok, timeout, f"job {jid} to be {'/'.join(states)}")
        except DaemonDied:
            raise
        except AssertionError:
            raise AssertionError(
                f"job {jid} is not {'/'.join(states)} after {timeout}s: {self.job(jid)}; "
                f"daemon {self.why_dead()}\n{self.log_tail()}"
            ) from None

    def wait_taken(self, name: str, timeout: float = 15) -> None:
        """Until ``incoming/NAME`` is gone (taken in, refused or quarantined)."""
        p = self.spool_dir / "incoming" / name
        wait_for(lambda: not os.path.lexists(p), timeout, f"the daemon to take {name} out of incoming/")

    def wait_why(self, name: str, timeout: float = 15) -> str:
        """The reason beside ``quarantine/NAME`` once the daemon has written it (it writes it just after it
        moves the request out of ``incoming/``)."""
        p = self.spool_dir / "quarantine" / (name + ".why")
        wait_for(lambda: p.exists() and p.read_text().endswith("\n"), timeout, f"the reason {name} was refused")
        return p.read_text()

    def settle(self, timeout: float = 20) -> None:
        """Until incoming/ holds nothing but hidden files and the daemon has had a turn after that."""
        inc = self.spool_dir / "incoming"
        wait_for(
            lambda: not [n for n in os.listdir(inc) if not n.startswith(".")], timeout, "the daemon to empty incoming/"
        )
        self.turn()

    def turn(self, timeout: float = 15) -> None:
        """Until the daemon has surely finished the turn in progress: a marker request of root's is served."""
        # a hold of a job that does not exist: harmless, and removed only when served
        name = f"hold-{time.time_ns()}-turn.json"
        self.put(None, name, {"type": "hold", "jobs": [999_999_999]})
        self.wait_taken(name, timeout)

    # -- commands -------------------------------------------------------------------------
    def cmd(
        self,
        u: User | None,
        *args: Any,
        timeout: float = 30,
        umask: int = -1,
        cwd: Path | None = None,
        input: bytes | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Result:
        argv = [str(self.env_.bindir / args[0]), *args[1:]]
        env = self.user_env(u)
        env.update(extra_env or {})
        return run_cmd(argv, u, env, cwd or (u.home if u is not None else self.base), timeout, umask, input)

    def gsub(self, u: User, *args: Any, **kw: Any) -> int:
        r = self.cmd(u, "gsub", *args, **kw)
        assert r.rc == 0, f"gsub as {u.name} failed: {r}"
        jid = int(r.stdout.strip().splitlines()[-1])
        self.ids[u.name].add(jid)
        return jid

    # -- hand-written requests ------------------------------------------------------------
    def next_id(self) -> int:
        """A job id nobody has: above every id in the tables and in the names waiting in incoming/ (as a
        user finds one by hand)."""
        best = self.last_id
        if (self.spool_dir / "state.db").exists():
            con = self._db()
            try:
                for table in ("jobs", "reservations", "ids"):
                    try:
                        best = max(best, int(con.execute(f"SELECT MAX(id) FROM {table}").fetchone()[0] or 0))
                    except sqlite3.Error:
                        pass
            finally:
                con.close()
        for n in os.listdir(self.spool_dir / "incoming"):
            m = re.fullmatch(r"submit-([0-9]{1,18})\.json", n)
            if m and int(m.group(1)) < 10**12:
                best = max(best, int(m.group(1)))
        self.last_id = best + 1
        return self.last_id

    def spec(self, u: User, jid: int | None = None, **changes: Any) -> dict[str, Any]:
        """A complete, valid job spec of ``u``'s (as gsub writes it), with ``changes`` applied."""
        jid = self.next_id() if jid is None else jid
        home = str(u.home)
        spec: dict[str, Any] = {
            "id": jid,
            "name": "hand",
            "user": u.name,
            "uid": u.uid,
            "gid": u.gid,
            "ncpus": 1,
            "walltime": 60,
            "mem": None,
            "checkpoint": "none",
            "hold": False,
            "depend": "",
            "script": "#!/bin/sh\ntrue\n",
            "args": [],
            "workdir": home,
            "stdout": f"{home}/hand.o{jid}",
            "stderr": f"{home}/hand.e{jid}",
            "env": {"PATH": f"{self.env_.bindir}:/usr/bin:/bin", "HOME": home},
            "submit_time": time.time(),
            "submit_dir": home,
        }
        spec.update(changes)
        return spec

    def put(
        self, u: User | None, name: str, payload: Any, mode: int = 0o600, raw: bytes | None = None
    ) -> dict[str, Any]:
        """Write ``incoming/NAME`` as ``u`` (hidden temporary name, then renamed) and wake the daemon."""
        data = raw if raw is not None else json.dumps(payload).encode()
        inc = str(self.spool_dir / "incoming")
        sock = str(self.spool_dir / "gschedd.sock")

        def write() -> str:
            tmp = os.path.join(inc, f".{os.getpid()}.{time.time_ns()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.rename(tmp, os.path.join(inc, name))
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                    s.setblocking(False)
                    s.sendto(b"!", sock)
            except OSError:
                pass
            return name

        if u is None:
            return {"ok": write()}
        return as_user(u, write)

    def submit_as(
        self, u: User, fname: str | None = None, mode: int = 0o600, record: bool = True, **changes: Any
    ) -> int:
        """A hand-written submit request of ``u``'s (file ``fname``, by default named after its id); its job id."""
        spec = self.spec(u, **changes)
        jid = spec["id"]
        r = self.put(u, fname or f"submit-{jid:010d}.json", {"type": "submit", "job": spec}, mode=mode)
        assert "ok" in r, r
        if record and isinstance(jid, int):
            self.wrote[u.name].add(jid)
        return jid


# -- the checks after every attack --------------------------------------------------------------


def table_problems(system: System, allow_root: Iterable[int] = ()) -> dict[tuple[int, str], str]:
    """What is wrong in the job table, by (job id, kind): A's jobs lost or not A's, jobs given to A that A never
    asked for, root jobs."""
    a, b = system.a, system.b
    rows = system.rows()
    problems = {}
    for jid in sorted(system.ids[a.name]):
        r = rows.get(jid)
        if r is None:
            if (system.spool_dir / "incoming" / f"submit-{jid:010d}.json").exists():
                continue  # still waiting to be taken in (the daemon may be down)
            problems[jid, "lost"] = f"A's job {jid} is not in the job table (lost)"
        elif r["uid"] != a.uid or r["user"] != a.name:
            problems[jid, "owner"] = (
                f"A's job {jid} belongs to uid {r['uid']} user {r['user']!r} (A is {a.uid} {a.name!r})"
            )
    for jid, r in sorted(rows.items()):
        if r["uid"] == a.uid and jid not in system.ids[a.name] | system.wrote[a.name]:
            problems[jid, "given to A"] = (
                f"job {jid} runs as A (uid {a.uid}) but A never submitted it: {r['name']!r} {r['state']}"
            )
        if r["user"] == a.name and r["uid"] != a.uid:
            problems[jid, "named A's"] = f"job {jid} is named A's but runs as uid {r['uid']}"
        if r["uid"] == 0 and jid not in set(allow_root):
            problems[jid, "root"] = f"job {jid} runs as root: {r['name']!r} {r['state']} {r['reason']!r}"
        if jid in system.ids[b.name] | system.wrote[b.name] and r["uid"] != b.uid:
            problems[jid, "B's"] = f"B's job {jid} runs as uid {r['uid']}"
    return problems


def check_table(system: System, allow_root: Iterable[int] = ()) -> list[str]:
    """:func:`table_problems` less those an earlier test on the same daemon already reported."""
    return [m for k, m in table_problems(system, allow_root).items() if k not in system.known]


def still_serves_a(system: System, timeout: float = 30) -> None:
    """(d): the daemon runs and a job A submits with gsub completes, its output A's."""
    a = system.a
    assert system.alive(), f"the daemon is not running: {system.why_dead()}"
    jid = system.gsub(a, "-t", "1m", "-N", "probe", "--wrap", "echo served-$GS_JOBID")
    try:
        row = system.wait_state(jid, *TERMINAL, timeout=timeout)
    except DaemonDied:
        raise
    except AssertionError as e:
        if system.job(jid) is None:
            raise AssertionError(
                f"the daemon runs but does not serve: A's job {jid} was not taken in within "
                f"{timeout}s (wedged)\n{system.log_tail(15)}"
            ) from None
        raise e
    assert row["state"] == "COMPLETED", f"A's probe job {jid} ended {row['state']}: {row['reason']!r}"
    out = a.home / f"probe.o{jid}"
    assert out.read_text().strip() == f"served-{jid}", out.read_text()
    assert os.stat(out).st_uid == a.uid


def check_intact(
    system: System,
    targets: Targets | None = None,
    allow_root: Iterable[int] = (),
    serve: bool = True,
    probe_timeout: float = 30,
) -> None:
    """(b), (c) and (d) after an attack: targets unchanged, A's jobs A's, the daemon serves A."""
    problems = []
    if targets is not None:
        problems += targets.changes()
    problems += check_table(system, allow_root)
    assert not problems, "\n".join(problems) + f"\ndaemon: {system.why_dead()}"
    if serve:
        still_serves_a(system, probe_timeout)
        assert not check_table(system, allow_root), check_table(system, allow_root)


def control_bytes(data: bytes) -> list[bytes]:
    return sorted(set(CONTROL.findall(data)))


# -- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_system(env: Env) -> Iterable[System]:
    """One daemon for a module whose attacks do not interfere; restarted (on a fresh spool) if one killed it."""
    s = System(env, tag="mod")
    s.start()
    holder = {"system": s}
    yield holder  # type: ignore[misc]
    holder["system"].cleanup()


@pytest.fixture
def system(shared_system: dict[str, System], env: Env) -> System:
    s = shared_system["system"]
    if not s.alive():
        print(
            f"the module's daemon was stopped or died in an earlier test ({s.why_dead()}); a new one on a fresh spool"
        )
        s.cleanup()
        s = System(env, tag="mod")
        s.start()
        shared_system["system"] = s
    for u in (s.a, s.b):
        s.home(u)
    s.known = set(table_problems(s))  # reported by the test that caused them, not by every later one
    return s


@pytest.fixture
def fresh(env: Env) -> Iterable[Callable[..., System]]:
    """``fresh(config=None)``: a daemon of the test's own (for attacks that may kill it), cleaned at teardown."""
    made: list[System] = []

    def make(config: dict[str, dict[str, Any]] | None = None, start: bool = True) -> System:
        s = System(env, config, tag="own")
        made.append(s)
        if start:
            s.start()
        return s

    yield make
    for s in made:
        s.cleanup()


@pytest.fixture
def targets(system: System) -> Targets:
    return Targets(system.base, system.a).snapshot()
