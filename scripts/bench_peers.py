#!/usr/bin/env python3
"""The per-job path of gridsched beside task-spooler (``tsp``) and ``nq``, measured alternately in one run.

Each system runs in a private temporary directory: gridsched as a personal daemon (``gschedd run``)
on its own spool and config (``GRIDSCHED_SPOOL``, ``GRIDSCHED_CONFIG``, a machine of ``--cores``
cores), task-spooler on its own socket (``TS_SOCKET``, ``tsp -S CORES``), nq on its own directory
(``NQDIR``).  For each round the systems take turns on every figure:

- ``submit``: one submission as a whole process (``gsub --wrap true``, ``tsp -n true``, ``nq true``)
  to an idle queue: wall-clock and CPU milliseconds (beside ``python -c "import click"``, the floor
  of a command written with click);
- ``loop``: a shell loop of ``--loop`` submissions of ``true`` (jobs a second, jobs running meanwhile);
- ``dispatch``: on an idle queue, from just before the submitting command starts to the job's first
  instruction (the job writes ``date +%s.%N``), and from the acknowledgement to that instruction:
  gridsched's request published in its spool (the moment gsub may report the job id: seen with
  inotify), the other commands' return;
- ``drain``: ``--drain`` ``true`` jobs queued behind a job in each slot that waits for a file, then
  that file made: jobs a second until the last has ended.  nq has no slots: each job waits for all
  the jobs queued before it, so it drains one at a time.

    python scripts/bench_peers.py [--rounds 3] [--loop 200] [--drain 500] [--dispatch 5]
                                  [--gridsched NAME=BINDIR ...] [--only gridsched,tsp,nq]

``--gridsched NAME=BINDIR`` adds another installation of gridsched (the ``bin`` directory of its
virtual environment, such as the previous release's) as one more peer; the default is the one
beside this interpreter.  tsp and nq are installed with ``apt-get install -y task-spooler nq`` when
absent and this runs as root; otherwise they are left out.  Prints a table of medians with the
machine (nproc, CPU model) and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """[scheduler]
policy = "checkpoint-backfill"
[machine]
cores = {cores}
[daemon]
autostart = false
"""


def run_timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(start, wall ms, CPU ms) of one run of argv; exits on failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p0 = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = (time.perf_counter() - p0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.decode(errors='replace').strip()}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return t0, wall, cpu


def wait_for(cond, what: str, limit: float = 600.0, step: float = 0.005) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(step)


class Peer:
    """One system: how to submit a shell command, and how to know its queue is empty."""

    name = ""
    slots_note = ""

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self.dir = Path(tempfile.mkdtemp(prefix=f"bench-peers-{self.name}-"))
        self.env = dict(os.environ)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def submit_argv(self, cmd: str) -> list[str]:
        raise NotImplementedError

    def submit(self, cmd: str) -> tuple[float, float, float]:
        return run_timed(self.submit_argv(cmd), self.env, self.dir)

    def submit_many(self, cmd: str, n: int) -> None:
        for _ in range(n):
            self.submit(cmd)

    def idle(self) -> bool:
        raise NotImplementedError

    def wait_idle(self) -> None:
        wait_for(self.idle, f"{self.name} to finish its queue", step=0.02)

    def start(self) -> None:
        pass

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _stat_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user and system) of process ``pid`` itself, and of its children it has reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


class Gridsched(Peer):
    def __init__(self, cores: int, label: str, bindir: Path) -> None:
        self.name = label
        super().__init__(cores)
        self.bin = bindir
        cfg = self.dir / "gridsched.toml"
        cfg.write_text(CONFIG.format(cores=cores))
        self.spool = self.dir / "spool"
        self.env.update(GRIDSCHED_SPOOL=str(self.spool), GRIDSCHED_CONFIG=str(cfg))
        self.proc: subprocess.Popen[bytes] | None = None
        self.db: sqlite3.Connection | None = None
        self.published = Published(self.spool / "incoming")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(self.bin / "gschedd"), "run"],
            env=self.env,
            cwd=self.dir,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: (self.spool / "gschedd.sock").exists(), "gschedd to start", 30)

    def submit_argv(self, cmd: str) -> list[str]:
        return [str(self.bin / "gsub"), "-n", "1", "-t", "10m", "-o", "/dev/null", "--wrap", cmd]

    def idle(self) -> bool:
        if self.db is None:
            self.db = sqlite3.connect(f"file:{self.spool / 'state.db'}?mode=ro", uri=True)
        if any(self.spool.glob("incoming/submit-*")):
            return False
        try:
            row = self.db.execute("SELECT COUNT(*) FROM jobs WHERE state NOT IN ('COMPLETED','FAILED')").fetchone()
        except sqlite3.Error:
            return False
        return bool(row[0] == 0)

    def submit_many(self, cmd: str, n: int) -> None:
        """n submissions from one process (gridsched.api.client, the installation's own): quicker to queue."""
        code = (
            "import sys\nfrom gridsched.api.client import Client\nc = Client()\n"
            f"for _ in range({n}):\n    c.submit(command=sys.argv[1], ncpus=1, walltime=600, output='/dev/null')\n"
        )
        subprocess.run([str(self.bin / "python"), "-c", code, cmd], env=self.env, cwd=self.dir, check=True)

    def last_id(self) -> int:
        """The highest job id in the table (0 when none)."""
        self.idle()  # opens the table
        assert self.db is not None
        return int(self.db.execute("SELECT COALESCE(MAX(id), 0) FROM jobs").fetchone()[0])

    def jobs_cpu(self, first: int, last: int) -> float:
        """CPU seconds the jobs ``first``..``last`` used, as their shepherds recorded it."""
        assert self.db is not None
        row = self.db.execute(
            "SELECT COALESCE(SUM(COALESCE(cpu_user, 0) + COALESCE(cpu_sys, 0)), 0) FROM jobs WHERE id BETWEEN ? AND ?",
            (first, last),
        ).fetchone()
        return float(row[0])

    def cpu(self) -> tuple[float, float]:
        """CPU seconds of the daemon itself, and of the rest of the per-job path: the daemon's children it has
        reaped (shepherds and their jobs, where it forks them), and its children still running (the
        shepherds' starter, where there is one) with the children they have reaped (its shepherds)."""
        assert self.proc is not None
        own, reaped = _stat_cpu(self.proc.pid)
        live = 0.0
        try:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        except OSError:
            kids = []
        for k in kids:
            try:
                a, b = _stat_cpu(int(k))
            except (OSError, ValueError, IndexError):
                continue  # ended meanwhile
            live += a + b
        return own, reaped + live

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        super().close()


class TaskSpooler(Peer):
    name = "tsp"

    def __init__(self, cores: int) -> None:
        super().__init__(cores)
        self.env.update(TS_SOCKET=str(self.dir / "ts.sock"), TMPDIR=str(self.dir), TS_MAXFINISHED="100000")
        self.env.pop("TS_SLOTS", None)

    def start(self) -> None:
        subprocess.run(["tsp", "-S", str(self.cores)], env=self.env, check=True)

    def submit_argv(self, cmd: str) -> list[str]:
        return ["tsp", "-n", "sh", "-c", cmd]

    def submit(self, cmd: str) -> tuple[float, float, float]:
        argv = ["tsp", "-n", "true"] if cmd == "true" else self.submit_argv(cmd)
        return run_timed(argv, self.env, self.dir)

    def idle(self) -> bool:
        out = subprocess.run(["tsp", "-l"], env=self.env, capture_output=True, text=True, check=True).stdout
        return not any(w in out for w in (" running ", " queued ", " allocating "))

    def close(self) -> None:
        subprocess.run(["tsp", "-K"], env=self.env, capture_output=True)
        super().close()


class Nq(Peer):
    name = "nq"
    slots_note = "nq has no slots: one job at a time"

    def __init__(self, cores: int) -> None:
        super().__init__(cores)
        self.env.update(NQDIR=str(self.dir / "nq"))

    def submit_argv(self, cmd: str) -> list[str]:
        return ["nq", "-q", "sh", "-c", cmd]

    def submit(self, cmd: str) -> tuple[float, float, float]:
        argv = ["nq", "-q", "true"] if cmd == "true" else self.submit_argv(cmd)
        return run_timed(argv, self.env, self.dir)

    def idle(self) -> bool:
        return subprocess.run(["nq", "-t"], env=self.env, capture_output=True).returncode == 0

    def wait_idle(self) -> None:
        subprocess.run(["nq", "-w"], env=self.env, capture_output=True)


# -- the figures ----------------------------------------------------------------------------------


def one_submit(peer: Peer) -> tuple[float, float]:
    _, wall, cpu = peer.submit("true")
    peer.wait_idle()
    return wall, cpu


def loop(peer: Peer, n: int) -> float:
    argv = peer.submit_argv("true")
    if isinstance(peer, (TaskSpooler, Nq)):
        argv = argv[:-3] + ["true"]
    line = " ".join(f"'{a}'" for a in argv)
    script = f"i=0; while [ $i -lt {n} ]; do {line} >/dev/null || exit 1; i=$((i+1)); done"
    t0 = time.perf_counter()
    subprocess.run(["sh", "-c", script], env=peer.env, cwd=peer.dir, check=True)
    rate = n / (time.perf_counter() - t0)
    peer.wait_idle()
    return rate


class Published:
    """When a submission appears in a gridsched spool's ``incoming/`` (inotify, read by a thread): the moment
    the request is published, which is when gsub may acknowledge it."""

    IN_CREATE, IN_MOVED_TO = 0x100, 0x80

    def __init__(self, directory: Path) -> None:
        import ctypes
        import threading

        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC)
        directory.mkdir(parents=True, exist_ok=True)
        if (
            self.fd < 0
            or libc.inotify_add_watch(self.fd, str(directory).encode(), self.IN_CREATE | self.IN_MOVED_TO) < 0
        ):
            raise OSError(ctypes.get_errno(), "inotify")
        self.times: dict[str, float] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        import struct

        while True:
            buf = os.read(self.fd, 65536)
            now = time.time()
            off = 0
            while off + 16 <= len(buf):
                _, _, _, n = struct.unpack_from("iIII", buf, off)
                name = buf[off + 16 : off + 16 + n].rstrip(b"\0").decode()
                off += 16 + n
                if name.startswith("submit-"):
                    self.times.setdefault(name, now)


def dispatch(peer: Peer, i: int) -> tuple[float, float]:
    """Seconds to the job's first instruction from before the command, and from the submission's
    acknowledgement: gridsched's request published in its spool (seen by inotify), the others' return."""
    mark = peer.dir / f"mark-{i}"
    seen = set(peer.published.times) if isinstance(peer, Gridsched) else set()
    t0, wall, _ = peer.submit(f"date +%s.%N > {mark}")
    wait_for(lambda: mark.exists() and mark.read_text().endswith("\n"), f"{peer.name}'s job to start", 60, 0.0005)
    t = float(mark.read_text())
    acked = t0 + wall / 1000
    if isinstance(peer, Gridsched):
        new = [v for k, v in peer.published.times.items() if k not in seen]
        if new:
            acked = min(new)
    peer.wait_idle()
    return t - t0, t - acked


def drain(peer: Peer, n: int) -> tuple[float, tuple[float, float] | None]:
    """Jobs a second; for gridsched also the CPU milliseconds a job cost the daemon itself and its children
    (the shepherds, with the jobs and what they left, as the daemon reaps them), less what the jobs that held
    the slots used while the others were queued (the state db has it)."""
    go = peer.dir / "go"
    go.unlink(missing_ok=True)
    blockers = 1 if isinstance(peer, Nq) else peer.cores
    first = peer.last_id() + 1 if isinstance(peer, Gridsched) else 0
    for _ in range(blockers):  # (they end too once the peer's directory is removed: a run cut short leaves none)
        peer.submit(f"while [ ! -e {go} ] && [ -d {peer.dir} ]; do sleep 0.01; done")
    peer.submit_many("true", n)
    cpu0 = peer.cpu() if isinstance(peer, Gridsched) else None
    t0 = time.perf_counter()
    go.touch()
    peer.wait_idle()
    rate = n / (time.perf_counter() - t0)
    if cpu0 is None or not isinstance(peer, Gridsched):
        return rate, None
    cpu1 = peer.cpu()
    # the blockers' own CPU (their loops, all the while the jobs were queued) reaches the shepherds' count
    # when they end, at the start of the drain: it is no part of the drained jobs' cost
    blocked = peer.jobs_cpu(first, first + blockers - 1)
    return rate, ((cpu1[0] - cpu0[0]) * 1000 / n, (cpu1[1] - cpu0[1] - blocked) * 1000 / n)


# -- the run --------------------------------------------------------------------------------------


def ensure_peers(wanted: set[str]) -> set[str]:
    missing = [pkg for pkg, exe in (("task-spooler", "tsp"), ("nq", "nq")) if exe in wanted and not shutil.which(exe)]
    if missing and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", *missing], stdout=subprocess.DEVNULL, check=False)
    return {w for w in wanted if w not in ("tsp", "nq") or shutil.which(w)}


def machine() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}), Python {sys.version.split()[0]}"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2, help="the machine gridsched declares, and tsp's slots")
    ap.add_argument("--loop", type=int, default=200, help="submissions in the shell loop")
    ap.add_argument("--drain", type=int, default=500, help="jobs in the drain")
    ap.add_argument("--dispatch", type=int, default=5, help="dispatch samples per round")
    ap.add_argument("--submits", type=int, default=5, help="single submissions timed per round")
    ap.add_argument("--gridsched", action="append", default=[], metavar="NAME=BINDIR")
    ap.add_argument("--only", default="", help="figures to run: submit,loop,dispatch,drain (default: all)")
    ap.add_argument("--peers", default="tsp,nq", help="other systems (default: tsp,nq; '' for none)")
    args = ap.parse_args()
    figures = set(args.only.split(",")) if args.only else {"submit", "loop", "dispatch", "drain"}
    others = ensure_peers({p for p in args.peers.split(",") if p})
    installs = [g.split("=", 1) for g in args.gridsched] or [["gridsched", str(Path(sys.executable).parent)]]
    print(f"machine: {machine()}; load average before: {load()}", flush=True)
    peers: list[Peer] = [Gridsched(args.cores, name, Path(bindir)) for name, bindir in installs]
    peers += [cls(args.cores) for cls in (TaskSpooler, Nq) if cls.name in others]
    res: dict[str, dict[str, list[float]]] = {p.name: {} for p in peers}
    click_floor: list[tuple[float, float]] = []
    py = [str(Path(installs[0][1]) / "python"), "-c", "import click"]
    try:
        for p in peers:
            p.start()
            p.submit("true")  # warm the caches
            p.wait_idle()
        for rnd in range(args.rounds):
            order = peers if rnd % 2 == 0 else peers[::-1]
            if "submit" in figures:
                for _ in range(args.submits):
                    click_floor.append(run_timed(py, peers[0].env, peers[0].dir)[1:])
                    for p in order:
                        wall, cpu = one_submit(p)
                        res[p.name].setdefault("submit_wall", []).append(wall)
                        res[p.name].setdefault("submit_cpu", []).append(cpu)
            if "dispatch" in figures:
                for i in range(args.dispatch):
                    for p in order:
                        whole, after = dispatch(p, rnd * 1000 + i)
                        res[p.name].setdefault("dispatch", []).append(whole * 1000)
                        res[p.name].setdefault("dispatch_after", []).append(after * 1000)
                for p in order:
                    got = res[p.name]["dispatch_after"][-args.dispatch :]
                    print(f"  dispatch {p.name}: median {med(got):.1f} ms from the acknowledgement", flush=True)
            if "loop" in figures:
                for p in order:
                    res[p.name].setdefault("loop", []).append(loop(p, args.loop))
            if "drain" in figures:
                for p in order:
                    rate, cpu = drain(p, args.drain)
                    res[p.name].setdefault("drain", []).append(rate)
                    each = f"  drain {p.name}: {rate:.0f} jobs/s"
                    if cpu is not None:
                        res[p.name].setdefault("drain_daemon_cpu", []).append(cpu[0])
                        res[p.name].setdefault("drain_children_cpu", []).append(cpu[1])
                        each += f", CPU a job {cpu[0]:.1f} ms the daemon, {cpu[1]:.1f} ms the rest"
                    print(f"{each}; load average {load()}", flush=True)
            print(f"round {rnd + 1}/{args.rounds} done, load average {load()}", flush=True)
    finally:
        for p in peers:
            p.close()
    report(res, peers, click_floor, args)


def report(res: dict[str, dict[str, list[float]]], peers: list[Peer], floor: list[tuple[float, float]], args) -> None:
    rows = [
        ("submit_wall", "one submission, wall (ms)", "{:.1f}"),
        ("submit_cpu", "one submission, CPU (ms)", "{:.1f}"),
        ("loop", f"shell loop of {args.loop} (jobs/s)", "{:.0f}"),
        ("dispatch", "dispatch, from before the command (ms)", "{:.1f}"),
        ("dispatch_after", "dispatch, from the acknowledgement (ms)", "{:.1f}"),
        ("drain", f"drain of {args.drain} `true`, {args.cores} slots (jobs/s)", "{:.0f}"),
        ("drain_daemon_cpu", "  CPU a job costs the daemon (ms)", "{:.1f}"),
        ("drain_children_cpu", "  CPU a job costs starter, shepherd and job (ms)", "{:.1f}"),
    ]
    names = [p.name for p in peers]
    width = max(len(r[1]) for r in rows)
    print()
    print(f"medians of {args.rounds} rounds; load average after: {load()}")
    print(f"{'figure':<{width}}  " + "  ".join(f"{n:>12}" for n in names))
    for key, label, fmt in rows:
        if not any(res[n].get(key) for n in names):
            continue
        print(f"{label:<{width}}  " + "  ".join(f"{fmt.format(med(res[n].get(key, []))):>12}" for n in names))
    if floor:
        fw, fc = med([f[0] for f in floor]), med([f[1] for f in floor])
        print(f"python -c 'import click': {fw:.1f} ms wall, {fc:.1f} ms CPU")
        for p in peers:
            if isinstance(p, Gridsched) and res[p.name].get("submit_cpu"):
                r = res[p.name]
                print(
                    f"{p.name}: gsub / import click: {med(r['submit_wall']) / fw:.2f}x wall, "
                    f"{med(r['submit_cpu']) / fc:.2f}x CPU"
                )
    for p in peers:
        if p.slots_note:
            print(f"{p.name}: {p.slots_note}")


if __name__ == "__main__":
    main()
