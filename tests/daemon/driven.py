"""Scheduling scenarios in the daemon, in process: the stub executor and a clock the test drives.

:class:`Driven` wraps a stub daemon (the ``stub_daemon`` fixture): jobs are submitted as the commands
write them, each with the seconds of work it really does (``work``); :meth:`Driven.run_to` turns the
loop every ``step`` seconds of the driven clock and plays the jobs' part: a job ends when its work is
done, saves its state and exits 75 when asked to checkpoint (``SIGUSR1``) and later resumes from it,
stops and continues on ``SIGSTOP``/``SIGCONT``, and dies of ``SIGTERM``/``SIGKILL``.  What the daemon
decides (starts, preemptions, ends, the records ``gstat`` shows) is the real daemon's; only the processes
and the clock are stood in for.  The driven clock starts at the wall clock's time and only goes forward.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import time
from dataclasses import dataclass
from typing import Any

from gridsched.daemon.loop import Daemon
from gridsched.daemon.spawn import Stub
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState
from tests.fuzz.test_requests import valid_job

EXIT_CHECKPOINTED = 75
# Commands whose click command is not ``cli`` in ``gridsched.cli.<name>``.
COMMANDS = {
    "gwait": "gridsched.cli.gwait:gwait_cli",
    "gyield": "gridsched.cli.gwait:gyield_cli",
    "gresume": "gridsched.cli.gwait:gresume_cli",
    "gresume-tree": "gridsched.cli.gwait:gresume_tree_cli",
}


@dataclass
class Work:
    """What a stand-in job does: ``total`` seconds of work (None: until stopped), its checkpoint mode."""

    total: float | None
    mode: str
    done: float = 0.0  # work saved (signal mode: at its checkpoints) or done before a stop (suspend)
    since: float | None = None  # when the running segment began its work
    segment: int | None = None
    ending: bool = False  # its exit is recorded; the daemon has not collected it yet


class Shepherds(Stub):
    """The stub executor whose shepherds outlive a daemon, as real ones do: a restarted daemon finds the jobs
    still running again, and tells a segment that ended from a later one of the same job."""

    segments: dict[int, int]  # shepherd pid -> segment

    def spawn(self, spec: Any) -> tuple[int, int | None]:
        pid, ticks = super().spawn(spec)
        self.segments[pid] = spec.segment
        return pid, ticks

    def alive(self, pid: int, ticks: int | None) -> bool:
        return pid in self.pids and (self.pids[pid], self.segments.get(pid)) not in self.exits

    def pid_info(self, job_dir: Any, segment: int) -> dict[str, Any] | None:
        jid = int(str(job_dir).rstrip("/").rsplit("/", 1)[-1])
        for pid, j in self.pids.items():
            if j == jid and self.segments.get(pid) == segment and self.alive(pid, 0):
                return {"pid": pid, "ticks": 0}
        return None


class Driven:
    """A stub daemon, the stand-in jobs it runs, and the driven clock (``now``, from ``t0``)."""

    def __init__(self, d: Daemon, t0: float | None = None) -> None:
        if type(d.ex) is Stub and not d.ex.started:  # the fixture's stub, nothing started yet: make it keep
            d.ex.__class__ = Shepherds  # its shepherds across a restart
            d.ex.segments = {}  # type: ignore[attr-defined]
        self.d = d
        self.t0 = time.time() if t0 is None else t0
        self.now = self.t0
        self.work: dict[int, Work] = {}
        self.seen_starts = 0
        self.seen_signals = 0
        self.default_work: float | None = 0.0  # the work of a job not submitted through submit or gsub

    # -- requests, as the commands write them ------------------------------------------------
    def submit(self, work: float | None = None, checkpoint: str = "none", turn: bool = True, **fields: Any) -> int:
        """Submit a job that does ``work`` seconds of work (None: runs until stopped); take it in at once
        (``turn``), or leave the request for a later turn (as while the daemon is down)."""
        nid = self.d.spool.next_id()
        job = {**valid_job(nid), "submit_time": self.now, "checkpoint": checkpoint, **fields}
        (self.d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": job}))
        self.work[nid] = Work(work, checkpoint)
        if turn:
            self.turn()
        return nid

    def request(self, kind: str, **fields: Any) -> str:
        name = f"{kind}-{time.time_ns()}-1.json"
        (self.d.spool.incoming / name).write_text(json.dumps({"type": kind, **fields}))
        self.turn()
        return name

    def resv_create(self, ncpus: int, duration: int, **fields: Any) -> int:
        """Create a reservation as ``gresv create`` writes it (flexible unless ``start`` is given)."""
        rid = self.d.spool.next_id()
        me = pwd.getpwuid(os.getuid())
        resv = {"id": rid, "uid": me.pw_uid, "user": me.pw_name, "ncpus": ncpus, "duration": duration}
        resv.update({"create_time": self.now, "start": None, "kill": True, **fields})
        (self.d.spool.incoming / rq.id_name(rid)).write_text(json.dumps({"type": "resv_create", "resv": resv}))
        self.turn()
        return rid

    def resv(self, rid: int) -> dict[str, Any]:
        """The reservation's record, with the jobs bound to it (as ``gresv show --json``)."""
        self.d.table.commit()
        (row,) = self.d.db.reservations([rid])
        bound = [j["id"] for j in self.d.db.jobs() if (j.get("spec") or {}).get("reservation") == rid]
        return {**row, "jobs": bound}

    def finish(self, jid: int, exit_code: int = 0) -> None:
        """Let a running job end now with ``exit_code`` (as one that waited for a file the test makes)."""
        w = self.work[jid]
        assert w.since is not None and not w.ending, f"job {jid} is not running"
        self._exit(jid, w, exit_code=exit_code)
        self.turn()

    def restart(self, stub_daemon: Any, crash: bool = False) -> None:
        """Stop the daemon (``crash``: kill it, as ``kill -9``) and start it again on the same spool
        (``stub_daemon``: the fixture); the jobs' shepherds go on."""
        self.d = stub_daemon.restart(self.d, crash=crash)
        self.turn()

    def gsub(self, *args: str, work: float | None = 0.0, env: dict[str, str] | None = None) -> int:
        """Submit with ``gsub ARGS`` (in process; ``env``: more variables, as for :meth:`command`); the job does
        ``work`` seconds of work.  Its id."""
        r = self.command("gsub", *args, turn=False, env=env)
        jid = int(r.stdout.strip().splitlines()[-1])
        self.work[jid] = Work(work, "none")
        self.turn()
        return jid

    def command(
        self, prog: str, *args: str, check: bool = True, turn: bool = True, env: dict[str, str] | None = None
    ) -> Any:
        """Run a command (``galter``, ``gstat``, ...) in process against this daemon's spool, then take a turn
        (the daemon serves what it wrote) unless ``turn`` is false.  ``env``: more variables (``GS_JOBID``
        and ``GS_SPOOL`` for a command run inside a job).  The click result: ``exit_code``, ``stdout``,
        ``stderr``."""
        import importlib

        from click.testing import CliRunner

        module, _, attr = COMMANDS.get(prog, f"gridsched.cli.{prog}:cli").partition(":")
        cli = getattr(importlib.import_module(module), attr)
        env = {"GRIDSCHED_SPOOL": str(self.d.spool.root), "GRIDSCHED_CONFIG": str(self.d.config_path), **(env or {})}
        r = CliRunner().invoke(cli, list(args), env=env, prog_name=prog)
        if check and r.exit_code != 0:
            raise AssertionError(f"{prog} {' '.join(args)} exited {r.exit_code}: {r.stderr}")
        if turn:
            self.turn()
        return r

    def refusal(self, name: str) -> str | None:
        why = self.d.spool.quarantine / (name + ".why")
        return why.read_text() if why.exists() else None

    # -- the clock -----------------------------------------------------------------------------
    def at(self, offset: float) -> float:
        return self.t0 + offset

    def turn(self) -> None:
        """One turn of the loop at the driven clock's time, requests taken in; then the jobs play their part."""
        self.d.turn(self.now, scan=True)
        self._play()
        if self.d.reload_requested:  # as the loop does after its turns: a reload asked for (gctl, SIGHUP)
            self.d.reload()
        if self.d.table.forecast_dirty:  # as the loop does after its turns: predicted starts and reasons
            self.d.forecast(self.now)
            self.d.table.commit()

    def run_to(self, offset: float, step: float = 0.25) -> None:
        """Advance the clock to ``t0 + offset``, a turn every ``step`` seconds (and at each job's end)."""
        end = self.at(offset)
        while self.now < end:
            nxt = min(end, self.now + step)
            due = [w.since + w.total - w.done for w in self._running() if w.total is not None and w.since is not None]
            soon = [t for t in due if self.now < t < nxt]
            self.now = min([nxt, *soon])
            self._finish_work()
            self.turn()

    def run_until(self, cond: Any, limit: float, step: float = 0.25) -> None:
        """Advance the clock until ``cond()`` holds; fail after ``limit`` seconds from ``t0``."""
        while not cond():
            if self.now >= self.at(limit):
                raise AssertionError(f"not so by {limit} s of the driven clock")
            self.run_to(self.now - self.t0 + step, step)

    # -- the stand-in jobs ----------------------------------------------------------------------
    def _running(self) -> list[Work]:
        return [w for w in self.work.values() if w.since is not None and not w.ending]

    def _exit(self, jid: int, w: Work, **result: Any) -> None:
        assert w.segment is not None
        if w.since is not None and w.mode != "signal":
            w.done += self.now - w.since
        w.since = None
        w.ending = True
        self.d.ex.end(jid, w.segment, end=self.now, **result)

    def _finish_work(self) -> None:
        for jid, w in self.work.items():
            if w.since is None or w.ending or w.total is None:
                continue
            left = w.total - w.done - (self.now - w.since)
            if left <= 1e-9:
                if w.mode == "signal":
                    w.done = w.total
                self._exit(jid, w, exit_code=0)

    def _play(self) -> None:
        """Answer what the daemon did in the last turn, then let it collect the exits."""
        for _ in range(20):
            changed = False
            ex = self.d.ex
            for spec in ex.started[self.seen_starts :]:
                w = self.work.setdefault(spec.job_id, Work(self.default_work, "none"))
                w.segment, w.since, w.ending = spec.segment, self.now, False
                w.mode = self.d.table.jobs[spec.job_id].checkpoint
                if w.mode != "signal":
                    w.done = 0.0  # started again, it begins from the start (signal mode: from its checkpoint)
                changed = True
            self.seen_starts = len(ex.started)
            for jid, sig in ex.signals[self.seen_signals :]:
                w = self.work.get(jid)
                if w is None or w.ending:
                    continue
                if sig == signal.SIGSTOP and w.since is not None:
                    w.done += self.now - w.since
                    w.since = None
                elif sig == signal.SIGCONT and w.since is None:
                    w.since = self.now
                elif sig == signal.SIGUSR1 and w.mode == "signal" and w.since is not None:
                    w.done += self.now - w.since  # the work so far is saved
                    self._exit(jid, w, exit_code=EXIT_CHECKPOINTED)
                elif sig in (signal.SIGTERM, signal.SIGKILL):
                    self._exit(jid, w, signal=sig)
                changed = True
            self.seen_signals = len(ex.signals)
            self._finish_work()
            for jid, w in self.work.items():
                rec = self.d.table.jobs.get(jid)
                if w.ending and rec is not None and rec.shepherd is not None:
                    self.d.job_ended(jid)
                    changed = True
                if w.ending and (rec is None or rec.shepherd is None):
                    w.ending = False
            if not changed:
                return
            self.d.turn(self.now)

    # -- what gstat shows ----------------------------------------------------------------------
    def job(self, jid: int) -> dict[str, Any]:
        self.d.table.commit()
        row = self.d.db.job(jid)
        assert row is not None, f"job {jid} is not in the table"
        return row

    def state(self, jid: int) -> str:
        rec = self.d.table.jobs.get(jid)
        return rec.state.value if rec is not None else self.job(jid)["state"]

    def running(self, jid: int) -> bool:
        return self.state(jid) == JobState.RUNNING.value
