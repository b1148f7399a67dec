"""``gstat --priority``: each pending job's priority and its factors, as Slurm's ``sprio`` shows them.

Computed by the core's own function (:func:`gridsched.core.priority.factors`) from what the daemon
gives it: the jobs' rows, the machine's cores, the config's ``[priority]`` and each user's usage
from the accounting table, decayed to now (:mod:`gridsched.protocol.usage`).  Imported only for this
option.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import click

from gridsched.cli.common import fail
from gridsched.core.priority import factors
from gridsched.core.types import Snapshot, Waiting
from gridsched.protocol.config import Config
from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB
from gridsched.protocol.text import dumps, shown
from gridsched.protocol.usage import Usage

PROG = "gstat"
PENDING = ("PENDING", "HELD")


def _waiting(job: dict[str, Any]) -> Waiting:
    spec = job.get("spec") or {}
    nice, prio = spec.get("nice", 0), spec.get("priority")
    return Waiting(
        int(job["id"]),
        int(job.get("ncpus") or 1),
        float(job.get("walltime") or 0),
        user=str(job.get("user") or ""),
        submitted=float(job.get("submit_time") or 0.0),
        nice=nice if isinstance(nice, int) and not isinstance(nice, bool) else 0,
        admin=prio if isinstance(prio, int) and not isinstance(prio, bool) else None,
    )


def rows(spool: Spool, cfg: Config, jobs: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """One record per pending or held job of ``jobs``, highest priority first (ties: submission order)."""
    pp = cfg.params.priority
    usage = Usage()
    ncores = cfg.cores or 1
    if spool.db.exists():
        try:
            db = StateDB(spool.db)
            try:
                if pp.weight_fairshare:
                    usage.load(db.conn, pp.half_life)
                raw = db.meta().get("machine")
            finally:
                db.close()
        except sqlite3.Error as e:
            fail(PROG, shown(f"cannot read {spool.db}: {e}"))
        if raw:
            try:
                ncores = int(json.loads(raw)["ncores"])
            except (ValueError, KeyError, TypeError):
                pass
    pending = tuple(_waiting(j) for j in sorted(jobs, key=lambda j: j["id"]) if j["state"] in PENDING)
    snap = Snapshot(now, ncores, (), pending, params=cfg.params, usage=usage.now(now, pp.half_life))
    fs = factors(snap)
    users = {w.id: w.user for w in pending}
    order = sorted(range(len(fs)), key=lambda i: -fs[i].priority)
    out = []
    for i in order:
        f = fs[i]
        out.append(
            {
                "id": f.job,
                "user": users[f.job],
                "priority": f.priority,
                "age": f.age,
                "job_size": f.size,
                "fairshare": f.fairshare,
                "nice": f.nice,
                "admin_priority": f.admin,
                "weights": {
                    "age": pp.weight_age,
                    "job_size": pp.weight_job_size,
                    "fairshare": pp.weight_fairshare,
                },
            }
        )
    return out


def show(spool: Spool, cfg: Config, jobs: list[dict[str, Any]], now: float, as_json: bool) -> int:
    recs = rows(spool, cfg, jobs, now)
    if as_json:
        click.echo(dumps({"jobs": recs}, indent=2))
        return 0
    pp = cfg.params.priority
    click.echo(f"{'JOBID':>8} {'USER':<10} {'PRIORITY':>12} {'AGE':>10} {'JOBSIZE':>10} {'FAIRSHARE':>10} {'NICE':>6}")
    for r in recs:
        if r["admin_priority"] is not None:
            parts = ("(admin)", "", "")
        else:
            parts = (
                f"{pp.weight_age * r['age']:.0f}",
                f"{pp.weight_job_size * r['job_size']:.0f}",
                f"{pp.weight_fairshare * r['fairshare']:.0f}",
            )
        click.echo(
            f"{r['id']:>8} {shown(r['user'])[:10]:<10} {r['priority']:>12.0f} "
            f"{parts[0]:>10} {parts[1]:>10} {parts[2]:>10} {r['nice']:>6}"
        )
    return 0
