#!/usr/bin/env python3
"""Crash soak: many jobs while the daemon is killed with SIGKILL and restarted.

A declared 16-core machine runs N jobs of mixed sizes and lengths under
checkpoint-backfill: plain jobs, checkpointable ones (the example
``scripts/examples/checkpoint_counter.sh``), requeue-mode ones, wide ones that
make the others wait and get preempted, jobs that overrun their walltime (some
ignoring SIGTERM), jobs that fail, and jobs cancelled with ``gdel`` at random
moments.  Meanwhile the daemon is killed with SIGKILL K times at random moments
and restarted after a random pause.

Every job appends ``<id> <segment> start`` and ``<id> <segment> end <status>``
lines to a ledger file; a checkpointable job also logs each unit of work it
does.  At the end the script checks, job by job, the state db against the
ledger:

* lost: a job with no row or no terminal state, or one that should have run and
  did not;
* duplicated: a segment that ran twice, a run the accounting does not record,
  a unit of checkpointed work done twice without a recorded loss;
* mismatched: a recorded segment that did not run, restarts or time
  accounting that disagree with the segments, an exit status that disagrees
  with the ledger, a final state other than the one the job was built to reach.

With ``--system`` (as root) the daemon runs in system mode and the jobs
belong to two throwaway users, created with ``useradd`` for the run and
removed at its end (also on failure or Ctrl-C): each job is submitted with
``gsub`` as one of them, in turn, and cancelled with ``gdel`` as its owner.
Every job is then also checked for

* wrong_owner: a job row whose uid or user is not its submitter's, or an
  output file not owned by its submitter (or missing though the job ran).

It prints the counts (target zero each) and exits 1 if any is not zero, or if
the run did not finish within ``--timeout``.  Run with the Python of the
environment gridsched is installed in::

    python scripts/soak.py                                   # 1000 jobs, 50 kills
    python scripts/soak.py --jobs 100 --kills 10             # the short form
    sudo python scripts/soak.py --jobs 100 --kills 10 --system   # two users, a system daemon
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
COUNTER = REPO / "scripts" / "examples" / "checkpoint_counter.sh"
UNIT_SECONDS = 0.2
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY"}
EXPECTED = {
    "short": "COMPLETED",
    "wide": "COMPLETED",
    "ckpt": "COMPLETED",
    "requeue": "COMPLETED",
    "timeout": "TIMEOUT",
    "fail": "FAILED",
}
# Segment outcomes after which a job goes on in a later segment.
REQUEUED = {"checkpointed", "requeued", "killed before checkpoint"}

CONFIG = """
[scheduler]
policy = "checkpoint-backfill"
p = 0.25
threshold = "5s"
[jobs]
kill_grace = "1s"
checkpoint_grace = "3s"
max_walltime = "1h"
[machine]
cores = {cores}
[daemon]
autostart = false
log_level = "info"
{system}"""

START = 's=$((GS_RESTART_COUNT + 1))\necho "$GS_JOBID $s start" >> "$SOAK_LEDGER"\n'


@dataclass
class Job:
    """One job of the soak, as built: what it is and what it should end as."""

    index: int
    kind: str
    ncpus: int
    walltime: int
    mode: str
    script: str
    run: float  # seconds of work (for the estimate of the soak's length)
    units: int = 0
    cancel_after: float | None = None  # seconds after submission
    submit_at: float = 0.0  # seconds after the soak's start
    id: int = 0
    submitted: float = 0.0
    owner: pwd.struct_passwd | None = None  # the user who submits it (None: the soak's own user)
    out: Path | None = None  # its output file (standard output and error)


def build_jobs(n: int, cores: int, rng: random.Random, scale: float) -> list[Job]:
    kinds = ["short", "ckpt", "requeue", "wide", "timeout", "fail"]
    weights = [40, 20, 10, 13, 7, 5]
    jobs = []
    for i in range(n):
        kind = rng.choices(kinds, weights)[0]
        if kind in ("short", "wide"):
            t = round(rng.uniform(0.3, 3.0) * scale, 2)
            ncpus = rng.randint(1, 4) if kind == "short" else rng.randint(cores // 2, cores)
            script = f'#!/bin/sh\n{START}sleep {t}\necho "$GS_JOBID $s end 0" >> "$SOAK_LEDGER"\n'
            job = Job(i, kind, ncpus, int(t) + 3, "none", script, t)
        elif kind == "requeue":
            t = round(rng.uniform(2.0, 6.0) * scale, 2)
            script = f'#!/bin/sh\n{START}sleep {t}\necho "$GS_JOBID $s end 0" >> "$SOAK_LEDGER"\n'
            job = Job(i, kind, rng.randint(2, 6), 20, "requeue", script, t)
        elif kind == "ckpt":
            units = max(2, int(rng.randint(5, 40) * scale))
            # the wrapper survives the checkpoint signal (a caught signal is reset at exec,
            # so the counter below still gets it) and logs the counter's exit status
            script = (
                "#!/bin/sh\ntrap ':' USR1\n"
                + START
                + f'LEDGER="$SOAK_UNITS/$GS_JOBID" UNIT_SECONDS={UNIT_SECONDS} sh {COUNTER} {units}\n'
                + 'rc=$?\necho "$GS_JOBID $s end $rc" >> "$SOAK_LEDGER"\nexit $rc\n'
            )
            job = Job(i, kind, rng.randint(1, 4), 20, "signal", script, units * UNIT_SECONDS, units=units)
        elif kind == "timeout":
            trap = "trap '' TERM\n" if rng.random() < 0.5 else ""
            script = f'#!/bin/sh\n{trap}{START}sleep 60\necho "$GS_JOBID $s end 0" >> "$SOAK_LEDGER"\n'
            job = Job(i, kind, rng.randint(1, 2), 2, "none", script, 3.0)
        else:
            script = f'#!/bin/sh\n{START}sleep 0.2\necho "$GS_JOBID $s end 3" >> "$SOAK_LEDGER"\nexit 3\n'
            job = Job(i, kind, 1, 10, "none", script, 0.2)
        if rng.random() < 0.05:
            job.cancel_after = rng.uniform(0.0, 20.0)
        jobs.append(job)
    return jobs


class Daemon:
    """The daemon under test, started and killed as a separate process."""

    def __init__(self, root: Path, env: dict[str, str], system: bool = False) -> None:
        self.root = root
        self.env = env
        self.system = system
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.unexpected_exits = 0

    def start(self) -> None:
        with open(self.root / "daemon.out", "ab") as out:
            cmd = [str(BIN / "gschedd"), "run", *(["--system"] if self.system else [])]
            self.proc = subprocess.Popen(
                cmd, env=self.env, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + 30
        pidfile = self.root / "spool" / "gschedd.pid"
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"soak: the daemon exited with {self.proc.returncode} at start; "
                    f"see {self.root / 'spool' / 'gschedd.log'}"
                )
            try:
                if json.loads(pidfile.read_text()).get("pid") == self.proc.pid:
                    break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit("soak: the daemon did not start within 30 s")
            time.sleep(0.02)
        self.starts += 1

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None

    def check(self) -> None:
        """Restart a daemon that died without being killed (and count it)."""
        if self.proc is not None and self.proc.poll() is not None:
            self.unexpected_exits += 1
            print(f"soak: the daemon exited on its own with {self.proc.returncode}", file=sys.stderr)
            self.proc = None
            self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


class Users:
    """Throwaway unprivileged users for system mode: made with ``useradd``, removed by :meth:`remove`."""

    def __init__(self) -> None:
        self.made: list[pwd.struct_passwd] = []

    def create(self, n: int) -> list[pwd.struct_passwd]:
        tags = "abcdefgh"
        for i in range(n):
            name = next(
                f"gsk{tags[i]}{os.getpid() % 100000 + k}"
                for k in range(100)
                if not _user_exists(f"gsk{tags[i]}{os.getpid() % 100000 + k}")
            )
            r = subprocess.run(["useradd", "-M", "-U", "-s", "/bin/sh", name], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"soak: useradd {name} failed: {r.stderr.strip() or r.returncode}")
            self.made.append(pwd.getpwnam(name))
        return list(self.made)

    def remove(self) -> list[str]:
        """Kill every process of the users, then ``userdel`` them; the problems met (empty if none)."""
        import psutil

        problems = []
        uids = {pw.pw_uid for pw in self.made}
        deadline = time.monotonic() + 10
        while uids:
            alive = []
            for p in psutil.process_iter():
                try:
                    if uids & set(p.uids()):
                        p.kill()
                        alive.append(p.pid)
                except psutil.Error:
                    pass
            if not alive:
                break
            if time.monotonic() > deadline:
                problems.append(f"processes of the soak's users still alive: {alive[:10]}")
                break
            time.sleep(0.1)
        for pw in self.made:
            r = subprocess.run(["userdel", pw.pw_name], capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"userdel {pw.pw_name} failed: {r.stderr.strip() or r.returncode}")
        self.made = []
        return problems


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _demote(pw: pwd.struct_passwd) -> None:
    os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


def _preload() -> None:
    """Import what gsub and gdel load, before any fork: a child that has become another user may be unable to
    read the interpreter's directory (under /root, 0700) to import it then."""
    import difflib  # noqa: F401
    import hashlib  # noqa: F401
    import heapq  # noqa: F401
    import secrets  # noqa: F401
    import socket  # noqa: F401
    import sqlite3  # noqa: F401

    import click  # noqa: F401

    import gridsched.cli.gdel  # noqa: F401
    import gridsched.cli.gsub  # noqa: F401
    import gridsched.host.topology  # noqa: F401
    import gridsched.protocol.admin  # noqa: F401
    import gridsched.protocol.arrays  # noqa: F401
    import gridsched.protocol.requests  # noqa: F401
    import gridsched.protocol.reservations  # noqa: F401
    import gridsched.protocol.tree  # noqa: F401
    import gridsched.protocol.view  # noqa: F401


class AsUser:
    """Runs ``gsub`` and ``gdel`` as a given user: the commands themselves when the users can run them, else
    the commands' entry points in a forked child that has taken the user's uid, gid and groups first."""

    def __init__(self, probe: pwd.struct_passwd, cwd: Path) -> None:
        self.fork = False
        self.why = ""
        try:
            r = subprocess.run(
                [str(BIN / "gsub"), "--help"],
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=60,
                preexec_fn=lambda: _demote(probe),
            )
            if r.returncode != 0:
                self.fork, self.why = True, (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        except OSError as e:
            self.fork, self.why = True, f"{BIN / 'gsub'}: {e.strerror or e}"
        if self.fork:
            _preload()

    def describe(self) -> str:
        if self.fork:
            return f"gsub and gdel entry points in a child forked as each user ({self.why})"
        return f"{BIN / 'gsub'} and {BIN / 'gdel'} run as each user"

    def run(
        self, pw: pwd.struct_passwd, prog: str, args: list[str], env: dict[str, str], cwd: Path
    ) -> tuple[int, str, str]:
        """``prog ARGS`` as user ``pw``: its exit status, standard output and standard error."""
        if not self.fork:
            r = subprocess.run(
                [str(BIN / prog), *args],
                env=env,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                preexec_fn=lambda: _demote(pw),
            )
            return r.returncode, r.stdout, r.stderr
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        stops = {signal.SIGINT, signal.SIGTERM}
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # the child must not run the soak's clean-up
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 125
                try:
                    for sig in stops:
                        signal.signal(sig, signal.SIG_DFL)
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
                    null = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(null, 0)
                    os.dup2(out.fileno(), 1)
                    os.dup2(err.fileno(), 2)
                    sys.stdout = open(1, "w", closefd=False)
                    sys.stderr = open(2, "w", closefd=False)
                    _demote(pw)
                    os.chdir(cwd)
                    os.environ.clear()
                    os.environ.update(env)
                    from gridsched.cli import gdel, gsub

                    try:
                        (gsub if prog == "gsub" else gdel).cli.main(args=args, prog_name=prog)
                        code = 0
                    except SystemExit as e:
                        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                except BaseException as e:  # noqa: BLE001 - reported through the exit status and stderr
                    os.write(2, f"soak: {prog} as {pw.pw_name}: {type(e).__name__}: {e}\n".encode())
                finally:
                    try:
                        sys.stdout.flush()
                        sys.stderr.flush()
                    finally:
                        os._exit(code)
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
                _, status = os.waitpid(pid, 0)
            except BaseException:  # interrupted: the child goes too, reaped (no process of the user is left)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise
            out.seek(0)
            err.seek(0)
            return (
                os.waitstatus_to_exitcode(status),
                out.read().decode(errors="replace"),
                err.read().decode(errors="replace"),
            )
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
            out.close()
            err.close()


def read_rows(spool: Path) -> dict[int, dict[str, Any]]:
    from gridsched.protocol.state import StateDB

    if not (spool / "state.db").exists():
        return {}
    db = StateDB(spool / "state.db")
    try:
        return {r["id"]: r for r in db.jobs()}
    finally:
        db.close()


def count_terminal(spool: Path, ids: list[int]) -> int:
    import sqlite3

    if not (spool / "state.db").exists():
        return 0
    con = sqlite3.connect(f"file:{spool / 'state.db'}?mode=ro", uri=True, timeout=10)
    try:
        want = set(ids)  # the soak's jobs (not the tasks of its array)
        got = con.execute(
            "SELECT id FROM jobs WHERE state IN ('COMPLETED','FAILED','CANCELLED','TIMEOUT','OUT_OF_MEMORY')"
        ).fetchall()
        return sum(1 for (jid,) in got if jid in want)
    except sqlite3.Error:
        return -1
    finally:
        con.close()


def array_done(spool: Path, aid: int) -> bool:
    """Whether array ``aid`` has no task left to make and every task made has ended."""
    try:
        con = sqlite3.connect(f"file:{spool / 'state.db'}?mode=ro", uri=True, timeout=5)
        try:
            rest = con.execute("SELECT pending, held FROM arrays WHERE id = ?", (aid,)).fetchone()
            live = con.execute(
                "SELECT COUNT(*) FROM jobs WHERE json_extract(spec, '$.array_id') = ? AND state NOT IN "
                f"({', '.join('?' * len(TERMINAL))})",
                (aid, *TERMINAL),
            ).fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return (rest is None or rest == ("", "")) and live == 0


def check_array(spool: Path, aid: int, n: int, rows: dict[int, dict[str, Any]], ledger: Path, v: Verdict) -> None:
    """Every index of the array once (a job row, or cancelled in its record before it was made), every task
    made ended, none run twice and every run a task made."""
    from gridsched.protocol.arrays import Indices

    seen: dict[int, str] = {}
    for jid, r in rows.items():
        i = r["spec"].get("array_index")
        if i in seen:
            v.duplicated.append(f"array {aid}: task {i} made twice (job {jid})")
        seen[i] = r["state"]
        if r["state"] not in TERMINAL:
            v.lost.append(f"array {aid}: task {i} (job {jid}) still {r['state']}")
    con = sqlite3.connect(f"file:{spool / 'state.db'}?mode=ro", uri=True, timeout=5)
    try:
        got = con.execute("SELECT pending, held, cancelled FROM arrays WHERE id = ?", (aid,)).fetchone()
    finally:
        con.close()
    pending, held, cancelled = (Indices.from_text(t) for t in (got or ("", "", "")))
    if pending or held:
        v.lost.append(f"array {aid}: {len(pending) + len(held)} tasks neither made nor cancelled")
    for i in cancelled:
        if i in seen:
            v.duplicated.append(f"array {aid}: task {i} both made and cancelled before it was made")
        seen[i] = "CANCELLED"
    missing = n - sum(1 for i in seen if 0 <= i < n)
    if missing:
        v.lost.append(f"array {aid}: {missing} indices neither made nor cancelled")
    runs = Counter(int(x) for x in ledger.read_text().split())
    for i, k in runs.items():
        if k > 1:
            v.duplicated.append(f"array {aid}: task {i} ran {k} times")
        if seen.get(i) not in ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"):
            v.mismatched.append(f"array {aid}: task {i} ran but is {seen.get(i)}")
    for i, st in seen.items():
        if st == "COMPLETED" and i not in runs:
            v.mismatched.append(f"array {aid}: task {i} COMPLETED but never ran")
    v.unobserved.append(f"array {aid}: {len(rows)} tasks made, {len(runs)} ran, {len(cancelled)} cancelled unmade")


def read_ledger(path: Path) -> dict[int, dict[int, dict[str, list[int]]]]:
    """``{job: {segment: {"start": [1, ...], "end": [status, ...]}}}`` from the ledger lines."""
    out: dict[int, dict[int, dict[str, list[int]]]] = defaultdict(lambda: defaultdict(lambda: {"start": [], "end": []}))
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 3 and f[0].isdigit() and f[1].isdigit():
            if f[2] == "start":
                out[int(f[0])][int(f[1])]["start"].append(1)
            elif f[2] == "end" and len(f) == 4:
                out[int(f[0])][int(f[1])]["end"].append(int(f[3]))
    return out


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    wrong_owner: list[str] = field(default_factory=list)
    unobserved: list[str] = field(default_factory=list)  # segments killed before their first line


def check_job(
    job: Job, row: dict[str, Any] | None, led: dict[int, dict[str, list[int]]], units_dir: Path, v: Verdict
) -> None:
    jid = job.id
    if row is None:
        v.lost.append(f"job {jid}: no row in the state db")
        return
    state = row["state"]
    if state not in TERMINAL:
        v.lost.append(f"job {jid}: still {state}")
        return
    segs = row["segments"]
    for k, seg in enumerate(segs, 1):
        if "end" not in seg:
            v.mismatched.append(f"job {jid}: segment {k} has no end though the job is {state}")
    # each segment ran at most once, and every run is a recorded segment
    for k, rec in led.items():
        if len(rec["start"]) > 1:
            v.duplicated.append(f"job {jid}: segment {k} started {len(rec['start'])} times")
        if len(rec["end"]) > 1:
            v.duplicated.append(f"job {jid}: segment {k} ended {len(rec['end'])} times")
        if rec["start"] and not 1 <= k <= len(segs):
            v.duplicated.append(f"job {jid}: ran a segment {k} the accounting does not record ({len(segs)} segments)")
    for k, seg in enumerate(segs, 1):
        if not led.get(k, {}).get("start"):
            dur = seg.get("end", seg["start"]) - seg["start"]
            if dur < 0.5 and seg.get("outcome") in ("cancelled", "requeued", "killed before checkpoint", "timeout"):
                v.unobserved.append(f"job {jid}: segment {k} ({seg.get('outcome')} after {dur:.3f} s) left no line")
            else:
                v.mismatched.append(f"job {jid}: segment {k} ({seg.get('outcome')}) is recorded but did not run")
    # the accounting of restarts and time agrees with the segments
    if row["restarts"] != max(0, len(segs) - 1):
        v.mismatched.append(f"job {jid}: {row['restarts']} restarts recorded for {len(segs)} segments")
    for seg in segs[:-1]:
        if seg.get("outcome") not in REQUEUED:
            v.mismatched.append(f"job {jid}: a segment ended {seg.get('outcome')} yet the job ran again")
    ckpts = sum(1 for s in segs if s.get("outcome") == "checkpointed")
    if row["checkpoints"] != ckpts:
        v.mismatched.append(f"job {jid}: {row['checkpoints']} checkpoints recorded, {ckpts} segments checkpointed")
    if row["preemptions"] < sum(1 for s in segs if s.get("outcome") in REQUEUED):
        v.mismatched.append(f"job {jid}: fewer preemptions ({row['preemptions']}) than requeued segments")
    ran = sum(s["end"] - s["start"] for s in segs if "end" in s)
    if abs(row["elapsed"] + row["lost"] - ran) > 0.05:
        v.mismatched.append(
            f"job {jid}: elapsed {row['elapsed']:.2f} + lost {row['lost']:.2f} != {ran:.2f} seconds in its segments"
        )
    for k, seg in enumerate(segs, 1):
        ends = led.get(k, {}).get("end", [])
        if seg.get("outcome") == "lost":
            v.mismatched.append(f"job {jid}: segment {k} lost (its shepherd vanished)")
        if seg.get("outcome") == "checkpointed" and ends != [75]:
            v.mismatched.append(f"job {jid}: segment {k} recorded as checkpointed, ledger says {ends}")
        if seg.get("outcome") == "completed" and ends != [0]:
            v.mismatched.append(f"job {jid}: segment {k} recorded as completed, ledger says {ends}")
    if state in ("COMPLETED", "FAILED") and segs and row["exit_signal"] is None:
        ends = led.get(len(segs), {}).get("end", [])
        if ends and ends[-1] != row["exit_code"]:
            v.mismatched.append(f"job {jid}: exit code {row['exit_code']} recorded, ledger says {ends[-1]}")
    # the final state is the one the job was built to reach (or cancelled, if it was cancelled)
    want = EXPECTED[job.kind]
    if state == "CANCELLED" and job.cancel_after is None:
        v.mismatched.append(f"job {jid} ({job.kind}): CANCELLED, but nobody cancelled it")
    elif state != "CANCELLED" and state != want:
        v.mismatched.append(f"job {jid} ({job.kind}): {state} ({row['reason']}), expected {want}")
    if want == "FAILED" and state == "FAILED" and row["exit_code"] != 3:
        v.mismatched.append(f"job {jid}: exit code {row['exit_code']}, expected 3")
    if state == "COMPLETED" and not segs:
        v.lost.append(f"job {jid}: COMPLETED without ever running")
    # checkpointed work is done once
    if job.kind == "ckpt":
        path = units_dir / str(jid)
        units = path.read_text().split("\n") if path.exists() else []
        done = Counter(int(u.split()[1]) for u in units if u.startswith("unit "))
        repeats = sum(n - 1 for n in done.values() if n > 1)
        excused = any(s.get("outcome") == "killed before checkpoint" for s in segs)
        if repeats and not excused:
            v.duplicated.append(f"job {jid}: {repeats} units of checkpointed work done twice")
        if state == "COMPLETED" and set(done) != set(range(1, job.units + 1)):
            v.mismatched.append(f"job {jid}: completed with units {sorted(done)}, expected 1..{job.units}")


def check_owner(job: Job, row: dict[str, Any] | None, led: dict[int, dict[str, list[int]]], v: Verdict) -> None:
    """The job's row names its submitter, and its output file is the submitter's."""
    pw = job.owner or pwd.getpwuid(os.getuid())
    jid = job.id
    if row is not None and (row["uid"] != pw.pw_uid or row["user"] != pw.pw_name):
        v.wrong_owner.append(
            f"job {jid}: row says {row['user']} (uid {row['uid']}), submitted by {pw.pw_name} (uid {pw.pw_uid})"
        )
    if job.out is None:
        return
    try:
        st = os.stat(job.out, follow_symlinks=False)
    except FileNotFoundError:
        if any(rec["start"] for rec in led.values()):
            v.wrong_owner.append(f"job {jid}: ran, but its output file {job.out} does not exist")
        return
    if (st.st_uid, st.st_gid) != (pw.pw_uid, pw.pw_gid):
        v.wrong_owner.append(
            f"job {jid}: output file {job.out} owned by uid {st.st_uid} gid {st.st_gid}, "
            f"submitted by {pw.pw_name} (uid {pw.pw_uid} gid {pw.pw_gid})"
        )


def leftover_processes(spool: Path) -> list[int]:
    import psutil

    root = str(spool)
    out = []
    for p in psutil.process_iter():
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("GS_SPOOL") == root or env.get("GRIDSCHED_SPOOL") == root:
            out.append(p.pid)
    return out


def machine() -> str:
    from gridsched.host.facts import describe

    return describe()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000, help="number of jobs (default 1000)")
    ap.add_argument("--kills", type=int, default=50, help="times the daemon is killed with SIGKILL (default 50)")
    ap.add_argument("--cores", type=int, default=16, help="declared cores (default 16)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply job lengths by this (default 1)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="give up after this many seconds (default 1800)")
    ap.add_argument(
        "--system",
        action="store_true",
        help="run the daemon in system mode (as root) and the jobs as two throwaway users made for "
        "the run (useradd) and removed at its end",
    )
    ap.add_argument(
        "--array",
        type=int,
        default=100_000,
        help="also submit one array of this many tasks at the start, at most 2 running at once, cancelled once "
        "the jobs have ended: every index must then exist once, and no task have run twice (0: none; "
        "default 100000)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary spool and ledger")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args(argv)
    if a.system:
        if os.geteuid() != 0:
            print("soak: --system needs root (it creates two users and runs a system daemon)", file=sys.stderr)
            return 2
        missing = [c for c in ("useradd", "userdel") if shutil.which(c) is None]
        if missing:
            print(f"soak: --system needs {' and '.join(missing)}, not found on this host", file=sys.stderr)
            return 2

    got: list[int] = [int(signal.SIGINT)]

    def stop(signum: int, frame: Any) -> None:
        got[0] = signum
        raise KeyboardInterrupt  # SIGTERM too unwinds through the clean-up below

    old_term = signal.signal(signal.SIGTERM, stop)
    users = Users()
    try:
        return soak(a, users)
    except KeyboardInterrupt:
        print(f"soak: interrupted ({signal.Signals(got[0]).name})", file=sys.stderr)
        return 128 + got[0]
    finally:
        for problem in users.remove():
            print(f"soak: {problem}", file=sys.stderr)
        signal.signal(signal.SIGTERM, old_term)


def soak(a: argparse.Namespace, users: Users) -> int:
    root = Path(tempfile.mkdtemp(prefix="gs-soak-"))
    try:
        return run_soak(a, users, root)
    except BaseException:
        print(f"soak: kept {root}", file=sys.stderr)
        raise


def run_soak(a: argparse.Namespace, users: Users, root: Path) -> int:
    rng = random.Random(a.seed)
    jobs = build_jobs(a.jobs, a.cores, rng, a.scale)
    # the length of the soak if the cores were always full, to spread submissions and kills over it
    est = sum(j.ncpus * j.run for j in jobs) / a.cores
    span = max(2.0, 0.4 * est)
    for j in jobs:
        j.submit_at = 0.0 if j.index < len(jobs) // 5 else rng.uniform(0.0, span)
    jobs.sort(key=lambda j: (j.submit_at, j.index))
    kill_mean = max(0.5, est / (a.kills + 1)) if a.kills else 0.0

    spool_dir = root / "spool"
    work = root / "work"
    units_dir = root / "units"
    ledger = root / "ledger"
    config_path = root / "gridsched.toml"
    config_path.write_text(CONFIG.format(cores=a.cores, system="system = true\n" if a.system else ""))
    env = {**os.environ, "GRIDSCHED_SPOOL": str(spool_dir), "GRIDSCHED_CONFIG": str(config_path)}
    # where each user submits from: (work dir, job environment)
    homes: dict[int, tuple[Path, dict[str, str]]] = {}
    counter = COUNTER
    as_user: AsUser | None = None

    def job_env(home: Path) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "SOAK_LEDGER": str(ledger),
            "SOAK_UNITS": str(units_dir),
            "LC_ALL": "C",
        }

    if a.system:
        # everything the users need is reachable by them: the tree is 0755, the shared ledger and units
        # directory writable by both, each user's work directory their own
        os.chmod(root, 0o755)
        os.chmod(config_path, 0o644)
        units_dir.mkdir()
        os.chmod(units_dir, 0o1777)
        ledger.touch()
        os.chmod(ledger, 0o666)
        scripts = root / "scripts"
        scripts.mkdir(mode=0o755)
        counter = scripts / COUNTER.name  # the repository may lie where the users cannot read
        shutil.copyfile(COUNTER, counter)
        os.chmod(counter, 0o644)
        owners = users.create(2)
        for pw in owners:
            home = root / f"work-{pw.pw_name}"
            (home / "out").mkdir(parents=True)
            for d in (home, home / "out"):
                os.chown(d, pw.pw_uid, pw.pw_gid)
                os.chmod(d, 0o755)
            homes[pw.pw_uid] = (home, job_env(home))
        for k, j in enumerate(jobs):  # in turn, in the order they are submitted
            j.owner = owners[k % 2]
            j.script = j.script.replace(str(COUNTER), str(counter))
            path = scripts / f"soak-{j.index}.sh"
            path.write_text(j.script)
            os.chmod(path, 0o644)
        as_user = AsUser(owners[0], root)
    else:
        for d in (work, units_dir, work / "out"):
            d.mkdir(parents=True)
        ledger.touch()
        homes[os.getuid()] = (work, job_env(work))

    from gridsched.protocol import config as configmod
    from gridsched.protocol.spool import Spool
    from gridsched.submission.submit import Options, Script
    from gridsched.submission.submit import submit as publish

    cfg = configmod.load(str(config_path))
    spool = Spool(spool_dir)
    if a.system:
        spool.ensure_system()
    else:
        spool.ensure()
    daemon = Daemon(root, env, system=a.system)

    def submit(j: Job) -> int:
        home, jenv = homes[j.owner.pw_uid if j.owner else os.getuid()]
        out = home / "out" / "%x.o%j"
        if j.owner is None or as_user is None:
            # as gsub does: the id is taken by publishing, and the next one tried if a job's own gsub took it
            spec = publish(
                spool,
                cfg,
                Script(j.script, f"soak-{j.index}", f"soak{j.kind}"),
                Options(ncpus=j.ncpus, walltime=j.walltime, checkpoint=j.mode, output=str(out), error=str(out)),
                env=jenv,
                cwd=home,
            )
            jid = int(spec["id"])
        else:
            args = [
                "--spool",
                str(spool_dir),
                "--config",
                str(config_path),
                "-N",
                f"soak{j.kind}",
                "-n",
                str(j.ncpus),
                "-t",
                f"{j.walltime}s",
                "--checkpoint",
                j.mode,
                "-o",
                str(out),
                "-e",
                str(out),
                str(root / "scripts" / f"soak-{j.index}.sh"),
            ]
            code, stdout, stderr = as_user.run(j.owner, "gsub", args, jenv, home)
            if code != 0 or not stdout.strip().isdigit():
                raise SystemExit(
                    f"soak: gsub as {j.owner.pw_name} failed (exit {code}): "
                    f"{(stderr.strip() or stdout.strip())[-2000:]}"
                )
            jid = int(stdout.strip())
        j.out = home / "out" / f"soak{j.kind}.o{jid}"
        return jid

    def cancel(due: list[Job]) -> None:
        if as_user is None:
            subprocess.run(
                [str(BIN / "gdel"), *(str(j.id) for j in due)],
                env=env,
                cwd=work,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
            return
        for pw in {j.owner.pw_uid: j.owner for j in due if j.owner}.values():  # each job by its owner
            home, jenv = homes[pw.pw_uid]
            ids = [str(j.id) for j in due if j.owner and j.owner.pw_uid == pw.pw_uid]
            code, stdout, stderr = as_user.run(
                pw, "gdel", ["--spool", str(spool_dir), "--config", str(config_path), *ids], jenv, home
            )
            if code not in (0, 1):  # 1: some had ended already
                raise SystemExit(
                    f"soak: gdel {' '.join(ids)} as {pw.pw_name} failed (exit {code}): "
                    f"{(stderr.strip() or stdout.strip())[-2000:]}"
                )
            # a refusal other than "already ENDED" (the job ended first): gdel did not take the job as its owner's
            for line in stderr.splitlines():
                if "error" in line and ": already " not in line:
                    refused.append(f"gdel as {pw.pw_name}: {line.strip()}")

    array_ledger = root / "array-ledger"
    array_id = 0

    def submit_array() -> int:
        """One array of ``a.array`` tasks, each appending its index to the array's ledger."""
        array_ledger.touch()
        os.chmod(array_ledger, 0o666)
        script = root / "array.sh"
        script.write_text(f'#!/bin/sh\necho "$GS_ARRAY_TASK_ID" >> {array_ledger}\n')
        os.chmod(script, 0o755)
        args = ["--spool", str(spool_dir), "--config", str(config_path), "-N", "soakarray", "-t", "60s"]
        home, jenv = homes[jobs[0].owner.pw_uid if jobs[0].owner else os.getuid()]
        out = str(home / "out" / "soakarray.o%A_%a")
        args += ["--array", f"0-{a.array - 1}%2", "-o", out, "-e", out, str(script)]
        if as_user is None:
            out = subprocess.run([str(BIN / "gsub"), *args], env=env, cwd=work, capture_output=True, text=True)
            code, stdout, stderr = out.returncode, out.stdout, out.stderr
        else:
            code, stdout, stderr = as_user.run(jobs[0].owner, "gsub", args, jenv, home)  # type: ignore[arg-type]
        if code != 0 or not stdout.strip().isdigit():
            raise SystemExit(f"soak: gsub --array failed (exit {code}): {(stderr.strip() or stdout.strip())[-2000:]}")
        return int(stdout.strip())

    def cancel_array() -> None:
        if as_user is None:
            subprocess.run([str(BIN / "gdel"), str(array_id)], env=env, cwd=work, capture_output=True, timeout=60)
        else:
            home, jenv = homes[jobs[0].owner.pw_uid]  # type: ignore[union-attr]
            args = ["--spool", str(spool_dir), "--config", str(config_path), str(array_id)]
            as_user.run(jobs[0].owner, "gdel", args, jenv, home)  # type: ignore[arg-type]

    refused: list[str] = []  # gdel refusals other than of a job that had ended
    t0 = time.monotonic()
    kills = 0
    cancels_sent = 0
    timed_out = False
    wall = 0.0
    rows: dict[int, dict[str, Any]] = {}
    left: list[int] = []
    try:
        daemon.start()
        if a.array:
            array_id = submit_array()
        array_cancelled = False
        pending = list(jobs)
        cancels: list[tuple[float, Job]] = []
        next_kill = t0 + rng.uniform(0.3, 2 * kill_mean) if a.kills else float("inf")
        restart_at: float | None = None
        last_check = 0.0
        submitted: list[int] = []
        while True:
            now = time.monotonic()
            if now - t0 > a.timeout:
                timed_out = True
                break
            el = now - t0
            while pending and pending[0].submit_at <= el:
                j = pending.pop(0)
                j.id = submit(j)
                j.submitted = now
                submitted.append(j.id)
                if j.cancel_after is not None:
                    cancels.append((now + j.cancel_after, j))
            now = time.monotonic()
            due = [j for t, j in cancels if t <= now]
            if due:
                cancels = [(t, j) for t, j in cancels if t > now]
                cancel(due)
                cancels_sent += len(due)
            if restart_at is not None and now >= restart_at:
                daemon.start()
                restart_at = None
            elif restart_at is None and kills < a.kills and now >= next_kill:
                daemon.kill9()
                kills += 1
                restart_at = now + rng.uniform(0.0, 1.5)
                next_kill = now + rng.uniform(0.3, 2 * kill_mean)
            elif restart_at is None:
                daemon.check()
            if now - last_check >= 1.0:
                last_check = now
                if not pending and not cancels and count_terminal(spool_dir, submitted) >= len(jobs):
                    if array_id and not array_cancelled and restart_at is None:
                        cancel_array()
                        array_cancelled = True
                    elif restart_at is None and (not array_id or array_done(spool_dir, array_id)):
                        break
            time.sleep(0.02)
        wall = time.monotonic() - t0
        daemon.stop()
        rows = read_rows(spool_dir)
        left = leftover_processes(spool_dir)
        if timed_out:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        daemon.stop()
        for pid in leftover_processes(spool_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    cleanup = users.remove()

    led = read_ledger(ledger)
    v = Verdict()
    for j in jobs:
        if j.id == 0:
            v.lost.append(f"job #{j.index}: never submitted (the soak ran out of time)")
            continue
        check_job(j, rows.get(j.id), led.get(j.id, {}), units_dir, v)
        check_owner(j, rows.get(j.id), led.get(j.id, {}), v)
    v.wrong_owner += refused
    known = {j.id for j in jobs}
    array_rows = {jid: r for jid, r in rows.items() if (r.get("spec") or {}).get("array_id") == array_id}
    if array_id:
        check_array(spool_dir, array_id, a.array, array_rows, array_ledger, v)
    for jid in rows:
        if jid not in known and jid not in array_rows:
            v.mismatched.append(f"job {jid}: in the state db but never submitted")
    for jid in led:
        if jid not in known:
            v.duplicated.append(f"job {jid}: in the ledger but never submitted")
    if left and not timed_out:
        v.mismatched.append(f"{len(left)} job processes still alive after every job ended: {left[:10]}")

    own = [rows[j.id] for j in jobs if j.id in rows]  # the soak's jobs (the array's tasks are counted apart)
    states = Counter(r["state"] for r in own)
    segs = [s for r in own for s in r["segments"]]
    array_states = Counter(r["state"] for r in array_rows.values())
    outcomes = Counter(s.get("outcome", "open") for s in segs)
    log = (spool_dir / "gschedd.log").read_text(errors="replace") if (spool_dir / "gschedd.log").exists() else ""
    undone = adopted = collected = 0
    for line in log.splitlines():
        if "recovered:" in line:
            f = line.split("recovered:", 1)[1].replace(",", " ").split()
            adopted += int(f[0])
            collected += int(f[4])
            undone += int(f[7])
    by_user = Counter(j.owner.pw_name if j.owner else pwd.getpwuid(os.getuid()).pw_name for j in jobs)
    failed = bool(v.lost or v.duplicated or v.mismatched or v.wrong_owner or timed_out)
    result = {
        "machine": machine(),
        "mode": "system" if a.system else "personal",
        "users": dict(by_user),
        "submitted_with": as_user.describe() if as_user else "the spool API gsub uses, in the soak's process",
        "jobs": len(jobs),
        "kinds": dict(Counter(j.kind for j in jobs)),
        "cores": a.cores,
        "seed": a.seed,
        "kills": kills,
        "daemon_starts": daemon.starts,
        "unexpected_daemon_exits": daemon.unexpected_exits,
        "cancels_sent": cancels_sent,
        "wall_seconds": round(wall, 1),
        "timed_out": timed_out,
        "states": dict(states),
        "segments": len(segs),
        "segment_outcomes": dict(outcomes),
        "preemptions": sum(r["preemptions"] for r in own),
        "checkpoints": sum(r["checkpoints"] for r in own),
        "array": {"id": array_id, "tasks": a.array, "made": dict(array_states)} if array_id else None,
        "recovered": {"adopted": adopted, "collected": collected, "starts_undone": undone},
        "quarantined": len(list((spool_dir / "quarantine").glob("*.why"))),
        "lost": len(v.lost),
        "duplicated": len(v.duplicated),
        "mismatched": len(v.mismatched),
        "wrong_owner": len(v.wrong_owner),
        "unobserved_segments": len(v.unobserved),
        "problems": (v.lost + v.duplicated + v.mismatched + v.wrong_owner)[:40],
        "notes": v.unobserved[:10],
        "cleanup": cleanup,
    }
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"machine: {result['machine']}")
        print(
            f"mode: {result['mode']}, jobs submitted by {', '.join(f'{u} {n}' for u, n in sorted(by_user.items()))}"
            f" ({result['submitted_with']})"
        )
        print(
            f"jobs: {len(jobs)} ({', '.join(f'{k} {n}' for k, n in sorted(result['kinds'].items()))}) "
            f"on {a.cores} declared cores, seed {a.seed}"
        )
        print(
            f"daemon killed: {kills} times (SIGKILL), started {daemon.starts} times, "
            f"exited on its own {daemon.unexpected_exits} times"
        )
        print(f"wall time: {wall:.1f} s{' (TIMED OUT)' if timed_out else ''}")
        print(f"states: {', '.join(f'{k} {n}' for k, n in sorted(states.items()))}")
        if array_id:
            made = ", ".join(f"{k} {n}" for k, n in sorted(array_states.items()))
            print(f"array {array_id} of {a.array} tasks: made {made or 'none'}; the others cancelled before made")
        print(f"segments: {len(segs)} ({', '.join(f'{k} {n}' for k, n in sorted(outcomes.items()))})")
        print(f"preemptions: {result['preemptions']}, checkpoints: {result['checkpoints']}, gdel'd: {cancels_sent}")
        print(f"recovery: {adopted} running jobs adopted, {collected} endings collected, {undone} starts undone")
        print(f"unobserved segments (killed before their first line): {len(v.unobserved)}")
        for p in result["problems"]:
            print(f"  problem: {p}")
        for p in cleanup:
            print(f"  clean-up: {p}")
        print(f"lost: {len(v.lost)}")
        print(f"duplicated: {len(v.duplicated)}")
        print(f"mismatched: {len(v.mismatched)}")
        print(f"wrong_owner: {len(v.wrong_owner)}")
    if a.keep or failed:
        print(f"soak: kept {root}", file=sys.stderr)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
