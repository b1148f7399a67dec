"""grun: run a command as a job, in the foreground (srun and salloc in one).

grun submits a normal job, with gsub's resource options (the same option
objects, taken from gsub's command), whose command is the job side of grun
(:mod:`gridsched.job.grun`).  It listens on a Unix socket in a private directory
(mode 0700, the user's own); once the job starts, its job side connects and
receives grun's standard streams, or the slave of a pseudo-terminal grun relays
to its own terminal (``--pty``), as file descriptors.  Nothing new crosses the
daemon's request boundary: the job is a job like any other, pinned, timed and
accounted.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gridsched.cli.common import Command, ExitCode, fail, setup, spool_options, warn
from gridsched.protocol.jobs import JobState

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow

PROG = "grun"
# gsub's options that grun takes too (one definition: the option objects of gsub's command)
GSUB_PARAMS = (
    "name",
    "ncpus",
    "ntasks",
    "cpus_per_task",
    "walltime",
    "mem",
    "mem_per_cpu",
    "mem_per_gpu",
    "chdir",
    "depend",
    "checkpoint",
    "resource",
    "reservation",
    "wait_resv",
    "place",
    "threads_per_core",
    "exclusive_board",
    "gpus",
    "gpus_per_task",
    "gres",
    "gpu_bind",
    "exclusive_gpu",
    "parent",
    "no_parent",
    "partition",
    "account",
    "qos",
)
POLL = 0.5  # seconds between looks at the job's state while grun waits for it to start
QUEUED_AFTER = 1.0  # seconds: then grun says that the job waits in the queue
END_WAIT = 30.0  # seconds grun waits for the state db to show how a job ended that hung up
MAX_SOCK_PATH = 100  # bytes of a Unix socket's path (sun_path holds 108)
MAX_SHOWN = 4096  # bytes of the job side's own output shown when it ended before connecting
# checkpoint modes that rerun a preempted job: a rerun cannot reconnect to the grun that waits


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP while waiting."""

    def __init__(self, sig: int) -> None:
        super().__init__(sig)
        self.sig = sig


def _gsub_params() -> list[click.Parameter]:
    from gridsched.cli import gsub

    by_name = {p.name: p for p in gsub.cli.params}
    return [by_name[n] for n in GSUB_PARAMS if n in by_name]


def _state(spool: Any, job_id: int) -> tuple[JobRow | None, str | None]:
    """The job's row (None before the daemon has taken it in) and why the daemon refused it (or None)."""
    import sqlite3

    from gridsched.protocol.state import StateDB

    if not spool.db.exists():
        return None, None
    try:
        db = StateDB(spool.db)
        try:
            job = db.job(job_id)
            why = db.id_record(job_id) if job is None else None
        finally:
            db.close()
    except sqlite3.Error:
        return None, None
    return job, (why["refused"] if why is not None and why["refused"] else None)


def _submit(s: Any, p: dict[str, Any], ctx: click.Context, sock: Path, cmd: list[str]) -> int:
    """Submit the job that runs ``cmd`` through the job side connecting to ``sock``; its id."""
    import shlex

    from gridsched.cli import gsub
    from gridsched.protocol.jobs import RERUN_MODES, rerun_refused
    from gridsched.submission.submit import Options, Script, SubmitError, submit

    # gsub's checks, run here, name this command in their error lines
    p = gsub.check_tasks(PROG, ctx, {**p, "split": None, "split_file": None})
    p = gsub.one_memory(PROG, ctx, p)
    gsub.warn_ignored(PROG, p)
    mem = p["mem"]
    if p["mem_per_cpu"] is not None:
        mem = p["mem_per_cpu"] * (p["ncpus"] or s.cfg.default_ncpus)
    if p["ntasks"] and not p["ncpus"]:
        p["ncpus"] = p["ntasks"]
    checkpoint = p["checkpoint"]
    why = rerun_refused(True, checkpoint)
    if why:
        fail(PROG, f"{why}; use none or suspend", ExitCode.USAGE)
    if checkpoint is None and s.cfg.checkpoint in RERUN_MODES:
        checkpoint = "none"  # the configured default would let it be preempted and rerun
    resources, resv = gsub.resv_options(PROG, s.spool, s.cfg, p)
    devices = gsub.device_options(PROG, s.spool, s.cfg, p)
    if p["mem_per_gpu"] is not None:
        mem = p["mem_per_gpu"] * gsub.gpus_of(None, devices, PROG)
    text = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gridsched.job.grun "$@"\n'
    script = Script(text, "grun", os.path.basename(cmd[0]) or "grun")
    opts = Options(
        name=p["name"],
        ncpus=p["ncpus"],
        walltime=p["walltime"],
        mem=mem,
        output=str(sock.parent / "job.out"),  # the job side's own messages; grun removes the directory
        join="oe",
        chdir=p["chdir"],
        checkpoint=checkpoint,
        depend=p["depend"],
        parent=p["parent"],
        no_parent=bool(p["no_parent"]),
    )

    def extra(spec: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"interactive": True}
        if resources:
            out["resources"] = resources
        if resv is not None:
            out.update(reservation=resv, wait_resv=bool(p["wait_resv"]))
        if p["place"] or p["threads_per_core"] or p["exclusive_board"]:
            out.update(gsub.place_options(PROG, s.cfg, s.spool, spec["ncpus"], p))
        if devices:
            out["devices"] = devices
        if p["ntasks"] is not None:
            out["ntasks"] = p["ntasks"]
        if p["cpus_per_task"] is not None:
            out["cpus_per_task"] = p["cpus_per_task"]
        if p["account"]:
            out["account"] = p["account"]
        return out

    try:
        spec = submit(s.spool, s.cfg, script, opts, [str(sock), "--", *cmd], extra=extra)
    except SubmitError as e:
        fail(PROG, str(e), e.code)
    if s.spool.daemon_info() is None:
        if s.cfg.autostart:
            from gridsched.protocol.autostart import autostart

            autostart(s.spool, s.config_file)
        else:
            warn(PROG, f"note: no daemon runs on {s.spool.root}; the job waits until one starts (gschedd start)")
    return int(spec["id"])


def _cancel(spool: Any, job_id: int) -> None:
    from gridsched.protocol import view

    try:
        view.control(spool, "cancel", [job_id], os.getuid())
    except view.QueueError as e:
        warn(PROG, f"error: job {job_id}: {e}")


def _ended(spool: Any, job_id: int, job: JobRow, workdir: Path) -> int:
    """Say on standard error how job ``job_id`` ended without grun; grun's exit status."""
    from gridsched.submission.submit import job_exit_status

    state = job["state"]
    why = {JobState.TIMEOUT: "walltime reached", JobState.CANCELLED: "cancelled"}.get(state, "")
    code = job_exit_status(job) or 1
    if state not in (JobState.TIMEOUT, JobState.CANCELLED):
        why = f"exit status {code}"
    warn(PROG, f"error: job {job_id} ended: {state}" + (f" ({why})" if why else ""))
    try:
        with open(workdir / "job.out", "rb") as f:
            said = f.read(MAX_SHOWN).decode("utf-8", errors="replace").strip()
    except OSError:
        said = ""
    if said:
        click.echo(said, err=True)
    return code


def _wait_start(spool: Any, job_id: int, listener: socket.socket, workdir: Path) -> socket.socket | int:
    """Wait for the job side to connect (the connection) or the job to end first (grun's exit status)."""
    import select
    import time

    start = time.monotonic()
    said_queued = False
    while True:
        ready, _, _ = select.select([listener], [], [], POLL)
        if ready:
            conn, _ = listener.accept()
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            uid = int.from_bytes(creds[4:8], sys.byteorder)
            if uid != os.getuid():  # only the user's own job may take the terminal
                conn.close()
                continue
            if said_queued:
                warn(PROG, f"job {job_id} has been allocated resources")
            return conn
        job, refused = _state(spool, job_id)
        if refused:
            fail(PROG, f"job {job_id}: refused by the daemon: {refused}")
        if job is not None and job["state"] in (
            JobState.COMPLETED,
            JobState.FAILED,
            JobState.TIMEOUT,
            JobState.CANCELLED,
        ):
            return _ended(spool, job_id, job, workdir)
        if not said_queued and time.monotonic() - start >= QUEUED_AFTER:
            warn(PROG, f"job {job_id} queued and waiting for resources")
            said_queued = True


def _lines(conn: socket.socket, buf: bytearray) -> list[dict[str, Any]]:
    out = []
    while b"\n" in buf:
        i = buf.index(b"\n")
        line = bytes(buf[:i])
        del buf[: i + 1]
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            out.append(msg)
    return out


def _run_streams(conn: socket.socket) -> dict[str, Any] | None:
    """Lend the job grun's standard streams and forward signals until CMD has ended; its exit message."""
    socket.send_fds(conn, [json.dumps({"pty": False}).encode() + b"\n"], [0, 1, 2])

    def forward(sig: int, _frame: Any) -> None:
        try:
            conn.sendall(json.dumps({"signal": sig}).encode() + b"\n")
        except OSError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    buf = bytearray()
    while True:
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if not data:
            return None
        buf += data
        for msg in _lines(conn, buf):
            if "exit" in msg:
                return msg


def _winsize(fd: int) -> bytes | None:
    import fcntl
    import termios

    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _run_pty(conn: socket.socket) -> dict[str, Any] | None:
    """Lend the job the slave of a new pty, relay it to grun's raw terminal until CMD has ended; its exit
    message.  The terminal's modes are restored on every way out."""
    import fcntl
    import select
    import termios
    import tty

    master, slave = os.openpty()
    saved = termios.tcgetattr(0)
    termios.tcsetattr(slave, termios.TCSANOW, saved)
    size = _winsize(0)
    if size is not None:
        fcntl.ioctl(master, termios.TIOCSWINSZ, size)
    socket.send_fds(conn, [json.dumps({"pty": True}).encode() + b"\n"], [slave])
    os.close(slave)

    def resize(_sig: int, _frame: Any) -> None:
        ws = _winsize(0)
        if ws is not None:
            try:
                fcntl.ioctl(master, termios.TIOCSWINSZ, ws)
            except OSError:
                pass

    def leave(sig: int, _frame: Any) -> None:
        raise Interrupted(sig)

    signal.signal(signal.SIGWINCH, resize)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, leave)
    result: dict[str, Any] | None = None
    buf = bytearray()
    watch: list[int | socket.socket] = [0, master, conn]
    try:
        tty.setraw(0, termios.TCSANOW)
        conn_open, master_open = True, True
        while master_open or conn_open:
            timeout = None if conn_open else 0.2  # CMD has ended: drain what the pty still holds
            ready, _, _ = select.select(watch, [], [], timeout)
            if not ready:
                break
            if master in ready:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:  # EIO: every holder of the slave has closed it
                    data = b""
                if data:
                    _write_all(1, data)
                else:
                    master_open = False
                    watch.remove(master)
            if 0 in ready:
                data = os.read(0, 1 << 16)
                if data:
                    _write_all(master, data)
                else:
                    watch.remove(0)
            if conn in ready:
                data = conn.recv(4096)
                buf += data
                for msg in _lines(conn, buf):
                    if "exit" in msg:
                        result = msg
                if not data or result is not None:
                    conn_open = False
                    watch.remove(conn)
    finally:
        termios.tcsetattr(0, termios.TCSAFLUSH, saved)
        os.close(master)
    return result


@click.command(
    PROG,
    cls=Command,
    context_settings={"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]},
    short_help="run a command as a job, in the foreground",
)
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED, metavar="[CMD [ARGS]...]")
@click.option(
    "--pty",
    is_flag=True,
    help="Run CMD (default: $SHELL) on a pseudo-terminal connected to grun's terminal, which is raw "
    "meanwhile: ^C, ^Z and the window size reach the job as on a local terminal.",
)
@spool_options
def cli(cmd: tuple[str, ...], pty: bool, spool_dir: str | None, config_file: str | None, **_: Any) -> int:
    """Run CMD as a job in the foreground: it waits in the queue like any job, then runs on the job's
    cores with grun's standard input, output and error; grun exits with CMD's exit status.

    With --pty, CMD (default: your $SHELL) runs on a pseudo-terminal: an interactive session on the
    job's cores.  Ctrl-C while the job waits cancels it (exit status 130).  The resource options are
    gsub's.

    A grun job runs once: a rerun could not reconnect to grun.  So --checkpoint takes none or
    suspend only (a configured default of signal or requeue becomes none), galter does not change
    that, and grequeue refuses a grun job (as Slurm requeues only batch jobs).  Should the job
    restart all the same, grun cancels it, says so and exits with status 1.
    """
    import shutil
    import tempfile

    ctx = click.get_current_context()
    if pty and not os.isatty(0):
        fail(PROG, "--pty needs a terminal on standard input", ExitCode.USAGE)
    argv = list(cmd) or ([os.environ.get("SHELL") or "/bin/sh"] if pty else [])
    if not argv:
        fail(PROG, "give a command to run (or --pty for a shell)", ExitCode.USAGE)
    s = setup(PROG, spool_dir, config_file)
    workdir = Path(tempfile.mkdtemp(prefix="grun."))  # mode 0700, the user's own
    if len(str(workdir / "sock")) > MAX_SOCK_PATH:  # a Unix socket's path is short; $TMPDIR may be deep
        workdir.rmdir()
        workdir = Path(tempfile.mkdtemp(prefix="grun.", dir="/tmp"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    job_id: int | None = None

    def interrupted(sig: int, _frame: Any) -> None:
        raise Interrupted(sig)

    try:
        sock = workdir / "sock"
        listener.bind(str(sock))
        listener.listen(1)
        job_id = _submit(s, ctx.params, ctx, sock, argv)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, interrupted)
        try:
            got = _wait_start(s.spool, job_id, listener, workdir)
        except Interrupted as e:
            _cancel(s.spool, job_id)
            warn(PROG, f"job {job_id} cancelled while waiting in the queue")
            return ExitCode.INTERRUPTED if e.sig == signal.SIGINT else 128 + e.sig
        if isinstance(got, int):
            return got
        listener.close()
        row = _state(s.spool, job_id)[0]
        restarts = row["restarts"] if row is not None else 0  # more later: the job was requeued
        with got:
            try:
                result = _run_pty(got) if pty else _run_streams(got)
            except Interrupted as e:  # grun itself is told to end: the job side hangs up
                return 128 + e.sig
        if result is not None:
            if result.get("error"):
                warn(PROG, f"error: {result['error']}")
            return int(result["exit"])
        return _hung_up(s.spool, job_id, workdir, restarts)
    finally:
        listener.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _hung_up(spool: Any, job_id: int, workdir: Path, restarts: int) -> int:
    """The job side went away without CMD's exit status: the job was killed, or requeued. Say which."""
    import time

    from gridsched.protocol.jobs import TERMINAL

    deadline = time.monotonic() + END_WAIT
    while True:
        job, _ = _state(spool, job_id)
        if job is not None and (
            job["restarts"] > restarts or job["state"] in (JobState.PENDING, JobState.HELD, JobState.STOPPING)
        ):
            if job["state"] not in TERMINAL:
                _cancel(spool, job_id)
            fail(PROG, f"job {job_id} was requeued: a grun job cannot be rerun (it could not reconnect); cancelled")
        if job is not None and job["state"] in TERMINAL:
            return _ended(spool, job_id, job, workdir)
        if time.monotonic() > deadline:
            fail(PROG, f"job {job_id}: lost the connection to the job: it has not ended after {END_WAIT:g} s")
        time.sleep(POLL)


cli.params[1:1] = _gsub_params()  # after CMD and --pty, before --spool and --config


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
