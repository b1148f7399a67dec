"""Which pending jobs may be scheduled now: holds, begin times, dependencies, array throttles (pure).

Both drivers hand the core every pending job; before any policy looks at the
queue, :func:`eligibility` keeps those that may start now and says why each
other one waits:

* a held job (``Waiting.held``: held by its owner or an admin, or held with
  its subtree when its recoverable parent ended badly) waits with the
  hold's reason;
* a job with a begin time still ahead (``Waiting.begin`` > ``now``) waits
  with the reason :func:`not_before` gives (``not before SECONDS``: the
  core formats no clock time, the daemon shows it as a date);
  ``Plan.wake_at`` includes the earliest such time;
* a job's dependencies (:mod:`gridsched.core.depend`) are evaluated against
  ``Snapshot.states`` (the state of every job they name) and, for
  ``singleton``, the jobs of the same user and name queued or running ahead
  of it;
* a task of a throttled array (``Waiting.array_max``) is offered only while
  fewer than ``array_max`` tasks of its array run, counting the tasks offered
  before it in queue order;
* under a limit on the cores a user's running jobs may hold together
  (``Params.max_cpus_per_user``, Slurm's ``MaxTRESPerUser=cpu``), a job is
  offered only while its user's running jobs, plus the jobs of that user
  offered before it in queue order, plus itself stay within the limit; it
  waits with the reason :func:`cpu_limit` gives (squeue's
  ``QOSMaxCpuPerUserLimit``).  Jobs offered together may all start in one
  pass, so they are counted as if they did, as the array throttle counts its
  tasks.  Flexible reservations have caps of their own and are not counted;
* a job whose dependencies can never be met is cancelled with the reason
  (a :class:`~gridsched.core.types.Cancel` decision) when
  ``Params.cancel_never_satisfied`` is set, as Slurm's
  ``kill_invalid_depend``; otherwise it waits with that reason, as Slurm's
  DependencyNeverSatisfied.

The reasons end up in ``Plan.reasons`` (job id -> why it waits); a job that
may start has none from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from gridsched.core import depend
from gridsched.core.types import Cancel, Snapshot, Waiting


def eligibility(snap: Snapshot) -> tuple[tuple[Waiting, ...], dict[int, str], tuple[Cancel, ...]]:
    """The pending jobs that may be scheduled now (in queue order), why each other one waits, and the
    jobs to cancel because their dependencies can never be met."""
    pending = snap.pending
    limit = snap.params.max_cpus_per_user
    if not limit and (
        not snap.gated or not any(w.deps or w.array_max is not None or w.held or w.begin is not None for w in pending)
    ):
        return pending, {}, ()
    now = snap.now
    running_arrays: dict[int, int] = {}
    used: dict[str, int] = {}  # cores held by each user's running jobs and offered to their pending ones
    for r in snap.running:
        if r.array is not None:
            running_arrays[r.array] = running_arrays.get(r.array, 0) + 1
        if limit:
            used[r.user] = used.get(r.user, 0) + r.ncpus
    names = _queued_names(snap)
    keep: list[Waiting] = []
    reasons: dict[int, str] = {}
    cancels: list[Cancel] = []
    for w in pending:
        if w.held:
            reasons[w.id] = w.held
            continue
        if w.begin is not None and w.begin > now:
            reasons[w.id] = not_before(w.begin)
            continue
        if w.deps:
            earlier = any(i < w.id for i in names.get(w.user, {}).get(w.name, ()))
            st = depend.status(w.deps, snap.states, (w.name,) if earlier else (), w.name)
            if st.verdict == "never" and snap.params.cancel_never_satisfied:
                cancels.append(Cancel(w.id, st.reason))
                continue
            if st.verdict != "ready":
                reasons[w.id] = st.reason
                continue
        arr, cap = w.array, w.array_max
        n = 0
        if arr is not None and cap is not None:
            n = running_arrays.get(arr, 0)
            if n >= cap:
                reasons[w.id] = f"{THROTTLED}{arr}: {cap} tasks already running (%{cap})"
                continue
        if limit and not w.flex:
            u = used.get(w.user, 0)
            if u + w.ncpus > limit:
                reasons[w.id] = cpu_limit(w.user, u, w.ncpus, limit)
                continue
            used[w.user] = u + w.ncpus
        if arr is not None and cap is not None:
            running_arrays[arr] = n + 1
        keep.append(w)
    return tuple(keep), reasons, tuple(cancels)


def array_window(ncores: int, ncpus: int, array_max: int | None) -> int:
    """How many of an array's pending tasks are offered to the passes (the others wait behind them in the
    array's record, not made yet): as many as a machine of ``ncores`` could run at once, and one more to wait
    first in the queue, within the array's throttle ``array_max`` (``%MAX``) and the one more."""
    n = ncores // max(1, ncpus) + 1
    if array_max is not None:
        n = min(n, array_max + 1)
    return max(1, n)


def not_before(t: float) -> str:
    """The reason of a job that waits for its begin time ``t`` (seconds on the driver's clock)."""
    return f"{NOT_BEFORE}{t:.0f}"


def cpu_limit(user: str, used: int, ncpus: int, limit: int) -> str:
    """The reason of a job of ``ncpus`` cores that would take ``user`` (``used`` cores running or offered
    before it) beyond the limit on the cores a user's running jobs may hold."""
    if ncpus > limit:
        return f"{CPU_LIMIT}it asks for {ncpus} cores, more than a user's running jobs may hold ({limit})"
    return f"{CPU_LIMIT}{user}'s jobs hold {used} cores; {ncpus} more would be over the {limit} a user may hold"


CPU_LIMIT = "user core limit: "
NOT_BEFORE = "not before "
THROTTLED = "array "


def throttled(reason: str) -> bool:
    """Whether ``reason`` is that of a job that is eligible but waits for its array's throttle."""
    return reason.startswith(THROTTLED)


def _queued_names(snap: Snapshot) -> Mapping[str, Mapping[str, list[int]]]:
    """user -> job name -> ids of the user's queued or running jobs of that name (for singleton)."""
    out: dict[str, dict[str, list[int]]] = {}
    if not any(any(d.kind == "singleton" for d in w.deps) for w in snap.pending):
        return out
    for r in snap.running:
        out.setdefault(r.user, {}).setdefault(r.name, []).append(r.id)
    for w in snap.pending:
        if not w.held:  # a held job holds no place for its name
            out.setdefault(w.user, {}).setdefault(w.name, []).append(w.id)
    return out
