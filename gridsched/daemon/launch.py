"""Starting a job: a shepherd is forked (by the shepherds' starter, :mod:`.starter`), the shepherd runs the job.

The shepherd is the job's session leader and a child subreaper: every process
the job starts stays below it, whatever it does with process groups or
sessions.  It writes ``seg-N.pid`` before the job runs and ``seg-N.exit`` when
the job has ended, both atomically, so a daemon restarted after ``kill -9``
can adopt a running job or collect the exit status of one that ended while it
was down.  The job itself runs in its own process group (so signals for the
job never reach the shepherd), pinned to its cores before its first
instruction, as its owner, in its working directory, with its submitter's
umask.  The job ends when its script does: the shepherd records the script's
status and kills whatever the script left running.  A job with ``--mem``
runs in a memory cgroup of its own where the host allows it (see
:mod:`.cgroup`); its exit file then says when the kernel killed it for want
of memory (``"reason": "out of memory (limit 100M)"``).  On a machine with
devices, a job that does not hold all of them runs in a cgroup that refuses
the device nodes of the others, where the host allows it (see
:mod:`.devcgroup`).
"""

from __future__ import annotations

import ctypes
import errno
import gc
import json
import os
import pwd
import resource  # here, not in each shepherd: the starter loads it once for all of them
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from gridsched.core.units import format_size
from gridsched.daemon import birth, cgroup, confine, devcgroup, execproblem, jobtmp
from gridsched.daemon.numa import bind_memory, unbind_memory
from gridsched.daemon.procs import kill_tree, start_ticks
from gridsched.host.device_nodes import Node
from gridsched.job import env as jobenv
from gridsched.protocol.spool import atomic_write

TRACE = os.environ.get("GRIDSCHED_TRACE", "")  # debugging the per-job path: the file marks are appended to


def mark(what: str, job: int = 0) -> None:
    """With ``GRIDSCHED_TRACE`` set: one line ``MONOTONIC WHAT JOB PID`` appended to the file it names."""
    if not TRACE:
        return
    try:
        fd = os.open(TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{time.monotonic():.6f} {what} {job} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass


# the read end of the pipe the daemon's word comes on, in a shepherd (-1: none): go, once the job's private directory
# is made (birth.go)
GO = -1
# the write end of the daemon's pipe of ends (-1: none), inherited by each shepherd from its parent (the starter,
# or the daemon where it forks the shepherds itself): a shepherd tells the daemon its job's end on it (:func:`_tell`)
NOTIFY = -1

# the signals a shepherd ignores (what a terminal or an admin sends to the daemon's process group)
IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT)
# whether the process that forks the shepherds has the shepherd's dispositions already (:func:`ignore_signals`:
# the starter's, set once for all of its shepherds), so that a shepherd need not set them again
SIGNALS_SET = False


def ignore_signals() -> None:
    """Ignore :data:`IGNORED` and take SIGCHLD's default disposition: a shepherd's, and its starter's (whose
    shepherds then inherit them instead of setting them each)."""
    global SIGNALS_SET
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    SIGNALS_SET = True


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux has a libc
    _libc = None


@dataclass(frozen=True, slots=True)
class Launch:
    """Everything the shepherd needs, prepared by the daemon before the fork."""

    job_id: int
    segment: int
    job_dir: str
    script: str
    args: tuple[str, ...]
    workdir: str
    stdout: str
    stderr: str
    append: bool  # a restarted job appends to its output files
    env: dict[str, str]
    cpus: frozenset[int]
    uid: int
    gid: int
    user: str
    shell: bool = False  # ``script`` is the shell that runs the job's script (it has no #! line)
    mem: int | None = None
    mem_nodes: tuple[int, ...] = ()  # host NUMA nodes to bind the job's memory to (its boards')
    umask: int = 0o022  # the submitter's: for the output files and everything the job creates
    private: str = ""  # the job's private directory (TMPDIR; jobtmp), removed when the job's processes are gone
    # the PATH in which the job's process, as its owner, looks for an installed MPI (jobtmp.use_installed_mpi)
    mpi_path: str = ""
    deny_devices: tuple[Node, ...] = ()  # the device nodes of the devices the job does not hold
    device_enforce: str = "auto"  # "required": the job fails if they cannot be refused to it
    # --get-user-env: (timeout, login shell, what goes before the login's PATH; "": the job's PATH wins)
    user_env: tuple[int, bool, str] | None = None
    max_processes: int = 0  # jobs.max_processes: pids.max of the job's cgroup (0: no cap)


def pid_file(job_dir: str | Path, segment: int) -> Path:
    return Path(job_dir) / f"seg-{segment}.pid"


def exit_file(job_dir: str | Path, segment: int) -> Path:
    return Path(job_dir) / f"seg-{segment}.exit"


def spawn(spec: Launch, go: int = -1) -> int:
    """Fork the shepherd; returns its pid at once (the daemon watches it with a pidfd).  The shepherd is
    armed against the caller: it dies with it until it has written its pid file.  ``go``: the read end of a
    pipe on which the daemon says whether the job may run (its private directory made meanwhile); the shepherd
    writes its pid file only after a go."""
    global GO
    daemon = os.getpid()
    made = None  # the job's cgroups, made before the fork where the shepherd is born in its cgroup v2 (birth.py)
    pid = -1
    if _direct(spec, None):
        made = birth.ahead(cgroup.job_name(spec.job_dir, spec.segment), spec.cpus, spec.max_processes)
        mark("st_cg_made", spec.job_id)
        if made[2] is not None:
            pid = birth.fork_into(made[2])
    if pid < 0:
        if made is not None:
            made = (made[0], made[1], None)
        try:
            pid = os.fork()
        except OSError:
            if made:
                birth.undo(made[0], None)
            raise
    if pid == 0:  # the shepherd
        code = 70
        try:
            gc.disable()
            GO = go
            mark("sh_first", spec.job_id)
            _shepherd(spec, daemon, made)
            code = 0
        except BaseException:  # noqa: BLE001 - never return into the daemon's loop
            pass
        finally:
            os._exit(code)
    return pid


def _write_json(path: Path, data: dict) -> None:
    atomic_write(path, json.dumps(data).encode(), fsync=False)


def _shepherd(spec: Launch, daemon: int, made: tuple[list[Path], list[str], Path | None] | None = None) -> None:
    """Run the job and record how it ended.

    A daemon killed before this shepherd has written its pid file must not
    leave a job running that the restarted daemon cannot know of (it would
    start the job again): until the pid file is written, the shepherd dies
    with the daemon (``PR_SET_PDEATHSIG``).  Where the job needs nothing
    the shepherd cannot give it by inheritance (:func:`_direct`), the
    shepherd takes the job's cgroups, cores and process cap itself, writes
    its pid file and spawns the job (:func:`_start_direct`); otherwise the
    job's process is a fork of the shepherd that waits for a go from it
    before it takes its owner's ids, opens its files and runs anything (it
    enters its cgroups meanwhile: :func:`_exec_job`).
    """
    os.setsid()
    if not SIGNALS_SET:  # inherited from the starter, which set them once
        ignore_signals()
    mark("sh_session", spec.job_id)
    # the daemon's lock, database and sockets stay with the daemon; the pipe of ends and the daemon's word are kept
    low = 3
    for fd in sorted(fd for fd in (NOTIFY, GO) if fd >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)
    mark("sh_closed", spec.job_id)
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.getppid() != daemon:
        if made:
            birth.undo(made[0], made[2])
        _remove_private(spec)
        return  # the daemon died before the shepherd was armed: nothing ran
    mark("sh_armed", spec.job_id)
    me = os.getpid()
    cg = _memory_cgroup(spec)
    dcg, dwhy = _device_cgroup(spec)
    more, notes = (made[0], made[1]) if made else _confinement(spec)
    joins = [p for p in dict.fromkeys([*more, dcg]) if p is not None and p != cg]  # cg: joined first, alone
    # the job's first process (with its start time: a pid is reused), which leads its process group, and
    # every cgroup of the job: the daemon signals the job's processes through them (procs.py)
    info: dict[str, object] = {"pid": me, "ticks": start_ticks(me)}
    if cg is not None:
        info["cgroup"] = str(cg)
    if dcg is not None and dcg != cg:
        info["devcgroup"] = str(dcg)
    cgroups = [str(p) for p in dict.fromkeys([cg, *joins]) if p is not None]
    if cgroups:
        info["cgroups"] = cgroups
    mark("sh_cg_made", spec.job_id)
    if _direct(spec, cg):
        started = _start_direct(spec, daemon, joins, notes, info, made[2] if made else None, dcg, dwhy)
        if started is None:
            for joined in joins:
                cgroup.remove(joined)
            _remove_private(spec)
            return
        child, status, err = started
        rd: int | None = None
    else:
        got = _start_forked(spec, daemon, cg, dcg, dwhy, joins, notes, info)
        if got is None:
            for path in {cg, *joins} - {None}:
                cgroup.remove(path)  # type: ignore[arg-type]
            _remove_private(spec)
            return
        child, rd = got
        status, err = None, b""
    # the job ends when its script does, whatever it left running: take the
    # script's status first, then what it wrote to the pipe, then kill the rest
    while status is None:
        try:
            wpid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if wpid == child:
            status = st
    end = time.time()
    mark("sh_job_exited", spec.job_id)
    if rd is not None:
        err = _read_ready(rd)
        os.close(rd)
    result: dict = {"end": end}
    if status is not None:
        if os.WIFEXITED(status):
            result["exit_code"] = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            result["signal"] = os.WTERMSIG(status)
    if err:
        result["error"] = err.decode(errors="replace")
    _reap_rest()
    mark("sh_reaped", spec.job_id)
    result["usage"] = _usage(cg)
    if cg is not None:
        kills = cgroup.oom_kills(cg)
        if kills and spec.mem:
            result["reason"] = f"out of memory (limit {format_size(spec.mem)})"
            result["oom_kills"] = kills
        cgroup.remove(cg)
    for path in joins:
        cgroup.remove(path)
    mark("sh_cg_removed", spec.job_id)
    _write_until_room(exit_file(spec.job_dir, spec.segment), result)
    mark("sh_exit_written", spec.job_id)
    _tell(spec)
    mark("sh_told", spec.job_id)
    _remove_private(spec)
    mark("sh_private_removed", spec.job_id)


def _start_forked(
    spec: Launch,
    daemon: int,
    cg: Path | None,
    dcg: Path | None,
    dwhy: str,
    joins: list[Path],
    notes: list[str],
    info: dict[str, object],
) -> tuple[int, int] | None:
    """Start the job's process as a fork of the shepherd, which prepares it in Python (its cgroups, its
    owner's ids, its memory binding...) and runs it once the pid file is written: its pid and the pipe its
    failures come on; None if the daemon died meanwhile (nothing ran)."""
    rd, wr = os.pipe2(os.O_CLOEXEC)
    go_r, go_w = os.pipe2(os.O_CLOEXEC)
    child = os.fork()
    if child == 0:
        os.close(rd)
        os.close(go_w)
        _exec_job(spec, wr, cg, dcg, dwhy, joins, notes, go_r)  # never returns
    os.close(wr)
    os.close(go_r)
    try:
        os.setpgid(child, child)
    except OSError:
        pass  # the child did it first
    info.update(pgid=child, job=child, job_ticks=start_ticks(child))
    if not _armed(daemon):
        # the daemon died just now (or said no): a restarted daemon finds no pid file and starts the job itself
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(rd)
        os.close(go_w)
        return None
    _write_json(pid_file(spec.job_dir, spec.segment), info)
    try:
        os.write(go_w, b"g")
    except OSError:
        pass  # the job failed while it was being prepared: its status and message are collected below
    os.close(go_w)
    return child, rd


def _direct(spec: Launch, cg: Path | None) -> bool:
    """Whether the job's process can be spawned straight from the shepherd (``posix_spawn``: no copy of the
    shepherd's memory) with everything it needs inherited from it: the job keeps the shepherd's ids (a daemon
    that is not root, or root's own job), and needs no memory limit and no login environment, which are
    prepared in a forked process of its own.  A device cgroup is entered by the shepherd as its other cgroups
    are (on a machine with devices, nearly every job has one)."""
    return cg is None and not spec.mem and spec.user_env is None and spec.uid == os.getuid()


# every signal the job may be given a default disposition for (glibc keeps two for itself, which its
# posix_spawn leaves ignored, as for every process it starts: system(), popen())
ALL_SIGNALS = tuple(sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}))


def _start_direct(
    spec: Launch,
    daemon: int,
    joins: list[Path],
    notes: list[str],
    info: dict[str, object],
    born: Path | None,
    dcg: Path | None = None,
    dwhy: str = "",
) -> tuple[int, int | None, bytes] | None:
    """Start the job's process with ``posix_spawn`` (a vfork and an exec: nothing of the shepherd's memory
    is copied).  What the forked path prepares in the job's process is inherited from the shepherd instead:
    the shepherd enters the job's cgroups, takes its cores, memory binding, process cap and umask, enters its working
    directory and opens its output files, writes its pid file, spawns the job (in its own process group,
    every signal at its default), leaves the cgroups again and writes the job's pid into the pid file.  The
    job's pid (0 if it could not start), its status if it could not start (with why) or has ended already
    (its pid is then not written), or None if the daemon died before the pid file was written (nothing ran)."""
    capped = False
    for path in joins:
        try:
            if path != born:  # born in it: no move (birth.py)
                cgroup.join(path)
            capped = capped or (path / "pids.max").exists()
        except OSError as e:
            if path == dcg:
                dwhy = f"cannot enter {dcg}: {e.strerror}"
            else:
                notes.append(f"cannot enter {path}: {e.strerror}")
    if dwhy and spec.device_enforce != "required" and devcgroup.controller()[0] is not None:
        notes.append(f"not isolated from the devices it does not hold: {dwhy}")  # the host can, but not for this job
    mark("sh_cg_joined", spec.job_id)
    if not capped and spec.max_processes > 0 and spec.uid != 0:
        confine.cap_by_rlimit(spec.uid, spec.max_processes)  # the shepherd forks nothing after the job
    own = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, spec.cpus)  # after the cgroups: entering a cpuset sets the affinity to its CPUs
    except OSError as e:
        notes.append(f"cannot pin to CPUs {sorted(spec.cpus)}: {e.strerror}")
    if spec.mem_nodes:  # the job's boards' memory: a memory policy is inherited across the spawn and the exec
        unbound = bind_memory(spec.mem_nodes)
        if unbound:
            notes.append(f"memory not bound to NUMA nodes {','.join(map(str, spec.mem_nodes))}: {unbound}")
    mark("sh_pinned", spec.job_id)
    if not _armed(daemon):
        _leave(joins)
        return None  # the daemon died just now (or said no): a restarted daemon finds no pid file, starts the job
    mark("sh_go", spec.job_id)
    _write_json(pid_file(spec.job_dir, spec.segment), info)
    mark("sh_pidfile", spec.job_id)
    status: int | None
    if dwhy and spec.device_enforce == "required":
        child, status, why = 0, 127 << 8, f"cannot refuse it the devices it does not hold: {dwhy}"
    else:
        child, status, why = _spawn_job(spec, notes)
    mark("sh_spawned", spec.job_id)
    if spec.mem_nodes:
        unbind_memory()
    try:
        os.sched_setaffinity(0, own)
    except OSError:
        pass
    _leave(joins)
    mark("sh_left", spec.job_id)
    if child:
        ended = _ended(child)
        if ended is not None:
            # it has ended already (a short job): nothing is left to signal by its pid, and its exit file comes
            # next; the pid file naming the shepherd and the cgroups stays, without one more file made and freed
            mark("sh_pidfile2", spec.job_id)
            return child, ended, b""
        info.update(pgid=child, job=child, job_ticks=start_ticks(child))
        try:
            _write_json(pid_file(spec.job_dir, spec.segment), info)
        except OSError:
            pass  # a full spool: the pid file naming the shepherd and the cgroups stays, the job is found by them
    mark("sh_pidfile2", spec.job_id)
    return child, status, why.encode(errors="replace")[:4000]


def _ended(child: int) -> int | None:
    """The status of the shepherd's child ``child`` if it has ended (it is reaped), else None."""
    try:
        pid, status = os.waitpid(child, os.WNOHANG)
    except ChildProcessError:
        return None
    return status if pid == child else None


def _armed(daemon: int) -> bool:
    """Whether the shepherd may write its pid file, after which it outlives its parent (no longer dying with it):
    the daemon said go (the job's private directory is made) and its parent (``daemon``) still lives."""
    global GO
    told, GO = birth.go(GO), -1  # read once, and closed
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
    return told and os.getppid() == daemon


def _leave(joins: list[Path]) -> None:
    """Take the shepherd out of the job's cgroups (back to where they were made): its signals and its end are
    the job's, never the shepherd's."""
    for path in joins:
        try:
            cgroup.join(path.parent)
        except OSError:
            pass


def _spawn_job(spec: Launch, notes: list[str]) -> tuple[int, int | None, str]:
    """Spawn the job's script from the shepherd (see :func:`_start_direct`): its pid, or 0 with the status and
    the message of a job that could not start."""
    old = os.umask(spec.umask)
    fds: list[int] = []
    try:
        try:
            os.chdir(spec.workdir)
        except OSError as e:
            return 0, 127 << 8, f"cannot enter working directory {spec.workdir}: {e.strerror}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if spec.append else os.O_TRUNC)
        try:
            out = os.open(spec.stdout, flags, 0o644)
            fds.append(out)
            err = out if spec.stderr == spec.stdout else os.open(spec.stderr, flags, 0o644)
            fds.append(err)
        except OSError as e:
            return 0, 127 << 8, f"cannot open output file {e.filename}: {e.strerror}"
        nul = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        fds.append(nul)
        mark("sh_opened", spec.job_id)
        for note in notes:  # the host can, but not for this job
            os.write(err, f"gridsched: job {spec.job_id}: {note}\n".encode(errors="replace"))
        actions = [(os.POSIX_SPAWN_DUP2, nul, 0), (os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2)]
        env = _with_mpi(spec)
        mark("sh_mpi", spec.job_id)
        try:
            pid = os.posix_spawn(
                spec.script,
                [spec.script, *spec.args],
                env,
                file_actions=actions,
                setpgroup=0,
                setsigmask=(),
                setsigdef=ALL_SIGNALS,
            )
        except OSError as e:
            why = execproblem.why(spec.script, spec.shell, e)
            try:
                os.write(err, f"gridsched: job {spec.job_id} could not start: {why}\n".encode())
            except OSError:
                pass
            return 0, 127 << 8, why
        return pid, None, ""
    finally:
        os.umask(old)
        for fd in dict.fromkeys(fds):
            os.close(fd)
        try:
            os.chdir("/")
        except OSError:
            pass


def _usage(cg: Path | None) -> dict[str, float | int | str]:
    """What the job's processes used, once every one of them has been reaped by this shepherd.

    The shepherd is a child subreaper, so every process of the job (the script,
    what it started, what was left orphaned) ends as a waited-for descendant:
    ``RUSAGE_CHILDREN`` holds their CPU time (user and system) and the peak
    resident set of the largest of them.  A job in a memory cgroup has its
    peak from the cgroup instead (all its processes together, page cache
    included, as the kernel charged them).
    """
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    out: dict[str, float | int | str] = {
        "cpu_user": round(ru.ru_utime, 6),
        "cpu_sys": round(ru.ru_stime, 6),
        "max_rss": int(ru.ru_maxrss) * 1024,  # kilobytes on Linux
        "rss_from": "rusage",
    }
    peak = cgroup.peak(cg) if cg is not None else None
    if peak:
        out["max_rss"] = peak
        out["rss_from"] = "cgroup"
    return out


def _tell(spec: Launch) -> None:
    """Tell the daemon the job has ended (its exit file is written): one line ``JOB SEGMENT`` on the pipe of
    ends, written at once (a line is shorter than ``PIPE_BUF``: never split), so that it records the end and
    starts the next job while this shepherd removes the job's private directory.  Nothing is lost if it cannot
    be: the daemon also learns of the end when the shepherd exits (a full pipe, or the pipe of a daemon that
    has since died: a restarted one adopted this shepherd through its pidfd)."""
    if NOTIFY < 0:
        return
    try:
        os.write(NOTIFY, f"{spec.job_id} {spec.segment}\n".encode())
    except OSError:
        pass


def _remove_private(spec: Launch) -> None:
    """Remove the job's private directory (as its owner), now that none of its processes is left; one of the
    daemon's own user's is kept for another start where the daemon keeps a pool of them (:func:`.jobtmp.retire`)."""
    if spec.private and not jobtmp.retire(spec.private, spec.uid, spec.job_dir):
        jobtmp.remove(spec.private, spec.uid, spec.gid)


def _write_until_room(path: Path, data: dict, limit: float = 86400.0) -> None:
    """Write the exit file, waiting for room on a full or read-only spool (the job's outcome lives only here)."""
    deadline = time.monotonic() + limit
    delay = 0.1
    while True:
        try:
            _write_json(path, data)
            return
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def _memory_cgroup(spec: Launch) -> Path | None:
    """The cgroup that holds the job to its ``--mem``, or None (no limit, or no usable cgroup)."""
    if not spec.mem:
        return None
    try:
        h = cgroup.hierarchy()
        if h is None:
            return None
        return cgroup.create(h, cgroup.job_name(spec.job_dir, spec.segment), spec.mem)
    except OSError:
        return None


def _device_cgroup(spec: Launch) -> tuple[Path | None, str]:
    """The cgroup that refuses the job the nodes of the devices it does not hold, or None (none to refuse,
    or it cannot be done here) and why not ("" when nothing was to be done)."""
    if not spec.deny_devices:
        return None, ""
    c, why = devcgroup.controller()
    if c is None:
        return None, why
    try:
        return devcgroup.create(c, cgroup.job_name(spec.job_dir, spec.segment), spec.deny_devices), ""
    except OSError as e:
        return None, e.strerror or str(e)


def _confinement(spec: Launch) -> tuple[list[Path], list[str]]:
    """The job's cgroups for tracking, its process cap and its cores (:mod:`.confine`), and what could not be
    done of what the host allows."""
    try:
        s = confine.setup()
        return confine.create(s, cgroup.job_name(spec.job_dir, spec.segment), spec.cpus, spec.max_processes)
    except OSError as e:
        return [], [f"not confined by cgroups: {e.strerror or e}"]


def _read_ready(fd: int) -> bytes:
    """What is in the pipe now, without waiting for its end (a process may still hold its other end)."""
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


def _children() -> list[int]:
    """The shepherd's own children (a subreaper: whatever the job left running is one, or below one)."""
    me = os.getpid()
    try:
        fd = os.open(f"/proc/self/task/{me}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return [me]  # cannot tell: walk the process table
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
        return [int(p) for p in data.split()]
    except OSError:
        return [me]
    finally:
        os.close(fd)


def _reap_rest() -> None:
    """Kill what the job left behind (as a batch system does when a job's script ends).

    Every process of the job is below this shepherd (a child subreaper), so
    SIGKILL to each of them, again for those re-parented here as their
    parents die, until the shepherd has no child left.  It never waits for a
    process to end by itself.
    """
    delay = 0.005
    while True:
        if not _children():  # nothing left (the common case): no need to walk the process table
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                return  # no child at all, living or ended: nothing of the job is left below the shepherd
            if not _children():
                return
        kill_tree(os.getpid())
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return  # none left
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _fail(wr: int, msg: str) -> None:
    try:
        os.write(wr, msg.encode(errors="replace")[:4000])
    finally:
        os._exit(127)


def _exec_job(
    spec: Launch,
    wr: int,
    cg: Path | None = None,
    dcg: Path | None = None,
    dwhy: str = "",
    joins: list[Path] | None = None,
    notes: list[str] | None = None,
    go: int | None = None,
) -> None:
    """Prepare the job's process and exec its script.  Its cgroups, affinity and memory binding (the slow
    part: entering a cgroup may wait for the kernel's RCU grace period) are set while the shepherd writes its
    pid file; the rest, from the owner's ids on, once the shepherd says go on ``go``."""
    notes = list(notes or ())
    try:
        os.setpgid(0, 0)
        for s in range(1, signal.NSIG):
            if s in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                signal.signal(s, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if cg is not None:
            try:
                cgroup.join(cg)
            except OSError:
                cg = None
        capped = False
        for path in joins or ():
            try:
                cgroup.join(path)
                capped = capped or (path / "pids.max").exists()
            except OSError as e:
                if path == dcg:
                    dwhy = f"cannot enter {dcg}: {e.strerror}"
                else:
                    notes.append(f"cannot enter {path}: {e.strerror}")
        if not capped and spec.max_processes > 0 and spec.uid != 0:
            confine.cap_by_rlimit(spec.uid, spec.max_processes)
        # after the cgroups: entering a cpuset sets the affinity to its CPUs
        os.sched_setaffinity(0, spec.cpus)
        bind_warning = bind_memory(spec.mem_nodes) if spec.mem_nodes else None
        if dwhy and spec.device_enforce == "required":
            _fail(wr, f"cannot refuse it the devices it does not hold: {dwhy}")
        if go is not None:
            if os.read(go, 1) != b"g":
                os._exit(0)  # the shepherd is gone: the job never runs
            os.close(go)
        if spec.mem and cg is None:
            resource.setrlimit(resource.RLIMIT_AS, (spec.mem, spec.mem))
        if os.getuid() == 0 and spec.uid != 0:
            # the groups come from the password and group databases, not from the request
            pw = pwd.getpwuid(spec.uid)
            gid = spec.gid if spec.gid >= 0 else pw.pw_gid
            if gid not in os.getgrouplist(pw.pw_name, pw.pw_gid):
                _fail(wr, f"{pw.pw_name} is no longer a member of group {gid}, which the job was submitted with")
            os.setgroups(os.getgrouplist(pw.pw_name, gid))
            os.setgid(gid)
            os.setuid(spec.uid)
        os.umask(spec.umask)
    except Exception as e:  # noqa: BLE001
        _fail(wr, f"cannot prepare the job: {e}")
    try:
        os.chdir(spec.workdir)
    except OSError as e:
        _fail(wr, f"cannot enter working directory {spec.workdir}: {e.strerror}")
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if spec.append else os.O_TRUNC)
    try:
        out = os.open(spec.stdout, flags, 0o644)
        err = out if spec.stderr == spec.stdout else os.open(spec.stderr, flags, 0o644)
    except OSError as e:
        _fail(wr, f"cannot open output file {e.filename}: {e.strerror}")
    nul = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nul, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for note in notes:  # the host can, but not for this job
        os.write(2, f"gridsched: job {spec.job_id}: {note}\n".encode(errors="replace"))
    if dwhy and devcgroup.controller()[0] is not None:  # the host can, but not for this job
        os.write(2, f"gridsched: job {spec.job_id}: not isolated from the devices it does not hold: {dwhy}\n".encode())
    if bind_warning:
        os.write(
            2,
            f"gridsched: job {spec.job_id}: memory not bound to NUMA nodes "
            f"{','.join(map(str, spec.mem_nodes))}: {bind_warning}\n".encode(),
        )
    argv = [spec.script, *spec.args]
    env = _with_mpi(spec)
    if spec.user_env is not None:
        from gridsched.daemon.loginenv import with_login_env

        env = with_login_env(spec.job_id, spec.user_env, env)
    try:
        os.execve(spec.script, argv, env)
    except OSError as e:
        why = execproblem.why(spec.script, spec.shell, e)
        msg = f"gridsched: job {spec.job_id} could not start: {why}\n"
        try:
            os.write(2, msg.encode())
        except OSError:
            pass
        _fail(wr, why)


def _with_mpi(spec: Launch) -> dict[str, str]:
    """The job's environment, with its host file as the default of an MPI installed on its PATH, if there is
    one (gridsched's own mpirun and mpiexec are then taken out of its way).  Run as the job's owner, in its
    working directory: the daemon never looks through a PATH a user wrote."""
    try:
        found = jobtmp.use_installed_mpi(spec.private, spec.mpi_path)
    except (OSError, ValueError):
        found = False
    if not found:
        return spec.env
    return {**spec.env, **jobenv.mpi_env(jobtmp.layout(spec.private))}


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
