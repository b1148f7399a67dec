"""Spare private directories: a job of the daemon's own user leaves its private directory, emptied, for a
later start (jobtmp.retire), which gets it renamed and filled anew (jobtmp.create with a pool)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from gridsched.daemon import jobtmp


def _make(tmp_path: Path, job_id: int, ncpus: int = 2, ntasks: int = 2) -> jobtmp.Private:
    """A private directory in ``tmp_path/base`` for a job of the spool ``tmp_path/spool``."""
    base = tmp_path / "base"
    base.mkdir(exist_ok=True)
    (tmp_path / "spool" / "jobs").mkdir(parents=True, exist_ok=True)
    pool = jobtmp.pool_dir(str(tmp_path / "spool" / "jobs" / str(job_id)))
    name = os.path.basename(jobtmp.name_for(str(base), job_id))
    return jobtmp.create(str(base), job_id, os.getuid(), os.getgid(), "h", ncpus, ntasks, name=name, pool=pool)


def _retire(tmp_path: Path, priv: jobtmp.Private, job_id: int) -> bool:
    return jobtmp.retire(priv.root, os.getuid(), str(tmp_path / "spool" / "jobs" / str(job_id)))


def _pool(tmp_path: Path) -> Path:
    return tmp_path / "spool" / "private-spares"


def test_a_retired_private_directory_is_emptied_and_made_again_for_the_next_start(tmp_path):
    """The job's files go (even a directory it made unreadable), the directory waits in the pool, and the next
    start gets it (the same inode) under its own name with its own host files, its bin/ whole again and its
    launcher as written by this installation, whatever the job did to them."""
    first = _make(tmp_path, 1, ncpus=3, ntasks=3)
    inode = os.stat(first.root).st_ino
    Path(first.tmpdir, "a", "b").mkdir(parents=True)
    Path(first.tmpdir, "a", "b", "f").write_text("x")
    Path(first.tmpdir, "a", "b").chmod(0o000)
    Path(first.tmpdir, "g").write_text("y")
    assert jobtmp.use_installed_mpi(first.root, str(_installed_mpi(tmp_path)))  # mpirun, mpiexec taken out
    Path(first.bin, "srun").write_text("changed by the job\n")
    Path(first.bash_env).write_text("changed by the job\n")
    Path(first.nodefile).chmod(0o600)
    assert _retire(tmp_path, first, 1)
    assert not os.path.exists(first.root)
    pool = _pool(tmp_path)
    (spare,) = pool.iterdir()
    assert list((spare / "tmp").iterdir()) == []
    second = _make(tmp_path, 2, ncpus=1, ntasks=1)
    assert os.stat(second.root).st_ino == inode and list(pool.iterdir()) == []
    assert Path(second.nodefile).read_text() == "h\n" and Path(second.mpi_hosts).read_text() == "h\n"
    assert os.stat(second.nodefile).st_mode & 0o777 == 0o644
    assert Path(second.pe_hostfile).read_text().startswith("h 1 ")
    assert second.bin in Path(second.bash_env).read_text()
    assert sorted(os.listdir(second.bin)) == sorted(n.removeprefix("bin/") for n in jobtmp.BIN_NAMES)
    assert len({os.stat(Path(second.root) / n).st_ino for n in jobtmp.BIN_NAMES}) == 1
    launcher = Path(second.bin, "srun").read_text()
    assert launcher.startswith("#!") and "gridsched.job.launcher" in launcher
    assert os.stat(second.root).st_mode & 0o777 == 0o700 and os.listdir(second.tmpdir) == []


def _installed_mpi(tmp_path: Path) -> Path:
    mpi = tmp_path / "mpi"
    mpi.mkdir()
    (mpi / "mpirun").write_text("#!/bin/sh\n")
    (mpi / "mpirun").chmod(0o755)
    return mpi


def test_a_private_directory_not_as_made_is_not_kept_and_a_spare_not_as_made_is_not_used(tmp_path):
    """A job that left a file beside its tmp/ has its directory removed, not kept; a spare that is not as made
    when it is taken is removed and a new directory made instead."""
    first = _make(tmp_path, 1)
    Path(first.root, "extra").write_text("x")
    assert not _retire(tmp_path, first, 1)
    jobtmp.remove(first.root, os.getuid())
    second = _make(tmp_path, 2)
    assert _retire(tmp_path, second, 2)
    pool = _pool(tmp_path)
    (spare,) = pool.iterdir()
    (spare / "tmp" / "planted").write_text("x")  # not emptied: not to be given to another job
    third = _make(tmp_path, 3)
    assert list(pool.iterdir()) == [] and os.listdir(third.tmpdir) == []
    assert Path(third.nodefile).read_text() == "h\nh\n"


def test_without_a_pool_or_room_in_it_a_private_directory_is_not_kept_and_the_pool_goes_with_the_daemon(tmp_path):
    """The pool is made by the daemon when it makes a private directory; a shepherd whose daemon has none (it
    stopped) or whose pool is full keeps nothing; the daemon's stop removes its pool."""
    (tmp_path / "base").mkdir()
    priv = jobtmp.create(str(tmp_path / "base"), 1, os.getuid(), os.getgid(), "h", 1, 1)  # no pool
    assert not _retire(tmp_path, priv, 1)
    privs = [_make(tmp_path, j) for j in range(2, 3 + jobtmp.SPARES)]
    kept = [_retire(tmp_path, p, j) for j, p in zip(range(2, 3 + jobtmp.SPARES), privs)]
    assert kept == [True] * jobtmp.SPARES + [False]
    jobtmp.sweep(force=True)
    assert not _pool(tmp_path).exists()
    priv = _make(tmp_path, 99)  # the daemon makes its pool again when it needs one
    jobtmp.sweep(force=True)
    assert not _retire(tmp_path, priv, 99)


def test_a_spool_on_another_file_system_than_the_base_keeps_no_spare(tmp_path):
    """A spare cannot be renamed from one file system to another: with the base elsewhere than the spool, every
    start gets a new directory and every end removes it."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system (/dev/shm) to put the base on")
    base = Path(tempfile.mkdtemp(dir=shm))
    try:
        (tmp_path / "spool" / "jobs").mkdir(parents=True)
        job_dir = str(tmp_path / "spool" / "jobs" / "1")
        priv = jobtmp.create(
            str(base), 1, os.getuid(), os.getgid(), "h", 1, 1, name="gridsched.1.x", pool=jobtmp.pool_dir(job_dir)
        )
        assert not jobtmp.retire(priv.root, os.getuid(), job_dir)
        assert list(_pool(tmp_path).iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("linked", ["nodefile", "bin/srun"])
def test_a_spare_whose_file_a_job_linked_elsewhere_is_not_written_in_place(tmp_path, linked):
    """A job that made another name for one of its directory's files (a hard link out of it) keeps what that
    name holds: the spare is not filled anew in place but removed, and the next start gets a new directory."""
    first = _make(tmp_path, 1, ncpus=3)
    outside = tmp_path / "kept-by-the-job"
    os.link(Path(first.root, linked), outside)
    before = outside.read_bytes()
    assert _retire(tmp_path, first, 1)
    second = _make(tmp_path, 2, ncpus=1)
    assert outside.read_bytes() == before and os.stat(outside).st_nlink == 1
    assert list(_pool(tmp_path).iterdir()) == []
    assert Path(second.nodefile).read_text() == "h\n"
    assert len({os.stat(Path(second.root) / n).st_ino for n in jobtmp.BIN_NAMES}) == 1
