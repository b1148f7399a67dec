"""Each user's decayed usage (core-seconds), the input of fair share (:mod:`gridsched.core.priority`).

Kept cheap: read once from the accounting table when the daemon starts (every ended job's cores times
the time it ran, decayed from its end), then one number per user, added to as jobs end.  Nothing is
stored beyond the accounting rows the daemon keeps anyway, so a restart finds the same usage.  The
decay is the core's (:func:`gridsched.core.priority.decay`), with the half-life in force.
"""

from __future__ import annotations

import sqlite3

from gridsched.core.priority import decay


class Usage:
    def __init__(self) -> None:
        self._by_user: dict[str, tuple[float, float]] = {}  # user -> (core-seconds, as of this time)

    def load(self, conn: sqlite3.Connection, half_life: float) -> None:
        """The usage of every ended job in the accounting table."""
        rows = conn.execute(
            "SELECT user, ncpus * elapsed, end_time FROM jobs WHERE end_time IS NOT NULL AND elapsed > 0"
        )
        for user, amount, end in rows:
            self.add(str(user), float(amount), float(end), half_life)

    def add(self, user: str, amount: float, at: float, half_life: float) -> None:
        """``amount`` core-seconds used by ``user``, counted at time ``at``."""
        if amount <= 0:
            return
        old, t = self._by_user.get(user, (0.0, at))
        if at >= t:
            self._by_user[user] = (decay(old, at - t, half_life) + amount, at)
        else:
            self._by_user[user] = (old + decay(amount, t - at, half_life), t)

    def now(self, now: float, half_life: float) -> dict[str, float]:
        """Every user's usage decayed to ``now``."""
        return {u: decay(v, now - t, half_life) for u, (v, t) in self._by_user.items()}
