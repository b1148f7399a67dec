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

It prints the counts (target zero each) and exits 1 if any is not zero, or if
the run did not finish within ``--timeout``.  Run with the Python of the
environment gridsched is installed in::

    python scripts/soak.py                          # 1000 jobs, 50 kills
    python scripts/soak.py --jobs 100 --kills 10    # the short form
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
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
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
EXPECTED = {"short": "COMPLETED", "wide": "COMPLETED", "ckpt": "COMPLETED", "requeue": "COMPLETED",
            "timeout": "TIMEOUT", "fail": "FAILED"}
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
"""

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


def build_jobs(n: int, cores: int, rng: random.Random, scale: float) -> list[Job]:
    kinds = ["short", "ckpt", "requeue", "wide", "timeout", "fail"]
    weights = [40, 20, 10, 13, 7, 5]
    jobs = []
    for i in range(n):
        kind = rng.choices(kinds, weights)[0]
        if kind in ("short", "wide"):
            t = round(rng.uniform(0.3, 3.0) * scale, 2)
            ncpus = rng.randint(1, 4) if kind == "short" else rng.randint(cores // 2, cores)
            script = f"#!/bin/sh\n{START}sleep {t}\necho \"$GS_JOBID $s end 0\" >> \"$SOAK_LEDGER\"\n"
            job = Job(i, kind, ncpus, int(t) + 3, "none", script, t)
        elif kind == "requeue":
            t = round(rng.uniform(2.0, 6.0) * scale, 2)
            script = f"#!/bin/sh\n{START}sleep {t}\necho \"$GS_JOBID $s end 0\" >> \"$SOAK_LEDGER\"\n"
            job = Job(i, kind, rng.randint(2, 6), 20, "requeue", script, t)
        elif kind == "ckpt":
            units = max(2, int(rng.randint(5, 40) * scale))
            # the wrapper survives the checkpoint signal (a caught signal is reset at exec,
            # so the counter below still gets it) and logs the counter's exit status
            script = (
                "#!/bin/sh\ntrap ':' USR1\n" + START
                + f'LEDGER="$SOAK_UNITS/$GS_JOBID" UNIT_SECONDS={UNIT_SECONDS} sh {COUNTER} {units}\n'
                + 'rc=$?\necho "$GS_JOBID $s end $rc" >> "$SOAK_LEDGER"\nexit $rc\n'
            )
            job = Job(i, kind, rng.randint(1, 4), 20, "signal", script, units * UNIT_SECONDS, units=units)
        elif kind == "timeout":
            trap = "trap '' TERM\n" if rng.random() < 0.5 else ""
            script = f"#!/bin/sh\n{trap}{START}sleep 60\necho \"$GS_JOBID $s end 0\" >> \"$SOAK_LEDGER\"\n"
            job = Job(i, kind, rng.randint(1, 2), 2, "none", script, 3.0)
        else:
            script = f"#!/bin/sh\n{START}sleep 0.2\necho \"$GS_JOBID $s end 3\" >> \"$SOAK_LEDGER\"\nexit 3\n"
            job = Job(i, kind, 1, 10, "none", script, 0.2)
        if rng.random() < 0.05:
            job.cancel_after = rng.uniform(0.0, 20.0)
        jobs.append(job)
    return jobs


class Daemon:
    """The daemon under test, started and killed as a separate process."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.unexpected_exits = 0

    def start(self) -> None:
        with open(self.root / "daemon.out", "ab") as out:
            self.proc = subprocess.Popen([str(BIN / "gschedd"), "run"], env=self.env, stdout=out, stderr=out,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        pidfile = self.root / "spool" / "gschedd.pid"
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"soak: the daemon exited with {self.proc.returncode} at start; "
                                 f"see {self.root / 'spool' / 'gschedd.log'}")
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


def read_rows(spool: Path) -> dict[int, dict[str, Any]]:
    from gridsched.state import StateDB

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
        row = con.execute(
            "SELECT COUNT(*) FROM jobs WHERE state IN ('COMPLETED','FAILED','CANCELLED','TIMEOUT')"
        ).fetchone()
        return int(row[0])
    except sqlite3.Error:
        return -1
    finally:
        con.close()


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
    unobserved: list[str] = field(default_factory=list)  # segments killed before their first line


def check_job(job: Job, row: dict[str, Any] | None, led: dict[int, dict[str, list[int]]], units_dir: Path,
              v: Verdict) -> None:
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
        v.mismatched.append(f"job {jid}: elapsed {row['elapsed']:.2f} + lost {row['lost']:.2f} != {ran:.2f} "
                            "seconds in its segments")
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
    from gridsched.host import describe

    return describe()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000, help="number of jobs (default 1000)")
    ap.add_argument("--kills", type=int, default=50, help="times the daemon is killed with SIGKILL (default 50)")
    ap.add_argument("--cores", type=int, default=16, help="declared cores (default 16)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply job lengths by this (default 1)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="give up after this many seconds (default 1800)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary spool and ledger")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args(argv)

    rng = random.Random(a.seed)
    jobs = build_jobs(a.jobs, a.cores, rng, a.scale)
    # the length of the soak if the cores were always full, to spread submissions and kills over it
    est = sum(j.ncpus * j.run for j in jobs) / a.cores
    span = max(2.0, 0.4 * est)
    for j in jobs:
        j.submit_at = 0.0 if j.index < len(jobs) // 5 else rng.uniform(0.0, span)
    jobs.sort(key=lambda j: (j.submit_at, j.index))
    kill_mean = max(0.5, est / (a.kills + 1)) if a.kills else 0.0

    root = Path(tempfile.mkdtemp(prefix="gs-soak-"))
    spool_dir = root / "spool"
    work = root / "work"
    units_dir = root / "units"
    for d in (work, units_dir, work / "out"):
        d.mkdir(parents=True)
    ledger = root / "ledger"
    ledger.touch()
    (root / "gridsched.toml").write_text(CONFIG.format(cores=a.cores))
    env = {**os.environ, "GRIDSCHED_SPOOL": str(spool_dir), "GRIDSCHED_CONFIG": str(root / "gridsched.toml")}
    job_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "SOAK_LEDGER": str(ledger),
               "SOAK_UNITS": str(units_dir), "LC_ALL": "C"}

    from gridsched import config as configmod
    from gridsched.spool import Spool
    from gridsched.submit import Options, Script, build_spec

    cfg = configmod.load(str(root / "gridsched.toml"))
    spool = Spool(spool_dir)
    spool.ensure()
    daemon = Daemon(root, env)
    t0 = time.monotonic()
    kills = 0
    cancels_sent = 0
    timed_out = False
    try:
        daemon.start()
        pending = list(jobs)
        cancels: list[tuple[float, int]] = []
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
                spec = build_spec(spool, cfg, Script(j.script, f"soak-{j.index}", f"soak{j.kind}"),
                                  Options(ncpus=j.ncpus, walltime=j.walltime, checkpoint=j.mode,
                                          output=str(work / "out" / "%x.o%j"), error=str(work / "out" / "%x.o%j")),
                                  env=job_env, cwd=work)
                spool.submit(spec)
                j.id = spec["id"]
                j.submitted = now
                submitted.append(j.id)
                if j.cancel_after is not None:
                    cancels.append((now + j.cancel_after, j.id))
            due = [jid for t, jid in cancels if t <= now]
            if due:
                cancels = [(t, jid) for t, jid in cancels if t > now]
                subprocess.run([str(BIN / "gdel"), *map(str, due)], env=env, cwd=work,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
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
                    if restart_at is None:
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

    led = read_ledger(ledger)
    v = Verdict()
    for j in jobs:
        if j.id == 0:
            v.lost.append(f"job #{j.index}: never submitted (the soak ran out of time)")
            continue
        check_job(j, rows.get(j.id), led.get(j.id, {}), units_dir, v)
    known = {j.id for j in jobs}
    for jid in rows:
        if jid not in known:
            v.mismatched.append(f"job {jid}: in the state db but never submitted")
    for jid in led:
        if jid not in known:
            v.duplicated.append(f"job {jid}: in the ledger but never submitted")
    if left and not timed_out:
        v.mismatched.append(f"{len(left)} job processes still alive after every job ended: {left[:10]}")

    states = Counter(r["state"] for r in rows.values())
    segs = [s for r in rows.values() for s in r["segments"]]
    outcomes = Counter(s.get("outcome", "open") for s in segs)
    log = (spool_dir / "gschedd.log").read_text(errors="replace") if (spool_dir / "gschedd.log").exists() else ""
    undone = adopted = collected = 0
    for line in log.splitlines():
        if "recovered:" in line:
            f = line.split("recovered:", 1)[1].replace(",", " ").split()
            adopted += int(f[0])
            collected += int(f[4])
            undone += int(f[7])
    result = {
        "machine": machine(),
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
        "preemptions": sum(r["preemptions"] for r in rows.values()),
        "checkpoints": sum(r["checkpoints"] for r in rows.values()),
        "recovered": {"adopted": adopted, "collected": collected, "starts_undone": undone},
        "quarantined": len(list((spool_dir / "quarantine").glob("*.why"))),
        "lost": len(v.lost),
        "duplicated": len(v.duplicated),
        "mismatched": len(v.mismatched),
        "unobserved_segments": len(v.unobserved),
        "problems": (v.lost + v.duplicated + v.mismatched)[:40],
        "notes": v.unobserved[:10],
    }
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"machine: {result['machine']}")
        print(f"jobs: {len(jobs)} ({', '.join(f'{k} {n}' for k, n in sorted(result['kinds'].items()))}) "
              f"on {a.cores} declared cores, seed {a.seed}")
        print(f"daemon killed: {kills} times (SIGKILL), started {daemon.starts} times, "
              f"exited on its own {daemon.unexpected_exits} times")
        print(f"wall time: {wall:.1f} s{' (TIMED OUT)' if timed_out else ''}")
        print(f"states: {', '.join(f'{k} {n}' for k, n in sorted(states.items()))}")
        print(f"segments: {len(segs)} ({', '.join(f'{k} {n}' for k, n in sorted(outcomes.items()))})")
        print(f"preemptions: {result['preemptions']}, checkpoints: {result['checkpoints']}, "
              f"gdel'd: {cancels_sent}")
        print(f"recovery: {adopted} running jobs adopted, {collected} endings collected, {undone} starts undone")
        print(f"unobserved segments (killed before their first line): {len(v.unobserved)}")
        for p in result["problems"]:
            print(f"  problem: {p}")
        print(f"lost: {len(v.lost)}")
        print(f"duplicated: {len(v.duplicated)}")
        print(f"mismatched: {len(v.mismatched)}")
    if a.keep or v.lost or v.duplicated or v.mismatched or timed_out:
        print(f"soak: kept {root}", file=sys.stderr)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if (v.lost or v.duplicated or v.mismatched or timed_out) else 0


if __name__ == "__main__":
    sys.exit(main())
