"""gschedd: start, stop and query the scheduler daemon of a spool.

``gschedd run`` is the daemon itself, in the foreground; ``gschedd start``
runs it in the background, detached, with its output in ``spool/gschedd.log``.
"""

from __future__ import annotations

import os
import signal
import time

import click

from ..core.units import format_duration
from ..spool import Spool
from .common import ExitCode, Group, fail, setup, spawn_daemon, spool_options

PROG = "gschedd"
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


@click.group(PROG, cls=Group, context_settings={"help_option_names": ["-h", "--help"]},
             short_help="the scheduler daemon")
def cli() -> None:
    """The gridsched daemon: one per spool directory.  It takes in the
    requests of gsub, gdel and gctl, schedules the queue, and runs the jobs
    on the cores it pins them to."""


@cli.command("run")
@spool_options
def run(spool_dir: str | None, config_file: str | None) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT (SIGHUP
    reloads the configuration)."""
    s = setup(PROG, spool_dir, config_file)
    from ..daemon.main import AlreadyRunning, serve

    s.spool.ensure()
    try:
        return int(serve(s.spool, s.cfg) or 0)
    except AlreadyRunning as e:
        pid = getattr(e, "pid", None) or (e.args[0] if e.args else "?")
        fail(PROG, f"already running with pid {pid}")


@cli.command("start")
@spool_options
def start(spool_dir: str | None, config_file: str | None) -> int:
    """Start the daemon in the background and wait until it runs."""
    s = setup(PROG, spool_dir, config_file)
    spool = s.spool
    info = spool.daemon_info()
    if info is not None:
        fail(PROG, f"already running with pid {info.get('pid')}")
    proc = spawn_daemon(spool, s.config_file)
    if not wait_until(lambda: spool.daemon_info() is not None or proc.poll() is not None, START_TIMEOUT):
        fail(PROG, f"the daemon did not start within {START_TIMEOUT:.0f} s; see {spool.log}")
    info = spool.daemon_info()
    if info is None:
        code = proc.wait()
        why = last_log_line(spool)
        fail(PROG, f"the daemon exited with status {code}" + (f": {why}" if why else f"; see {spool.log}"))
    click.echo(f"{PROG}: started, pid {info.get('pid')}, spool {spool.root}")
    return ExitCode.OK


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


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
