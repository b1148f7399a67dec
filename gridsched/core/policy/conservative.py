"""conservative backfilling: every pending job gets a reservation, in queue order; a job starts now
only if its earliest start is now (see "conservative" in :mod:`gridsched.core.policy`)."""

from __future__ import annotations

from math import inf

from gridsched.core.end_time import NAIVE as _NAIVE
from gridsched.core.end_time import USER as _USER
from gridsched.core.end_time import counted_end
from gridsched.core.policy.backfill import make_room
from gridsched.core.policy.plan import general_queue, loose_fit, make_plan
from gridsched.core.policy.reservations import fixed_reservations, start_bound
from gridsched.core.policy.room import Pass
from gridsched.core.policy.state import Vec
from gridsched.core.policy.windows import split_windows
from gridsched.core.preempt import places_devices
from gridsched.core.types import HeadReservation, Plan, Snapshot, Waiting


def conservative(snap: Snapshot, record: dict[int, float] | None) -> tuple[Plan, Pass]:
    relied = any(r.planned is not None for r in snap.running)  # see "Estimates" in gridsched.core.policy
    ps = Pass(snap, _NAIVE if relied else _USER)
    fixed_reservations(ps)
    now = snap.now
    head: HeadReservation | None = None
    # the reservations of jobs asking for devices that devices.choose can place at their time
    # (on what is free then): (time, job); a job started now must leave each of them so
    guarded: list[tuple[float, Waiting]] = []
    # the reservations of jobs whose memory is placed on the boards' (where it is counted), that can be placed
    # at their time: a job started now must leave each of them its cores and its memory on their boards then
    on_boards: list[tuple[float, Waiting]] = []
    dtimes: _DeviceTimes | None = None
    for w in general_queue(snap):
        v = ps.vec(w)
        if not ps.possible(v):
            if record is not None:
                record[w.id] = inf
            continue
        t = ps.earliest(v, w.estimate)
        started = denied = False
        if ((t == now and all(v[d] <= ps.free_now[d] for d in range(ps.dims))) or loose_fit(ps, w, v)) and ps.placeable(
            w, v
        ):
            if (not guarded or _leaves_reserved(ps, w, guarded)) and (
                not on_boards or _leaves_boards(ps, w, on_boards)
            ):
                # a job ahead waits: one that fits on its own estimate only is held to it
                planned = w.estimate if head is not None and w.hard is not None and not ps.fits_now(v, w.hard) else None
                ps.start(w, v, w.estimate, head is not None, planned)
                t, started = now, True
            else:
                denied = True
        if not started:
            if ps.machine is not None:
                t = ps.placed_earliest(w, v, w.estimate, t if t > now else None)
            on_devices = bool(w.devices) and not w.flex
            if on_devices and t < inf:
                if dtimes is None:
                    dtimes = _DeviceTimes(ps)
                t = dtimes.start(w, v, t, denied)
            if t == inf:
                if record is not None:
                    record[w.id] = inf
                continue
            if head is None:
                head = HeadReservation(w.id, t)
                if relied and t <= now:
                    make_room(ps, w, v, False)
            ps.hold(t, w.estimate, v)
            if on_devices and (t > now or not ps.head_devices_blocked(w)):  # (later: placeable then, see above)
                guarded.append((t, w))
            if now < t < inf and ps.asks_board_memory(w) and ps.placeable_at(w, t):
                on_boards.append((t, w))
        if record is not None:
            record[w.id] = t
        elif head is not None and ps.free_now[0] <= 0:
            break
    start_bound(ps, snap.pending)
    if head is not None:
        split_windows(ps, snap, general_queue(snap))
    wake = min((e for r in snap.running if r.planned is not None and (e := r.start + r.planned) > now), default=inf)
    return make_plan(ps, head, wake), ps


def _leaves_reserved(ps: Pass, w: Waiting, guarded: list[tuple[float, Waiting]]) -> bool:
    """Whether ``w``, started now, leaves every job of ``guarded`` that it would still run beside at
    the job's reservation time a placement then by :func:`gridsched.core.devices.choose`."""
    end = ps.now + w.estimate
    for t, r in guarded:
        if end <= t:
            continue  # over by then
        if not (ps.leaves_devices_at(w, r, t) if t > ps.now else ps.leaves_devices(w, r)):
            return False
    return True


def _leaves_boards(ps: Pass, w: Waiting, reserved: list[tuple[float, Waiting]]) -> bool:
    """Whether ``w``, started now, leaves every job of ``reserved`` that it would still run beside at the job's
    reservation time a placement then with its memory on the boards of its cores (:meth:`Pass.leaves_room`)."""
    end = ps.now + w.estimate
    return all(end <= t or ps.leaves_room(w, r, t) for t, r in reserved)


class _DeviceTimes:
    """When jobs asking for devices can first be placed, for conservative's reservations.

    What :func:`gridsched.core.devices.choose` can place at a later time ``t``
    is decided on the devices free then (:meth:`Pass.busy_devices_at`) and, on
    a map, the cores free by then (:meth:`Pass.cores_at`): both only grow with
    ``t`` while no job starts, so the first time a request can be placed is
    found by bisection over the times devices or cores come free, and kept per
    request until a job starts (or is preempted).
    """

    def __init__(self, ps: Pass) -> None:
        self.ps = ps
        self.state: tuple[int, int, int] = (-1, -1, -1)
        self.times: list[float] = []
        self.first: dict[tuple[object, ...], float] = {}

    def _fresh(self) -> None:
        ps = self.ps
        state = (len(ps.dev_ends), len(ps.releases), len(ps.preempted))
        if state == self.state:
            return
        self.state = state
        self.first.clear()
        now = ps.now
        events = {e for e, _keys, _whole in ps.dev_ends}
        events.update(e for e, _cores in ps.releases)
        events.update(counted_end(r, now, ps.mode) for r in ps.general if r.devices)
        self.times = sorted(e for e in events if e > now)

    def _places(self, w: Waiting, t: float) -> bool:
        ps = self.ps
        return places_devices(ps.snap, w, ps.busy_devices_at(t), ps.cores_at(t), ())

    def start(self, w: Waiting, v: Vec, t: float, later: bool) -> float:
        """The reservation time of ``w`` from ``t`` (its time by count and, on a map, placement) on: the
        first time from then on at which devices.choose can also place it and the count still fits
        (``later``: after now, for a job that may not start now)."""
        self._fresh()
        ps = self.ps
        kept = ps.snap.kept.get(w.id) if ps.snap.kept else None
        key = (w.devices, w.ncpus, w.place, later, kept)
        first = self.first.get(key)
        if first is None:
            first = self.first[key] = self._first(w, later)
        if t >= first:
            return t
        if first == inf:
            return inf
        return ps.placed_earliest(w, v, w.estimate, first)

    def _first(self, w: Waiting, later: bool) -> float:
        if not later and self._places(w, self.ps.now):
            return self.ps.now
        times = self.times
        if not times or not self._places(w, times[-1]):
            return inf
        lo, hi = 0, len(times) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._places(w, times[mid]):
                hi = mid
            else:
                lo = mid + 1
        return times[lo]
