"""fcfs: start jobs in queue order while they fit; the first that does not is the head."""

from __future__ import annotations

from math import inf

from gridsched.core.end_time import USER as _USER
from gridsched.core.policy.plan import general_queue, loose_fit, make_plan
from gridsched.core.policy.reservations import fixed_reservations, start_bound
from gridsched.core.policy.room import Pass
from gridsched.core.types import HeadReservation, Plan, Snapshot


def fcfs(snap: Snapshot, record: dict[int, float] | None) -> tuple[Plan, Pass]:
    ps = Pass(snap, _USER)
    fixed_reservations(ps)
    head: HeadReservation | None = None
    for w in general_queue(snap):
        v = ps.vec(w)
        if not ps.possible(v):
            continue
        if (ps.fits_now(v, w.estimate) or loose_fit(ps, w, v)) and ps.placeable(w, v):
            ps.start(w, v, w.estimate, False, None)
            continue
        t = ps.placed_earliest(w, v, w.estimate)
        if t == inf:
            continue  # can never be placed: never blocks the queue
        head = HeadReservation(w.id, t)
        if t < inf:
            ps.hold(t, w.estimate, v)
        if record is not None:
            record[w.id] = t
        break
    start_bound(ps, snap.pending)
    return make_plan(ps, head), ps
