"""Parent-child job trees: cores lent by yielding parents, who may use them, and preemption order (pure).

A job submitted from inside a running job is its child.  ``Snapshot.parents``
maps each live job that has a parent to that parent.  A running parent that
waits for its children may *yield* its cores: the driver lists them in
``Snapshot.lent`` (one :class:`~gridsched.core.types.Lent` per yielding
parent) until the parent resumes.  Lent cores stay the parent's: they are
never in ``Snapshot.free``.  The resources of a tree are allocated to its
root: a task started on lent cores takes nothing from the machine's pool.

Who runs on a core
    The running jobs on one core form a stack: the job that got the core
    from the pool at the bottom, above it each job started on it as a lent
    core.  The top is the job started last (ties: the deeper, then the
    higher id); only the top may compute there.  A core lent by P is free
    when P is on top of it; a job started on it goes on top.  So a child
    running on P's cores that yields them lends them again, to its own
    descendants, and P is *clear* (:func:`clear`) -- it may be resumed --
    only when it is on top of all its cores again: a parent is never
    resumed onto cores a task still uses.  A lender that is ``resuming``
    lends no more.  A job is started on a lent core only if that order puts
    it on top (:func:`on_top`): a lender started at this very instant (a
    driver may run several passes at one instant, as ``gsim`` does) lends to
    its descendants at once, but to a job that the tie-break puts below it
    only once the clock has moved (the plan's ``wake_at`` says when) -- else
    the stack would put the lender back on top of the job it lent to, and
    neither could ever be clear.

Who may use the cores lent by P (``Params.yield_affinity``)
    1. P's pending descendants (every affinity): the deepest first, then
       the one with the smallest pending subtree (itself and its pending
       descendants), then queue order;
    2. ``tree`` and ``none``: the other pending jobs of P's root tree, in
       queue order;
    3. ``none``: every other pending job that is the root of its tree (has
       no parent), in queue order.  A child of another tree never runs on
       P's cores: the cores of a tree are its root's, and a child taking
       them from P's tree would make two trees each wait for cores the
       other holds (each sitting on the other's cores, each waiting for
       children that need them).  A root of another tree brings its own
       tree, which nests on P's cores and ends on them.

    Jobs bound to a reservation, flexible reservations, splittable jobs and
    jobs with floating resources never run on lent cores.  The memory a job
    asks for (:mod:`gridsched.core.memory`) does not keep it off them: on lent
    cores it uses the lender's memory, as it uses the lender's cores, and
    takes none of the pool (so a tree whose jobs ask for memory progresses
    as any tree does, below).

Devices lent by P
    A yielding parent lends the devices it holds (GPUs, ...) with its cores.
    A job asking for devices runs on lent resources only if one lender --
    the one whose candidates it is among -- has them all free: its cores on
    that lender's free lent cores and its devices among that lender's free
    lent devices (:func:`gridsched.core.devices.choose`, with the job's
    ``--gpu-bind``; each lent device is one slot, the one the lender holds;
    an exclusive ask only on devices the lender holds whole).  A lent device
    is free when no job started on the lender's lent cores after it holds
    it.  Sitting on the lender's cores, such a job keeps the lender from
    being resumed until it ends, so the lender gets its devices back with
    its cores.  The job holds no device slot of the pool: the lender's slot
    is counted for it.  Jobs asking for devices are not pooled to unstall a
    tree (below): they start from the lender they fit or from the pool.

The pass (:func:`schedule`)
    Lenders are served deepest first (ties: lowest id).  For each, every
    candidate in the order above that fits is started now
    (``Start(backfilled=True)``): on the lender's own free lent cores if they
    can hold it, else on the free lent cores of every lender it may use.  A
    job is never split between lent cores and the pool.  Only then does the
    policy's pass run, on a snapshot without the jobs just started, without
    the tasks running on lent cores (they hold no pool cores, and a task on a
    yielded core owns it until it ends: it is never preempted for the
    lender, which resumes only after) and with the lenders not preemptable.
    So a job that may run on either a lent or a free core is put on the lent
    one, and lending never delays the head job of the pool.

Deadlock freedom
    With descendant affinity a tree can stall: every running job of the tree
    yields and waits, and each pending job of the tree needs more cores than
    the lenders above it can offer, the tree's cores being split among
    sibling branches.  Such a tree -- one with pending jobs, whose running
    jobs all lend, none computing, and none of whose jobs the pass above
    started -- pools the free lent cores of all its lenders (resuming ones
    too): its pending jobs, deepest first, then in queue order, may use any
    of them.  As a child never asks for more cores than the root of its tree,
    and (while the root lives) the root's cores are among those lent, some
    pending job of the tree always fits, so a tree whose parents yield
    always progresses: no scheduling deadlock when parents fill the machine.
    This holds because trees never interleave on cores: only jobs of the
    same tree, and (``none``) roots of other trees, run on a tree's lent
    cores, and a job started on a core is above every job on it in the
    stack order, so the trees on a core are stacked in the order they came
    and the topmost tree, which waits for no other, always finishes and
    gives the cores back to the one below.

Walltime of a yielding parent (:func:`walltime_credit`)
    A job's walltime always holds; the only time it is not charged is time
    its children ran while it yielded.  The driver keeps, per running job,
    the spans during which it *earns* credit (:func:`credit_spans`): it yields
    (from its yield until it is resumed or ends) and at least one of its
    children (jobs whose parent it is) runs.  Time it yields while its
    children are pending, held or not yet begun earns nothing, so a child
    that never runs cannot keep a parent's walltime paused, and yielding,
    resuming and yielding again earns only what children ran meanwhile.  Its
    walltime deadline moves later by the credit, and so does its end as the
    core sees it (the driver adds the credit to ``Running.estimate``).  The
    credit never carries a run past the longest walltime a job may have
    (:func:`credit_limit`): a run lasts at most ``max(its walltime,
    jobs.max_walltime)`` of wall-clock time from its start, whatever it
    earned.  A parent that waits for its children without yielding keeps its
    cores and is charged as any job.

Preemption order (:func:`preempt_order`)
    With trees in the snapshot (``parents`` not empty): leaves first (jobs
    with no live child), the deepest first, then the most recently started,
    then the highest id.  Without: the policy's own order, most cores first
    (ties: most recently started, then highest id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from math import inf, nextafter

from gridsched.core import devices as dev
from gridsched.core.memory import MEMORY
from gridsched.core.placement import Reason, StatusMap, assign, usable
from gridsched.core.topology import Device
from gridsched.core.types import Plan, Running, Snapshot, Start, Waiting, YieldAffinity


def ancestors(parents: Mapping[int, int], job: int) -> tuple[int, ...]:
    """The ancestors of ``job``, its parent first (a cycle in ``parents`` ends the chain)."""
    out: list[int] = []
    seen = {job}
    p = parents.get(job)
    while p is not None and p not in seen:
        out.append(p)
        seen.add(p)
        p = parents.get(p)
    return tuple(out)


def root(parents: Mapping[int, int], job: int) -> int:
    """The root of ``job``'s tree (``job`` itself when it has no parent)."""
    anc = ancestors(parents, job)
    return anc[-1] if anc else job


Key = tuple[float, int, int]


def _key(r: Running, parents: Mapping[int, int]) -> Key:
    return (r.start, len(ancestors(parents, r.id)), r.id)


def _keys(snap: Snapshot) -> dict[int, Key]:
    return {r.id: _key(r, snap.parents) for r in snap.running}


def tops(running: Iterable[Running], parents: Mapping[int, int]) -> dict[int, int]:
    """Core -> the job on top of it (see the module docstring)."""
    best: dict[int, tuple[Key, int]] = {}
    for r in running:
        k = _key(r, parents)
        for c in r.cores:
            if c not in best or k > best[c][0]:
                best[c] = (k, r.id)
    return {c: j for c, (_, j) in best.items()}


def clear(running: Iterable[Running], parents: Mapping[int, int], job: int) -> bool:
    """Whether ``job`` is on top of every core it holds (a yielding job may then be resumed)."""
    rs = list(running)
    top = tops(rs, parents)
    return all(top.get(c) == job for r in rs if r.id == job for c in r.cores)


def walltime_credit(spans: Iterable[tuple[float, float | None]], now: float, limit: float = inf) -> float:
    """The seconds by which a job's walltime deadline moves later: the time it earned credit, at most ``limit``.

    ``spans`` are the driver's records of when the job began and stopped
    earning (:func:`credit_spans`; None: it still earns, counted up to
    ``now``); ``limit``: :func:`credit_limit`.
    """
    total = 0.0
    for since, until in spans:
        end = now if until is None else min(until, now)
        if end > since:
            total += end - since
    return min(total, max(0.0, limit))


def credit_limit(allowance: float, longest: float, backfilled: bool = False) -> float:
    """The most credit a run may have: a run allowed ``allowance`` seconds (its walltime left when it started)
    never lasts, in wall-clock time, past ``max(allowance, longest)`` (``longest``: jobs.max_walltime).  A run
    started ahead of a waiting job (``backfilled``) earns none: that job's reservation counted on its walltime,
    and a credit would carry it past the reserved start."""
    if backfilled:
        return 0.0
    return max(0.0, longest - allowance)


Span = tuple[float, float | None]


def credit_spans(spans: Iterable[Span], earning: bool, now: float) -> tuple[Span, ...]:
    """``spans`` brought up to ``now``: a span opens at ``now`` when the job starts earning, the open one closes
    (never before it opened) when it stops.

    ``earning``: the job yields and at least one of its children runs (a
    fact the driver observes at ``now``).
    """
    out = tuple(spans)
    is_open = bool(out) and out[-1][1] is None
    if earning and not is_open:
        return (*out, (now, None))
    if not earning and is_open:
        since = out[-1][0]
        return (*out[:-1], (since, max(since, now)))
    return out


def lent_free(snap: Snapshot, resuming: bool = False) -> dict[int, frozenset[int]]:
    """For each lender (``resuming`` ones too when asked), the lent cores it is on top of."""
    top = tops(snap.running, snap.parents)
    return {
        lent.parent: frozenset(c for c in lent.cores if top.get(c) == lent.parent)
        for lent in snap.lent
        if resuming or not lent.resuming
    }


def lent_tasks(snap: Snapshot) -> frozenset[int]:
    """The running jobs that run on lent cores: those with another running job below them on a core."""
    if not snap.lent:
        return frozenset()
    parents = snap.parents
    low: dict[int, Key] = {}
    for r in snap.running:
        k = _key(r, parents)
        for c in r.cores:
            if c not in low or k < low[c]:
                low[c] = k
    return frozenset(r.id for r in snap.running if any(low[c] < _key(r, parents) for c in r.cores))


def _may_lend(w: Waiting) -> bool:
    if w.bind is not None or w.flex or w.split is not None:
        return False
    # its memory is the lender's, as its cores are (it holds none of the pool: see the module docstring)
    rest = [k for k, _ in w.resources if k != MEMORY]
    return not rest or (bool(w.devices) and all(k.startswith(dev.PREFIX) for k in rest))


def lent_devices(snap: Snapshot, lender: int, keys: Mapping[int, Key] | None = None) -> tuple[Device, ...]:
    """The devices ``lender`` lends that are free: those it holds that no job started on its lent cores after
    it holds, each as one slot (the lender's)."""
    by_id = {r.id: r for r in snap.running}
    me = by_id.get(lender)
    lent = next((x for x in snap.lent if x.parent == lender), None)
    if me is None or not me.devices or lent is None:
        return ()
    keys = _keys(snap) if keys is None else keys
    mine = keys[lender]
    taken: set[tuple[str, int]] = set()
    for r in snap.running:
        if r.devices and r.id != lender and keys[r.id] > mine and not lent.cores.isdisjoint(r.cores):
            taken.update(r.devices)
    by_key = {dv.key: dv for dv in snap.devices}
    return tuple(replace(by_key[k], share=1) for k in me.devices if k in by_key and k not in taken)


def _lent_choice(
    snap: Snapshot,
    w: Waiting,
    lender: int,
    own: frozenset[int],
    keys: Mapping[int, Key],
    given: set[tuple[str, int]],
) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...], frozenset[int]] | None:
    """The devices and cores ``w`` (asking for devices) gets from ``lender`` alone (but not the devices
    ``given`` to others in this pass), or None."""
    if w.ncpus > len(own) or not on_top(snap, w, lender, keys) or w.id in snap.kept:
        return None  # (a suspended job is continued on the devices it kept)
    if any(a.exclusive for a in w.devices):
        me = next((r for r in snap.running if r.id == lender), None)
        if me is None or not me.whole_devices:
            return None
    devs = tuple(dv for dv in lent_devices(snap, lender, keys) if dv.key not in given)
    if not devs:
        return None
    return dev.choose(w.devices, devs, {}, snap.machine, own, w.ncpus, w.place)


def candidates(snap: Snapshot, lender: int) -> list[Waiting]:
    """The pending jobs that may run on the cores ``lender`` lends, in the order they get them."""
    parents = snap.parents
    pend = [w for w in snap.pending if _may_lend(w)]
    anc = {w.id: ancestors(parents, w.id) for w in pend}
    size: dict[int, int] = {}
    for w in pend:
        for j in (w.id, *anc[w.id]):
            size[j] = size.get(j, 0) + 1
    pos = {w.id: i for i, w in enumerate(snap.pending)}
    below = [w for w in pend if lender in anc[w.id]]
    below.sort(key=lambda w: (-len(anc[w.id]), size[w.id], pos[w.id]))
    affinity = snap.params.yield_affinity
    if affinity is YieldAffinity.DESCENDANT:
        return below
    taken = {w.id for w in below}
    top = root(parents, lender)
    same = [w for w in pend if w.id not in taken and w.id != lender and root(parents, w.id) == top]
    if affinity is YieldAffinity.TREE:
        return below + same
    taken.update(w.id for w in same)
    return below + same + [w for w in pend if w.id not in taken and w.id not in parents]


def on_top(snap: Snapshot, w: Waiting, lender: int, keys: Mapping[int, Key] | None = None) -> bool:
    """Whether ``w``, started now on a core ``lender`` is on top of, would be on top of it in the stack order.

    It would unless ``lender`` started at this very instant (or, the clock
    having gone back, later) and comes after ``w`` in the tie-break: then
    ``w`` may use the lender's cores only once the clock has moved on (see
    "Who runs on a core").  ``keys``: the stack order keys of the running
    jobs, when the caller has them.
    """
    k = (_keys(snap) if keys is None else keys).get(lender)
    return k is None or k < (snap.now, len(ancestors(snap.parents, w.id)), w.id)


def may_use(
    snap: Snapshot, w: Waiting, free: Mapping[int, frozenset[int]], keys: Mapping[int, Key] | None = None
) -> frozenset[int]:
    """The lenders whose free lent cores ``w`` may use now (``free``: lender -> its free lent cores)."""
    if not _may_lend(w):
        return frozenset()
    maps = [StatusMap(Reason.LENT, p, cores) for p, cores in free.items()]
    anc = ancestors(snap.parents, w.id)
    out = {int(owner) for _, owner in usable(maps, ancestors=anc)}
    affinity = snap.params.yield_affinity
    if affinity is not YieldAffinity.DESCENDANT:
        top = root(snap.parents, w.id)
        own_tree = affinity is YieldAffinity.TREE or w.id in snap.parents  # only a root is a guest
        out.update(p for p in free if p != w.id and (not own_tree or root(snap.parents, p) == top))
    keys = _keys(snap) if keys is None else keys
    return frozenset(p for p in out if on_top(snap, w, p, keys))


def lend(snap: Snapshot) -> tuple[Start, ...]:
    """The jobs started now on free lent cores (see the module docstring)."""
    free = lent_free(snap)
    keys = _keys(snap)
    depth = {p: len(ancestors(snap.parents, p)) for p in free}
    starts: list[Start] = []
    started: set[int] = set()
    given: set[tuple[str, int]] = set()  # lent devices given in this pass
    for lender in sorted(free, key=lambda p: (-depth[p], p)):
        for w in candidates(snap, lender):
            own = free[lender]
            if not own:
                break
            if w.id in started:
                continue
            if w.devices:  # cores and devices from this lender alone (see "Devices lent by P")
                chosen = _lent_choice(snap, w, lender, own, keys, given)
                if chosen is None:
                    continue
                dkeys, cores, held = chosen
                for p in free:
                    free[p] = free[p] - held
                given.update(dkeys)
                starts.append(Start(w.id, cores, True, devices=dkeys))
                started.add(w.id)
                continue
            got = None
            if w.ncpus <= len(own) and on_top(snap, w, lender, keys):
                got = assign(snap.machine, own, w.ncpus, w.place)
            if got is None:
                pool = frozenset().union(*(free[p] for p in may_use(snap, w, free, keys)))
                got = assign(snap.machine, pool, w.ncpus, w.place) if w.ncpus <= len(pool) else None
            if got is None:
                continue
            cores, held = got
            for p in free:
                free[p] = free[p] - held
            starts.append(Start(w.id, cores, True))
            started.add(w.id)
    return tuple(starts) + _unstall(snap, free, started)


def _unstall(snap: Snapshot, free: dict[int, frozenset[int]], started: set[int]) -> tuple[Start, ...]:
    """Starts that pool the free lent cores of a stalled tree (see "Deadlock freedom" above)."""
    parents = snap.parents
    lenders = {lent.parent for lent in snap.lent}
    stalled = {root(parents, p) for p in lenders}
    for r in snap.running:  # a tree with a member that computes (not lending) is not stalled
        if r.id not in lenders:
            stalled.discard(root(parents, r.id))
    stalled -= {root(parents, j) for j in started}
    if not stalled:
        return ()
    free = {**lent_free(snap, resuming=True), **free}  # resuming lenders' cores too
    out: list[Start] = []
    keys = _keys(snap)
    pos = {w.id: i for i, w in enumerate(snap.pending)}
    for t in sorted(stalled):
        pend = [
            w
            for w in snap.pending
            if _may_lend(w) and not w.devices and w.id not in started and root(parents, w.id) == t
        ]
        pend.sort(key=lambda w: (-len(ancestors(parents, w.id)), pos[w.id]))
        mine = [p for p in free if root(parents, p) == t]
        for w in pend:
            pool = frozenset().union(*(free[p] for p in mine if on_top(snap, w, p, keys)))
            got = assign(snap.machine, pool, w.ncpus, w.place) if w.ncpus <= len(pool) else None
            if got is None:
                continue
            cores, held = got
            for p in free:
                free[p] = free[p] - held
            out.append(Start(w.id, cores, True))
            started.add(w.id)
    return tuple(out)


def pool_view(snap: Snapshot, started: Iterable[int] = ()) -> Snapshot:
    """The snapshot the policy's pass sees: without ``started``, the tasks on lent cores and the lending."""
    gone = set(started)
    tasks = lent_tasks(snap)
    lenders = {lent.parent for lent in snap.lent}
    running: list[Running] = []
    for r in snap.running:
        if r.id in tasks:
            continue
        if r.id in lenders and (r.backfilled or r.preemptable):
            r = replace(r, backfilled=False, preemptable=False)
        running.append(r)
    return replace(
        snap,
        pending=tuple(w for w in snap.pending if w.id not in gone),
        running=tuple(running),
        lent=(),
    )


def retry_at(snap: Snapshot) -> float | None:
    """When lenders that started at this instant (or later) may lend to jobs :func:`on_top` keeps off them now.

    None when there is no such lender with free lent cores: the plan cannot
    change by the clock moving past a lender's start.
    """
    if not snap.pending:
        return None
    keys = _keys(snap)
    late = [
        k[0]
        for p, cores in lent_free(snap, resuming=True).items()
        if cores and (k := keys.get(p)) is not None and k[0] >= snap.now
    ]
    return nextafter(min(late), inf) if late else None


def schedule(snap: Snapshot, pool_pass: Callable[[Snapshot], Plan]) -> Plan:
    """Start jobs on free lent cores, then run ``pool_pass`` (the policy) on the rest."""
    starts = lend(snap)
    plan = pool_pass(pool_view(snap, (s.job for s in starts)))
    wake = [t for t in (plan.wake_at, retry_at(snap)) if t is not None]
    return Plan(starts + plan.decisions, plan.head, min(wake) if wake else None)


def preempt_order(snap: Snapshot, cands: Iterable[Running]) -> list[Running]:
    """Running jobs in the order they are preempted (see the module docstring)."""
    parents = snap.parents
    if not parents:
        return sorted(cands, key=lambda r: (-r.ncpus, -r.start, -r.id))
    inner = set(parents.values())
    return sorted(cands, key=lambda r: (r.id in inner, -len(ancestors(parents, r.id)), -r.start, -r.id))
