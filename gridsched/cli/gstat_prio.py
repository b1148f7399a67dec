"""``gstat --priority``: each pending job's priority and its factors, as Slurm's ``sprio`` shows them.

Computed by the core's own function (:func:`gridsched.core.priority.factors`) from what the daemon
gives it: the jobs' rows, the machine's cores, the config's ``[priority]`` and each user's usage
from the accounting table, decayed to now (:mod:`gridsched.protocol.usage`).  Imported only for this
option.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

import click

from gridsched.cli.common import fail
from gridsched.core.priority import factors
from gridsched.core.types import Snapshot, Waiting
from gridsched.protocol.config import Config
from gridsched.protocol.jobs import JobState
from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB
from gridsched.protocol.text import dumps, shown
from gridsched.protocol.usage import Usage

if TYPE_CHECKING:
    from gridsched.protocol.view import ViewRow as Row

PROG = "gstat"
PENDING = (JobState.PENDING, JobState.HELD)


def _waiting(job: Row) -> Waiting:
    spec = job["spec"]
    nice, prio = spec.nice, spec.priority
    return Waiting(
        int(job["id"]),
        int(job.get("ncpus") or 1),
        float(job.get("walltime") or 0),
        user=str(job.get("user") or ""),
        submitted=float(job.get("submit_time") or 0.0),
        nice=nice if isinstance(nice, int) and not isinstance(nice, bool) else 0,
        admin=prio if isinstance(prio, int) and not isinstance(prio, bool) else None,
    )


def _flexible(spool: Spool) -> list[Waiting]:
    """The waiting flexible reservations, each as the queue entry that holds its place among the jobs."""
    from gridsched.protocol.reservations import load

    try:
        resvs = load(spool)
    except Exception as e:  # noqa: BLE001 - sqlite3 errors
        fail(PROG, shown(f"cannot read {spool.db}: {e}"))
    out = []
    for r in resvs:
        if r.get("state") != "WAITING" or r.get("start") is not None:
            continue
        nice, prio = r.get("nice") or 0, r.get("priority")
        out.append(
            Waiting(
                int(r["id"]),
                int(r.get("ncpus") or 1),
                float(r.get("duration") or 0),
                user=str(r.get("user") or ""),
                submitted=float(r.get("create_time") or 0.0),
                flex=True,
                nice=nice if isinstance(nice, int) else 0,
                admin=prio if isinstance(prio, int) else None,
            )
        )
    return out


def rows(spool: Spool, cfg: Config, jobs: list[Row], now: float) -> list[dict[str, Any]]:
    """One record per pending or held job of ``jobs`` and per waiting flexible reservation (whose place among
    the jobs is decided by the same function), highest priority first (ties: submission order)."""
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
    waiting = [_waiting(j) for j in jobs if j["state"] in PENDING] + _flexible(spool)
    pending = tuple(sorted(waiting, key=lambda w: w.id))
    flex = {w.id for w in pending if w.flex}
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
                **({"reservation": True} if f.job in flex else {}),
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


def show(spool: Spool, cfg: Config, jobs: list[Row], now: float, as_json: bool) -> int:
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
        name = f"R{r['id']}" if r.get("reservation") else str(r["id"])
        click.echo(
            f"{name:>8} {shown(r['user'])[:10]:<10} {r['priority']:>12.0f} "
            f"{parts[0]:>10} {parts[1]:>10} {parts[2]:>10} {r['nice']:>6}"
        )
    return 0
