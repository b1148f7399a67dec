"""Mail about jobs' events (gsub --mail-type, as sbatch's), sent by the daemon with the host's sendmail.

Nothing is sent unless the admin names a sendmail program (``[mail] sendmail``).
The events: BEGIN (a job started), END (it ended, with its state and exit
code), FAIL (it ended FAILED, TIMEOUT, OUT_OF_MEMORY: sent instead of END, as
Slurm does), REQUEUE (it went back to the queue), TIME_LIMIT_50/80/90 (it used
that part of its walltime) and TIME_LIMIT (it reached it).  An array's tasks
share one mail, BEGIN as its first task starts and END or FAIL as its last
ends, unless the job asked for ARRAY_TASKS.

The message is made here, from fixed headers: To (the recipients, checked at
the boundary, :func:`gridsched.protocol.requests.parse_mail_user`), From and Subject,
whose job name has every non-printable character removed, so a name cannot add
a header.  sendmail runs as the job's owner (never as root for another user's
job), as ``SENDMAIL -oi -- RECIPIENT...`` (never ``-t``), in a session of its
own, with the message on its standard input (small enough for the pipe) and
``[mail] timeout`` to finish: the daemon never waits for it; :meth:`Mailer.poll`
reaps it, kills it when it is late, and logs a failure in one line.
"""

from __future__ import annotations

import logging
import os
import pwd
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridsched.protocol.arrays import Indices
from gridsched.protocol.jobs import JobState
from gridsched.protocol.requests import parse_mail_user, safe

if TYPE_CHECKING:
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.config import Config
    from gridsched.protocol.state import StateDB

log = logging.getLogger("gschedd")

LIMITS = ((50, "TIME_LIMIT_50"), (80, "TIME_LIMIT_80"), (90, "TIME_LIMIT_90"))
MAX_MESSAGE = 16 << 10  # bytes: well under a pipe's buffer, so writing it never blocks
OK_STATES = (JobState.COMPLETED, JobState.CANCELLED)
MAX_CHILDREN = 64  # sendmails at once; more mail is dropped (and logged) until some finish


@dataclass(slots=True)
class Wants:
    """What a job asked for: its events, recipients and name, read once from its spec."""

    events: frozenset[str]
    to: tuple[str, ...]
    name: str
    array_id: int | None


@dataclass(slots=True)
class _Child:
    proc: subprocess.Popen[bytes]
    job: int
    what: str
    deadline: float
    err: Any


def clean(s: str, limit: int = 200) -> str:
    """``s`` for a header: printable characters only (no newline, no control character), at most ``limit``."""
    out = "".join(c for c in s if c.isprintable())
    return out[:limit]


def _hms(secs: float) -> str:
    secs = max(0, int(secs))
    d, rest = divmod(secs, 86400)
    h, rest = divmod(rest, 3600)
    return f"{d}-{h:02d}:{rest // 60:02d}:{rest % 60:02d}" if d else f"{h:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _began_before(other: Rec, rec: Rec) -> bool:
    """Whether another task of ``rec``'s array started before it (already launched, or an earlier start)."""
    if other.id == rec.id or other.first_start is None:
        return False
    return other.shepherd is not None or (rec.first_start is not None and other.first_start < rec.first_start)


class Mailer:
    def __init__(self) -> None:
        self.wants: dict[int, Wants | None] = {}  # job id -> what it asked (None: no mail)
        self.children: list[_Child] = []
        self.arrays_begun: set[int] = set()

    # -- what a job asked for -------------------------------------------------------------------------
    def _wants(self, rec: Rec) -> Wants | None:
        if rec.id in self.wants:
            return self.wants[rec.id]
        w = None
        try:
            spec = rec.job
            events = frozenset(spec.mail_type)
            if events:
                users = spec.mail_user
                to = parse_mail_user(",".join(users) if users else rec.user)  # checked again: never an option
                w = Wants(events, to, spec.name, spec.array_id)
        except (KeyError, TypeError, ValueError, OSError) as e:
            log.warning("job %d: no mail: %s", rec.id, safe(str(e)))
        self.wants[rec.id] = w
        return w

    def _active(self, cfg: Config, rec: Rec) -> Wants | None:
        return self._wants(rec) if cfg.mail_sendmail else None

    # -- events ------------------------------------------------------------------------------------
    def began(self, cfg: Config, table: JobTable, rec: Rec, now: float) -> None:
        w = self._active(cfg, rec)
        if w is None:
            return
        if "BEGIN" not in w.events:
            return
        if w.array_id is not None and "ARRAY_TASKS" not in w.events:
            aid = w.array_id
            if aid in self.arrays_begun or any(
                r.array_id == aid and _began_before(r, rec) for r in table.jobs.values()
            ):
                self.arrays_begun.add(aid)
                return
            self.arrays_begun.add(w.array_id)
            self._send(cfg, rec, w, f"Array_job_id={w.array_id} Name={clean(w.name)} Began", "array began")
            return
        queued = _hms(now - rec.submit_time)
        self._send(cfg, rec, w, f"Job_id={rec.id} Name={clean(w.name)} Began, Queued time {queued}", "began")

    def requeued(self, cfg: Config, rec: Rec) -> None:
        w = self._active(cfg, rec)
        if w is not None and "REQUEUE" in w.events:
            self._send(cfg, rec, w, f"Job_id={rec.id} Name={clean(w.name)} Requeued", "requeued")

    def ended(
        self,
        cfg: Config,
        table: JobTable,
        db: StateDB,
        rec: Rec,
        state: JobState,
        code: int | None,
        sig: int | None,
        reason: str,
        unmade: Container[int] = (),
    ) -> None:
        """Mail about job ``rec``'s end; ``unmade``: the arrays with tasks not made yet."""
        if not cfg.mail_sendmail:
            self.wants.pop(rec.id, None)
            return
        w = self._wants(rec)
        self.wants.pop(rec.id, None)
        if w is None:
            return
        ok = state in OK_STATES
        kind = "END" if ok or "FAIL" not in w.events else "FAIL"
        if kind not in w.events:
            kind = ""
        if w.array_id is not None and "ARRAY_TASKS" not in w.events:
            if w.array_id in unmade or any(r.array_id == w.array_id for r in table.jobs.values()):
                return  # tasks are left: the array's mail goes when the last one ends
            self.arrays_begun.discard(w.array_id)
            try:
                states = Counter(row["state"] for row in db.by_spec("array_id", w.array_id))
                for row in db.array_rests([w.array_id]):  # tasks cancelled before they were made
                    if row["cancelled"]:
                        states[JobState.CANCELLED] += len(Indices.from_text(row["cancelled"]))
            except Exception as e:  # noqa: BLE001 - mail is advice: it never stops the daemon
                log.warning("array %d: no mail: %s", w.array_id, safe(str(e)))
                return
            failed = any(s not in (JobState.COMPLETED, JobState.CANCELLED) for s in states)
            kind = "FAIL" if failed and "FAIL" in w.events else ("END" if "END" in w.events else "")
            if kind:
                counts = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                word = "Failed" if kind == "FAIL" else "Ended"
                subject = f"Array_job_id={w.array_id} Name={clean(w.name)} {word}, {counts}"
                self._send(cfg, rec, w, subject, f"array {word.lower()}")
            return
        if not kind:
            return
        ran = f"Run time {_hms(rec.elapsed)}, " if rec.first_start is not None else ""
        if sig is not None:
            how = f"Signal {sig}"
        else:
            how = f"ExitCode {code if code is not None else '-'}"
        word = "Failed" if kind == "FAIL" else "Ended"
        subject = f"Job_id={rec.id} Name={clean(w.name)} {word}, {ran}{state.value}, {how}"
        self._send(cfg, rec, w, subject, word.lower(), body=reason)

    def timers(self, cfg: Config, table: JobTable, rec: Rec, now: float, due: float | None) -> None:
        """TIME_LIMIT_50/80/90 as a running job passes that part of its walltime."""
        if not cfg.mail_sendmail or due is None:
            return
        w = self._wants(rec)
        if w is None or not any(e.startswith("TIME_LIMIT_") for e in w.events):
            return
        used = rec.walltime - (due - now)
        for pct, event in LIMITS:
            if event in w.events and pct > rec.mailed and used >= rec.walltime * pct / 100:
                rec.mailed = pct  # saved before it is sent, so a restart does not send it again
                table.save(rec)
                self._send(cfg, rec, w, f"Job_id={rec.id} Name={clean(w.name)} Reached {pct}% of time limit", event)

    def next_limit(self, cfg: Config, rec: Rec, now: float, due: float) -> float | None:
        """When the next TIME_LIMIT_NN of ``rec`` is due (the loop wakes for it)."""
        w = self.wants.get(rec.id) if cfg.mail_sendmail else None
        if w is None:
            return None
        times = [due - rec.walltime * (1 - pct / 100) for pct, e in LIMITS if e in w.events and pct > rec.mailed]
        return min(times) if times else None

    def time_limit(self, cfg: Config, rec: Rec) -> None:
        w = self._active(cfg, rec)
        if w is not None and "TIME_LIMIT" in w.events:
            self._send(cfg, rec, w, f"Job_id={rec.id} Name={clean(w.name)} Reached time limit", "time limit")

    # -- sending ----------------------------------------------------------------------------------
    def _send(self, cfg: Config, rec: Rec, w: Wants, subject: str, what: str, body: str = "") -> None:
        self.poll(time.time())
        if len(self.children) >= MAX_CHILDREN:
            log.warning("job %d: %s mail not sent: %d sendmails still running", rec.id, what, len(self.children))
            return
        sender = cfg.mail_from or f"gridsched@{clean(socket.gethostname(), 200) or 'localhost'}"
        text = (
            f"To: {', '.join(w.to)}\n"
            f"From: {sender}\n"
            f"Subject: gridsched {clean(subject, 400)}\n"
            "Auto-Submitted: auto-generated\n"
            "Content-Type: text/plain; charset=utf-8\n"
            "\n"
            f"{clean(subject, 400)}\n"
        )
        if body:
            text += f"\n{clean(body, 1000)}\n"
        msg = text.encode("utf-8", errors="replace")[:MAX_MESSAGE]
        argv = [cfg.mail_sendmail, "-oi", "--", *w.to]
        kw: dict[str, Any] = {}
        home = "/"
        try:
            pw = pwd.getpwuid(rec.uid)
            home = pw.pw_dir or "/"
            if os.getuid() == 0 and rec.uid != 0:  # as the job's owner, never as root for another's job
                kw = {"user": rec.uid, "group": pw.pw_gid, "extra_groups": os.getgrouplist(pw.pw_name, pw.pw_gid)}
        except KeyError:
            if os.getuid() == 0:
                log.warning("job %d: %s mail not sent: uid %d has no user", rec.id, what, rec.uid)
                return
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": home, "USER": rec.user, "LOGNAME": rec.user}
        r, wfd = os.pipe()
        err = tempfile.TemporaryFile()
        try:
            os.write(wfd, msg)
            os.close(wfd)
            wfd = -1
            proc = subprocess.Popen(
                argv,
                stdin=r,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd="/",
                env=env,
                close_fds=True,
                start_new_session=True,
                **kw,
            )
        except (OSError, subprocess.SubprocessError) as e:
            log.warning("job %d: %s mail not sent: cannot run %s: %s", rec.id, what, cfg.mail_sendmail, e)
            err.close()
            return
        finally:
            os.close(r)
            if wfd >= 0:
                os.close(wfd)
        self.children.append(_Child(proc, rec.id, what, time.time() + cfg.mail_timeout, err))
        log.info("job %d: %s mail to %s", rec.id, what, safe(",".join(w.to), 300))

    def poll(self, now: float) -> None:
        """Reap the sendmails that finished; kill those past their time.  Never waits."""
        left = []
        for c in self.children:
            rc = c.proc.poll()
            if rc is None and now >= c.deadline:
                try:
                    os.killpg(c.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    rc = c.proc.wait(1.0)
                except subprocess.TimeoutExpired:
                    left.append(c)
                    continue
                log.warning("job %d: %s mail: sendmail killed after its timeout", c.job, c.what)
            elif rc is None:
                left.append(c)
                continue
            elif rc != 0:
                c.err.seek(0)
                first = c.err.read(400).decode(errors="replace").strip().splitlines()
                why = f": {safe(first[0])}" if first else ""
                log.warning("job %d: %s mail: sendmail exited %d%s", c.job, c.what, rc, why)
            c.err.close()
        self.children = left

    def next_deadline(self) -> float | None:
        return min((c.deadline for c in self.children), default=None)
