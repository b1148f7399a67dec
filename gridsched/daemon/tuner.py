"""The daemon's tuning of its ``"auto"`` settings, in a background process that never holds up the loop.

Every ``scheduler.tune_every`` (and at once on ``gctl tune``; every day,
``sim.tune.RETRY``, until a tuning has had enough history), while the
configuration has an ``"auto"`` setting under checkpoint-backfill, the daemon
starts ``python -m gridsched.sim.autotune`` at the lowest CPU priority; the loop
only polls it.  When it ends, its decision is logged, recorded in the state
db (meta ``tuning``: what is in force and the last decision, which ``gctl
info`` shows) and, if it adopts a setting, put in force for the next pass.
The setting in force survives restarts and reloads; a configuration without
``"auto"`` settings ends it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridsched.core.params import Policy
from gridsched.protocol import config as configmod
from gridsched.sim.autotune import applied, lowest_priority, setting
from gridsched.sim.tune import RETRY, kept_windows

if TYPE_CHECKING:
    from gridsched.daemon.table import JobTable
    from gridsched.protocol.state import StateDB

log = logging.getLogger("gschedd")

META = "tuning"
LIMIT = 3600.0  # a tuning process still running after this long is stopped (and tried again next time)


@dataclass(frozen=True)
class Ctx:
    """What the tuner sees of the daemon: the configuration as read from its file and as in force, the
    machine's size, the state db's file (the tuning process reads the jobs' history there), the job table and
    the state db (where the tuning's record is kept)."""

    file_cfg: configmod.Config
    cfg: configmod.Config
    ncores: int
    db_path: str
    table: JobTable
    db: StateDB


class Tuner:
    def __init__(self) -> None:
        self.requested = False  # gctl tune: tune at the next turn
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.polled = 0.0  # when the loop last looked at a tuning run under way
        self.last_at: float | None = None  # when the last tuning run started (or the daemon, before any)
        # meta "tuning": {"in_force": setting | None, "last": decision, "evidence": the last windows replayed}
        self.record: dict[str, Any] = {}

    @staticmethod
    def tunes(cfg: configmod.Config) -> bool:
        """Whether ``cfg`` (as read from its file) has settings to tune."""
        return cfg.tuning.active and cfg.params.policy is Policy.CHECKPOINT_BACKFILL

    def load(self, db: StateDB, now: float) -> None:
        try:
            rec = json.loads(db.meta().get(META) or "{}")
        except ValueError:
            rec = {}
        self.record = rec if isinstance(rec, dict) else {}
        last = self.record.get("last") or {}
        t = last.get("time")
        self.last_at = float(t) if isinstance(t, (int, float)) else now

    def effective(self, cfg: configmod.Config) -> configmod.Config:
        """``cfg`` with the tuned setting in force, if it tunes and one was adopted."""
        s = self.record.get("in_force")
        if not self.tunes(cfg) or not isinstance(s, dict):
            return cfg
        try:
            return dataclasses.replace(cfg, params=applied(cfg.params, s, cfg.tuning.backfill_order))
        except (KeyError, ValueError, TypeError):
            return cfg

    def due(self, cfg: configmod.Config) -> float | None:
        """When the loop must next look at the tuner (None: never)."""
        if self.proc is not None:  # polled about once a second while it runs
            return self.polled + 1.0
        if not self.tunes(cfg):
            return None
        if self.requested:
            return 0.0
        if self.last_at is None:
            return None
        last = self.record.get("last") or {}
        if last.get("best") is None:  # no tuning has had enough history yet: tried again sooner
            return self.last_at + min(cfg.tuning.every, RETRY)
        return self.last_at + cfg.tuning.every

    def stop(self) -> None:
        """The daemon stops: so does a tuning run under way (the next daemon tunes again when due)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def tick(self, ctx: Ctx, now: float) -> configmod.Config | None:
        """One look from the loop: collect a finished tuning run, or start one that is due.  The configuration
        to put in force when a run just adopted a setting, else None."""
        base = ctx.file_cfg
        if self.proc is not None:
            self.polled = now
            if self.proc.poll() is None:
                if now - self.started > LIMIT:
                    self.proc.kill()
                    self.proc.wait()
                    self.proc = None
                    log.warning("tuning: stopped after %.0f s without an answer; the setting in force stays", LIMIT)
                return None
            return self._collect(ctx, base, now)
        if not self.tunes(base):
            self.requested = False
            return None
        due = self.due(base)
        if due is not None and now >= due:
            self._start(ctx, base, now)
        return None

    def _start(self, ctx: Ctx, base: configmod.Config, now: float) -> None:
        self.requested = False
        self.last_at = now
        arg = {
            "db": ctx.db_path,
            "now": now,
            "ncores": ctx.ncores,
            "current": setting(ctx.cfg.params),
            "tuning": dataclasses.asdict(base.tuning),
            "evidence": self.record.get("evidence") or [],
        }
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gridsched.sim.autotune", json.dumps(arg)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,
                preexec_fn=lowest_priority,  # from its first instruction, not only once Python has started
            )
        except OSError as e:
            log.warning("tuning: could not start the tuner: %s", e)
            return
        self.started = self.polled = now
        log.info(
            "tuning: started (pid %d) over the jobs of the last %ss (after %ss of warm-up)",
            self.proc.pid,
            base.tuning.window,
            base.tuning.warmup,
        )

    def _collect(self, ctx: Ctx, base: configmod.Config, now: float) -> configmod.Config | None:
        assert self.proc is not None
        out, err = self.proc.communicate()
        rc = self.proc.returncode
        self.proc = None
        try:
            dec = json.loads(out.decode()) if rc == 0 else None
        except ValueError:
            dec = None
        if not isinstance(dec, dict):
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {rc}"]
            log.warning("tuning: the tuner failed (%s); the setting in force stays", tail[0])
            return None
        window = dec.pop("window", None)
        if isinstance(window, dict):  # kept for the next tunings, which judge on it too (sim.tune.POOL)
            kept = self.record.get("evidence")
            kept = kept if isinstance(kept, list) else []
            self.record["evidence"] = kept_windows(kept, window)
        self.record["last"] = dec
        adopt = dec.get("adopt")
        took = now - self.started
        if adopt is not None:
            self.record["in_force"] = adopt
            self.record["since"] = now
            gain = dec.get("beats_easy_by")
            log.info(
                "tuning: %d jobs of history, objective %s: adopted %s (%s; %s EASY's score) in %.1f s",
                dec.get("jobs", 0),
                dec.get("objective"),
                dec.get("adopt_label"),
                dec.get("why"),
                "equal to" if not gain else f"{gain:.1%} better than",
                took,
            )
        else:
            log.info("tuning: %d jobs of history: %s (%.1f s)", dec.get("jobs", 0), dec.get("why"), took)
        ctx.table.begin()
        ctx.db.set_meta(META, json.dumps(self.record))
        return self.effective(base) if adopt is not None else None
