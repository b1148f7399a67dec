"""gschedd: start, stop and query the scheduler daemon of a spool.

``gschedd run`` is the daemon itself, in the foreground; ``gschedd start``
runs it in the background, detached, with its output in ``spool/gschedd.log``.
With ``--system`` (or ``daemon.system = true``) the daemon serves every user
of the machine: it runs as root on ``/var/spool/gridsched`` with
``/etc/gridsched/gridsched.toml``, and the spool is made shareable (see
:meth:`gridsched.protocol.spool.Spool.ensure_system`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from gridsched.cli.common import ExitCode, Group, fail, setup, spool_options
from gridsched.core.units import format_duration
from gridsched.protocol.spool import Spool, spawn_daemon

PROG = "gschedd"
SYSTEM_SPOOL = "/var/spool/gridsched"
SYSTEM_CONFIG = "/etc/gridsched/gridsched.toml"
START_TIMEOUT = 10.0  # seconds gschedd start waits for the daemon to take the spool
STOP_TIMEOUT = 30.0  # seconds gschedd stop waits for the daemon to let go of the spool


def wait_until(cond, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    """Poll ``cond()`` with a growing, bounded interval until it is true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        if cond():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 1.5, 0.5)


def last_log_line(spool: Spool) -> str:
    try:
        with open(spool.log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""
    except OSError:
        return ""


@click.group(
    PROG, cls=Group, context_settings={"help_option_names": ["-h", "--help"]}, short_help="the scheduler daemon"
)
def cli() -> None:
    """The gridsched daemon: one per spool directory.  It takes in the
    requests of gsub, gdel and gctl, schedules the queue, and runs the jobs
    on the cores it pins them to."""


def system_option(f):  # type: ignore[no-untyped-def]
    return click.option(
        "--system",
        is_flag=True,
        help=f"Serve every user of the machine (as root): spool {SYSTEM_SPOOL} and config {SYSTEM_CONFIG} "
        "unless --spool or --config say otherwise; the same as daemon.system = true.",
    )(f)


def system_setup(system: bool, spool_dir: str | None, config_file: str | None):  # type: ignore[no-untyped-def]
    """The spool and config of ``run`` and ``start``; with system mode, checked and made shareable."""
    if system:
        if not config_file and not os.environ.get("GRIDSCHED_CONFIG") and Path(SYSTEM_CONFIG).is_file():
            config_file = SYSTEM_CONFIG
        if not spool_dir and not os.environ.get("GRIDSCHED_SPOOL"):
            from gridsched.protocol.config import ConfigError, load

            try:  # the config's daemon.spool, else the system spool
                spool_dir = os.path.expanduser(load(config_file, None).spool or "") or SYSTEM_SPOOL
            except ConfigError as e:
                fail(PROG, f"config {e}")
    s = setup(PROG, spool_dir, config_file)
    system = system or s.cfg.system
    if system:
        if os.geteuid() != 0:
            fail(
                PROG,
                "system mode needs root: jobs run as their owners (or leave out --system "
                "and daemon.system for a personal daemon)",
            )
        try:
            s.spool.ensure_system()
        except OSError as e:
            fail(PROG, f"cannot prepare the system spool {s.spool.root}: {e}")
    return s, system


@cli.command("run")
@system_option
@spool_options
def run(system: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT (SIGHUP
    reloads the configuration)."""
    s, system = system_setup(system, spool_dir, config_file)
    from gridsched.daemon.loop import AlreadyRunning, serve

    s.spool.ensure()
    try:
        return int(serve(s.spool, s.cfg, s.config_file) or 0)
    except AlreadyRunning as e:
        pid = getattr(e, "pid", None) or (e.args[0] if e.args else "?")
        fail(PROG, f"already running with pid {pid}")
    except OSError as e:  # a full or read-only spool, or one it may not write
        fail(PROG, f"cannot run on {s.spool.root}: {e.strerror or e}")
    except ValueError as e:  # a topology file that cannot be used (TopologyError)
        fail(PROG, str(e))


@cli.command("start")
@system_option
@spool_options
def start(system: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Start the daemon in the background and wait until it runs."""
    s, system = system_setup(system, spool_dir, config_file)
    spool = s.spool
    info = spool.daemon_info()
    if info is not None:
        fail(PROG, f"already running with pid {info.get('pid')}")
    old_sock = _sock_id(spool)  # a socket a killed daemon left: the new daemon's is another
    proc = spawn_system(spool, s.cfg.path) if system else spawn_daemon(spool, s.config_file)

    def up() -> bool:
        # the lock, then the pid file, then the job table opened (an earlier release's taken over), then the
        # socket bound: the daemon runs once its own socket is there (commands may wait for its answers)
        if proc.poll() is not None:
            return True
        i = spool.daemon_info()
        sock = _sock_id(spool)
        return i is not None and i.get("pid") is not None and sock is not None and sock != old_sock

    if not wait_until(up, START_TIMEOUT):
        fail(PROG, f"the daemon did not start within {START_TIMEOUT:.0f} s; see {spool.log}")
    info = spool.daemon_info()
    if info is None:
        code = proc.wait()
        why = last_log_line(spool)
        fail(PROG, f"the daemon exited with status {code}" + (f": {why}" if why else f"; see {spool.log}"))
    click.echo(f"{PROG}: started, pid {info.get('pid')}, spool {spool.root}")
    return ExitCode.OK


def _sock_id(spool: Spool) -> tuple[int, int] | None:
    """Which socket is at the spool's socket path (its inode and change time), or None where none is."""
    try:
        st = os.lstat(spool.sock)
    except OSError:
        return None
    return (st.st_ino, st.st_ctime_ns)


@cli.command("stop")
@spool_options
def stop(spool_dir: str | None, config_file: str | None) -> int:
    """Stop the daemon (SIGTERM) and wait until it has let go of the spool.
    Running jobs keep running and are found again at the next start."""
    s = setup(PROG, spool_dir, config_file)
    spool = s.spool
    info = spool.daemon_info()
    if info is None:
        click.echo(f"{PROG}: not running, spool {spool.root}", err=True)
        return ExitCode.NOT_RUNNING
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        fail(PROG, f"the spool is locked but {spool.pidfile} gives no pid")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # exited meanwhile: the lock is about to be free
    except PermissionError:
        fail(PROG, f"not allowed to signal pid {pid}")
    if not wait_until(lambda: spool.daemon_info() is None, STOP_TIMEOUT):
        fail(PROG, f"pid {pid} did not stop within {STOP_TIMEOUT:.0f} s")
    click.echo(f"{PROG}: stopped, pid {pid}, spool {spool.root}")
    return ExitCode.OK


@cli.command("status")
@spool_options
def status(spool_dir: str | None, config_file: str | None) -> int:
    """Say whether the daemon runs: exit 0 if it does, 3 if not."""
    s = setup(PROG, spool_dir, config_file)
    spool = s.spool
    info = spool.daemon_info()
    if info is None:
        click.echo(f"{PROG}: not running, spool {spool.root}")
        return ExitCode.NOT_RUNNING
    started = info.get("started")
    up = f", up {format_duration(time.time() - started)}" if isinstance(started, (int, float)) else ""
    click.echo(f"{PROG}: running, pid {info.get('pid')}, spool {spool.root}{up}")
    return ExitCode.OK


def spawn_system(spool: Spool, config_path: str) -> subprocess.Popen[bytes]:
    """Start ``gschedd run --system`` in the background, detached, its output in the spool's log."""
    cmd = [
        sys.executable,
        "-m",
        "gridsched.cli.gschedd",
        "run",
        "--system",
        "--spool",
        str(spool.root),
        "--config",
        str(Path(config_path).absolute()),
    ]
    with open(os.devnull, "rb") as devnull, open(spool.log, "ab") as log:
        return subprocess.Popen(
            cmd, stdin=devnull, stdout=log, stderr=log, start_new_session=True, close_fds=True, cwd="/"
        )


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
