"""What a pass leaves the head job: preemption for it, and the devices and cores free now, coming
free, or free at its reservation time (:class:`Pass`, the state of a pass with these questions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gridsched.core import board_memory
from gridsched.core import devices as dev
from gridsched.core.end_time import counted_end
from gridsched.core.memory import MEMORY
from gridsched.core.placement import assign
from gridsched.core.policy.state import PassState, Vec
from gridsched.core.preempt import device_victims, places_devices, search, victims
from gridsched.core.tree import preempt_order
from gridsched.core.types import Kill, Preempt, Running, Waiting


def overrun(r: Running, now: float) -> bool:
    """Whether ``r`` was started on an estimate a backfill relied on (``planned``) and has outlived it."""
    return r.planned is not None and r.start + r.planned <= now


def overran(r: Running, head: Waiting | None) -> str:
    """Why ``r``, overrunning the estimate it was backfilled on, is ended (a :class:`Kill`'s reason)."""
    waited = f" while job {head.id} waited" if head is not None else ""
    return f"overran the estimate it was backfilled on ({r.planned:.0f}s){waited}"


class Pass(PassState):
    """The state of one pass, with what it leaves the head job: preemption for it, and the devices and
    cores free now, coming free (stopping or just preempted jobs'), or free at its reservation time."""

    def preempt(self, cands: list[Running], short: list[int], head: Waiting | None = None) -> bool:
        """Preempt ``cands`` (most cores first) until no component of ``short`` is positive.

        On a machine map, for ``head``, the chosen jobs must also leave cores
        where ``head`` can be placed (:func:`gridsched.core.preempt.victims`: the
        smallest set that does, most cores first among sets of one size).
        Nothing is preempted unless the chosen jobs together would do.
        """
        vecs = {r.id: self.freed(r) for r in cands}
        total = [0] * self.dims
        for v in vecs.values():
            self.accumulate(total, v)
        if any(short[d] > total[d] for d in range(self.dims)):
            return False
        order = preempt_order(self.snap, cands)  # most cores first; leaves first in job trees
        chosen: list[Running] = []
        if head is not None and head.devices and not head.flex:  # distinct devices, on the right boards
            got = device_victims(
                self.snap,
                order,
                head,
                self._by_count(order, vecs, short),
                lambda rs: all(sum(vecs[r.id][d] for r in rs) >= short[d] for d in range(self.dims) if short[d] > 0),
                self.busy_devices(),
                self.coming_set() if self.free_set is not None else None,
            )
            if got is None:
                return False
            chosen = got
            for r in chosen:
                v = vecs[r.id]
                for d in range(self.dims):
                    short[d] -= v[d]
        elif head is not None and self.machine is not None:
            if self.asks_board_memory(head):
                got = self._memory_victims(order, head, vecs, short)
            else:
                got = victims(self.snap, order, head, self.coming_set(), short[0])
            if got is None:
                return False
            chosen = list(got)
            for r in chosen:
                v = vecs[r.id]
                for d in range(self.dims):
                    short[d] -= v[d]
        picked = {r.id for r in chosen}
        for r in order:
            if all(s <= 0 for s in short):
                break
            v = vecs[r.id]
            if r.id in picked or not any(v[d] > 0 and short[d] > 0 for d in range(self.dims)):
                continue
            chosen.append(r)
            for d in range(self.dims):
                short[d] -= v[d]
        for r in chosen:
            if r.preemptable:
                self.decisions.append(Preempt(r.id))
            else:  # backfilled on its own estimate, which it overran: ended as at its walltime
                self.decisions.append(Kill(r.id, overran(r, head)))
            self.preempted.add(r.id)
            e = counted_end(r, self.now, self.mode)
            v = vecs[r.id]
            for d in range(self.dims):
                if v[d] and e > self.now:
                    self.profs[d].add(self.now, e, v[d])
                    self.rising = False
                    if self.loose is not None:
                        self.loose[d].add(self.now, e, v[d])
            if self.machine is not None:
                self.releases.append((self.now, r.cores))
        return True

    def _memory_victims(
        self, order: list[Running], head: Waiting, vecs: dict[int, Vec], short: list[int]
    ) -> list[Running] | None:
        """The fewest of ``order`` to preempt so that ``head`` has what it is ``short`` of by count, and cores
        where it can be placed with its memory on their boards (:func:`gridsched.core.preempt.search`): the
        cores free now or coming free and theirs, the memory coming free on each board and theirs (none of
        a job that keeps its memory, suspended).  [] when nothing needs preempting; None when none would do."""
        machine = self.machine
        assert machine is not None
        coming = self.coming_set()
        mem = self.board_memory_at(self.now, coming=True)
        dims = range(self.dims)

        def ok(rs: Sequence[Running]) -> bool:
            if any(short[d] > 0 and sum(vecs[r.id][d] for r in rs) < short[d] for d in dims):
                return False
            free = list(mem) if mem is not None else None
            if free is not None:
                for r in rs:
                    if not r.keeps_memory:
                        for b, k in board_memory.shares(machine, r.cores, board_memory.mem_of(r.resources)).items():
                            free[b] += k
            return self.placeable_with(head, coming.union(*(r.cores for r in rs)), free)

        return [] if ok(()) else search(order, ok)

    def _by_count(self, order: list[Running], vecs: dict[int, Vec], short: list[int]) -> list[Running]:
        """``order`` taken while some component of ``short`` is positive, each job that frees some of it."""
        left = list(short)
        out: list[Running] = []
        for r in order:
            if all(s <= 0 for s in left):
                break
            v = vecs[r.id]
            if not any(v[d] > 0 and left[d] > 0 for d in range(self.dims)):
                continue
            out.append(r)
            for d in range(self.dims):
                left[d] -= v[d]
        return out

    def freed(self, r: Running) -> Vec:
        """What preempting ``r`` frees: its vector, without its devices and its memory if it keeps them
        (suspended)."""
        v = self.vec(r)
        devices, memory = r.keeps_devices and bool(r.devices), r.keeps_memory
        if not (devices or memory):
            return v
        return tuple(
            0
            if d
            and ((devices and self.names[d - 1].startswith(dev.PREFIX)) or (memory and self.names[d - 1] == MEMORY))
            else x
            for d, x in enumerate(v)
        )

    def busy_devices(self) -> dict[tuple[str, int], int]:
        """The slots in use per device by the jobs that stay: all but the stopping and just preempted ones
        (a preempted job that keeps its devices stays with them)."""
        used = dict(self.device_use())
        gone = [
            r
            for r in self.snap.running
            if r.devices and (r.stopping or (r.id in self.preempted and not r.keeps_devices))
        ]
        for k, n in dev.used_slots(((r.devices, r.whole_devices) for r in gone), self.snap.devices).items():
            used[k] -= n
        return used

    def head_devices_blocked(self, head: Waiting) -> bool:
        """Whether ``head``, which asks for devices, cannot be placed on what is free now or coming free
        (:func:`gridsched.core.devices.choose`), whatever the counts say."""
        coming = self.coming_set() if self.free_set is not None else None
        return not places_devices(self.snap, head, self.busy_devices(), coming, ())

    def leaves_devices(self, w: Waiting, head: Waiting) -> bool:
        """Whether ``head`` (asking for devices, its reservation time come) can still be placed on what is
        free now or coming free once ``w`` runs on the devices and cores it would get now."""
        took = self._would_take(w, self.busy_devices())
        if took is None:
            return True  # it does not start now, or cores by count: the extra count keeps the head's
        busy, taken = took
        coming = self.coming_set().difference(taken) if self.free_set is not None else None
        return places_devices(self.snap, head, busy, coming, ())

    def _would_take(
        self, w: Waiting, busy: Mapping[tuple[str, int], int]
    ) -> tuple[Mapping[tuple[str, int], int], frozenset[int]] | None:
        """The device slots in use (``busy`` and ``w``'s, in a new dict) and the cores ``w`` would hold if
        it started now; None if it cannot start now, or when there is nothing to check (no devices asked
        for and cores only counted)."""
        if w.devices and not w.flex:
            got = self.choose_devices(w)
            if got is None:
                return None
            keys, cores, held = got
            if not (self.snap.kept and w.id in self.snap.kept):
                more = dict(busy)
                whole = any(a.exclusive for a in w.devices)
                for k, n in dev.used_slots(((keys, whole),), self.snap.devices).items():
                    more[k] = more.get(k, 0) + n
                busy = more
            return busy, held or frozenset(cores)
        if self.machine is not None and self.free_set is not None:
            got_c = assign(self.machine, self.free_set, w.ncpus, w.place)
            if got_c is None:
                return None
            return busy, got_c[1]
        return None

    def busy_devices_at(self, t: float) -> dict[tuple[str, int], int]:
        """The slots in use per device at ``t`` (later than now): by the running jobs counted as ending
        after ``t`` (stopping ones and those just preempted without keeping their devices are gone), by
        the suspended jobs that keep theirs, and by the jobs started in this pass that end after ``t``."""
        memo = self._busy_at
        if memo is not None and memo[:3] == (t, len(self.dev_ends), len(self.preempted)):
            return memo[3]
        snap, now, mode = self.snap, self.now, self.mode
        holders: list[tuple[Iterable[tuple[str, int]], bool]] = []
        for r in snap.running:
            if not r.devices:
                continue
            if r.id in self.preempted:
                if r.keeps_devices:
                    holders.append((r.devices, r.whole_devices))
            elif not r.stopping and counted_end(r, now, mode) > t:
                holders.append((r.devices, r.whole_devices))
        holders.extend(snap.kept.values())
        holders.extend((keys, whole) for end, keys, whole in self.dev_ends if end > t)
        used = dev.used_slots(holders, snap.devices)
        self._busy_at = (t, len(self.dev_ends), len(self.preempted), used)
        return used

    def head_devices_placeable_at(self, head: Waiting, t: float) -> bool:
        """Whether ``head``, which asks for devices, can be placed at ``t`` (later than now) by
        :func:`gridsched.core.devices.choose` on the devices and (on a map) the cores free then."""
        return places_devices(self.snap, head, self.busy_devices_at(t), self.cores_at(t), ())

    def leaves_devices_at(self, w: Waiting, head: Waiting, t: float) -> bool:
        """Whether ``head`` (asking for devices, its reservation at ``t``, later than now) can still be
        placed then by :func:`gridsched.core.devices.choose` once ``w``, running past ``t``, holds the
        devices and cores it would get now: on the devices free at ``t`` and, on a map, the cores free
        by then less ``w``'s.  Without a map the cores are only counted (the profile keeps them)."""
        took = self._would_take(w, self.busy_devices_at(t))
        if took is None:
            return True  # it does not start now, or no devices and cores by count: the profile keeps the head's
        busy, taken = took
        then = self.cores_at(t)
        return places_devices(self.snap, head, busy, then.difference(taken) if then is not None else None, ())

    def cores_at(self, t: float) -> frozenset[int] | None:
        """On a map, the cores free at ``t``: free now, or held by a job counted as ending by then."""
        if self.machine is None or self.free_set is None:
            return None
        cores = set(self.free_set)
        for when, cs in self.releases:
            if when <= t:
                cores.update(cs)
        return frozenset(cores)

    def coming(self) -> list[int]:
        """Free now plus held by stopping or just preempted jobs."""
        acc = list(self.free_now)
        for r in self.general:
            if r.stopping:
                self.accumulate(acc, self.vec(r))
            elif r.id in self.preempted:
                self.accumulate(acc, self.freed(r))
        return acc

    def coming_set(self) -> frozenset[int]:
        """The cores free now or coming free (stopping or just preempted jobs'); empty without a map."""
        if self.free_set is None:
            return frozenset()
        return self.free_set.union(*(r.cores for r in self.general if r.stopping or r.id in self.preempted))

    def placeable_at(
        self, w: Waiting, t: float, without: frozenset[int] = frozenset(), less: Mapping[int, int] | None = None
    ) -> bool:
        """Whether ``w`` can be placed at ``t`` on the cores free by then (less ``without``) and, where the
        boards' memory is counted, with its memory on their boards (less ``less``, MiB by board)."""
        if self.machine is None or (w.flex and w.place is None):
            return True
        cores = set(self.free_set or ()).difference(without)
        for when, cs in self.releases:
            if when <= t:
                cores.update(cs)
        if not self.asks_board_memory(w):
            return self.placeable_on(w, frozenset(cores))
        return self.placeable_with(w, frozenset(cores), _less(self.board_memory_at(t), less))

    def placeable_coming(self, w: Waiting, less: Mapping[int, int] | None = None) -> bool:
        """Whether ``w`` can be placed on the cores free now or coming free (stopping, just preempted) and,
        where the boards' memory is counted, with its memory on their boards (less ``less``)."""
        return self._placeable_coming(w, self.coming_set(), less)

    def _placeable_coming(self, w: Waiting, cores: frozenset[int], less: Mapping[int, int] | None) -> bool:
        if not self.asks_board_memory(w):
            return self.placeable_on(w, cores)
        return self.placeable_with(w, cores, _less(self.board_memory_at(self.now, coming=True), less))

    def leaves_room(self, w: Waiting, head: Waiting, t: float) -> bool:
        """Whether ``head`` can still be placed at ``t`` once ``w`` runs on the cores it would get now (and,
        where the boards' memory is counted, holds its memory on their boards).

        At ``t <= now`` (the reservation time has come) the head has only the
        cores free now or coming free (stopping, just preempted), never those
        of jobs merely counted as ended.
        """
        machine = self.machine
        where = self.memory_cores(w) if machine is not None else None
        got = assign(machine, where, w.ncpus, w.place) if machine is not None and where is not None else None
        if got is None:
            return True
        less = None
        if self.asks_board_memory(head) and w.resources:
            assert machine is not None
            less = board_memory.shares(machine, got[0], board_memory.mem_of(w.resources))
        if t <= self.now:
            return self._placeable_coming(head, self.coming_set().difference(got[1]), less)
        return self.placeable_at(head, t, got[1], less)


def _less(free: list[int] | None, less: Mapping[int, int] | None) -> list[int] | None:
    """``free`` (MiB free on each board) less ``less`` (MiB by board)."""
    if free is None or not less:
        return free
    return [x - less.get(b, 0) for b, x in enumerate(free)]
