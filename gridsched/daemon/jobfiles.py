"""A job's directory, ``spool/jobs/ID``: made by the daemon, never through a path a user can change.

The directory is the daemon's (in system mode root's, ``0711``): a user can
neither list it nor put anything in it, so no name in it can be swapped for a
link.  In it:

``script`` (and ``task-script``)
    the job's script, the owner's, ``0700``;
``checkpoint/``
    the owner's directory for the job's saved state, with the owner's umask;
``private.json``
    the job's environment, arguments and paths, the owner's, ``0600``: what
    ``gstat -f`` and ``--json`` show the owner (other users cannot read it);
``launch.json``
    the same, the daemon's own copy, ``0600``: the only one the daemon reads
    when it starts the job of another user (the owner can change their own
    copy, not this one); a job of the daemon's own user has only
    ``private.json``, which is then the daemon's;
``seg-N.pid``, ``seg-N.exit``
    written by the shepherd (:mod:`.launch`).

Every file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to the
directory's descriptor and handed to its owner with ``fchown`` on its own
descriptor.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

from gridsched.protocol.jobs import PRIVATE_FILE, PRIVATE_KEYS

# A job's files as it is taken in: name in its directory -> the file's text, or a path to hard-link.
JobFiles: TypeAlias = Mapping[str, str | Path]

LAUNCH_FILE = "launch.json"
MAX_PRIVATE = 16 << 20


class JobFilesError(Exception):
    """A job's files cannot be read; the message says why (the job fails with it)."""


def create(job_dir: Path, uid: int, gid: int, umask: int, files: JobFiles, private: bytes) -> None:
    """Make ``job_dir`` with the job's ``files`` (name -> text, or a path to hard-link), ``checkpoint/`` and
    the private parts of its spec; the files the job uses are handed to ``uid``/``gid`` when run as root."""
    me = os.geteuid()
    give = me == 0 and uid != 0
    if os.path.lexists(job_dir):  # left by a take-in whose commit a crash lost
        shutil.rmtree(job_dir)  # safe against links (fd-based) where the platform allows
    os.mkdir(job_dir, 0o711)
    dfd = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(dfd)
        if st.st_uid != me:
            raise OSError(f"{job_dir}: not the daemon's directory")
        os.fchmod(dfd, 0o711)
        for name, content in files.items():
            if isinstance(content, str):
                _new_file(dfd, name, content.encode(), 0o700, uid if give else -1, gid if give else -1)
            else:
                os.link(content, name, dst_dir_fd=dfd, follow_symlinks=False)
        # nobody but the daemon can write the directory, so the names made in it stay what they were made
        os.mkdir("checkpoint", 0o700, dir_fd=dfd)
        if give:
            os.chown("checkpoint", uid, gid, dir_fd=dfd, follow_symlinks=False)
        os.chmod("checkpoint", (0o777 & ~umask) | 0o700, dir_fd=dfd)
        _new_file(dfd, PRIVATE_FILE, private, 0o600, uid if give else -1, gid if give else -1)
        if give:  # the owner's copy is not the daemon's: keep one of its own to start the job from
            _new_file(dfd, LAUNCH_FILE, private, 0o600, -1, -1)
    finally:
        os.close(dfd)


def _new_file(dfd: int, name: str, data: bytes, mode: int, uid: int, gid: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if uid != -1:
            os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def read_private(job_dir: Path) -> dict[str, Any]:
    """The private parts of a job's spec from the daemon's own copy; :class:`JobFilesError` if it cannot be read.

    A job taken in by an earlier version has only ``private.json``: it is read
    when the daemon owns it (never a file a user could have written).
    """
    me = os.geteuid()
    for name in (LAUNCH_FILE, PRIVATE_FILE):
        try:
            fd = os.open(job_dir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise JobFilesError(f"cannot open its {name}: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if st.st_uid != me or st.st_size > MAX_PRIVATE or not (st.st_mode & 0o170000 == 0o100000):
                continue
            with os.fdopen(os.dup(fd), "rb") as f:
                data = json.loads(f.read(MAX_PRIVATE))
        except (OSError, ValueError, RecursionError) as e:
            raise JobFilesError(f"cannot read its {name}: {e}") from None
        finally:
            os.close(fd)
        if not isinstance(data, dict) or not all(k in data for k in ("env", "args", "workdir", "stdout", "stderr")):
            raise JobFilesError(f"its {name} is incomplete")
        return {k: data[k] for k in PRIVATE_KEYS if k in data}
    raise JobFilesError("its launch file is missing")


ARRAY_FILE = "array.json"  # in an array's directory (its first task's): what the tasks not made yet are made from


def write_array(job_dir: Path, data: bytes) -> None:
    """Write (or replace) the array file of ``job_dir``: the daemon's own, ``0600``, on disk before it returns
    (the array's row in the job table, committed next, counts on it)."""
    dfd = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if os.fstat(dfd).st_uid != os.geteuid():
            raise OSError(f"{job_dir}: not the daemon's directory")
        tmp = f".{ARRAY_FILE}.new"
        try:
            os.unlink(tmp, dir_fd=dfd)
        except FileNotFoundError:
            pass
        _new_file(dfd, tmp, data, 0o600, -1, -1)
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, ARRAY_FILE, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_array(job_dir: Path) -> dict[str, Any]:
    """The array file of ``job_dir`` (:func:`write_array`); :class:`JobFilesError` if it cannot be read or is
    not the daemon's own."""
    try:
        fd = os.open(job_dir / ARRAY_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise JobFilesError(f"cannot open its {ARRAY_FILE}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_size > MAX_PRIVATE or st.st_mode & 0o170000 != 0o100000:
            raise JobFilesError(f"its {ARRAY_FILE} is not the daemon's own file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = json.loads(f.read(MAX_PRIVATE))
    except (OSError, ValueError, RecursionError) as e:
        raise JobFilesError(f"cannot read its {ARRAY_FILE}: {e}") from None
    finally:
        os.close(fd)
    if not isinstance(data, dict):
        raise JobFilesError(f"its {ARRAY_FILE} is not an object")
    return data
