"""gctl reload, drain and resume are for root and the spool's owner: anyone else is refused in one line.

Runs only as root with ``useradd``: a throwaway user is created and removed at
teardown, and gctl runs as that user (its uid, gid and groups) on a spool
owned by root, while a stand-in process holds the spool as a running daemon
does.  gctl is run as a command in a subprocess; where that user cannot reach
the Python interpreter (one installed under root's home, mode 0700), the
subprocess is a fork of the test that takes the user's identity and then runs
gctl's entry point.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w  # noqa: F401 - gctl set writes with it

import gridsched.core.cpuset  # noqa: F401
import gridsched.host.topology  # noqa: F401

# loaded here, before any fork: a child that is not root may be unable to import from the interpreter's directory
import gridsched.protocol.admin  # noqa: F401
import gridsched.protocol.configwrite  # noqa: F401
from gridsched.cli import gctl
from gridsched.protocol.spool import Spool

BIN = Path(sys.executable).parent

# Holds the spool lock and writes the pid file as the daemon does, then waits to be killed.
HOLDER = r"""
import fcntl, json, os, sys, time
root = sys.argv[1]
fd = os.open(os.path.join(root, "gschedd.lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
with open(os.path.join(root, "gschedd.pid"), "w") as f:
    json.dump({"pid": os.getpid(), "started": time.time()}, f)
print("ready", flush=True)
while True:
    time.sleep(60)
"""


@pytest.fixture(scope="module")
def stranger() -> Iterator[pwd.struct_passwd]:
    """A throwaway user, neither root nor the owner of any spool."""
    if os.geteuid() != 0:
        print("gctl admin tests skipped: they need root to create a user")
        pytest.skip("needs root (creates a user)")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        print("gctl admin tests skipped: no useradd/userdel on this host")
        pytest.skip("no useradd/userdel")
    name = f"gsadm{os.getpid() % 100000}"
    subprocess.run(["useradd", "-M", "-U", "-s", "/bin/sh", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every user can pass through, with a config file every user can read."""
    d = Path(tempfile.mkdtemp(prefix="gs-admin-"))
    try:
        os.chmod(d, 0o755)
        (d / "gridsched.toml").write_text("[daemon]\nautostart = false\n[machine]\ncores = 4\n")
        os.chmod(d / "gridsched.toml", 0o644)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def system_spool(base: Path) -> Iterator[Spool]:
    """A spool owned by root, as a system daemon makes it (incoming/ writable by all), with a daemon holding it."""
    spool = Spool(base / "spool")
    spool.ensure_system()
    assert os.stat(spool.incoming).st_mode & 0o7777 == 0o1777
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(spool.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield spool
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _demote(pw: pwd.struct_passwd) -> None:
    os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


def _forked_gctl(pw: pwd.struct_passwd, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """gctl's entry point in a child process that has taken ``pw``'s identity first."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        code = 125
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            os.environ.clear()
            os.environ.update(env)
            os.chdir("/")
            _demote(pw)
            assert os.getuid() == pw.pw_uid and os.geteuid() == pw.pw_uid
            sys.argv = ["gctl", *args]
            try:
                gctl.main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # noqa: BLE001 - reported through the exit status and stderr
            os.write(2, f"test harness: {type(e).__name__}: {e}\n".encode())
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    try:
        return os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()
    finally:
        out.close()
        err.close()


def gctl_as(pw: pwd.struct_passwd, spool: Spool, *args: str) -> tuple[int, str, str]:
    """Run ``gctl ARGS`` as user ``pw`` on ``spool``: its exit status, standard output and standard error."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/",
        "LANG": "C.UTF-8",
        "GRIDSCHED_SPOOL": str(spool.root),
        "GRIDSCHED_CONFIG": str(spool.root.parent / "gridsched.toml"),
    }
    try:
        r = subprocess.run(
            [str(BIN / "gctl"), *args],
            env=env,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: _demote(pw),
        )
        return r.returncode, r.stdout, r.stderr
    except PermissionError:  # the user cannot reach the interpreter: the same entry point, in a fork
        print(f"gctl {' '.join(args)}: run in a forked child as {pw.pw_name} ({sys.executable} is not theirs to run)")
        return _forked_gctl(pw, list(args), env)


def requests(spool: Spool) -> list[str]:
    return sorted(os.listdir(spool.incoming))


@pytest.mark.parametrize(
    "args, what",
    [
        (["reload"], "reload the configuration"),
        (["drain", "0-1", "--reason", "maintenance"], "drain cores"),
        (["resume", "0"], "resume cores"),
        (["set", "scheduler.p=0.3"], "change the configuration"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_a_user_who_is_not_admin_is_refused_and_writes_nothing(stranger, system_spool, args, what):
    assert requests(system_spool) == []
    config = system_spool.root.parent / "gridsched.toml"
    before = config.read_bytes()
    code, out, err = gctl_as(stranger, system_spool, *args)
    assert code == 1, (out, err)
    assert out == ""
    assert err == f"gctl: error: {args[0]}: only root or the spool's owner (uid 0) may {what}\n"
    assert requests(system_spool) == []
    assert config.read_bytes() == before and sorted(os.listdir(config.parent)) == ["gridsched.toml", "spool"]


def test_the_refusal_names_the_spool_owner(stranger, base):
    """A personal spool of someone else: its owner's uid is named."""
    spool = Spool(base / "spool")
    spool.ensure()
    owner = stranger.pw_uid + 1
    for d in (spool.root, spool.incoming):
        os.chown(d, owner, -1)
        os.chmod(d, 0o1777 if d == spool.incoming else 0o755)
    code, out, err = gctl_as(stranger, spool, "drain", "2")
    assert code == 1
    assert err == f"gctl: error: drain: only root or the spool's owner (uid {owner}) may drain cores\n"
    assert requests(spool) == []


def test_the_spool_owner_and_root_may(stranger, base, monkeypatch, run):
    """A personal spool: its owner drains cores, and root resumes them."""
    spool = Spool(base / "spool")
    spool.ensure()
    for d in (spool.root, spool.incoming, spool.quarantine, spool.jobs):
        os.chown(d, stranger.pw_uid, stranger.pw_gid)
    code, out, err = gctl_as(stranger, spool, "drain", "0-1")
    assert code == 0, err
    assert out.startswith("gctl: drain of cores 0-1 requested")
    assert [n.split("-")[0] for n in requests(spool)] == ["drain"]
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(spool.root))
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(base / "gridsched.toml"))
    assert os.getuid() == 0
    r = run(gctl.cli, ["resume", "0-1"])
    assert r.exit_code == 0, r.stderr
    assert sorted(n.split("-")[0] for n in requests(spool)) == ["drain", "undrain"]


def test_set_by_an_admin_who_cannot_write_the_file_changes_nothing(stranger, base):
    """The spool's owner may set, but the configuration file in force is root's (0644): one line, nothing
    written, no request."""
    spool = Spool(base / "spool")
    spool.ensure()
    for d in (spool.root, spool.incoming, spool.quarantine, spool.jobs):
        os.chown(d, stranger.pw_uid, stranger.pw_gid)
    config = base / "gridsched.toml"
    before = config.read_bytes()
    code, out, err = gctl_as(stranger, spool, "set", "scheduler.p=0.3")
    assert code == 1 and out == ""
    assert err == f"gctl: error: set: cannot write {config}: Permission denied; nothing changed\n"
    assert config.read_bytes() == before and sorted(os.listdir(base)) == ["gridsched.toml", "spool"]
    assert requests(spool) == []
