"""Confining each job by cgroups: its processes are known, counted, and kept on its cores.

Where the host lets the daemon make cgroups, each job segment gets cgroups of
its own, named as its memory cgroup (:func:`.cgroup.job_name`), made by its
shepherd inside the daemon's own cgroups before the job runs and removed after
it.  They give three things:

* **which processes are the job's** (tracking): the members of the job's
  cgroup, whatever they do with process groups and sessions.  The daemon
  signals a job through them (:mod:`.procs`): each member through a pidfd,
  after checking that the process it names is in the job's cgroup, and on
  cgroup v2 a SIGKILL is also ``cgroup.kill``, which no fork can outrun.  A
  cgroup never names another process: a pid, or a process group number, can.
* **a cap on the job's processes** (``pids.max`` of the pids controller,
  ``jobs.max_processes``; the kernel counts threads as well): a fork bomb
  fails at the cap instead of taking the machine.
* **its cores** (``cpuset.cpus`` of the cpuset controller set to the job's
  host CPUs): ``sched_setaffinity`` (``taskset``) cannot move a process of
  the job to other cores.  CPU affinity is set as well, as before.

cgroup v2 is preferred for each: one directory holds all of them (and the
memory limit and device program of :mod:`.cgroup` and :mod:`.devcgroup`).
On a v1 or hybrid host the pids and cpuset controllers have hierarchies of
their own, and a v2 hierarchy without controllers still gives tracking and
``cgroup.kill``.  Where none of this can be done (a personal daemon, a
container without delegation), the daemon says why when it starts and in
``gctl info``; jobs are then tracked by their shepherd (a child subreaper:
every process of the job is below it) and pinned by affinity alone.

Where no pids cgroup can be made, the job's process gets ``RLIMIT_NPROC``
(:func:`cap_by_rlimit`): the kernel checks it against every process and
thread of the user, not the job's, so it is set to what the user runs when
the job starts plus ``jobs.max_processes``.  That stops a fork bomb, but
it is shared: what the user starts elsewhere later counts against it too.

Standard library only; everything here may run in a forked shepherd.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from gridsched.daemon import cgroup

V2_MOUNTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
V1_ROOT = "/sys/fs/cgroup"
PREFIX = "gridsched-"


@dataclass(frozen=True, slots=True)
class Place:
    """A cgroup hierarchy job cgroups are made in: cgroup ``version`` 1 or 2, below ``base`` (the daemon's own
    cgroup there)."""

    version: int
    base: Path

    def describe(self) -> str:
        return f"cgroup v{self.version} ({self.base})"


@dataclass(frozen=True, slots=True)
class Setup:
    """Where each part of a job's confinement is made here, or why it cannot be (``*_why``)."""

    track: Place | None = None
    track_why: str = ""
    kill: bool = False  # the tracking cgroup has cgroup.kill (v2, Linux 5.14)
    pids: Place | None = None
    pids_why: str = ""
    cpuset: Place | None = None
    cpuset_why: str = ""

    def lines(self, max_processes: int) -> list[str]:
        """What the daemon logs when it starts (and ``gctl info`` shows)."""
        return [
            f"job processes: {self.describe_track()}",
            f"process cap: {self.describe_pids(max_processes)}",
            f"cores: {self.describe_cpuset()}",
        ]

    def describe_track(self) -> str:
        if self.track is None:
            return f"by their shepherd only ({self.track_why}): signals go to the processes below it, a child subreaper"
        kill = ", SIGKILL by cgroup.kill" if self.kill else ""
        return f"each job's own cgroup in {self.track.describe()}{kill}, and the processes below its shepherd"

    def describe_pids(self, max_processes: int) -> str:
        if max_processes <= 0:
            return "none (jobs.max_processes = 0)"
        if self.pids is None:
            return (
                f"no pids cgroup ({self.pids_why}); instead RLIMIT_NPROC at what the user runs when a job starts "
                f"plus {max_processes} (the kernel counts every process of the user against it, not the job's)"
            )
        return f"{max_processes} processes and threads per job (pids.max in {self.pids.describe()})"

    def describe_cpuset(self) -> str:
        if self.cpuset is None:
            return f"pinned by CPU affinity only, a job may change it (no cpuset cgroup: {self.cpuset_why})"
        return f"each job confined to its cores by cpuset.cpus in {self.cpuset.describe()}, and pinned by affinity"


def _read(p: Path) -> str:
    """A cgroup file's text, stripped ("" if it cannot be read): an open, reads until its end and a close."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
        return data.decode(errors="replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


def _v2_base() -> tuple[Path | None, str]:
    own = cgroup._own_path(None)
    if own is None:
        return None, "this process is in no cgroup v2 hierarchy"
    for mount in V2_MOUNTS:
        if Path(mount, "cgroup.controllers").is_file():
            return Path(mount) / own.lstrip("/"), ""
    return None, "no cgroup v2 file system is mounted"


def _v1_base(controller: str) -> tuple[Path | None, str]:
    mount = Path(V1_ROOT, controller)
    if not (mount / "cgroup.procs").is_file() or (mount / "cgroup.controllers").exists():
        return None, f"no cgroup v1 {controller} controller is mounted"
    own = cgroup._own_path(controller)
    if own is None:
        return None, f"this process is in no cgroup v1 {controller} hierarchy"
    return mount / own.lstrip("/"), ""


def _v2_controller(base: Path, controller: str) -> str:
    """Why the v2 cgroup ``base`` cannot give ``controller`` to its children ("" when it can)."""
    if controller not in _read(base / "cgroup.controllers").split():
        return f"the {controller} controller is not available in {base}"
    if controller in _read(base / "cgroup.subtree_control").split():
        return ""
    try:
        (base / "cgroup.subtree_control").write_text(f"+{controller}")
    except OSError as e:
        if e.errno == errno.EBUSY:
            return (
                f"{base} holds processes and cannot hand the {controller} controller to job cgroups "
                "(start the daemon in a leaf of a delegated subtree)"
            )
        return f"cannot enable {controller} in {base}/cgroup.subtree_control: {e.strerror}"
    return ""


def _mems_of(base: Path) -> str:
    return _read(base / "cpuset.mems") or _read(base / "cpuset.effective_mems")


def _cpus_of(base: Path) -> str:
    return _read(base / "cpuset.effective_cpus") or _read(base / "cpuset.cpus")


def _probe(place: Place, what: str) -> str:
    """Make a cgroup in ``place`` with ``what`` set (track, pids, cpuset) and remove it: why it failed, or ""."""
    path = place.base / f"{PREFIX}probe-{os.getpid()}"
    try:
        path.mkdir()
    except FileExistsError:
        pass
    except OSError as e:
        return f"cannot make a cgroup in {place.base}: {e.strerror}"
    try:
        if what == "track" and not (path / "cgroup.procs").is_file():
            return f"{path} has no cgroup.procs"
        if what == "pids":
            (path / "pids.max").write_text("10")
        if what == "cpuset":
            if place.version == 1:
                (path / "cpuset.mems").write_text(_mems_of(place.base))
            (path / "cpuset.cpus").write_text(_cpus_of(place.base))
    except OSError as e:
        return f"cannot set {what} in {path}: {e.strerror}"
    finally:
        cgroup.remove(path, timeout=0.5)
    return ""


def find() -> Setup:
    """Where job cgroups for tracking, the process cap and the cores can be made on this host (tried on probe
    cgroups, which are removed), and why not where they cannot."""
    v2, v2_why = _v2_base()
    track: Place | None = None
    kill = False
    track_why = v2_why
    got: dict[str, Place | None] = {"pids": None, "cpuset": None}
    whys: dict[str, str] = {}
    if v2 is not None:
        place = Place(2, v2)
        track_why = _probe(place, "track")
        if not track_why:
            track = place
            kill = _has_kill(place)
        for ctl in got:
            why = _v2_controller(v2, ctl) or _probe(place, ctl)
            if why:
                whys[ctl] = f"v2: {why}"
            else:
                got[ctl] = place
    for ctl in got:
        if got[ctl] is not None:
            continue
        base, why = _v1_base(ctl)
        if base is not None:
            why = _probe(Place(1, base), ctl)
            if not why:
                got[ctl] = Place(1, base)
                whys.pop(ctl, None)
                continue
        whys[ctl] = "; ".join(w for w in (whys.get(ctl, ""), f"v1: {why}") if w)
    if track is None:  # a v1 hierarchy lists the job's processes too
        track = got["pids"] or got["cpuset"]
        if track is not None:
            track_why = ""
    if os.geteuid() != 0:  # a personal daemon: only a cgroup subtree delegated to its user can serve
        who = f"not root (uid {os.geteuid()}): "
        track_why, whys = who + track_why if track_why else "", {k: who + w for k, w in whys.items()}
    return Setup(track, track_why, kill, got["pids"], whys.get("pids", ""), got["cpuset"], whys.get("cpuset", ""))


def _has_kill(place: Place) -> bool:
    path = place.base / f"{PREFIX}probe-{os.getpid()}"
    try:
        path.mkdir()
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        return (path / "cgroup.kill").is_file()
    finally:
        cgroup.remove(path, timeout=0.5)


_found: Setup | None = None


def setup(refresh: bool = False) -> Setup:
    """:func:`find`, once per process (a shepherd forked from the daemon inherits the daemon's answer)."""
    global _found
    if _found is None or refresh:
        _found = find()
    return _found


def user_tasks(uid: int) -> int:
    """How many processes and threads ``uid`` runs now (what the kernel counts against ``RLIMIT_NPROC``)."""
    n = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                text = f.read()
        except OSError:
            continue
        real = threads = None
        for line in text.splitlines():
            if line.startswith(b"Uid:"):
                real = int(line.split()[1])
            elif line.startswith(b"Threads:"):
                threads = int(line.split()[1])
        if real == uid:
            n += threads or 1
    return n


def cap_by_rlimit(uid: int, max_processes: int) -> None:
    """Cap the processes a job of ``uid`` may make where no pids cgroup can (called in the job's process before
    it drops to ``uid``): ``RLIMIT_NPROC`` at what the user runs now plus ``max_processes``, never above the
    hard limit in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    want = user_tasks(uid) + max_processes
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (want, want))
    except (OSError, ValueError):
        pass


def _put(path: Path, text: str) -> None:
    """Write ``text`` to the cgroup file ``path`` in one write (an open, a write and a close: a cgroup file
    takes no buffering, and each job's are written on its path to its first instruction)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _fmt(cpus: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def create(s: Setup, name: str, cpus: frozenset[int], max_processes: int) -> tuple[list[Path], list[str]]:
    """The job cgroups ``name`` of a segment (each directory once: on cgroup v2 one holds everything) and what
    could not be done, for the job's standard error.  An existing directory (the job's memory cgroup on v2)
    is used as it is; nothing that fails is left behind by this call."""
    paths: list[Path] = []
    notes: list[str] = []
    made: list[Path] = []

    def mkdir(place: Place) -> Path | None:
        path = place.base / name
        if path in paths:
            return path
        try:
            path.mkdir()
            made.append(path)
        except FileExistsError:
            pass
        except OSError as e:
            notes.append(f"cannot make a cgroup in {place.base}: {e.strerror}")
            return None
        paths.append(path)
        return path

    if s.track is not None:
        mkdir(s.track)
    if s.pids is not None and max_processes > 0:
        path = mkdir(s.pids)
        if path is not None:
            try:
                _put(path / "pids.max", str(max_processes))
            except OSError as e:
                notes.append(f"no process cap: {path}/pids.max: {e.strerror}")
                _drop(path, s, paths, made)
    if s.cpuset is not None and cpus:
        path = mkdir(s.cpuset)
        if path is not None:
            try:
                # a cpuset v1 made just now has no memory nodes (or its parent's, where the parent clones them)
                if s.cpuset.version == 1 and (path in made or not _read(path / "cpuset.mems")):
                    _put(path / "cpuset.mems", _mems_of(s.cpuset.base))
                _put(path / "cpuset.cpus", _fmt(cpus))
            except OSError as e:
                notes.append(
                    f"not confined to its cores by a cpuset (CPU affinity only): {path}/cpuset.cpus = {_fmt(cpus)}: "
                    f"{e.strerror}"
                )
                _drop(path, s, paths, made)
    return paths, notes


def _drop(path: Path, s: Setup, paths: list[Path], made: list[Path]) -> None:
    """Give up the cgroup ``path`` for what failed in it, unless it serves something else (tracking)."""
    if s.track is not None and path == s.track.base / path.name:
        return
    if path in made:
        cgroup.remove(path, timeout=0.5)
    if path in paths:
        paths.remove(path)


def set_cpus(paths: list[str] | tuple[str, ...], cpus: set[int] | frozenset[int]) -> list[str]:
    """Move a job's cpuset cgroups to the host CPUs ``cpus`` (a suspended job resumed on other cores); why not,
    for each that refused."""
    out = []
    for p in paths:
        f = Path(p) / "cpuset.cpus"
        if not f.is_file():
            continue
        try:
            f.write_text(_fmt(frozenset(cpus)))
        except OSError as e:
            out.append(f"{f}: {e.strerror}")
    return out


def valid(path: object) -> bool:
    """Whether ``path`` (read back from a shepherd's pid file) names a job cgroup: a ``gridsched-`` directory
    under the cgroup file systems, nothing else."""
    if not isinstance(path, str) or not path.startswith(V1_ROOT + "/") or "/../" in path or "\x00" in path:
        return False
    return os.path.basename(path).startswith(PREFIX)
