"""``schedule(snapshot) -> Plan``: the one entry point both drivers call.

Every pass is a pure function of the :class:`~gridsched.core.types.Snapshot`:
the time ``now``, the running jobs, the pending queue in priority order, the
free cores (or only their number), the policy settings, the head-job memo and
the users' run-time history.  ``forecast(snapshot)`` gives each pending job a
predicted start time from the same data (``gstat``, like ``squeue --start``).

Common rules
------------
* A pending job asking for more cores than the machine can ever offer (free
  cores plus the cores of running jobs) is never started and never blocks the
  queue; its forecast is ``inf``.  Jobs ask for at least one core.
* A running job is counted as ending at ``start + estimate`` (its user
  walltime); a job already past that counts as ending ``now``.  A job with
  ``stopping`` set counts as ending ``now``: its cores are "coming free"; no
  job is started on them and no more cores are taken for them.
* Placement: in placement mode (``Snapshot.free`` is a set) a started job gets
  the lowest-numbered free cores (:func:`pick`); in count-only mode
  (``free is None``) ``Start.cores`` is ``()``.
* ``Start.backfilled`` is set on a job started by a backfill step: after the
  head job (easy, checkpoint-backfill) or while a job ahead of it keeps
  waiting (conservative).

fcfs
----
Start jobs in queue order while they fit in the free cores; stop at the first
that does not.  ``Plan.head`` is that job, at the earliest time enough cores
come free.

easy (EASY backfilling)
-----------------------
Start jobs in queue order while they fit.  The first that does not is the
*head*; its reservation is its *shadow time* ``S``: the earliest running-job
end at which the free cores plus the cores of all jobs ending by then reach its
need.  ``extra`` is the cores free at ``S`` beyond the head's need.  Every
later job, in queue order, starts now if it fits in the cores free now and
either ends by the shadow time (``now + estimate <= S``) or uses only extra
cores (``ncpus <= extra``; starting it this way reduces ``extra``).  Jobs
started earlier in the same pass count as running.  When the shadow time is
``now`` (the head waits only for stopping jobs), ``extra`` is the cores free
now plus those of stopping jobs, beyond the head's need.

conservative (conservative backfilling)
---------------------------------------
The running jobs define an availability profile
(:mod:`gridsched.core.profile`).  Every pending job in queue order gets a
reservation at the earliest time it fits for its whole estimate, and the
reservation is entered in the profile before the next job is considered.  A job
starts now only if its earliest start is ``now`` (and its cores are free now,
not merely coming free), so it delays no earlier job's reservation.  Queue
order and running jobs ending by their estimates guarantee that no job starts
later than its reservation.  The pass stops once nothing more can start now;
``forecast`` computes every reservation.

checkpoint-backfill (the default)
---------------------------------
EASY, with four changes.

1. *Shortened estimates.*  When deciding whether a job other than the head
   that is checkpointable (``preemptable``) may backfill, a prediction shorter
   than its estimate may be used (:mod:`gridsched.core.predict`; ``scaled``:
   ``estimate * p`` when ``estimate > threshold``).  A job is tried in this
   order: it ends by the shadow time on its own estimate (``planned=None``);
   it ends by the shadow time on its prediction (``planned=prediction``); it
   fits in the extra cores (``planned=None``, reduces ``extra``).  Jobs that are
   not checkpointable use the plain EASY rule.  The head is never shortened.
   Every job started after the head has ``Start(backfilled=True)``.
2. *Counting running jobs.*  A running job with ``planned`` set counts as
   ending at ``start + planned`` while that is in the future, and at
   ``start + estimate`` (its user walltime end) once it has outlived it.
3. *The head keeps its reservation.*  ``Snapshot.head`` is the previous pass's
   ``Plan.head``.  While that job is pending it stays the head, wherever it is
   in the queue (a job preempted and requeued ahead of it does not take its
   place; jobs ahead of it are backfill candidates like the others).  If it
   fits now it starts first and the pass goes on as EASY without memo.  If not,
   its reservation is the earlier of the remembered time and a fresh shadow
   time: it may move earlier, never later -- unless it can no longer be met at
   ``max(time, now)`` even by preempting every checkpointable backfilled job,
   in which case the memo is dropped and the pass is plain EASY (fresh head
   and shadow time).
4. *Preemption, only at the reservation time.*  When ``now >= S`` and the head
   still does not fit, running jobs with ``backfilled`` and ``preemptable`` set
   and not ``stopping`` are preempted, most cores first (ties: most recently
   started first, then highest id), until the free cores, plus the cores of
   stopping jobs, plus the preempted cores, reach the head's need.  If even all
   of them would not be enough, nothing is preempted.  Preempted cores count as
   coming free: nothing starts on them in the same pass.  Once the reservation
   time has come, ``extra`` counts only cores free now or coming free
   (stopping or just preempted), never jobs merely counted as ending now, so a
   backfill on "extra" cores can never take what the head is waiting for.

``Params.cascade = True`` selects the naive reading, kept to show its effect:
a backfilled job past ``start + planned`` counts as ending ``now`` and no memo
is kept, so a blocked head preempts at once whenever a backfilled job overruns
its prediction, and a job preempted and requeued ahead of the head becomes the
head in the same instant.

``Plan.wake_at`` (checkpoint-backfill only): the earliest future time at which
the plan could change with no event -- the head's reservation time when some
checkpointable backfilled job is running, or the next future ``start +
planned`` of a running job; ``None`` otherwise.

Floating resources and reservations: a snapshot with ``floating`` or
``reservations`` is scheduled by :mod:`gridsched.core.multi`, which states the
same rules for requests of several resources (cores and floating resources
such as licences) and adds reservations (``Activate`` decisions); without
them the pass below runs, unchanged.

Splittable jobs (easy, checkpoint-backfill, conservative)
---------------------------------------------------------
A pending job with ``Waiting.split`` is ``len(split.left)`` independent
sub-tasks of ``split.ncpus`` cores and ``split.task_time`` seconds; as a
whole it asks for one wave (``ncpus``) for its walltime and is scheduled like
any job.  After the backfill step, the cores still free now form a window
that lasts until the shadow time; each splittable job after the head, in
queue order, that did not start whole fills it with sub-tasks chained on the
same cores (:func:`gridsched.core.split.fill_window`), placed like one job of
that many cores: a ``StartTasks`` decision.  Every chain ends by the shadow
time even if each of its sub-tasks runs for its whole time, so the head is
never delayed; the job keeps the rest of its sub-tasks at its place in the
queue.  Under conservative the window is the cores free now that no
reservation needs, until the first time one does; every job keeps its
reservation.  fcfs never backfills.  The pass with floating resources or
reservations (:mod:`gridsched.core.multi`) splits under easy and
checkpoint-backfill with the same rule, its window ending where the head's or
a fixed reservation's hold begins (a job that also asks for floating
resources is not split), and so it does under conservative.

Predictors: ``Params.predictor`` ``user-history`` replaces the scaled rule by
the mean of the user's last two run times (see :mod:`gridsched.core.predict`);
preemption and rules 2-4 are unchanged.  The predictor is used only by
checkpoint-backfill.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import replace
from math import inf

from . import multi, tree
from .eligible import eligibility
from .ends import NAIVE as _NAIVE
from .ends import PLANNED as _PLANNED
from .ends import USER as _USER
from .ends import counted_end
from .placement import assign
from .predict import make_predictor
from .preempt import victims
from .profile import Profile
from .split import fill_window
from .types import Decision, HeadReservation, Plan, Policy, Preempt, Running, Snapshot, Start, StartTasks, Waiting

# (end, ncpus, reclaimable) of one running job; reclaimable = may be preempted.
_End = tuple[float, int, bool]


def free_count(snap: Snapshot) -> int:
    """The number of cores free now."""
    if snap.free is not None:
        return len(snap.free)
    return snap.ncores - sum(r.ncpus for r in snap.running)


def pick(free: frozenset[int] | None, n: int) -> tuple[int, ...]:
    """The cores for a job of ``n`` cores: the lowest-numbered free ones."""
    if free is None:
        return ()
    return tuple(sorted(free)[:n])


_NOWHERE: tuple[tuple[int, ...], frozenset[int]] = ((), frozenset())


def _use(free: frozenset[int] | None, nfree: int, n: int, held: frozenset[int]) -> tuple[frozenset[int] | None, int]:
    """The free cores and their number once a job of ``n`` cores holds ``held``."""
    if free is None:
        return None, nfree - n
    free = free.difference(held)
    return free, len(free)


def take(snap: Snapshot, free: frozenset[int] | None, w: Waiting) -> tuple[tuple[int, ...], frozenset[int]] | None:
    """Where ``w`` would run now: ``(cores it runs on, cores it holds)``, or None.

    None means ``free`` cannot hold the job now (too few cores, or its mapping
    requirement cannot be met on them); see
    :func:`gridsched.core.placement.assign`.  In count-only mode (``free``
    None) it is ``((), frozenset())``.
    """
    if free is None:
        return _NOWHERE
    return assign(snap.machine, free, w.ncpus, w.place)


def schedule(snap: Snapshot) -> Plan:
    """Decide what to start (and, under checkpoint-backfill, preempt) now.

    Only the pending jobs that may be scheduled now are looked at
    (:func:`gridsched.core.eligible.eligibility`); the plan says why the others
    wait and cancels those whose dependencies can never be met, if so set.
    """
    pending, reasons, cancels = eligibility(snap)
    if pending is snap.pending:
        return _schedule(snap)
    plan = _schedule(replace(snap, pending=pending))
    return replace(plan, decisions=(*cancels, *plan.decisions), reasons=reasons)


def _schedule(snap: Snapshot) -> Plan:
    if snap.lent:  # yielding parents: tasks on their cores first (gridsched.core.tree)
        return tree.schedule(snap, _schedule)
    if snap.floating or snap.reservations:
        return multi.schedule(snap)
    policy = snap.params.policy
    if policy is Policy.FCFS:
        return _fcfs(snap)
    if policy is Policy.EASY:
        return _backfill(snap, ckpt=False, naive=False)
    if policy is Policy.CHECKPOINT_BACKFILL:
        return _backfill(snap, ckpt=True, naive=snap.params.cascade)
    if policy is Policy.CONSERVATIVE:
        return _conservative(snap, None)
    raise ValueError(f"unknown policy {policy!r}")


def forecast(snap: Snapshot) -> dict[int, float]:
    """Predicted start time of every pending job (``inf``: never).

    Jobs the plan starts now get ``now``.  Under conservative the times are
    the reservations.  Otherwise the availability profile (running jobs at
    their counted ends, jobs started now at ``now + (planned or estimate)``)
    first takes the head job at its reservation time, then every other job in
    queue order at its earliest start; under fcfs no job is put before the
    one ahead of it.  Only the head's time is a promise; the others are
    estimates, like ``squeue --start``.
    """
    pending, _, _ = eligibility(snap)
    if pending is not snap.pending:
        snap = replace(snap, pending=pending)
    if snap.floating or snap.reservations:
        return multi.forecast(snap)
    params = snap.params
    now = snap.now
    out: dict[int, float] = {}
    if params.policy is Policy.CONSERVATIVE:
        _conservative(snap, out)
        return out
    plan = _schedule(snap)
    starts = {s.job: s for s in plan.starts}
    preempted = {p.job for p in plan.preempts}
    ckpt = params.policy is Policy.CHECKPOINT_BACKFILL
    mode = (_NAIVE if params.cascade else _PLANNED) if ckpt else _USER
    nfree = free_count(snap)
    cap = _capacity(snap, nfree)
    ends = [(now, r.ncpus) if r.id in preempted else (e, r.ncpus) for r, e in _counted(snap.running, now, mode)]
    for w in snap.pending:
        s = starts.get(w.id)
        if s is not None:
            nfree -= w.ncpus
            ends.append((now + (w.estimate if s.planned is None else s.planned), w.ncpus))
    prof = Profile(now, nfree)
    for e, c in sorted(ends):
        prof.release(e, c)
    head = plan.head
    last = now
    if head is not None:
        for w in snap.pending:
            if w.id == head.job:
                t = max(head.time, now)
                prof.reserve(t, w.estimate, w.ncpus)
                out[w.id] = last = t
                break
    fcfs = params.policy is Policy.FCFS
    for w in snap.pending:
        if w.id in starts:
            out[w.id] = now
        elif w.ncpus > cap:
            out[w.id] = inf
        elif w.id not in out:
            t = prof.earliest_start(w.ncpus, w.estimate, last if fcfs else now)
            prof.reserve(t, w.estimate, w.ncpus)
            out[w.id] = t
            if fcfs:
                last = t
    return out


# -- helpers -------------------------------------------------------------------


def _capacity(snap: Snapshot, nfree: int) -> int:
    """The most cores a job can ever get: free now plus held by running jobs."""
    return nfree + sum(r.ncpus for r in snap.running)


def _counted(running: tuple[Running, ...], now: float, mode: int) -> list[tuple[Running, float]]:
    """Each running job with the time its end is counted at."""
    return [(r, counted_end(r, now, mode)) for r in running]


def _ends(running: tuple[Running, ...], now: float, mode: int) -> list[_End]:
    """``(end, ncpus, reclaimable)`` of each running job, sorted by end."""
    ends = [(e, r.ncpus, r.backfilled and r.preemptable and not r.stopping) for r, e in _counted(running, now, mode)]
    ends.sort()
    return ends


def _shadow(nfree: int, ends: list[_End], need: int) -> tuple[float, int]:
    """The earliest end at which ``need`` cores are free, and the cores free then."""
    acc = nfree
    k, n = 0, len(ends)
    while k < n:
        e = ends[k][0]
        while k < n and ends[k][0] == e:
            acc += ends[k][1]
            k += 1
        if acc >= need:
            return e, acc
    return inf, acc


def _avail(nfree: int, ends: list[_End], t: float) -> int:
    """Cores free at ``t``: free now plus those of jobs counted as ended by ``t``."""
    acc = nfree
    for e, c, _ in ends:
        if e > t:
            break
        acc += c
    return acc


def _meetable(nfree: int, ends: list[_End], need: int, t: float) -> bool:
    """Whether ``need`` cores can be had at ``t``, preempting every reclaimable job."""
    acc = nfree
    for e, c, reclaim in ends:
        if e <= t or reclaim:
            acc += c
    return acc >= need


def _index(pending: tuple[Waiting, ...], job: int) -> int:
    for i, w in enumerate(pending):
        if w.id == job:
            return i
    return -1


def _fcfs(snap: Snapshot) -> Plan:
    now = snap.now
    nfree = free_count(snap)
    cap = _capacity(snap, nfree)
    free = snap.free
    out: list[Decision] = []
    ends: list[_End] | None = None
    head: HeadReservation | None = None
    started: list[_End] = []
    for w in snap.pending:
        n = w.ncpus
        if n > cap:
            continue
        got = take(snap, free, w) if n <= nfree else None
        if got is None:
            ends = _ends(snap.running, now, _USER) + started
            ends.sort()
            head = HeadReservation(w.id, _shadow(nfree, ends, n)[0])
            break
        cores, held = got
        free, nfree = _use(free, nfree, n, held)
        started.append((now + w.estimate, n, False))
        out.append(Start(w.id, cores))
    return Plan(tuple(out), head)


def _backfill(snap: Snapshot, ckpt: bool, naive: bool) -> Plan:
    """EASY, and checkpoint-backfill when ``ckpt`` (see the module docstring)."""
    now = snap.now
    pend = snap.pending
    running = snap.running
    nfree = free_count(snap)
    cap = _capacity(snap, nfree)
    free = snap.free
    mode = (_NAIVE if naive else _PLANNED) if ckpt else _USER
    counted = _counted(running, now, mode)
    ends = sorted((e, r.ncpus, r.backfilled and r.preemptable and not r.stopping) for r, e in counted)
    starts: list[Start] = []
    h = -1  # index of the head in pend
    shadow = inf
    skip = -1  # index of a memo head started first

    memo = snap.head if ckpt and not naive else None
    if memo is not None:
        i = _index(pend, memo.job)
        if i >= 0 and pend[i].ncpus <= cap:
            w = pend[i]
            n = w.ncpus
            got = take(snap, free, w) if n <= nfree else None
            if got is not None:
                cores, held = got
                free, nfree = _use(free, nfree, n, held)
                insort(ends, (now + w.estimate, n, False))
                starts.append(Start(w.id, cores))
                skip = i
            else:
                fresh = _shadow(nfree, ends, n)[0]
                t = min(memo.time, fresh)
                if _meetable(nfree, ends, n, max(t, now)):
                    h, shadow = i, t

    if h < 0:  # no memo head: queue order until the first job that does not fit
        for i, w in enumerate(pend):
            if i == skip:
                continue
            n = w.ncpus
            if n > cap:
                continue
            got = take(snap, free, w) if n <= nfree else None
            if got is None:
                h = i
                break
            cores, held = got
            free, nfree = _use(free, nfree, n, held)
            insort(ends, (now + w.estimate, n, False))
            starts.append(Start(w.id, cores))
        if h < 0:
            return Plan(tuple(starts))
        shadow = _shadow(nfree, ends, pend[h].ncpus)[0]
        rest = list(pend[h + 1 :])
        if skip > h:
            del rest[skip - h - 1]
    else:
        rest = list(pend[:h]) + list(pend[h + 1 :])

    head = pend[h]
    need = head.ncpus

    preempts: list[Decision] = []
    gone: set[int] = set()
    if ckpt and now >= shadow:
        short = need - nfree - sum(r.ncpus for r in running if r.stopping)
        coming = free.union(*(r.cores for r in running if r.stopping)) if free is not None else frozenset()
        if short > 0 or (free is not None and take(snap, coming, head) is None):
            cands = [r for r in running if r.backfilled and r.preemptable and not r.stopping]
            for r in victims(snap, cands, head, coming, short) or ():
                preempts.append(Preempt(r.id))
                gone.add(r.id)
    # Cores free at the shadow time beyond the head's need.  Once the reservation time
    # has come, only cores truly free or coming free (stopping, preempted) count.
    if shadow > now:
        extra = _avail(nfree, ends, shadow) - need
    else:
        extra = nfree - need + sum(r.ncpus for r in running if r.stopping or r.id in gone)

    # Backfill: every other job, in queue order.
    predict = make_predictor(snap.params, snap.history) if ckpt else None
    room = shadow - now  # a job ending within this ends by the shadow time
    wake_t = inf  # earliest future planned end
    reclaimable = any(e[2] for e in ends)
    for w in rest:
        if nfree <= 0:
            break
        n = w.ncpus
        if n > nfree:
            continue
        est = w.estimate
        planned = None
        if est <= room:
            pass
        elif predict is not None and w.preemptable and (planned := predict(w)) is not None and planned <= room:
            pass
        elif n <= extra:
            planned = -1.0  # on the extra cores: settled below, once it is placed
        else:
            continue
        if free is None:
            cores = ()
            nfree -= n
        else:
            got = take(snap, free, w)
            if got is None:
                continue
            cores, held = got
            free = free.difference(held)
            nfree = len(free)
        if planned == -1.0:
            extra -= n
            planned = None
        elif planned is not None and now < now + planned < wake_t:
            wake_t = now + planned
        if w.preemptable:
            reclaimable = True
        starts.append(Start(w.id, cores, True, planned))

    wake: float | None = None
    if ckpt:
        for r in running:
            if r.planned is not None and not r.stopping:
                pe = r.start + r.planned
                if now < pe < wake_t:
                    wake_t = pe
        if now < shadow < wake_t and reclaimable:
            wake_t = shadow
        if wake_t < inf:
            wake = wake_t
    split = _split_fill(snap, rest, starts, free, nfree, shadow)
    return Plan(tuple(preempts) + tuple(starts) + split, HeadReservation(head.id, shadow), wake)


def _split_fill(
    snap: Snapshot, rest: list[Waiting], started: list[Start], free: frozenset[int] | None, nfree: int, shadow: float
) -> tuple[StartTasks, ...]:
    """Sub-tasks of splittable jobs in the window left after backfilling (see "Splittable jobs" above)."""
    now = snap.now
    length = shadow - now
    if nfree <= 0 or not 0 < length < inf:
        return ()
    done = {s.job for s in started}
    out: list[StartTasks] = []
    for w in rest:
        sp = w.split
        if sp is None or w.id in done or w.flex or w.bind is not None or sp.ncpus > nfree:
            continue
        chains = fill_window(sp.left, sp.ncpus, sp.task_time, nfree, length)
        if not chains:
            continue
        n = len(chains) * sp.ncpus
        if free is None:
            cores: tuple[int, ...] = ()
            nfree -= n
        else:
            got = take(snap, free, replace(w, ncpus=n, split=None))
            if got is None:
                continue
            cores, held = got
            free = free.difference(held)
            nfree = len(free)
        tasks = tuple(i for c in chains for i in c)
        out.append(StartTasks(w.id, tasks, cores, tuple(chains), now + max(map(len, chains)) * sp.task_time))
        if nfree <= 0:
            break
    return tuple(out)


def _conservative(snap: Snapshot, record: dict[int, float] | None) -> Plan:
    """Conservative backfilling; with ``record``, every job's reservation is stored in it."""
    now = snap.now
    nfree = free_count(snap)
    cap = _capacity(snap, nfree)
    free = snap.free
    prof = Profile(now, nfree)
    for e, c, _ in _ends(snap.running, now, _USER):
        prof.release(e, c)
    starts: list[Decision] = []
    head: HeadReservation | None = None
    for w in snap.pending:
        n = w.ncpus
        if n > cap:
            if record is not None:
                record[w.id] = inf
            continue
        est = w.estimate
        t = prof.earliest_start(n, est, now)
        got = take(snap, free, w) if t == now and n <= nfree else None
        if got is not None:
            cores, held = got
            free, nfree = _use(free, nfree, n, held)
            starts.append(Start(w.id, cores, head is not None))
        elif head is None:
            head = HeadReservation(w.id, t)
        if record is not None:
            record[w.id] = t
        prof.reserve(t, est, n)
        if record is None and head is not None and (nfree <= 0 or prof.free_at(now) <= 0):
            break
    split: tuple[StartTasks, ...] = ()
    if record is None and head is not None and nfree > 0:
        # every pending job holds its reservation in the profile: the window is the cores
        # no reservation needs, from now until the first time one does
        width = min(nfree, prof.free_at(now))
        end = next((t for t, v in prof.steps() if t > now and v < width), inf)
        if width > 0 and end < inf:
            split = _split_fill(snap, list(snap.pending), [d for d in starts if isinstance(d, Start)], free, width, end)
    return Plan(tuple(starts) + split, head)
