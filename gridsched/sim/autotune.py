"""Tuning the ``"auto"`` settings of a machine: its history read from the state db, the tuner run, its decision.

The tuner itself (:mod:`gridsched.sim.tune`) is a pure function of a job history;
this module is what reads that history (the jobs that ended in the window, from
the state db) and turns a decision into the record the daemon keeps and shows
(``gctl info``, the log).  ``python -m gridsched.sim.autotune`` is the background
process the daemon starts: it lowers its own CPU priority to the lowest there
is, reads the history, replays it and prints the decision as one JSON object.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from gridsched.core.params import BackfillOrder, Params, Policy, Predictor

ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY")


def history(db_path: str | Path, now: float, window: float) -> list[Any]:
    """The jobs of the state db that ran and ended in the ``window`` seconds before ``now``."""
    return [job for _, job in _ended(db_path, now, window)]


def _ended(db_path: str | Path, now: float, window: float) -> list[tuple[float, Any]]:
    """(end time, job) of each job of the state db that ran and ended in the ``window`` seconds before ``now``."""
    from gridsched.protocol.state import StateDB
    from gridsched.sim import tune

    out: list[tuple[float, tune.Job]] = []
    if not Path(db_path).exists():
        return out
    db = StateDB(db_path)
    try:
        for j in db.jobs(states=ENDED):
            if j["start_time"] is None or j["end_time"] is None or j["end_time"] < now - window:
                continue
            run = max(0.0, float(j["elapsed"] or (j["end_time"] - j["start_time"])))
            out.append((j["end_time"], tune.Job(j["submit_time"], float(j["walltime"]), run, j["ncpus"], j["user"])))
    finally:
        db.close()
    return out


def setting(p: Params) -> dict[str, Any]:
    """The tuned part of ``p`` as JSON."""
    return {
        "policy": p.policy.value,
        "p": p.p,
        "threshold": p.threshold,
        "predictor": p.predictor.value,
        "backfill_order": p.backfill_order.value,
    }


def applied(base: Params, s: dict[str, Any], order_tuned: bool = True) -> Params:
    """``base`` with the tuned part ``s`` (from :func:`setting`) in force.

    The backfill order is ``s``'s when it is tuned (``order_tuned``) or ``s`` is EASY (the tuner's EASY is
    in queue order), else ``base``'s: a configured order is never overridden by a setting tuned under
    another (or recorded before the order was a setting, when it was the queue's)."""
    policy = Policy(s["policy"])
    if order_tuned or policy is Policy.EASY:
        order = BackfillOrder(s.get("backfill_order", "queue"))
    else:
        order = base.backfill_order
    return dataclasses.replace(
        base,
        policy=policy,
        p=float(s["p"]),
        threshold=float(s["threshold"]),
        predictor=Predictor(s["predictor"]),
        backfill_order=order,
    )


def kept_evidence(db_path: str | Path) -> list[Any]:
    """The windows of the last tunings that the daemon keeps in the state db (meta ``tuning``, ``evidence``)."""
    from gridsched.protocol.state import StateDB

    if not Path(db_path).exists():
        return []
    db = StateDB(db_path)
    try:
        raw = db.meta().get("tuning") or "{}"
    finally:
        db.close()
    try:
        rec = json.loads(raw)
    except ValueError:
        return []
    ev = rec.get("evidence") if isinstance(rec, dict) else None
    return ev if isinstance(ev, list) else []


def decide(
    db_path: str | Path, now: float, ncores: int, current: Params, tuning: Any, evidence: Any = None
) -> dict[str, Any]:
    """Replay the history of ``db_path`` and say what to adopt: a JSON-ready record of the decision, with the
    window replayed (``"window"``) that the next tunings pool with theirs, as ``evidence`` holds those before
    (None: those the daemon keeps in the state db, so that ``gctl tune --dry-run`` judges as the daemon does)."""
    from gridsched.sim import tune

    if evidence is None:
        evidence = kept_evidence(db_path)

    ended = _ended(db_path, now, tuning.window + tuning.warmup)  # the state db read once
    hist = [job for _, job in ended]
    in_window = sum(1 for end, _ in ended if end >= now - tuning.window)
    settings = tune.grid_for(current, tuning.p, tuning.threshold, tuning.predictor, tuning.backfill_order)
    score_from = now - tuning.window if tuning.warmup > 0 else None
    ev = evidence if isinstance(evidence, (list, tuple)) else ()
    d = tune.choose(
        hist, ncores, current, settings, tuning.objective, tuning.margin, score_from=score_from, evidence=ev
    )
    rows = [{"setting": r.label, "wait_avg": r.wait_avg, "bsld_avg": r.bsld_avg, "score": r.score} for r in d.rows]
    easy = d.rows[0] if d.rows else None
    gain_easy = None
    if d.best is not None and easy is not None and easy.score > 0:
        gain_easy = 1 - d.best.score / easy.score
    return {
        "time": now,
        "jobs": in_window,  # ended in the window
        "warmup_jobs": len(hist) - in_window,  # ended in the warm-up before it: replayed, not scored
        "objective": tuning.objective,
        "rows": rows,
        "best": d.best.label if d.best is not None else None,
        "adopt": setting(d.adopt) if d.adopt is not None else None,
        "adopt_label": tune.label(d.adopt) if d.adopt is not None else None,
        "beats_easy_by": gain_easy,
        "why": d.why,
        "window": d.window,
    }


def lowest_priority() -> None:
    """This process at the lowest CPU priority there is (SCHED_IDLE where the host has it, and nice 19)."""
    try:
        os.nice(19)
    except OSError:
        pass
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None:
        try:
            os.sched_setscheduler(0, idle, os.sched_param(0))
        except OSError:
            pass


def main(argv: list[str]) -> int:
    """The daemon's background tuner: ``python -m gridsched.sim.autotune`` with one JSON argument."""
    from gridsched.protocol.config import Tuning

    lowest_priority()
    a = json.loads(argv[0])
    current = applied(Params(), a["current"])
    tuning = Tuning(**a["tuning"])
    out = decide(a["db"], float(a["now"]), int(a["ncores"]), current, tuning, a.get("evidence") or [])
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
