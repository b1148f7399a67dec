"""The daemon's work done through its narrow contexts (daemon/contexts.py): each part is handed what it uses
and returns what changed; the loop's own state (whether to plan again, the head reservation, the wake time)
is set by the loop from that, never by the part itself.  In process, with the stub executor."""

from __future__ import annotations

import json
import time
from collections import deque

from gridsched.daemon import apply, contexts, slices
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import JobState
from tests.fuzz.test_requests import valid_job

ONE_CORE_EASY = """
[scheduler]
policy = "easy"
[machine]
cores = 1
[daemon]
autostart = false
"""


def _submit(d, count):
    ids = []
    for _ in range(count):
        nid = max(d.id_high, *ids, 0) + 1
        (d.spool.incoming / rq.id_name(nid)).write_text(json.dumps({"type": "submit", "job": valid_job(nid)}))
        ids.append(nid)
    d.ingest()
    return ids


def test_a_plan_carried_out_through_its_context_returns_what_the_loop_keeps(stub_daemon):
    """apply.schedule starts the first of two one-core jobs (its launch waits in the context's list for the
    commit), reserves the machine for the second, and returns that; the daemon's own flag, head and wake time
    are left as they were (the loop sets them from the result)."""
    d = stub_daemon(ONE_CORE_EASY)
    first, second = _submit(d, 2)
    assert d.dirty and d.head is None and not d.pending_launches
    wake_before = d.wake_at
    now = time.time()
    done = apply.schedule(contexts.for_apply(d), now)
    assert d.table.jobs[first].state is JobState.RUNNING and d.table.jobs[second].state is JobState.PENDING
    assert [rec.id for rec, _ in d.pending_launches] == [first]
    assert done.head is not None and done.head.job == second
    assert d.dirty and d.head is None and d.wake_at == wake_before  # untouched by the plan
    assert done.changed is False  # a start alone does not call for another pass
    # the loop's turn keeps the result: the head reservation is the second job's
    d.turn(now)
    assert d.head is not None and d.head.job == second and not d.dirty


def test_a_slice_of_a_sweep_through_its_context_says_what_it_changed(stub_daemon):
    """slices.advance acts on the jobs of a sweep within its context, lets the request go (settling) once the
    sweep is done, and returns whether a scheduling pass is due; the daemon's flag is left to the loop."""
    d = stub_daemon(ONE_CORE_EASY)
    d.turn(time.time())
    ids = _submit(d, 3)
    d.dirty = False
    acted: list[int] = []

    def act(rec):
        acted.append(rec.id)
        return rec.id == ids[1]  # only the second changes what a pass sees

    sweeps: deque[slices.Sweep] = deque([slices.Sweep("req-1", "a test sweep", [d.table.jobs[i] for i in ids], act)])
    busy, settling = {"req-1"}, {}
    ctx = slices.Ctx(d.table, d.db, sweeps, busy, settling, {}, lambda: contexts.for_arrays(d))
    got = slices.advance(ctx)
    assert acted == ids
    assert got == slices.Advanced(changed=True, more_tasks=False)
    assert not sweeps and not busy and settling == {"req-1": None}
    assert d.dirty is False  # the loop, not the slice, sets it
    nothing = slices.Sweep("req-2", "another", [d.table.jobs[ids[0]]], lambda rec: False)
    ctx2 = slices.Ctx(d.table, d.db, deque([nothing]), {"req-2"}, {}, {}, lambda: contexts.for_arrays(d))
    assert slices.advance(ctx2) == slices.Advanced(changed=False, more_tasks=False)
