"""gstat's view of job arrays and splittable jobs.

Without ``-t/--tasks`` the tasks of an array are folded into one row: its id
is ``ARRAYID_[RANGE%MAX]``, its state the most active one among its tasks
(RUNNING, STOPPING, SUSPENDED, PENDING, HELD; then COMPLETED when every task
completed, else FAILED, TIMEOUT or CANCELLED), and its note the number of
tasks in each state.  A splittable job's note counts its sub-tasks: done,
running, failed (in pieces that did not complete) and left.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..arrays import format_indices
from ..core import cpuset

ORDER = ("RUNNING", "STOPPING", "SUSPENDED", "PENDING", "HELD")
ENDED = ("FAILED", "TIMEOUT", "CANCELLED")


def array_state(states: Counter[str]) -> str:
    for s in ORDER:
        if states.get(s):
            return s
    if set(states) <= {"COMPLETED"}:
        return "COMPLETED"
    return next(s for s in ENDED if states.get(s))


def _counts(states: Counter[str]) -> str:
    order = [*ORDER, "COMPLETED", *ENDED]
    return ", ".join(f"{states[s]} {s.lower()}" for s in order if states.get(s))


def _cores(tasks: list[dict[str, Any]]) -> str:
    used: set[int] = set()
    for t in tasks:
        if t.get("cores") and t["state"] in ("RUNNING", "STOPPING"):
            used |= cpuset.parse(t["cores"])
    return cpuset.format(used)


def fold(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``jobs`` with each array's tasks replaced by one row (at the place of its first task)."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for j in jobs:
        aid = (j.get("spec") or {}).get("array_id")
        if aid is not None:
            groups.setdefault(aid, []).append(j)
    out: list[dict[str, Any]] = []
    for j in jobs:
        spec = j.get("spec") or {}
        aid = spec.get("array_id")
        if aid is None:
            if "array" in spec:  # submitted, not yet taken in
                j = {**j, "label": f"{j['id']}_[{spec['array']}]", "note": "array, not yet taken in"}
            out.append(j)
            continue
        tasks = groups.pop(aid, None)
        if tasks is None:
            continue  # already folded
        states = Counter(t["state"] for t in tasks)
        rng = format_indices(sorted(int((t.get("spec") or {}).get("array_index", 0)) for t in tasks))
        mx = spec.get("array_max")
        row = dict(tasks[0])
        row.update(
            id=aid,
            state=array_state(states),
            label=f"{aid}_[{rng}{'' if mx is None else f'%{mx}'}]",
            cores=_cores(tasks),
            note=_counts(states),
            predicted_start=None,
            start_time=None,
            elapsed=0.0,
            backfilled=False,
            preemptions=0,
            restarts=0,
        )
        out.append(row)
    return out


def label_tasks(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``jobs`` with each array task shown as ``ARRAYID_INDEX`` (gstat -t)."""
    out = []
    for j in jobs:
        spec = j.get("spec") or {}
        if spec.get("array_id") is not None:
            j = {**j, "label": f"{spec['array_id']}_{spec.get('array_index')}"}
        out.append(j)
    return out


def split_counts(job: dict[str, Any], pieces: list[dict[str, Any]]) -> dict[str, int]:
    """Sub-tasks of splittable job ``job`` done, running, failed and left, from its row and its pieces' rows."""
    sp = (job.get("spec") or {}).get("split") or {}
    n_left = len(sp["left"]) if isinstance(sp.get("left"), list) else int(sp.get("n", 0))
    out = {"done": 0, "running": 0, "failed": 0, "left": 0}
    st = job["state"]
    if st in ("RUNNING", "STOPPING", "SUSPENDED"):
        out["running"] += n_left
    elif st == "COMPLETED":
        out["done"] += n_left
    elif st in ENDED:
        out["failed"] += n_left
    else:
        out["left"] += n_left
    for p in pieces:
        k = sum(len(c) for c in (p.get("spec") or {}).get("split_chains") or [])
        ps = p["state"]
        key = (
            "running"
            if ps in ("RUNNING", "STOPPING", "PENDING", "SUSPENDED")
            else "done"
            if ps == "COMPLETED"
            else "failed"
        )
        out[key] += k
    return out


def annotate(jobs: list[dict[str, Any]], every: list[dict[str, Any]]) -> None:
    """Give each splittable job in ``jobs`` its sub-task counts (``note``, ``split_counts``) from ``every`` row."""
    pieces: dict[int, list[dict[str, Any]]] = {}
    for j in every:
        of = (j.get("spec") or {}).get("split_of")
        if of is not None:
            pieces.setdefault(of, []).append(j)
    for j in jobs:
        spec = j.get("spec") or {}
        if "split" in spec:
            c = split_counts(j, pieces.get(j["id"], []))
            j["split_counts"] = c
            j["note"] = (
                f"sub-tasks {c['done']} done, {c['running']} running, "
                + (f"{c['failed']} failed, " if c["failed"] else "")
                + f"{c['left']} left"
            )
        elif "split_of" in spec:
            j["note"] = f"piece of {spec['split_of']}"
