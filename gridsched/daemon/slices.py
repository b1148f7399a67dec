"""Big work in bounded slices, so that the daemon's loop always answers.

Acting on many jobs at once (a cancel, hold or release of many jobs:
:class:`Sweep`) and making the tasks of arrays about to start (:mod:`.arrays`) are done a slice
per turn of the loop: at most :data:`SLICE_MAX` jobs and about
:data:`SLICE_TIME` seconds of such work in all, then the loop goes on with
everything else (other requests, walltimes, the published table, a stop) and
comes back at once for the next slice.  The request file that asked for the
work stays in ``incoming/`` (the scan passes over it) until the work is done
and committed: a daemon stopped or killed meanwhile reads it again at its
next start and finishes the work from what was committed.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from gridsched.daemon.arrays import Ctx as ArraysCtx
    from gridsched.daemon.arrays import Rest
    from gridsched.daemon.table import JobTable, Rec
    from gridsched.protocol.state import StateDB

log = logging.getLogger("gschedd")

SLICE_MAX = 1000  # jobs taken in or acted on in one turn of the loop, at most
SLICE_TIME = 0.05  # seconds of such work in one turn, about (at least one job is done each turn)


class Budget:
    """What is left of one turn's slice: a count of jobs and a time."""

    def __init__(self, limit: int | None = None) -> None:
        self.t0 = time.monotonic()
        self.used = 0
        self.limit = SLICE_MAX if limit is None else limit

    def left(self) -> int:
        """How many more jobs this turn may take: 0 once the count or the time is spent (the first is always
        taken)."""
        if self.used >= self.limit or (self.used and time.monotonic() - self.t0 >= SLICE_TIME):
            return 0
        return self.limit - self.used

    def time_left(self) -> float:
        return SLICE_TIME - (time.monotonic() - self.t0)

    def spend(self, n: int = 1) -> None:
        self.used += n


class Sweep:
    """One request's action on many live jobs (``act`` on each), a slice per turn."""

    def __init__(self, name: str, what: str, recs: Iterable[Rec], act: Callable[[Rec], object]) -> None:
        self.name = name
        self.what = what
        self.ids = deque(r.id for r in recs)
        self.act = act

    def run(self, jobs: Mapping[int, Rec], budget: Budget) -> tuple[bool, bool]:
        """Act on the next jobs within ``budget``: whether every job has been done, and whether what a
        scheduling pass sees changed."""
        changed = False
        while self.ids and budget.left():
            rec = jobs.get(self.ids.popleft())
            if rec is not None:  # ended meanwhile: nothing to do
                try:
                    if self.act(rec):  # true: it changed what a scheduling pass sees
                        changed = True
                except Exception:  # noqa: BLE001 - one job's trouble never stops the daemon or the rest
                    log.exception("%s: job %d", self.what, rec.id)
            budget.spend()
        return not self.ids, changed


def sweep(
    table: JobTable,
    sweeps: deque[Sweep],
    busy: set[str],
    name: str,
    what: str,
    recs: list[Rec],
    act: Callable[[Rec], object],
) -> None:
    """Act on ``recs`` for the request ``name`` (kept ``busy``): in this turn's slices, the rest in the next
    turns (the request stays in ``incoming/`` until the last is done)."""
    if not recs:
        return
    table.begin()
    sweeps.append(Sweep(name, what, recs, act))
    busy.add(name)
    if len(recs) > SLICE_MAX:
        log.info("%s: %d jobs, in slices of at most %d a turn", what, len(recs), SLICE_MAX)


@dataclass(frozen=True)
class Ctx:
    """What a turn's slice sees of the daemon: the job table, the state db, the sweeps under way, the names of
    the requests whose work goes on (``busy``) and of those served (``settling``: they leave ``incoming/`` once
    published), the arrays not made yet, and what the work on arrays sees."""

    table: JobTable
    db: StateDB
    sweeps: deque[Sweep]
    busy: set[str]
    settling: dict[str, str | None]
    rests: Mapping[int, Rest]
    arrays: Callable[[], ArraysCtx]


class Advanced(NamedTuple):
    """What a turn's slice did: whether what a scheduling pass sees changed, and whether tasks of arrays are
    left to make that its slice had no room for."""

    changed: bool
    more_tasks: bool


def advance(ctx: Ctx) -> Advanced:
    """One turn's slice of the work under way: the sweeps first (a cancel stops work), then the tasks of arrays
    about to start (:func:`gridsched.daemon.arrays.fill`).  A request whose work is done leaves ``incoming/``
    once committed and published."""
    if not ctx.sweeps and not ctx.rests:
        return Advanced(False, False)
    from gridsched.daemon import arrays

    budget = Budget()
    ctx.table.begin()
    changed = False
    while ctx.sweeps and budget.left():
        s = ctx.sweeps[0]
        done, acted = s.run(ctx.table.jobs, budget)
        changed = changed or acted
        if not done:
            break
        ctx.sweeps.popleft()
        ctx.busy.discard(s.name)
        ctx.settling[s.name] = None
    if ctx.table.disk_trouble or ctx.db.unsaved or not ctx.rests:
        return Advanced(changed, False)  # no task is made while the table cannot be written (kept for the next commit)
    return Advanced(changed, arrays.fill(ctx.arrays(), budget))


def pending(sweeps: deque[Sweep], more_tasks: bool) -> bool:
    """Whether work waits that the next turn should do at once: a sweep, or tasks of arrays to make that this
    turn's slice had no room for."""
    return bool(sweeps) or more_tasks
