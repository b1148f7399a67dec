"""A job's private directory: its ``TMPDIR``, its host files and its ``srun``, made for each start and
removed at its end.

Slurm (with ``job_container/tmpfs``), PBS Pro, Torque and Grid Engine give
each job a temporary directory of its own and remove it with the job; so does
gridsched.  Each start of a job (each segment) gets
``BASE/gridsched.JOBID.RANDOM`` (``BASE``: ``[jobs] tmpdir``, default the
system's temporary directory), the job owner's, mode 0700, holding::

    tmp/          TMPDIR
    nodefile      the host once per core (PBS_NODEFILE)
    mpi_hosts     the host once per task: the ranks an installed mpirun starts
    pe_hostfile   Grid Engine's "host slots queue processors" line (PE_HOSTFILE)
    bin/          srun, mpirun and mpiexec (the job removes the last two, as its
                  owner, when its PATH has an MPI's: :func:`use_installed_mpi`);
                  sbatch, scontrol, squeue, scancel, qsub, qstat, qdel
                  (:mod:`gridsched.cli.injob`)
    bash_env      BASH_ENV: puts bin/ back first on PATH where a login shell's
                  profile set PATH anew (``#!/bin/bash -l``)

In system mode the daemon is root and ``BASE`` (``/tmp``) is writable by
every user, who may plant anything under any name there.  So the directory
is made with ``mkdir`` relative to a descriptor of ``BASE`` (``mkdir`` never
follows a link: a planted name makes it fail, and a new random name is
tried), opened with ``O_NOFOLLOW`` and checked to be root's own new
directory; everything in it is made relative to that descriptor while it is
still root's and mode 0700 (nobody else can enter it), and only then is the
whole of it handed to the owner (``fchown`` on descriptors, ``lchown`` of
names in it).  It is removed as the owner (a child process that has dropped
to the owner's ids), never by root through a path the owner can change; a
daemon that is not root removes it as itself.  The shepherd removes it when
the job's processes are gone, after it has told the daemon of the job's end; the daemon removes what a
killed shepherd left (a little after the job's end is recorded, and when a restarted daemon finds the job
gone).

A job of the daemon's own user (a personal daemon's every job, root's own under a system daemon) has no
owner to be handed to, so its shepherd keeps its directory for a later start instead of removing it: it
empties its ``tmp/`` (the job's files go, as before) and moves it into the pool of the daemon's spool
(``spool/private-spares/``, the daemon's, mode 0700; where the spool is on another file system than
``BASE`` there is none), from which the daemon takes it for another start (renamed, checked to be as
made, its host files written anew).  Each directory
costs the file system 8 inodes, made and freed a start, and on some file systems (ext4 without a journal)
making one costs more the more were freed in the seconds before.  The daemon makes its pool when it first
needs it and removes it when it stops (one left by a daemon that was killed is used by the next one); a
shepherd that finds no pool, or a full one, or a directory not as made, removes its directory.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shlex
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

from gridsched.job.env import PRIVATE_PREFIX, SGE_QUEUE, Private

PREFIX = PRIVATE_PREFIX
# run by the daemon's own interpreter, isolated from the job's PYTHONPATH, with the daemon's own gridsched; one
# file under every name of bin/, which runs the module of the name it was called by
LAUNCHER = (
    "#!{python} -I\nimport os\nimport sys\n\nsys.path.insert(0, {code!r})\n"
    "if os.path.basename(sys.argv[0]) in {in_job!r}:\n    from gridsched.cli.injob import main\n"
    "else:\n    from gridsched.job.launcher import main\n\nmain()\n"
)
CODE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPI_NAMES = ("mpirun", "mpiexec")
# Slurm's, PBS's and Grid Engine's commands a job's scripts call (gridsched.cli.injob)
IN_JOB_NAMES = ("sbatch", "scontrol", "squeue", "scancel", "qsub", "qstat", "qdel")
BIN_NAMES = tuple(f"bin/{n}" for n in ("srun", *MPI_NAMES, *IN_JOB_NAMES))


def base_dir(configured: str) -> str:
    """Where private directories are made: ``[jobs] tmpdir``, else the system's temporary directory."""
    return configured or tempfile.gettempdir()


def has_mpi(path: str) -> bool:
    """Whether an MPI's ``mpirun`` or ``mpiexec`` is on ``path`` (a job's PATH).

    It looks at every directory of ``path``, through whatever links the
    owner of that PATH planted: it is run by the job's own process, after it
    has dropped to its owner's ids (:func:`use_installed_mpi`), never by the
    daemon."""
    if not path:
        return False
    # what shutil.which looks for (an executable that is not a directory), one access a name where it is not
    for folder in dict.fromkeys(path.split(os.pathsep)):
        for name in MPI_NAMES:
            found = os.path.join(folder, name)
            if os.access(found, os.X_OK) and not os.path.isdir(found):
                return True
    return False


def use_installed_mpi(root: str, path: str) -> bool:
    """In the job's process, as its owner, before its script runs: when an MPI's ``mpirun`` or ``mpiexec`` is
    on ``path`` (the job's PATH), take gridsched's own out of the private directory ``root`` so that the
    installed one is found; whether one is (the job then gets its host file as that MPI's default)."""
    if not root or not has_mpi(path):
        return False
    for name in MPI_NAMES:
        try:
            os.unlink(os.path.join(root, "bin", name))
        except FileNotFoundError:
            pass
    return True


def layout(root: str) -> Private:
    return Private(
        root=root,
        tmpdir=f"{root}/tmp",
        nodefile=f"{root}/nodefile",
        mpi_hosts=f"{root}/mpi_hosts",
        pe_hostfile=f"{root}/pe_hostfile",
        bin=f"{root}/bin",
        bash_env=f"{root}/bash_env",
    )


def name_for(base: str, job_id: int) -> str:
    """A new private directory's path for a start of job ``job_id`` under ``base`` (a random name: nobody can
    plant it before it is made, :func:`create` with ``name``)."""
    return os.path.join(base, f"{PREFIX}{job_id}.{secrets.token_hex(6)}")


def create(
    base: str,
    job_id: int,
    uid: int,
    gid: int,
    host: str,
    ncpus: int,
    ntasks: int,
    tries: int = 8,
    name: str = "",
    pool: str = "",
) -> Private:
    """Make a private directory for a start of job ``job_id`` under ``base``, the owner's (``uid``/``gid``
    when the daemon is root), named ``name`` (a base name of :func:`name_for`'s; one try) or a new random name.
    A job of the daemon's own user with ``pool`` (:func:`pool_dir`) gets a spare directory from it, if there is
    one that is as made (:func:`retire`), renamed and filled anew.  OSError if it cannot."""
    me = os.geteuid()
    give = me == 0 and uid != me
    bfd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if pool and name and uid == me and _take(bfd, base, pool, name, host, ncpus, ntasks):
            return layout(os.path.join(base, name))
        given, tries = name, 1 if name else tries
        for attempt in range(tries):
            name = given or f"{PREFIX}{job_id}.{secrets.token_hex(6)}"
            try:
                os.mkdir(name, 0o700, dir_fd=bfd)  # never through a link, never into a planted directory
            except FileExistsError:
                if attempt == tries - 1:
                    raise
                continue
            break
        pfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=bfd)
        try:
            st = os.fstat(pfd)
            if st.st_uid != me:
                raise OSError(f"{base}/{name}: not the directory just made")
            os.fchmod(pfd, 0o700)
            _fill(pfd, host, ncpus, ntasks, os.path.join(base, name, "bin"))
            if give:
                for entry in ("tmp", "bin", "nodefile", "mpi_hosts", "pe_hostfile", "bash_env", *BIN_NAMES):
                    os.chown(entry, uid, gid, dir_fd=pfd, follow_symlinks=False)
                os.fchown(pfd, uid, gid)
        finally:
            os.close(pfd)
    finally:
        os.close(bfd)
    return layout(os.path.join(base, name))


# Read by every non-interactive bash of the job (BASH_ENV), after a login shell's /etc/profile: the job's
# bin/ first on PATH again when the profile dropped it.
BASH_ENV = 'case ":$PATH:" in *:{bin}:*) ;; *) PATH={bin}:"$PATH" ;; esac\n'


def _fill(pfd: int, host: str, ncpus: int, ntasks: int, bin_dir: str) -> None:
    os.mkdir("tmp", 0o700, dir_fd=pfd)
    os.mkdir("bin", 0o755, dir_fd=pfd)
    _host_files(pfd, host, ncpus, ntasks, bin_dir)
    # one file under all of its names (hard links in this directory, still root's and 0700): a new file costs
    # the file system an inode, made now and freed at the job's end, where a name costs a link
    first, *others = BIN_NAMES
    _write(pfd, first, LAUNCHER.format(python=sys.executable, code=CODE, in_job=IN_JOB_NAMES), 0o755)
    for name in others:
        os.link(first, name, src_dir_fd=pfd, dst_dir_fd=pfd, follow_symlinks=False)


def _host_files(pfd: int, host: str, ncpus: int, ntasks: int, bin_dir: str, fresh: bool = True) -> None:
    """The files of the private directory ``pfd`` that differ from a start to another: made, or written anew
    in a spare (:func:`_rewrite`)."""
    put = _write if fresh else _rewrite
    put(pfd, "nodefile", f"{host}\n" * ncpus, 0o644)
    put(pfd, "mpi_hosts", f"{host}\n" * ntasks, 0o644)
    put(pfd, "pe_hostfile", f"{host} {ncpus} {SGE_QUEUE}@{host} UNDEFINED\n", 0o644)
    put(pfd, "bash_env", BASH_ENV.format(bin=shlex.quote(bin_dir)), 0o644)


def _write(dfd: int, name: str, text: str, mode: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        os.write(fd, text.encode())
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def owner_gid(uid: int, gid: int = -1) -> int:
    """The group a job's files are given: the one it was submitted with, else its owner's primary group."""
    if gid >= 0:
        return gid
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return uid


# seconds a shepherd has to remove its job's private directory after telling the daemon of the job's end
LINGER = 2.0
_left: dict[str, tuple[int, float]] = {}  # the daemon's: private directory -> (its owner, when it is looked at)


def remove_left(segments: Sequence[Mapping[str, object]], uid: int) -> None:
    """Remove the private directories of a job's segments that are still there :data:`LINGER` seconds from
    now (:func:`sweep`): the job's processes are gone, and its shepherd, which tells the daemon of the job's
    end before it removes the directory, has had the time to (one still there: the shepherd was killed).  For
    the daemon: it never waits for the removal (what is there is the owner's to fill, and may take long to
    remove)."""
    due = time.monotonic() + LINGER
    for seg in segments:
        root = seg.get("tmpdir")
        if isinstance(root, str) and root:
            _left.setdefault(root, (uid, due))


def sweep(force: bool = False) -> None:
    """Remove what :func:`remove_left` was given whose time has come (all of it with ``force``), if it is still
    there; each turn of the daemon's loop."""
    if force:
        for pool in _pools:
            _rmtree(pool)  # the daemon stops: its spares go (a shepherd that finds no pool removes its directory)
        _pools.clear()
    if not _left:
        return
    now = time.monotonic()
    for root, (uid, due) in list(_left.items()):
        if force or now >= due:
            del _left[root]
            remove(root, uid, wait=False)


def remove(root: str, uid: int, gid: int = -1, wait: bool = True) -> None:
    """Remove a private directory and what is in it: as its owner ``uid`` when the caller is root (in a
    child process that has dropped to the owner's ids), else as the caller.  Never raises.

    ``wait=False`` (the daemon's loop, which must always answer): the work is done by a process of its own
    that nobody waits for, with none of the caller's files open, and this returns at once."""
    if not os.path.basename(root).startswith(PREFIX):
        return
    try:
        os.lstat(root)
    except OSError:
        return  # removed already
    as_owner = os.geteuid() == 0 and uid != 0
    if wait and not as_owner:
        _rmtree(root)
        return
    try:
        pid = os.fork()
    except OSError:
        return  # left for the next removal (a restarted daemon's, or the system's cleaning of BASE)
    if pid == 0:
        code = 1
        try:
            if not wait:
                if os.fork() != 0:  # the caller waits only for this child, which ends at once
                    code = 0
                    return
                os.setsid()
                os.closerange(3, 1 << 16)  # the daemon's lock, database and sockets stay with the daemon
            if as_owner:
                os.setgroups([])
                os.setgid(owner_gid(uid, gid))
                os.setuid(uid)
            _rmtree(root)
            code = 0
        finally:
            os._exit(code)
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except InterruptedError:
            continue
        except ChildProcessError:
            return


def _rmtree(root: str) -> None:
    """Remove ``root`` and what is in it, also directories the job left unreadable or unwritable (the caller
    is their owner: it gives them back their owner's rights first).  Links are removed, never followed."""
    shutil.rmtree(root, ignore_errors=True)  # fd-based: never follows a link
    if not os.path.lexists(root):
        return
    todo = [root]
    while todo:
        d = todo.pop()
        try:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                continue
            os.chmod(d, 0o700)
            todo += [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
    shutil.rmtree(root, ignore_errors=True)


# -- spare private directories (see the module's description) -----------------------------------------------

SPARES = 16  # spare private directories a pool keeps at most
_MADE = ("bash_env", "bin", "mpi_hosts", "nodefile", "pe_hostfile", "tmp")  # a private directory's entries
_pools: set[str] = set()  # the daemon's: the pools it used, removed when it stops (:func:`sweep` with force)


def pool_dir(job_dir: str) -> str:
    """The pool of spare private directories of the spool that holds the job directory ``job_dir``."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(job_dir))), "private-spares")


def _open_pool(pool: str, make: bool) -> int | None:
    """A descriptor of ``pool`` (made now with ``make``), if it is a directory of this process's user that
    nobody else may enter; None otherwise."""
    if make:
        try:
            os.mkdir(pool, 0o700)  # never through a link
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        fd = os.open(pool, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        return None
    return fd


def retire(root: str, uid: int, job_dir: str) -> bool:
    """At the job's end, its processes gone (its shepherd, as the job's owner): keep the private directory
    ``root`` of a job of the daemon's own user for another start, in the pool of its spool (``job_dir``: the
    job's directory there) while the daemon keeps one: its tmp/ emptied, moved into the pool.  False where it
    was not (not the daemon's user's, no pool, no room, or not as made): it is to be removed."""
    if uid != os.geteuid() or not os.path.basename(root).startswith(PREFIX):
        return False
    qfd = _open_pool(pool_dir(job_dir), make=False)
    if qfd is None:
        return False
    try:
        if len(os.listdir(qfd)) >= SPARES or sorted(os.listdir(root)) != list(_MADE):
            return False
        tmp = os.path.join(root, "tmp")
        if not stat.S_ISDIR(os.lstat(tmp).st_mode):
            return False
        with os.scandir(tmp) as entries:
            for entry in entries:  # the job's files
                if entry.is_dir(follow_symlinks=False):
                    _rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        if os.listdir(tmp):
            return False
        os.rename(root, os.path.basename(root), dst_dir_fd=qfd)
        return True
    except OSError:
        return False
    finally:
        os.close(qfd)


def _take(bfd: int, base: str, pool: str, name: str, host: str, ncpus: int, ntasks: int) -> bool:
    """Make the private directory ``name`` under ``base`` (``bfd``) of a spare of ``pool`` (made now if there
    is none): whether there was one as made (one that is not is removed)."""
    _pools.add(pool)
    qfd = _open_pool(pool, make=True)
    if qfd is None:
        return False
    try:
        if os.fstat(qfd).st_dev != os.fstat(bfd).st_dev:
            return False  # on another file system: a rename cannot bring a spare to base
        for spare in os.listdir(qfd):
            try:
                os.rename(spare, name, src_dir_fd=qfd, dst_dir_fd=bfd)
                break
            except OSError:
                continue
        else:
            return False
    finally:
        os.close(qfd)
    try:
        _fill_again(bfd, name, host, ncpus, ntasks, os.path.join(base, name, "bin"))
        return True
    except OSError:
        _rmtree(os.path.join(base, name))
        return False


def _fill_again(bfd: int, name: str, host: str, ncpus: int, ntasks: int, bin_dir: str) -> None:
    """Check that the spare just renamed ``name`` is as made (OSError if not) and give it this start's files."""
    pfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=bfd)
    try:
        if os.fstat(pfd).st_uid != os.geteuid() or sorted(os.listdir(pfd)) != list(_MADE):
            raise OSError(f"{name}: not as made")
        os.fchmod(pfd, 0o700)
        for sub, mode in (("tmp", 0o700), ("bin", 0o755)):
            fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
            try:
                os.fchmod(fd, mode)
                if sub == "tmp" and os.listdir(fd):
                    raise OSError(f"{name}/tmp: not empty")
                if sub == "bin":
                    _bin_again(fd)
            finally:
                os.close(fd)
        _host_files(pfd, host, ncpus, ntasks, bin_dir, fresh=False)
    finally:
        os.close(pfd)


def _bin_again(dfd: int) -> None:
    """bin/ of a spare: the launcher written anew if it changed, under every name again (mpirun and mpiexec
    are taken out where the job's PATH has an installed MPI)."""
    names = [n.removeprefix("bin/") for n in BIN_NAMES]
    if not set(os.listdir(dfd)) <= set(names):
        raise OSError("bin: not as made")
    first = names[0]
    held = os.stat(first, dir_fd=dfd, follow_symlinks=False).st_ino
    linked = sum(os.stat(n, dir_fd=dfd, follow_symlinks=False).st_ino == held for n in os.listdir(dfd))
    ino = _rewrite(dfd, first, LAUNCHER.format(python=sys.executable, code=CODE, in_job=IN_JOB_NAMES), 0o755, linked)
    for n in names[1:]:
        try:
            if os.stat(n, dir_fd=dfd, follow_symlinks=False).st_ino == ino:
                continue
            os.unlink(n, dir_fd=dfd)
        except FileNotFoundError:
            pass
        os.link(first, n, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)


def _rewrite(dfd: int, name: str, text: str, mode: int, links: int = 1) -> int:
    """Give the file ``name`` of a spare (``dfd``) the content ``text`` and ``mode``, in place (the same inode,
    no new blocks where the content is as long; nothing written where it is the same); its inode number.  Never
    truncated to nothing first: ext4 starts writing such a file back when it is closed."""
    data = text.encode()
    fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{name}: not a file")
        if st.st_nlink != links:
            raise OSError(f"{name}: linked elsewhere")  # a job linked it out: written in place, it would change there
        if st.st_size != len(data) or os.pread(fd, len(data), 0) != data:
            os.pwrite(fd, data, 0)
            if st.st_size > len(data):
                os.ftruncate(fd, len(data))
        if stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
        return st.st_ino
    finally:
        os.close(fd)
