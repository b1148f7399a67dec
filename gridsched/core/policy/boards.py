"""What one pass holds on the boards: the memory free on each (where the boards' memory is counted,
:mod:`gridsched.core.board_memory`) and given back over time, and the devices' slots in use; and where on the
free cores a job may be placed with them.  :class:`gridsched.core.policy.state.PassState` is built on it."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from math import inf
from typing import TYPE_CHECKING

from gridsched.core import board_memory
from gridsched.core import devices as dev
from gridsched.core.end_time import counted_end
from gridsched.core.memory import MEMORY
from gridsched.core.placement import assign
from gridsched.core.types import Resv, Running, Snapshot, Waiting

if TYPE_CHECKING:
    from gridsched.core.topology import MachineMap


class BoardState:
    """The boards' side of a pass's state (memory per board, devices); the pass's fields it reads are set by
    :class:`~gridsched.core.policy.state.PassState`."""

    snap: Snapshot
    now: float
    mode: int
    machine: MachineMap | None
    free_set: frozenset[int] | None
    general: Sequence[Running]
    active: dict[int, Resv]
    bound: list[Running]
    preempted: set[int]

    # slots in use per device (built when a job asking for devices is first looked at)
    dev_used: dict[tuple[str, int], int] | None = None
    _picked: tuple[tuple[str, int], ...] = ()
    # MiB free on each board, where the boards' memory is counted (gridsched.core.board_memory); built when
    # a job asking for memory is first placed
    _board_free: list[int] | None = None
    _boards_counted: bool | None = None
    _mem_memo: tuple[tuple[int, frozenset[int], tuple[int, ...]], frozenset[int] | None] | None = None
    # where the boards' memory is counted: the MiB each job started in this pass takes from each board, and
    # when it ends; and the memory running jobs and those give back over time (see _memory_ends)
    _mem_started: list[tuple[float, dict[int, int]]] | None = None
    _mem_ends: tuple[tuple[int, int], tuple[list[float], list[list[int]], list[int]]] | None = None

    def _board_memory(self) -> list[int] | None:
        """MiB free now on each board, or None where the boards' memory is not counted."""
        if self._boards_counted is None:
            machine, snap = self.machine, self.snap
            caps = board_memory.capacities(machine, snap.floating.get(MEMORY)) if machine else None
            self._boards_counted = caps is not None
            if machine is not None and caps is not None:
                # the running jobs outside active reservations, and those reservations' memory on the boards of
                # their cores (their jobs' memory is theirs)
                holders = [(r.cores, board_memory.mem_of(r.resources)) for r in self.general]
                holders.extend((rv.cores, board_memory.mem_of(rv.resources)) for rv in self.active.values())
                held = board_memory.used(machine, holders, len(caps))
                for kept in snap.kept_boards.values():  # suspended jobs keep theirs where it lies
                    for b, k in kept:
                        if 0 <= b < len(held):
                            held[b] += k
                self._board_free = [c - h for c, h in zip(caps, held)]
        return self._board_free

    def counts_board_memory(self) -> bool:
        """Whether the boards' memory is counted (a map that knows every board's memory, a memory pool)."""
        return self.machine is not None and self._board_memory() is not None

    def asks_board_memory(self, w: Waiting) -> bool:
        """Whether ``w`` asks for memory and the boards' memory is counted (a reservation without a mapping
        requirement takes any free cores: its memory is counted in the pool only, as it waits)."""
        return (
            self.machine is not None
            and bool(w.resources)
            and not (w.flex and w.place is None)
            and board_memory.mem_of(w.resources) > 0
            and self._board_memory() is not None
        )

    def _started_on_boards(self, w: Waiting, cores: Iterable[int], end: float) -> None:
        """Record the memory ``w``, started in this pass on ``cores``, holds on each board until ``end``."""
        assert self.machine is not None
        mib = board_memory.mem_of(w.resources)
        if mib > 0:
            if self._mem_started is None:
                self._mem_started = []
            self._mem_started.append((end, board_memory.shares(self.machine, cores, mib)))

    def let_go_on_boards(self, shares: dict[int, int], end: float) -> None:
        """Count ``shares`` (MiB by board), held now, as given back to the boards at ``end``."""
        if self._mem_started is None:
            self._mem_started = []
        self._mem_started.append((end, shares))

    def _memory_ends(self) -> tuple[list[float], list[list[int]], list[int]]:
        """The memory given back to the boards over time, for :meth:`board_memory_at`: the times, in order,
        at which running jobs are counted as ending and jobs started in this pass end; the MiB given back to
        each board by the first ``i`` of them (``i`` from 0); and that given back now by the stopping and
        just preempted jobs (a preempted job that keeps its memory gives back none)."""
        started = self._mem_started or []
        key = (len(started), len(self.preempted))
        memo = self._mem_ends
        if memo is not None and memo[0] == key:
            return memo[1]
        machine, now = self.machine, self.now
        assert machine is not None
        nboards = len(machine.boards)
        ends: list[tuple[float, dict[int, int]]] = []
        coming = [0] * nboards
        for r in self.general:
            mib = board_memory.mem_of(r.resources) if r.resources else 0
            if mib <= 0:
                continue
            preempted = r.id in self.preempted
            if preempted and r.keeps_memory:
                continue
            sh = board_memory.shares(machine, r.cores, mib)
            if preempted or r.stopping:
                for b, k in sh.items():
                    coming[b] += k
            ends.append((now if preempted else counted_end(r, now, self.mode), sh))
        ends.extend(started)
        if self.active:
            ends.extend(self._reservation_memory_ends())
        ends.sort(key=lambda e: e[0])
        acc = [0] * nboards
        cum = [list(acc)]
        for _, sh in ends:
            for b, k in sh.items():
                acc[b] += k
            cum.append(list(acc))
        out = ([e for e, _ in ends], cum, coming)
        self._mem_ends = (key, out)
        return out

    def _reservation_memory_ends(self) -> list[tuple[float, dict[int, int]]]:
        """When the active reservations give their memory back to the boards of their cores: at their end, but
        what a bound job running past the end of a reservation made with ``--no-kill`` keeps, at that job's."""
        machine, now = self.machine, self.now
        assert machine is not None
        out: list[tuple[float, dict[int, int]]] = []
        for rv in self.active.values():
            mib = board_memory.mem_of(rv.resources)
            if mib <= 0 or not rv.cores:
                continue
            sh = board_memory.shares(machine, rv.cores, mib)
            end = max(rv.end if rv.end is not None else inf, now)
            if not rv.kill:
                for b in self.bound:
                    if b.bind == rv.id and b.end > end:
                        past = board_memory.shares(machine, b.cores, board_memory.mem_of(b.resources))
                        past = {k: min(x, sh.get(k, 0)) for k, x in past.items()}
                        for k, x in past.items():
                            sh[k] -= x
                        out.append((b.end, past))
            out.append((end, sh))
        return out

    def board_memory_at(self, t: float, coming: bool = False) -> list[int] | None:
        """MiB free on each board at ``t``: free now, and given back by the jobs counted as ending by ``t``
        (``coming``: by the stopping and just preempted jobs only, as the head has them once its time has
        come); None where the boards' memory is not counted."""
        free = self._board_memory()
        if free is None:
            return None
        times, cum, soon = self._memory_ends()
        back = soon if coming else cum[bisect_right(times, t)]
        return [f + k for f, k in zip(free, back)]

    def placeable_with(self, w: Waiting, cores: frozenset[int], mem: list[int] | None) -> bool:
        """Whether ``cores`` hold ``w``'s mapping requirement and, ``mem`` given (MiB free on each board), its
        memory on the boards of the cores it would get (:func:`gridsched.core.board_memory.fit`)."""
        machine = self.machine
        if mem is None or machine is None or (w.flex and w.place is None):
            return self.placeable_on(w, cores)
        mib = board_memory.mem_of(w.resources)
        if mib <= 0:
            return self.placeable_on(w, cores)
        return (
            board_memory.fit(machine, cores, mem, mib, w.ncpus, lambda cs: assign(machine, cs, w.ncpus, w.place))
            is not None
        )

    def memory_cores(self, w: Waiting | None) -> frozenset[int] | None:
        """The free cores ``w`` may be placed on: those of the boards with its memory free, where the boards'
        memory is counted (None: no placement has it), else all the free cores."""
        free = self.free_set
        if free is None or w is None or self.machine is None:
            return free
        mib = board_memory.mem_of(w.resources) if w.resources else 0
        if mib <= 0:  # (a suspended job asks for none of the memory it keeps)
            if self.snap.kept_boards and w.id in self.snap.kept_boards:
                return self._on_kept_boards(w, free)
            return free
        boards = self._board_memory()
        if boards is None:
            return free
        key = (w.id, free, tuple(boards))  # asked when a job is found placeable, and again when it is taken
        memo = self._mem_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        machine = self.machine
        got = board_memory.fit(machine, free, boards, mib, w.ncpus, lambda cs: assign(machine, cs, w.ncpus, w.place))
        self._mem_memo = (key, got)
        return got

    def _kept_shares(self, w: Waiting) -> dict[int, int] | None:
        """The MiB suspended ``w`` keeps on each board (by position), where the boards' memory is counted."""
        kept = self.snap.kept_boards.get(w.id) if self.snap.kept_boards else None
        if kept is None or self._board_memory() is None:
            return None
        return dict(kept)

    def _on_kept_boards(self, w: Waiting, free: frozenset[int]) -> frozenset[int] | None:
        """The free cores suspended ``w`` may be continued on: those of the boards it keeps its memory on, as
        many on each as its memory there pays for (its memory is bound to them and never left: it is continued
        with the share it keeps on each, asking for none anew); None: no placement has it now."""
        machine = self.machine
        kept = self._kept_shares(w)
        if kept is None or machine is None:
            return free
        mem = [0] * len(machine.boards)
        for b, k in kept.items():
            if 0 <= b < len(mem):
                mem[b] = k
        mib = sum(mem)
        if mib <= 0:
            return free
        return board_memory.fit(machine, free, mem, mib, w.ncpus, lambda cs: assign(machine, cs, w.ncpus, w.place))

    def _take_memory(self, w: Waiting | None, cores: Iterable[int]) -> None:
        """Hold ``w``'s memory on the boards of ``cores`` (where the boards' memory is counted)."""
        boards = self._board_free
        if boards is None or w is None or self.machine is None or not w.resources:
            return
        for b, k in board_memory.shares(self.machine, cores, board_memory.mem_of(w.resources)).items():
            boards[b] -= k

    def device_use(self) -> dict[tuple[str, int], int]:
        """The slots in use per device: by the running jobs, by the suspended jobs that keep theirs, and by
        the jobs started in this pass (kept up to date by :meth:`_take_devices`)."""
        used = self.dev_used
        if used is None:
            snap = self.snap
            holders = [(r.devices, r.whole_devices) for r in snap.running if r.devices]
            holders.extend(snap.kept.values())
            used = self.dev_used = dev.used_slots(holders, snap.devices)
        return used

    def choose_devices(self, w: Waiting) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...], frozenset[int]] | None:
        """The devices and cores ``w`` gets now (:func:`gridsched.core.devices.choose`), or None.

        A suspended job that kept its devices is continued on them alone (they are its own)."""
        used = self.device_use()
        kept = self.snap.kept.get(w.id) if self.snap.kept else None
        if kept is None:
            return dev.choose(w.devices, self.snap.devices, used, self.machine, self.free_set, w.ncpus, w.place)
        used = dict(used)
        for k, n in dev.used_slots((kept,), self.snap.devices).items():
            used[k] -= n
        return dev.choose(w.devices, self.snap.devices, used, self.machine, self.free_set, w.ncpus, w.place, kept[0])

    def _devices_on_memory(
        self, w: Waiting
    ) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...], frozenset[int]] | None:
        """:meth:`choose_devices` among the cores whose boards have ``w``'s memory free (where counted)."""
        free = self.free_set
        if free is None:
            return self.choose_devices(w)
        cores = self.memory_cores(w)
        if cores is None:
            return None
        if cores is free:
            return self.choose_devices(w)
        self.free_set = cores
        try:
            got = self.choose_devices(w)
        finally:
            self.free_set = free
        boards = self._board_free
        if got is not None and boards is not None and self.machine is not None:
            for b, k in board_memory.shares(self.machine, got[1], board_memory.mem_of(w.resources)).items():
                if k > boards[b]:
                    return None
        return got

    def _take_devices(self, w: Waiting) -> tuple[int, ...] | None:
        """Take the devices (and the cores) :meth:`choose_devices` gives ``w``; its cores (None: not now)."""
        got = self._devices_on_memory(w)
        if got is None:
            return None
        keys, cores, held = got
        self._take_memory(w, cores)
        assert self.dev_used is not None
        if not (self.snap.kept and w.id in self.snap.kept):  # a suspended job's kept slots are counted already
            whole = any(a.exclusive for a in w.devices)
            for k, n in dev.used_slots(((keys, whole),), self.snap.devices).items():
                self.dev_used[k] = self.dev_used.get(k, 0) + n
        self._picked = keys
        if self.free_set is not None:
            self.free_set = self.free_set.difference(held or cores)
        return cores

    def placeable_on(self, w: Waiting, cores: frozenset[int]) -> bool:
        """Whether ``cores`` hold ``w``'s mapping requirement (always, without a map, and for a
        reservation without one: it takes any free cores)."""
        if self.machine is None or (w.flex and w.place is None):
            return True
        return assign(self.machine, cores, w.ncpus, w.place) is not None
