"""Sub-tasks of splittable jobs in the backfill windows left after a pass (see "Splittable jobs" in
:mod:`gridsched.core.policy`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import inf

from gridsched.core import devices as dev
from gridsched.core.placement import assign
from gridsched.core.policy.room import Pass
from gridsched.core.profile import Profile
from gridsched.core.split import chain_cores, fill_mixed, fill_window, per_chain
from gridsched.core.types import Snapshot, SplitInfo, Start, StartTasks, Waiting


def split_windows(ps: Pass, snap: Snapshot, rest: Sequence[Waiting]) -> None:
    """Sub-tasks of splittable jobs in the windows left after backfilling.

    The windows are the cores free now that nothing holds (the head's
    reservation, fixed reservations, conservative reservations), in bands by
    when something first needs them (:func:`_windows`); a job that also asks
    for floating resources is not split.  Sub-tasks that ask for devices
    (``SplitInfo.devices``) fill a window with at most as many chains as the
    devices have slots free until its end, each chain on distinct devices.
    """
    if not snap.splitting:
        return
    now = ps.now
    width = min(ps.free_now[0], ps.profs[0].free_at(now))
    if width <= 0:
        return
    cands = [w for w in rest if w.split is not None and (not w.resources or _device_split(w))]
    if not cands:
        return
    windows = _windows(ps.profs[0], now, width)
    if not windows:
        return
    started = [d for d in ps.decisions if type(d) is Start]
    pad = (0,) * (ps.dims - 1)
    devs = _DeviceChains(ps) if any(w.split is not None and w.split.devices for w in cands) else None
    whole = {w.id: any(a.exclusive for a in w.split.devices) for w in cands if w.split is not None and w.split.devices}
    for d in _split_fill(snap, cands, started, ps.free_set, windows, devs):
        ps.decisions.append(d)
        n = len(d.cores) if ps.free_set is not None else _piece_cores(d, snap)
        ps.free_now[0] -= n
        if d.devices:
            v = [0] * ps.dims
            v[0] = n
            for name, k in dev.held((key for ch in d.devices for key in ch), snap.devices, whole[d.job]):
                v[ps.index[name]] += k
            for i in range(1, ps.dims):
                ps.free_now[i] -= v[i]
            ps.hold(now, d.end - now, tuple(v), taken=True)
        else:
            ps.hold(now, d.end - now, (n, *pad), taken=True)
        if ps.free_set is not None:
            ps.free_set = ps.free_set.difference(d.cores)


def _device_split(w: Waiting) -> bool:
    """Whether ``w`` is a splittable job whose sub-tasks ask for devices and nothing floating."""
    return w.split is not None and bool(w.split.devices) and all(n.startswith(dev.PREFIX) for n, _ in w.resources)


class _DeviceChains:
    """The devices the chains of sub-tasks get in the backfill windows of a pass."""

    def __init__(self, ps: Pass) -> None:
        self.ps = ps

    def cap(self, sp: SplitInfo, end: float) -> int:
        """How many chains, each with the devices of one sub-task, the devices' slots hold from now to ``end``,
        on distinct devices free now."""
        ps = self.ps
        snap = ps.snap
        k = 1 << 30
        for name, per in dev.slots(sp.devices, snap.devices):
            d = ps.index.get(name)
            if d is None or per <= 0:
                return 0
            k = min(k, ps.profs[d].min_free(ps.now, end) // per, ps.free_now[d] // per)
        while k > 0 and self.choose_devices(sp, k) is None:
            k -= 1
        return k

    def choose_devices(self, sp: SplitInfo, k: int) -> tuple[tuple[str, int], ...] | None:
        asks = [replace(a, count=a.count * k) for a in sp.devices]
        got = dev.choose(asks, self.ps.snap.devices, self.ps.device_use(), None, None, 0, None)
        return got[0] if got is not None else None

    def take(self, sp: SplitInfo, k: int) -> tuple[tuple[tuple[str, int], ...], ...]:
        """The devices of ``k`` chains, now taken: per chain (empty: not that many)."""
        keys = self.choose_devices(sp, k)
        if keys is None:
            return ()
        snap = self.ps.snap
        used = self.ps.device_use()
        whole = any(a.exclusive for a in sp.devices)
        for key, n in dev.used_slots(((keys, whole),), snap.devices).items():
            used[key] = used.get(key, 0) + n
        return per_chain(sp.devices, keys, snap.devices, k)


def _piece_cores(d: StartTasks, snap: Snapshot) -> int:
    """The cores of the piece ``d`` starts (count-only mode)."""
    if d.widths:
        return sum(d.widths)
    w = next(x for x in snap.pending if x.id == d.job)
    return len(d.chains) * w.split.ncpus  # type: ignore[union-attr]


def _windows(prof: Profile, now: float, width: int) -> list[tuple[int, float]]:
    """The backfill windows in the ``width`` cores free now: ``(cores, end)`` bands.

    Reading the profile from now on, each time it drops below the cores
    still counted, the cores it loses close a band there: those cores are
    free from now until that time.  Cores it never loses form a band that
    is given the latest of those times (any end would do; a window that
    never closes is none).  Bands never overlap: at any instant the cores of
    the bands still open are at most what the profile has free.
    """
    out: list[tuple[int, float]] = []
    level = width
    last = inf
    for t, v in prof.steps():
        if t <= now or v >= level:
            continue
        low = v if v > 0 else 0
        out.append((level - low, t))
        last = t
        level = low
        if level == 0:
            break
    if level > 0 and last < inf:
        out.append((level, last))
    return out


def _split_fill(
    snap: Snapshot,
    rest: Sequence[Waiting],
    started: list[Start],
    free: frozenset[int] | None,
    windows: Sequence[tuple[int, float]],
    devs: _DeviceChains | None = None,
) -> tuple[StartTasks, ...]:
    """Sub-tasks of splittable jobs in the backfill ``windows`` (``(cores, end)`` bands from now).

    Each splittable job, in queue order, that did not start whole fills the
    windows, the longest first, with sub-tasks chained on the same cores
    (:func:`gridsched.core.split.fill_window`; sub-tasks of their own sizes:
    :func:`gridsched.core.split.fill_mixed`), each window's share placed like
    one job of that many cores: one ``StartTasks`` decision per window used.
    Every chain ends by its window's end; a sub-task is taken at most once.
    Sub-tasks that ask for devices (``devs``) get at most as many chains as
    :meth:`_DeviceChains.cap` allows, each with its own devices.
    """
    now = snap.now
    room = [[c, e] for c, e in sorted(windows, key=lambda x: -x[1]) if c > 0 and now < e < inf]
    if not room:
        return ()
    nfree = len(free) if free is not None else sum(int(c) for c, _ in room)
    done = {s.job for s in started}
    out: list[StartTasks] = []
    for w in rest:
        sp = w.split
        if sp is None or w.id in done or w.flex or w.bind is not None:
            continue
        left = sp.left
        for win in room:
            width = min(int(win[0]), nfree)
            if sp.devices:
                if sp.sizes or devs is None:
                    break
                width = min(width, devs.cap(sp, win[1]) * sp.ncpus)
            if width <= 0 or (not sp.sizes and sp.ncpus > width):
                continue
            length = win[1] - now
            widths: tuple[int, ...] = ()
            keys: tuple[tuple[tuple[str, int], ...], ...] = ()
            if sp.sizes:
                mixed = fill_mixed(left, sp.sizes, width, length)
                if not mixed:
                    continue
                chains = [ch for _, ch in mixed]
                widths = tuple(c for c, _ in mixed)
                n = sum(widths)
                sizes = sp.sizes
                dur = max(sum(sizes[i][1] for i in ch) for ch in chains)
            else:
                chains = fill_window(left, sp.ncpus, sp.task_time, width, length)
                if not chains:
                    continue
                n = len(chains) * sp.ncpus
                dur = max(map(len, chains)) * sp.task_time
                if sp.devices:
                    keys = devs.take(sp, len(chains)) if devs is not None else ()
                    if not keys:
                        continue
            if free is None:
                cores: tuple[int, ...] = ()
                nfree -= n
            else:
                got = assign(snap.machine, free, n, replace(w.place, ncpus=n) if w.place is not None else None)
                if got is None:
                    continue
                cores, held = got
                free = free.difference(held)
                if keys and w.place is None:  # each chain's cores on its devices' boards where free
                    cores = chain_cores(cores, sp.ncpus, keys, snap.devices, snap.machine, free)
                    free = free.union(held).difference(cores)
                nfree = len(free)
            win[0] -= n
            tasks = tuple(i for c in chains for i in c)
            out.append(StartTasks(w.id, tasks, cores, tuple(chains), now + dur, widths, keys))
            if widths:
                taken = set(tasks)
                left = tuple(i for i in left if i not in taken)
            else:  # fill_window takes the first ones
                left = left[len(tasks) :]
            if not left or nfree <= 0:
                break
        if nfree <= 0:
            break
    return tuple(out)
