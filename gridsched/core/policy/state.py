"""The state of one pass: the availability profiles, what is free now, and what the pass takes.

:class:`PassState` holds one profile per resource (cores, then each floating resource), the cores
free now and, with a machine map, where they are; it answers when a request fits (by count and by
placement) and takes and holds what the pass starts.  :class:`gridsched.core.policy.room.Pass` adds
what a pass leaves the head job (preemption, devices and cores free at a later time).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from math import inf, nextafter
from operator import attrgetter

from gridsched.core import board_memory
from gridsched.core import devices as dev
from gridsched.core.end_time import counted_end
from gridsched.core.placement import assign
from gridsched.core.policy.boards import BoardState
from gridsched.core.profile import Profile, earliest_common_start, first_free, from_ends
from gridsched.core.types import Activate, Decision, Resv, Running, Snapshot, Start, Waiting

_NCPUS = attrgetter("ncpus")


Vec = tuple[int, ...]


def pick(free: frozenset[int] | None, n: int) -> tuple[int, ...]:
    """The cores for a job of ``n`` cores without a map: the lowest-numbered free ones."""
    if free is None:
        return ()
    return tuple(sorted(free)[:n])


class PassState(BoardState):
    """One pass over a snapshot: the profiles, what is free now, the decisions taken."""

    names: list[str]  # the floating resources, in vector order after the cores
    index: dict[str, int]
    dims: int
    total: tuple[int, ...]
    active: dict[int, Resv]
    bound: list[Running]
    general: Sequence[Running]
    free_now: list[int]
    cap: list[int]
    profs_built: list[Profile] | None

    # What a pass starts with and most passes never change, as class attributes: set on the instance only
    # when changed (a pass is built for every scheduling event; each attribute set costs).
    # While the profile is not built: the one hold from a later time on (the head's reservation: start,
    # duration, cores) and the cores left free when it begins.
    later_hold: tuple[float, float, int] | None = None
    left_at_hold = 0
    _at: tuple[float, int] | None = None
    wake = inf
    _since_memo: tuple[tuple[int, int, int, int], dict[object, object]] | None = None
    _order_memo: tuple[tuple[int, int], tuple[list[tuple[float, tuple[int, ...]]], list[int], list[int]]] | None = None
    _busy_at: tuple[float, int, int, dict[tuple[str, int], int]] | None = None

    def __init__(self, snap: Snapshot, mode: int) -> None:
        self.snap = snap
        now = self.now = snap.now
        self.free_set = snap.free
        # with a machine map, jobs are placed, and the earliest start of a job is
        # the earliest time its requirement can be met on the cores free by then
        self.machine = snap.machine if snap.free is not None else None
        # (time, cores) freed then: running jobs at their counted ends, jobs started in this pass
        self.releases: list[tuple[float, tuple[int, ...]]] = []
        # (on the instance: read for every job a loop looks at)
        self.loose: list[Profile] | None = None
        # True while nothing is held from a later time on (only running jobs ending and
        # jobs started now): the profiles never fall, so what is free now stays free
        self.rising = True
        self.mode = mode
        if not snap.floating and not snap.reservations and not snap.devices:
            # cores only, no reservation: the common case, in one sweep over the running jobs
            self.names, self.index, self.dims, self.total = [], {}, 1, (snap.ncores,)
            self.active, self.bound = {}, []
            general = self.general = snap.running
            # (an end before now may stay so: every reader counts it as free now)
            if mode:
                ends0 = [(counted_end(r, now, mode), r.ncpus) for r in general]
            else:  # counted_end for the user's walltime
                ends0 = [(now if r.stopping else r.start + r.estimate, r.ncpus) for r in general]
            held0 = sum(map(_NCPUS, general))
            if self.machine is not None:
                self.releases = [(e if e > now else now, r.cores) for (e, _), r in zip(ends0, general)]
            free0 = len(snap.free) if snap.free is not None else snap.ncores - held0
            self.free_now = [free0]
            self.cap = [free0 + held0]
            # the profile is built when first read (see profs): a pass that only starts
            # jobs in queue order never reads it, and jobs started before are two numbers each
            self.profs_built = None
            self._ends = ends0
        else:
            self._general_init(snap, mode)
        self.decisions: list[Decision] = []
        self.preempted: set[int] = set()
        self.activated: dict[int, tuple[tuple[int, ...], float]] = {}
        # the devices of the jobs started in this pass: (counted end, device keys, whole)
        self.dev_ends: list[tuple[float, tuple[tuple[str, int], ...], bool]] = []

    def _general_init(self, snap: Snapshot, mode: int) -> None:
        """The state with floating resources or reservations (one profile per resource)."""
        now = self.now
        floating = {**snap.floating, **dev.totals(snap.devices)} if snap.devices else snap.floating
        self.names = names = sorted(floating)
        self.index = {n: k + 1 for k, n in enumerate(names)}
        self.dims = dims = len(names) + 1
        self.total = (snap.ncores, *(floating[n] for n in names))
        active = self.active = {r.id: r for r in snap.reservations if r.active}
        if active:
            general: Sequence[Running] = [r for r in snap.running if r.bind is None or r.bind not in active]
            self.bound = [r for r in snap.running if r.bind is not None and r.bind in active]
        else:
            general, self.bound = snap.running, []
        self.general = general
        free = [0] * dims
        held = [0] * dims
        ends: list[list[tuple[float, int]]] = [[] for _ in range(dims)]
        # the running jobs in one sweep: what they hold, and when they release it
        ends0 = ends[0]
        releases = self.releases if self.machine is not None else None
        for r in general:
            e = counted_end(r, now, mode)
            if releases is not None:
                releases.append((e, r.cores))
            if r.resources:
                for d, x in enumerate(self.vec(r)):
                    if x:
                        held[d] += x
                        ends[d].append((e, x))
            else:
                n = r.ncpus
                held[0] += n
                if n:
                    ends0.append((e, n))
        for rv in active.values():
            self.accumulate(held, self.vec(rv))
        for keys, whole in snap.kept.values():  # kept by suspended jobs: held, never released by a running end
            for name, k in dev.held(keys, snap.devices, whole):
                d = self.index.get(name, 0)
                if d:
                    held[d] += k
        for kept in snap.kept_floating.values():  # kept by suspended jobs (their memory), as above
            for name, k in kept:
                d = self.index.get(name, 0)
                if d:
                    held[d] += k
        for d in range(1, dims):
            free[d] = self.total[d] - held[d]
        if snap.free is not None:
            free[0] = len(snap.free)
        else:
            free[0] = snap.ncores - held[0]
        self.free_now = free
        self.cap = [free[d] + held[d] for d in range(dims)]

        def release(when: float, v: Iterable[int]) -> None:
            for d, x in enumerate(v):
                if x:
                    ends[d].append((when, x))

        for rv in active.values():
            v = list(self.vec(rv))
            end = rv.end if rv.end is not None else inf
            if not rv.kill:
                for b in self.bound:
                    if b.bind == rv.id and b.end > end:
                        bv = self.vec(b)
                        for d in range(dims):
                            v[d] -= bv[d]
                        release(max(b.end, now), bv)
            release(max(end, now), v)
        self.profs_built = [from_ends(now, free[d], ends[d]) for d in range(dims)]

    # -- vectors ------------------------------------------------------------
    def vec(self, x: Waiting | Running | Resv) -> Vec:
        if not x.resources:
            return (x.ncpus,) + (0,) * (self.dims - 1)
        v = [0] * self.dims
        v[0] = x.ncpus
        for name, k in x.resources:
            d = self.index.get(name)
            if d is None:
                if k > 0:
                    v[0] = -1  # unknown resource: never fits (see possible)
                continue
            v[d] += k
        return tuple(v)

    def possible(self, v: Vec) -> bool:
        """Whether ``v`` can ever be had."""
        return v[0] >= 0 and all(v[d] <= self.cap[d] for d in range(self.dims))

    @staticmethod
    def accumulate(acc: list[int], v: Vec) -> None:
        for d, x in enumerate(v):
            acc[d] += x

    # -- questions --------------------------------------------------------
    def earliest(
        self, v: Vec, duration: float, profs: list[Profile] | None = None, not_before: float | None = None
    ) -> float:
        if profs is None and self.profs_built is None and self.later_hold is None:
            return self._first_free(v[0], self.now if not_before is None else not_before)
        ps = profs or self.profs
        req = [(ps[d], v[d]) for d in range(self.dims) if v[d] > 0]
        return earliest_common_start(req, duration, self.now if not_before is None else not_before)

    def free_at(self, t: float) -> int:
        """The cores free at ``t`` (from now on), the profile not built and nothing held later."""
        return self.free_now[0] + sum(x for e, x in self._ends if e <= t)

    def _first_free(self, n: int, since: float) -> float:
        """The first time from ``since`` on that ``n`` cores are free, the profile not built.

        Only running and just started jobs are held, so what is free then stays free.
        """
        since, acc = first_free(n, max(since, self.now), self.free_now[0], self._ends)
        if since != inf:
            self._at = (since, acc)  # what is free then, for a hold there (see hold)
        return since

    def placed_earliest(self, w: Waiting, v: Vec, duration: float, not_before: float | None = None) -> float:
        """The earliest start of ``w``: when it fits by count and, on a map, can be placed.

        On a machine map the cores free at a time ``t`` are those free now and
        those of every job counted as ending by ``t``; the first ``t`` (from the
        count's answer on, at the ends of jobs) at which they hold ``w``'s
        mapping requirement, and the count still fits, is the answer.
        """
        machine = self.machine
        if machine is None or (w.flex and w.place is None):
            if self.profs_built is None and self.later_hold is None:  # earliest(), cores only, without a call
                return self._first_free(v[0], self.now if not_before is None else not_before)
            return self.earliest(v, duration, None, not_before)
        if self.asks_board_memory(w):  # most often placeable when the count fits: one placement asked, not ten
            t = self.earliest(v, duration, None, not_before)
            if t == inf or self.placed_on_boards_at(w, v[0], t):
                return t
            since = self.since_on_boards(w, v[0])
            return inf if since == inf else self.earliest(v, duration, None, max(since, t))
        since = self._placed_since(w, v[0], False)
        if since == inf:
            return inf
        return self.earliest(v, duration, None, since if not_before is None else max(since, not_before))

    def _release_order(self) -> tuple[list[tuple[float, tuple[int, ...]]], list[int], list[int]]:
        """The releases in time order; the cores in the order they come free (free now first); and how many
        of them are free after the first ``k`` releases (``k`` from 0).  Kept while nothing is started."""
        state = (len(self.releases), len(self.free_set or ()))
        memo = self._order_memo
        if memo is not None and memo[0] == state:
            return memo[1]
        rel = sorted(self.releases)
        base = self.free_set or frozenset()
        order = list(base)
        seen = set(base)
        count = [len(order)]
        for _, cs in rel:
            for c in cs:
                if c not in seen:
                    seen.add(c)
                    order.append(c)
            count.append(len(order))
        got = (rel, order, count)
        self._order_memo = (state, got)
        return got

    def _placeable_after(self, w: Waiting, n: int, k: int, on_boards: bool) -> bool:
        """Whether the cores free after the first ``k`` releases hold ``w``'s requirement of ``n`` cores
        (``on_boards``: and its memory on the boards of the cores it would get, free by then)."""
        machine = self.machine
        assert machine is not None
        rel, order, count = self._release_order()
        m = count[k]
        if m < n:
            return False
        cores = frozenset(order[:m]) if k else (self.free_set or frozenset())
        if not on_boards:
            if self.snap.kept_boards and w.id in self.snap.kept_boards:  # suspended: on the boards of its memory
                where = self._on_kept_boards(w, cores)
                return where is not None and assign(machine, where, n, w.place) is not None
            return assign(machine, cores, n, w.place) is not None
        return self.placeable_with(w, cores, self.board_memory_at(rel[k - 1][0]) if k else self._board_free)

    def _placed_since(self, w: Waiting, n: int, on_boards: bool) -> float:
        """The first time (now, or the end of a job) from which the cores free then hold ``w``'s requirement
        of ``n`` cores (``on_boards``: and its memory on the boards of the cores it would get); inf: never.

        The cores (and the boards' memory) free by a time only grow with it: the first release after which
        the requirement can be met is found by bisection."""
        rel = self._release_order()[0]
        if self._placeable_after(w, n, 0, on_boards):
            return self.now
        if not rel or not self._placeable_after(w, n, len(rel), on_boards):
            return inf
        lo, hi = 1, len(rel)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._placeable_after(w, n, mid, on_boards):
                hi = mid
            else:
                lo = mid + 1
        return rel[lo - 1][0]

    def _board_key(self, w: Waiting, n: int) -> tuple[tuple[int, object, int], dict[object, object]]:
        """``w``'s request (cores, requirement, memory) and the answers kept for such requests while nothing is
        started or preempted."""
        state = (len(self.releases), len(self.free_set or ()), len(self._mem_started or ()), len(self.preempted))
        memo = self._since_memo
        if memo is None or memo[0] != state:
            memo = self._since_memo = (state, {})
        return (n, w.place, board_memory.mem_of(w.resources)), memo[1]

    def since_on_boards(self, w: Waiting, n: int) -> float:
        """:meth:`_placed_since` with the boards' memory, kept per request (the forecast asks it of every
        pending job)."""
        key, kept = self._board_key(w, n)
        since = kept.get(key)
        if since is None:
            since = kept[key] = self._placed_since(w, n, True)
        return since  # type: ignore[return-value]

    def placed_on_boards_at(self, w: Waiting, n: int, t: float) -> bool:
        """Whether ``w`` (``n`` cores) can be placed at ``t`` with its memory on the boards of its cores, on
        the cores and the boards' memory free by then (answers kept per request and release)."""
        key, kept = self._board_key(w, n)
        k = bisect_right(self._release_order()[0], (t, (inf,)))
        got = kept.get((key, k))
        if got is None:
            got = kept[(key, k)] = self._placeable_after(w, n, k, True)
        return got  # type: ignore[return-value]

    def fits_now(self, v: Vec, duration: float, profs: list[Profile] | None = None) -> bool:
        """Whether ``v`` is free now and stays free for ``duration`` (nothing is promised to others)."""
        free = self.free_now
        if self.rising and profs is None:  # nothing is free now that is not free later
            return all(x <= free[d] for d, x in enumerate(v))
        if profs is None and self.profs_built is None:  # cores only, held from later on by one hold
            return v[0] <= free[0] and self.stays_free(v[0], duration)
        ps = profs or self.profs
        for d, x in enumerate(v):
            if x > free[d] or (x > 0 and not ps[d].fits_now(x, duration)):
                return False
        return True

    # -- changes ----------------------------------------------------------
    @property
    def profs(self) -> list[Profile]:
        """The availability profile of each resource (cores first)."""
        profs = self.profs_built
        if profs is None:  # cores only: free now, and the ends of running and just started jobs
            profs = self.profs_built = [from_ends(self.now, self.free_now[0], self._ends)]
            if self.later_hold is not None:
                profs[0].reserve(*self.later_hold)
        return profs

    def stays_free(self, n: int, duration: float) -> bool:
        """Whether ``n`` cores free now stay free for ``duration``, the profile not built.

        What is free only grows until the one later hold begins, and is least
        when it does (``left_at_hold`` left then): so ``n`` stays free for ever if
        ``n`` is at most that, else until the hold begins.
        """
        h = self.later_hold
        if h is None or n <= self.left_at_hold:
            return True
        return self.now + duration <= h[0] if duration > 0 else h[0] > self.now

    def hold(self, start: float, duration: float, v: Vec, fixed: bool = False, taken: bool = False) -> None:
        """Hold ``v`` over ``[start, start + duration)`` (``fixed``: not in the loose profiles;
        ``taken``: held from now on, and already taken from what is free now).

        A hold of duration 0 from a later time (a job of walltime 0 due then) holds the instant it
        begins, up to the next float: a job running across that instant must leave it room, as the
        cores-only test (:meth:`stays_free`) asks; a job ending then need not, and one that needs its
        cores from then on is reserved just after it (the next float).  From now on it holds
        nothing: such a job ends as it starts, and what it takes is out of what is free now."""
        if duration <= 0 and start > self.now:
            duration = nextafter(start, inf) - start
        if self.profs_built is None:  # cores only, the profile not built yet
            h = self.later_hold
            if taken:  # one more end
                self._at = None
                end = start + duration
                self._ends.append((end, v[0]))
                if h is not None and end > h[0]:
                    self.left_at_hold -= v[0]
                return
            if h is None and start > self.now:  # the head's reservation: kept as the cores it leaves when it begins
                self.later_hold = (start, duration, v[0])
                at = self._at
                self.left_at_hold = (at[1] if at is not None and at[0] == start else self.free_at(start)) - v[0]
                self.rising = False
                return
        if start > self.now:
            self.rising = False
        for d in range(self.dims):
            if v[d]:
                self.profs[d].reserve(start, duration, v[d])
                if self.loose is not None and not fixed:
                    self.loose[d].reserve(start, duration, v[d])

    def placeable(self, w: Waiting, v: Vec) -> bool:
        """Whether the free cores can hold ``w``'s mapping requirement now (always, without a map),
        and the free devices its devices (:func:`gridsched.core.devices.choose`); where the boards' memory is
        counted, on boards with its memory free (:func:`gridsched.core.board_memory.fit`)."""
        if w.devices and not w.flex:
            return self._devices_on_memory(w) is not None
        if self.free_set is None:
            return True
        cores = self.memory_cores(w)
        return cores is not None and self.placeable_on(w, cores)

    def take(self, v: Vec, w: Waiting | None = None) -> tuple[int, ...]:
        """Take ``v`` from what is free now; the cores picked.

        A job's mapping requirement is met: the pass starts a job only where
        :meth:`placeable` says the free cores can hold it.  So is a
        reservation's (``w`` its flexible entry, or :func:`~gridsched.core.policy.reservations._as_job` of a fixed
        one): it holds what a job so placed would.  A reservation without one
        is placed as a job with no requirement is (pack: the fewest boards,
        the best-fitting one first), or, if the free cores are too scattered
        for that, on the lowest-numbered ones.
        """
        for d in range(self.dims):
            self.free_now[d] -= v[d]
        if w is not None and w.devices and not w.flex:
            cores_d = self._take_devices(w)
            if cores_d is not None:
                return cores_d
        if self.free_set is None:
            return ()
        got = None
        if self.snap.machine is not None:
            where = self.memory_cores(w) if self.machine is not None else None
            got = assign(
                self.snap.machine, self.free_set if where is None else where, v[0], w.place if w is not None else None
            )
        cores, held = got if got is not None else (pick(self.free_set, v[0]), None)
        self._take_memory(w, cores)
        self.free_set = self.free_set.difference(held if held is not None else cores)
        return cores

    def start(self, w: Waiting, v: Vec, duration: float, backfilled: bool, planned: float | None) -> None:
        now = self.now
        self._picked = ()
        if self.profs_built is None and self.free_set is None and not w.devices:  # cores counted, no profile:
            # take and hold, inlined
            n = v[0]
            self.free_now[0] -= n
            end = now + duration
            self._ends.append((end, n))
            self._at = None
            h = self.later_hold
            if h is not None and end > h[0]:
                self.left_at_hold -= n
            cores: tuple[int, ...] = ()
        else:
            cores = self.take(v, w)
            self.hold(now, duration, v, taken=True)
            if self.machine is not None:
                self.releases.append((now + duration, cores))
                if self._board_free is not None:
                    if w.resources:
                        self._started_on_boards(w, cores, now + duration)
                    kept = self._kept_shares(w) if self.snap.kept_boards else None
                    if kept:  # a suspended job continued: what it kept it gives back at its end
                        self.let_go_on_boards(kept, now + duration)
        if w.flex:
            self.decisions.append(Activate(w.id, cores, now + w.estimate))
            self.activated[w.id] = (cores, now + w.estimate)
        else:
            if self._picked and not (self.snap.kept and w.id in self.snap.kept):  # (kept slots: in snap.kept)
                self.dev_ends.append((now + duration, self._picked, any(a.exclusive for a in w.devices)))
            self.decisions.append(Start(w.id, cores, backfilled, planned, self._picked))
            if planned is not None and now < now + planned < self.wake:
                self.wake = now + planned

    # -- reservations -----------------------------------------------------
