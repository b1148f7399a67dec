"""Availability over time: how much of a resource is free from now on.

A :class:`Profile` is a step function of time.  It starts at a time ``origin``
(normally ``Snapshot.now``) and holds one integer amount per step: step ``i``
covers ``[times[i], times[i+1])`` and the last step lasts for ever.  It is the
one planning structure of the core: EASY's shadow time, conservative
backfilling's reservations, and the predicted start times of ``gstat`` are all
questions put to a profile.

Operations
----------
``add(start, end, amount)`` / ``remove(start, end, amount)``
    Change the amount over ``[start, end)``; ``end`` may be ``math.inf``.
    ``release(t, amount)`` is ``add(t, inf, amount)`` (a running job ends at
    ``t``).  Amounts may go negative (a reservation kept although the resource
    is over-committed, e.g. one that relies on preemption); a negative step is
    simply never enough for any request.
``reserve(start, duration, amount)``
    ``remove(start, start + duration, amount)``.
``earliest_start(amount, duration, not_before)``
    The earliest ``t >= max(not_before, origin)`` such that at least
    ``amount`` is free over the whole of ``[t, t + duration)`` (for
    ``duration == 0``: at the instant ``t``); ``math.inf`` if there is none.
    Such a ``t`` is always ``not_before`` or the time of a step.

Several resources
-----------------
A profile counts one resource (cores).  A request for several (cores and
floating resources such as licences, one profile each) is answered by
:func:`earliest_common_start`, which iterates each profile's
``earliest_start`` to a common fixed point; ``reserve`` is then applied to
each profile.  Adding a resource therefore means adding a profile, not
changing this one.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence

INF = math.inf


class Profile:
    """Free amount of one resource over time, from ``origin`` on."""

    __slots__ = ("_t", "_v", "_first", "_fit", "_until")

    def __init__(self, origin: float, amount: int) -> None:
        self._t: list[float] = [origin]
        self._v: list[int] = [amount]
        # amount -> start of the first step holding at least that amount.  Valid
        # while the profile only loses availability (reservations), which can only
        # move that step later; cleared when anything is added.
        self._first: dict[int, float] = {}
        # (amount, duration) -> the earliest start last found from the origin, a lower
        # bound for the same request under the same condition.
        self._fit: dict[tuple[int, float], float] = {}
        # amount -> when the free amount first drops below it (for fits_now); None after a change
        self._until: dict[int, float] | None = None

    # -- reading ---------------------------------------------------------
    @property
    def origin(self) -> float:
        return self._t[0]

    def steps(self) -> list[tuple[float, int]]:
        """The steps as ``(start time, amount)``, in time order."""
        return list(zip(self._t, self._v))

    def free_at(self, t: float) -> int:
        """The amount free at instant ``t`` (``t`` before the origin reads the origin)."""
        i = bisect_right(self._t, t) - 1
        return self._v[i if i > 0 else 0]

    def min_free(self, start: float, end: float) -> int:
        """The least amount free at any instant of ``[start, end)`` (or at ``start`` if empty)."""
        t, v = self._t, self._v
        i = bisect_right(t, start) - 1
        if i < 0:
            i = 0
        low = v[i]
        i += 1
        n = len(t)
        while i < n and t[i] < end:
            if v[i] < low:
                low = v[i]
            i += 1
        return low

    def fits_now(self, amount: int, duration: float) -> bool:
        """Whether ``amount`` is free over the whole of ``[origin, origin + duration)``.

        ``earliest_start(amount, duration) == origin``, in constant time (see
        :meth:`until`).
        """
        end = self.until(amount)
        t0 = self._t[0]
        return end > t0 if duration <= 0 else t0 + duration <= end

    def until(self, amount: int) -> float:
        """When the free amount first drops below ``amount`` (``origin``: it is below now; ``inf``: never).

        Found once per amount and change of the profile, and kept in
        :meth:`limits`: a pass asks this of many pending jobs and changes the
        profile only when it starts one.
        """
        lim = self._until
        if lim is None:
            lim = self._until = {}
        end = lim.get(amount)
        if end is None:
            end = INF
            for t, x in zip(self._t, self._v):
                if x < amount:
                    end = t
                    break
            lim[amount] = end
        return end

    def limits(self) -> dict[int, float]:
        """The answers of :meth:`until` found since the last change (a new dict after each change)."""
        lim = self._until
        if lim is None:
            lim = self._until = {}
        return lim

    def earliest_start(self, amount: int, duration: float, not_before: float | None = None) -> float:
        """The earliest time ``amount`` is free for ``duration``, not before ``not_before``."""
        t, v = self._t, self._v
        first = self._first
        key = (amount, duration)
        base = first.get(amount, t[0])
        low = self._fit.get(key, base)
        if low < base:
            low = base
        from_origin = not_before is None or not_before <= low
        start: float = low if from_origin else not_before  # type: ignore[assignment]
        record = from_origin and start == base
        n = len(t)
        i = bisect_right(t, start) - 1
        while True:
            while i < n and v[i] < amount:
                i += 1
            if record:
                first[amount] = t[i] if i < n else INF
                record = False
            if i == n:
                s = INF
                break
            s = t[i] if t[i] > start else start
            end = s + duration
            j = i + 1
            while j < n and t[j] < end:
                if v[j] < amount:
                    break
                j += 1
            else:
                break
            i = j
        if from_origin:
            self._fit[key] = s
        return s

    def copy(self) -> Profile:
        """An independent profile with the same steps."""
        other = Profile(self._t[0], self._v[0])
        other._t[:] = self._t
        other._v[:] = self._v
        return other

    # -- changing --------------------------------------------------------
    def _split(self, when: float) -> int:
        """Index of the step starting exactly at ``when``, creating it if needed."""
        t = self._t
        i = bisect_right(t, when) - 1
        if i < 0:
            raise ValueError(f"time {when} is before the profile origin {t[0]}")
        if t[i] == when:
            return i
        t.insert(i + 1, when)
        self._v.insert(i + 1, self._v[i])
        return i + 1

    def add(self, start: float, end: float, amount: int) -> None:
        """Add ``amount`` over ``[start, end)``; a ``start`` before the origin is clipped."""
        if start < self._t[0]:
            start = self._t[0]
        if not end > start or amount == 0:
            return
        self._until = None
        if amount > 0:
            self._first.clear()
            self._fit.clear()
        i = self._split(start)
        j = len(self._t) if end == INF else self._split(end)
        v = self._v
        v[i:j] = [x + amount for x in v[i:j]]

    def remove(self, start: float, end: float, amount: int) -> None:
        """Subtract ``amount`` over ``[start, end)``."""
        self.add(start, end, -amount)

    def release(self, when: float, amount: int) -> None:
        """``amount`` becomes free at ``when`` for good (a job ends)."""
        self.add(when, INF, amount)

    def reserve(self, start: float, duration: float, amount: int) -> None:
        """Hold ``amount`` over ``[start, start + duration)``."""
        self.add(start, start + duration, -amount)

    def __repr__(self) -> str:
        inner = ", ".join(f"{t:g}:{v}" for t, v in zip(self._t, self._v))
        return f"Profile({inner})"


def from_ends(origin: float, free_now: int, ends: Iterable[tuple[float, int]]) -> Profile:
    """A profile with ``free_now`` free at ``origin`` and each ``(time, amount)`` freed at ``time``.

    Built in one sweep over the sorted ends (``release`` one by one would be
    quadratic in the number of running jobs); an end before the origin counts
    at the origin, one at ``inf`` never.
    """
    prof = Profile(origin, free_now)
    t, v = prof._t, prof._v
    acc = free_now
    for when, amount in sorted(ends):
        if not amount or when == INF:
            continue
        acc += amount
        if when <= t[-1]:
            v[-1] = acc
        else:
            t.append(when)
            v.append(acc)
    return prof


def first_free(n: int, since: float, free: int, ends: Iterable[tuple[float, int]]) -> tuple[float, int]:
    """The first time from ``since`` on that ``n`` cores are free, with ``free`` free now and each ``(time,
    amount)`` of ``ends`` freed at ``time`` (one at or before ``since`` counts by then), without building the
    profile; and how many are free then.  ``inf`` when they never are."""
    acc = free
    for e, x in sorted(ends):
        if e > since:
            if acc >= n:
                break
            if e == INF:
                return INF, acc
            since = e
        acc += x
    return (since, acc) if acc >= n else (INF, acc)


def earliest_common_start(requests: Sequence[tuple[Profile, int]], duration: float, not_before: float) -> float:
    """The earliest time every ``(profile, amount)`` of ``requests`` is free for ``duration``.

    Each profile's ``earliest_start`` is monotone in ``not_before`` and returns
    a time at which that profile fits, so raising the candidate to the latest
    answer until all agree reaches the earliest common time.
    """
    t = not_before
    while True:
        moved = False
        for prof, amount in requests:
            s = prof.earliest_start(amount, duration, t)
            if s == INF:
                return INF
            if s > t:
                t = s
                moved = True
        if not moved:
            return t
