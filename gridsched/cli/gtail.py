"""gtail: follow a job's output file while it runs, as ``tail -f`` (and ``pueue follow``).

gtail reads the job's state as gstat does and the file the job writes.  The
file is the user's: it is opened without following a link (``O_NOFOLLOW``),
without blocking (``O_NONBLOCK``: a FIFO planted in its place cannot hold gtail),
and read only if it is a regular file, owned by the job's user when gtail runs
as root, so that a job cannot make an admin's gtail show another file.  It is
read in chunks: memory stays bounded whatever the file's size.
"""

from __future__ import annotations

import os
import stat
import time
from typing import TYPE_CHECKING, Any

import click

from gridsched.cli.common import Command, ExitCode, fail, setup, spool_options, warn
from gridsched.protocol.jobs import TERMINAL, WAITING, JobState

if TYPE_CHECKING:
    from gridsched.protocol.view import ViewRow

PROG = "gtail"
CHUNK = 1 << 16  # bytes read at once
POLL = 0.25  # seconds between looks at the file and the job's state
ENDED = TERMINAL  # OUT_OF_MEMORY included: a job killed for memory has ended too


class NotRegular(Exception):
    """The path is a link, a FIFO, a directory, or a file someone else owns."""


def open_user_file(path: str, owner: int | None) -> int:
    """A descriptor of ``path``, a file a job's user wrote: not through a link at its last step, not
    blocking on a FIFO, a regular file only, and (``owner`` given) owned by ``owner``.

    :class:`FileNotFoundError` if it is not there, :class:`NotRegular` if it is not such a file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        import errno

        if e.errno == errno.ELOOP:
            raise NotRegular(f"{path}: a symbolic link, not the job's output file") from None
        raise
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "not a regular file"
    elif owner is not None and st.st_uid != owner:
        why = "not owned by the job's user"
    if why:
        os.close(fd)
        raise NotRegular(f"{path}: {why}")
    return fd


def tail_start(fd: int, lines: int) -> int:
    """The offset where the last ``lines`` lines of the open file ``fd`` begin (read back in chunks)."""
    end = os.fstat(fd).st_size
    if lines <= 0 or end == 0:
        return end
    pos, seen = end, 0
    last = os.pread(fd, 1, end - 1)
    if last == b"\n":
        seen = -1  # the final newline ends the last line; it does not start one
    while pos > 0:
        n = min(CHUNK, pos)
        pos -= n
        chunk = os.pread(fd, n, pos)
        i = len(chunk)
        while True:
            i = chunk.rfind(b"\n", 0, i)
            if i < 0:
                break
            seen += 1
            if seen == lines:
                return pos + i + 1
    return 0


def copy(fd: int, offset: int) -> int:
    """Write the file from ``offset`` to its current end on standard output; the new offset."""
    import sys

    out = sys.stdout.buffer
    while chunk := os.pread(fd, CHUNK, offset):
        out.write(chunk)
        offset += len(chunk)
    out.flush()
    return offset


def _job(spool: Any, jid: int) -> ViewRow | None:
    from gridsched.protocol import view

    rows = view.load_jobs(spool, [jid])
    return rows[0] if rows else None


@click.command(
    PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]}, short_help="follow a job's output"
)
@click.argument("job_ref", metavar="ID")
@click.option("-e", "--stderr", "errors", is_flag=True, help="Follow the job's standard error file instead.")
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Follow the file, as tail -f: what gtail always does (taken so that tail's habit works).",
)
@click.option(
    "-n",
    "--lines",
    type=click.IntRange(0, None),
    default=10,
    metavar="N",
    help="Show the last N lines of what the file already holds first (default 10; 0: only what comes next).",
)
@spool_options
def cli(job_ref: str, errors: bool, follow: bool, lines: int, spool_dir: str | None, config_file: str | None) -> int:
    """Follow the output file of job ID (ID, or ARRAYID_INDEX for a task of an array) as tail -f does:
    its last lines, then what the job writes, until the job ends.  While the job is pending, gtail
    waits (and says so).  When the job has ended, gtail prints a line on standard error saying how and
    exits: 0 if the job COMPLETED, else the exit status gsub --wait gives for it (at least 1).
    """
    from gridsched.protocol import view
    from gridsched.protocol.text import shown
    from gridsched.submission.submit import job_exit_status

    s = setup(PROG, spool_dir, config_file)
    try:
        jid = view.resolve(s.spool, job_ref)
        job = _job(s.spool, jid)
    except (LookupError, ValueError) as e:
        fail(PROG, shown(e))
    except view.QueueError as e:
        fail(PROG, shown(e))
    if job is None:
        fail(PROG, f"job {shown(job_ref)}: no such job")
    uid = os.getuid()
    if uid != 0 and job.get("uid") not in (None, uid):
        fail(PROG, f"job {shown(job_ref)}: owned by {shown(job.get('user') or job.get('uid'))}")
    spec = view.private(s.spool, job)["spec"]
    path = spec.stderr if errors else spec.stdout
    if not path:
        fail(PROG, f"job {shown(job_ref)}: no {'error' if errors else 'output'} file is known")
    owner = job.get("uid") if uid == 0 else None
    said_pending = False
    fd: int | None = None
    offset = 0
    try:
        while True:
            state = job["state"]
            if fd is None and state not in WAITING:
                try:
                    fd = open_user_file(path, owner)
                    offset = tail_start(fd, lines)
                except FileNotFoundError:
                    if state in ENDED:
                        fail(PROG, f"job {shown(job_ref)} ended {state} without its file {shown(path)}")
                except NotRegular as e:
                    fail(PROG, f"job {shown(job_ref)}: {shown(e)}")
                except OSError as e:
                    fail(PROG, f"job {shown(job_ref)}: {shown(path)}: {e.strerror or e}")
            elif fd is None and not said_pending:
                warn(PROG, f"job {shown(job_ref)} is {state}: waiting for it to start")
                said_pending = True
            if fd is not None:
                if os.fstat(fd).st_size < offset:
                    warn(PROG, f"{shown(path)}: file truncated")
                    offset = 0
                offset = copy(fd, offset)
            if state in ENDED and fd is not None:
                break
            time.sleep(POLL)
            got = _job(s.spool, jid)
            if got is None:
                fail(PROG, f"job {shown(job_ref)}: no longer known")
            job = got
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except view.QueueError as e:
        fail(PROG, shown(e))
    finally:
        if fd is not None:
            os.close(fd)
    code = 0 if job["state"] == JobState.COMPLETED else (job_exit_status(job) or 1)
    how = f"exit status {job_exit_status(job)}" if job["state"] in (JobState.COMPLETED, JobState.FAILED) else ""
    if job.get("exit_signal"):
        how = f"signal {job['exit_signal']}"
    warn(PROG, f"job {shown(job_ref)} ended: {job['state']}" + (f" ({how})" if how else ""))
    return code


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
