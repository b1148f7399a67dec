"""Shared fixtures: a real daemon on a temporary spool, the stub daemon, and bounded waits.

Tests come in two tiers.  A test that starts a real daemon (``gschedd`` as a process, forking real jobs) is
marked ``daemon``: the fixtures that start one mark the tests that use them (:func:`pytest_collection_modifyitems`),
and :class:`Gridsched` refuses to start a daemon for a test without the marker, so none slips into the fast tier
(``pytest -m "not daemon"``).  Scheduling scenarios run in the fast tier on the stub daemon (:func:`stub_daemon`),
whose turns and clock the test drives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.zygote import ForkedDaemon, ForkServer

BIN = Path(sys.executable).parent

# Fixtures that start a real daemon: a test using one (directly or through another fixture) is marked ``daemon``;
# a fixture of its own that starts one (as the compat corpus's) marks its tests explicitly.
REAL_DAEMON_FIXTURES = frozenset({"gs", "make_gs", "module_daemons", "shared_make_gs", "shared_gs"})
# Folders whose every test runs a real daemon (the system-mode attack suite).
REAL_DAEMON_DIRS = ("security",)

_current: list[pytest.Item] = []  # the test being run, for the check in Gridsched.start

# Gridsched.start forks its daemon from the fork server (tests/zygote.py) unless GRIDSCHED_TEST_FORK=0, where it
# starts ``gschedd run`` as a process of its own.
FORK = os.environ.get("GRIDSCHED_TEST_FORK", "1") != "0"
FORK_SERVER = ForkServer(BIN)  # started on its first fork


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    FORK_SERVER.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        try:
            top = Path(str(item.path)).relative_to(here).parts[0]
        except ValueError:
            top = ""
        if fixtures & REAL_DAEMON_FIXTURES or top in REAL_DAEMON_DIRS:
            item.add_marker(pytest.mark.daemon)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()


def check_marked(what: str) -> None:
    """Fail a test that starts a real daemon without carrying the ``daemon`` marker (it would run in the fast
    tier)."""
    if _current and _current[-1].get_closest_marker("daemon") is None:
        raise AssertionError(
            f"{_current[-1].nodeid} {what} but is not marked daemon: use the gs/make_gs fixtures "
            "(they mark the test) or mark it with @pytest.mark.daemon"
        )


def wait_for(cond: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``cond`` until it returns something true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.05)


def fill_disk(path: Path) -> None:
    """Write zeros to ``path`` until its file system is full (unbuffered: a last block that did not fit is not
    written again when the file is closed, which would fail)."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (64 << 10))
        except OSError:
            pass


class Gridsched:
    """A daemon on a temporary spool and the commands to talk to it."""

    def __init__(self, root: Path, config: str) -> None:
        self.root = root
        root.mkdir(parents=True)
        self.spool = root / "spool"
        self.cfgfile = root / "gridsched.toml"
        self.cfgfile.write_text(config)
        self.tmp = root / "tmp"  # the daemon's temporary directory: jobs' private directories go there
        self.tmp.mkdir()
        self.env = {
            **os.environ,
            "GRIDSCHED_SPOOL": str(self.spool),
            "GRIDSCHED_CONFIG": str(self.cfgfile),
            "TMPDIR": str(self.tmp),
        }
        self.proc: subprocess.Popen[bytes] | ForkedDaemon | None = None
        self.work = root / "work"
        self.work.mkdir()

    # -- the daemon ---------------------------------------------------------
    def start(self, fork: bool | None = None) -> None:
        """Start ``gschedd run``: forked from the fork server where ``fork`` (default: :data:`FORK`) and the
        daemon's environment says nothing else to the interpreter, else as a process of its own."""
        check_marked("starts a real daemon")
        # the socket a stopped daemon left would pass for this one's before it has opened its table (the wake
        # socket is made after that): the test's first read of the table would race the daemon's start
        (self.spool / "gschedd.sock").unlink(missing_ok=True)
        if (FORK if fork is None else fork) and FORK_SERVER.can_fork(self.env):
            self.proc = FORK_SERVER.fork(["run"], self.env, self.root / "daemon.out")
        else:
            log = open(self.root / "daemon.out", "ab")
            self.proc = subprocess.Popen(
                [str(BIN / "gschedd"), "run"], env=self.env, stdout=log, stderr=log, start_new_session=True
            )
            log.close()
        wait_for(self._up, 15, "the daemon to start")

    def _up(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.log()}")
        try:
            meta = json.loads((self.spool / "gschedd.pid").read_text())
        except (OSError, ValueError):
            return False
        return self.proc is not None and meta.get("pid") == self.proc.pid and (self.spool / "gschedd.sock").exists()

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        out = ""
        for name in ("spool/gschedd.log", "daemon.out"):
            p = self.root / name
            if p.exists():
                out += p.read_text()
        return out

    # -- commands ----------------------------------------------------------
    def run(
        self, *args: str, input: str | None = None, check: bool = False, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        if args[0] == "gschedd" and len(args) > 1 and args[1] in ("start", "run", "restart"):
            check_marked("starts a real daemon")
        cmd = [str(BIN / args[0]), *args[1:]]
        r = subprocess.run(
            cmd, env=self.env, input=input, capture_output=True, text=True, cwd=self.work, timeout=timeout
        )
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r

    def gsub(self, *args: str, input: str | None = None) -> int:
        """Submit with ``gsub ARGS`` in process, from the working directory and in the environment that
        :meth:`run` gives a command (the command's own process is tested through :meth:`run`, in tests/cli
        and where a test is about it); the job's id."""
        from click.testing import CliRunner

        from gridsched.cli.gsub import cli

        env: dict[str, str | None] = {k: None for k in os.environ if k not in self.env}
        env.update(self.env)
        here = os.getcwd()
        os.chdir(self.work)
        try:
            r = CliRunner().invoke(cli, list(args), input=input, env=env, prog_name="gsub")
        finally:
            os.chdir(here)
        if r.exit_code != 0:
            raise AssertionError(f"gsub {' '.join(args)} exited {r.exit_code}: {r.stderr}{r.exception or ''}")
        return int(r.stdout.strip().splitlines()[-1])

    def gstat_json(self) -> dict[str, Any]:
        """``gstat -a --json`` on this spool, in process (the record a test polls while it waits for a state:
        the command's own process, a second or more of each wait on a busy machine, is tested elsewhere)."""
        from click.testing import CliRunner

        from gridsched.cli.gstat import cli

        env = {"GRIDSCHED_SPOOL": str(self.spool), "GRIDSCHED_CONFIG": str(self.cfgfile)}
        r = CliRunner().invoke(cli, ["-a", "--json"], env=env, prog_name="gstat")
        if r.exit_code != 0:
            raise AssertionError(f"gstat -a --json exited {r.exit_code}: {r.stderr}")
        return json.loads(r.stdout)

    def job(self, jid: int) -> dict[str, Any]:
        for j in self.gstat_json()["jobs"]:
            if j["id"] == jid:
                return j
        raise AssertionError(f"job {jid} not in gstat -a --json")

    def wait_state(self, jid: int, *states: str, timeout: float = 30) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            j = self.job(jid)
            return j if j["state"] in states else None

        try:
            return wait_for(check, timeout, f"job {jid} to be {'/'.join(states)}")
        except AssertionError:
            raise AssertionError(f"job {jid} is {self.job(jid)['state']}, not {states}; log:\n{self.log()}") from None

    def processes(self) -> list[psutil.Process]:
        """Every process started on behalf of this spool (shepherds and jobs)."""
        mine = []
        root = str(self.spool)
        for p in psutil.process_iter():
            try:
                env = p.environ()
            except (psutil.Error, OSError):
                continue
            if env.get("GRIDSCHED_SPOOL") == root or env.get("GS_SPOOL") == root:
                mine.append(p)
        return mine

    def cleanup(self) -> None:
        self.stop()
        for p in self.processes():
            try:
                p.kill()
            except psutil.Error:
                pass


DEFAULT_CONFIG = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
checkpoint_grace = "2s"
[machine]
cores = 8
[daemon]
autostart = false
"""


@pytest.fixture
def make_gs(tmp_path: Path):
    """A factory: ``make_gs(config)`` gives a started daemon; all are stopped and cleaned at teardown."""
    made: list[Gridsched] = []

    def make(config: str = DEFAULT_CONFIG, start: bool = True) -> Gridsched:
        gs = Gridsched(tmp_path / f"gs{len(made)}", config)
        made.append(gs)
        if start:
            gs.start()
        return gs

    yield make
    for gs in made:
        gs.cleanup()


@pytest.fixture
def gs(make_gs) -> Gridsched:
    return make_gs()


class ModuleDaemons:
    """The daemons of a module, one per configuration, started on first use (again if a test stopped one); each
    test gets the environment its commands run in as it was made."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[str, Gridsched] = {}
        self.env: dict[str, dict[str, str]] = {}  # each one's environment for commands, as made

    def get(self, config: str, work: Path) -> Gridsched:
        g = self.made.get(config)
        if g is None:
            g = self.made[config] = Gridsched(self.root / f"gs{len(self.made)}", config)
            self.env[config] = dict(g.env)
        g.env = dict(self.env[config])  # what an earlier test set there stays its own
        g.work = work
        work.mkdir()
        if not g.alive():
            g.start()
        return g


@pytest.fixture(scope="module")
def module_daemons(tmp_path_factory: pytest.TempPathFactory):
    """The daemons :func:`shared_make_gs` gives the tests of a module; stopped and cleaned after its last test."""
    daemons = ModuleDaemons(tmp_path_factory.mktemp("module"))
    try:
        yield daemons
    finally:
        for g in daemons.made.values():
            g.cleanup()


@pytest.fixture
def shared_make_gs(module_daemons: ModuleDaemons, tmp_path: Path):
    """``shared_make_gs(config)``: the module's daemon of that configuration, with a working directory of the
    test's own.  For the tests of a module that are independent of each other's jobs (each waits for its own
    jobs and names them by their ids, never counts the queue): they need not wait for a daemon each to start
    and stop.  ``shared_make_gs.root``: a directory the module's tests share (for a path in the
    configuration)."""
    made = 0

    def make(config: str = DEFAULT_CONFIG) -> Gridsched:
        nonlocal made
        made += 1
        return module_daemons.get(config, tmp_path / f"gs-work{made}")

    make.root = module_daemons.root  # type: ignore[attr-defined]
    return make


@pytest.fixture
def shared_gs(shared_make_gs) -> Gridsched:
    """The module's daemon of the default configuration (see :func:`shared_make_gs`)."""
    return shared_make_gs()


@pytest.fixture
def stub_daemon(tmp_path: Path):
    """A factory: ``stub_daemon(config, system_layout=False)`` gives a daemon object on a temporary spool with
    the stub executor (nothing is forked; tests take its turns themselves); it is closed at teardown.
    ``stub_daemon.restart(d)`` stops one and starts another on the same spool (a restart of the daemon)."""
    from gridsched.daemon.loop import Daemon
    from gridsched.daemon.spawn import Stub
    from gridsched.protocol import config as configmod
    from gridsched.protocol.spool import Spool

    made: list[Daemon] = []

    def make(config: str, system_layout: bool = False) -> Daemon:
        root = tmp_path / f"stub{len(made)}"
        root.mkdir()
        cfgfile = root / "gridsched.toml"
        cfgfile.write_text(config)
        spool = Spool(root / "spool")
        spool.ensure()
        if system_layout:  # laid out as a system daemon's spool (private/), whoever runs the test
            spool.private.mkdir(mode=0o700)
        d = Daemon(spool, configmod.load(str(cfgfile)), str(cfgfile), executor=Stub())
        d.lock()
        d.open()
        made.append(d)
        return d

    def restart(d: Daemon, crash: bool = False) -> Daemon:
        """Stop ``d`` and start a new daemon object on its spool, configuration and executor; ``crash``: ``d``
        dies as after ``kill -9`` (it neither commits nor publishes anything more: it lets go of its files)."""
        made.remove(d)
        if crash:
            d.db.close()
            os.close(d.lock_fd)
            d.sel.close()
        else:
            d.close()
        again = Daemon(d.spool, configmod.load(d.config_path), d.config_path, executor=d.ex)
        again.lock()
        again.open()
        made.append(again)
        return again

    make.restart = restart  # type: ignore[attr-defined]
    yield make
    for d in made:
        d.close()


# Where ../shared/tools/slurm-localhost (a single-node Slurm on loopback) renders its configuration.
SLURM_LOCAL_CONF = Path("/tmp/gridsched-slurm/slurm.conf")


@pytest.fixture
def slurm_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Slurm that answers (SLURM_CONF as set, or that of slurm-localhost where it runs); else the test is
    skipped with the reason printed."""
    import shutil

    if "SLURM_CONF" not in os.environ and SLURM_LOCAL_CONF.exists():
        monkeypatch.setenv("SLURM_CONF", str(SLURM_LOCAL_CONF))
    why = None
    if shutil.which("sbatch") is None:
        why = "sbatch is not on PATH"
    else:
        try:
            r = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20)
            if r.returncode != 0 or "UP" not in r.stdout:
                said = (r.stdout.strip() or r.stderr.strip() or "no answer").splitlines()[0]
                why = f"no controller answers scontrol ping: {said[:200]}"
        except (OSError, subprocess.TimeoutExpired) as e:
            why = f"scontrol ping failed: {e}"
    if why:
        print(f"no local Slurm: {why}")
        pytest.skip(f"no local Slurm: {why}")
