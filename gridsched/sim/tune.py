"""Choosing the scheduler's settings from a site's own history: a pure function of a job history.

A history is the jobs that finished in a window (their submit time, the
walltime they asked for, the time they really ran, their cores and user).  The
tuner replays it through the same scheduling core as gsim (:mod:`gridsched.sim`)
under EASY and under every setting of a grid (checkpoint-backfill with each
``p``, ``threshold`` and predictor), scores each by the objective (average
bounded slowdown, average wait, or ``mix``: the mean of both, each relative to
EASY's), and says which to adopt; until the history holds ``min_jobs`` jobs it
keeps the setting in force.

The guard: EASY and EASY with shortest-first backfilling (EASY-SJF) are always
replayed, as the references.  EASY-SJF is the fallback; EASY is chosen only when
it beats EASY-SJF by ``guard`` (10 %) in average wait AND in average bounded
slowdown; any other setting only when it beats the better of the two in both,
each by the guard: a setting that wins by the objective but loses on either
metric, or wins by less than the guard, is never put in force.  The setting in
force is held only while it still passes the guard (EASY, itself a reference,
while it is no worse than EASY-SJF); when it does not, the tuner falls back at
once (no hysteresis) to the best setting that passes, EASY-SJF when none does.
Between settings that pass, the best by the objective replaces the one in force
when it beats it by ``margin`` (a hysteresis, so a setting is not changed back
and forth for noise).

The evidence: one window of a few days says little about the weeks a setting
then holds (a window's averages move with a handful of jobs), so the guard and
the objective judge each setting on the window replayed now pooled with the
``POOL - 1`` windows replayed at the tunings before (``evidence``: what
:attr:`Decision.window` recorded each time), job-weighted, each setting against
the references over the same windows.  This costs no replay: the earlier
windows' averages are kept, not their jobs.

A history may start with a warm-up: jobs replayed before the part that is
scored (``score_from``), so that the scored part starts with the queue and the
running jobs it had rather than on an empty machine.  Where the queue is hours
long, a replay from an empty machine judges every setting under less load than
the machine had, and preemption most of all.

Nothing here reads a clock, a file or the daemon: the caller (``gctl tune``,
gsim) gives the history and the settings.  The history is a set: jobs submitted
at one instant are replayed in the order of their walltime, run time, cores and
user, whatever order they are given in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridsched.core.params import BackfillOrder, Params, Policy, Predictor

if TYPE_CHECKING:
    from gridsched.sim.records import Tuner

OBJECTIVES = ("bsld", "wait", "mix")
DEFAULT_PS = (0.1, 0.2, 0.3, 0.5)
DEFAULT_THRESHOLDS = (600.0, 1800.0, 3600.0)
DEFAULT_PREDICTORS = (Predictor.SCALED,)
# the predictors an "auto" predictor is chosen from: user-history, seldom the best and never by much where it
# was (docs/results.md), is left out to keep the tuning cheap; it can still be configured
AUTO_PREDICTORS = (Predictor.SCALED, Predictor.USER_RATIO)
MIN_JOBS = 100
MARGIN = 0.02
RETRY = 86400.0  # while a tuning has had too little history, it is tried again after this long (or every)
GUARD = 0.10  # a setting other than EASY and EASY-SJF must beat both, in wait and in bsld, by this share
POOL = 8  # windows the guard and the objective judge on: the one replayed now and the last 7 before it


@dataclass(frozen=True, slots=True)
class Job:
    """One finished job of the history."""

    submit: float
    walltime: float  # asked for
    run: float  # really ran (cut at the walltime)
    ncpus: int
    user: str = ""


@dataclass(frozen=True, slots=True)
class Row:
    """One setting replayed over the history."""

    params: Params
    wait_avg: float
    bsld_avg: float
    score: float  # by the objective; lower is better
    jobs: int = 0  # the jobs its averages are over (scored in the window, or in the windows pooled)

    @property
    def label(self) -> str:
        return label(self.params)


@dataclass(frozen=True, slots=True)
class Decision:
    rows: tuple[Row, ...]  # EASY first, then the grid in order: this window's averages (scored pooled)
    best: Row | None  # None: too little history
    adopt: Params | None  # the setting to put in force; None: keep the one in force
    why: str
    # this window as evidence for the next tunings: {"jobs": scored jobs, "rows": {label: [wait, bsld]}}
    window: dict[str, Any] | None = None


def label(p: Params) -> str:
    order = "" if p.backfill_order is BackfillOrder.QUEUE else f" backfill={p.backfill_order.value}"
    if p.policy is not Policy.CHECKPOINT_BACKFILL:
        return p.policy.value + order
    if p.predictor is not Predictor.SCALED:
        return f"threshold={p.threshold:g}s predictor={p.predictor.value}{order}"
    return f"p={p.p:g} threshold={p.threshold:g}s predictor={p.predictor.value}{order}"


def grid(
    base: Params,
    ps: Sequence[float] = DEFAULT_PS,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    predictors: Sequence[Predictor] = DEFAULT_PREDICTORS,
) -> list[Params]:
    """EASY, EASY-SJF, then checkpoint-backfill at every combination (the rest of ``base`` kept)."""
    out = references(base)
    for pred in predictors:
        for p in ps:
            for th in thresholds:
                out.append(
                    dataclasses.replace(base, policy=Policy.CHECKPOINT_BACKFILL, p=p, threshold=th, predictor=pred)
                )
    return out


def grid_for(
    base: Params, p: bool = True, threshold: bool = True, predictor: bool = True, order: bool = False
) -> list[Params]:
    """EASY and EASY-SJF, then the checkpoint-backfill settings with the ``"auto"`` ones varied and the others
    as in ``base``.

    The user-history and user-ratio predictors do not read ``p``: they are varied by threshold only.  EASY,
    the first reference, is plain EASY: the queue's backfill order, whatever ``base``'s."""
    ps = DEFAULT_PS if p else (base.p,)
    ths = DEFAULT_THRESHOLDS if threshold else (base.threshold,)
    preds = AUTO_PREDICTORS if predictor else (base.predictor,)
    orders = (BackfillOrder.SHORTEST, BackfillOrder.QUEUE) if order else (base.backfill_order,)
    out = references(base)
    for bo in orders:
        for pred in preds:
            for pv in ps if pred is Predictor.SCALED else (base.p,):
                for th in ths:
                    out.append(
                        dataclasses.replace(
                            base,
                            policy=Policy.CHECKPOINT_BACKFILL,
                            p=pv,
                            threshold=th,
                            predictor=pred,
                            backfill_order=bo,
                        )
                    )
    return out


def references(base: Params) -> list[Params]:
    """The two settings the tuner never loses to: EASY (queue order) and EASY shortest-first (EASY-SJF)."""
    easy = dataclasses.replace(base, policy=Policy.EASY, backfill_order=BackfillOrder.QUEUE)
    return [easy, dataclasses.replace(easy, backfill_order=BackfillOrder.SHORTEST)]


def replay(
    history: Sequence[Job],
    ncores: int,
    settings: Sequence[Params],
    overhead: float = 120.0,
    score_from: float | None = None,
) -> list[Row]:
    """Every setting replayed over ``history`` on ``ncores`` cores (unscored: ``score`` is 0).

    With ``score_from``, the jobs submitted before it are replayed (they are the load the others find)
    but left out of the averages; if no job was submitted from then on, every job is scored."""
    from gridsched.sim.engine import simulate
    from gridsched.sim.metrics import BSLD_BOUND
    from gridsched.sim.swf import Trace

    # by submission, and jobs submitted at one instant by their other fields: the queue order of the
    # replay, and so the decision, does not depend on the order the history is given in
    jobs = sorted(history, key=lambda j: (j.submit, j.walltime, j.run, j.ncpus, j.user))
    tr = Trace("history", ncores, ncores, None)
    t0 = jobs[0].submit if jobs else 0.0
    for k, j in enumerate(jobs):
        if not 0 < j.ncpus <= ncores:
            continue
        tr.ids.append(k + 1)
        tr.submit.append(j.submit - t0)
        tr.size.append(j.ncpus)
        tr.walltime.append(max(j.walltime, j.run, 1.0))
        tr.run.append(min(j.run, max(j.walltime, j.run)))
        tr.user.append(j.user)
    lo = -float("inf") if score_from is None else score_from - t0
    scored = [k for k in range(len(tr.submit)) if tr.submit[k] >= lo] or list(range(len(tr.submit)))
    rows = []
    for prm in settings:
        res = simulate(tr, prm, overhead=overhead)
        n = len(scored) or 1
        waits = [res.start[k] - tr.submit[k] for k in scored]
        bslds = [max(1.0, (res.end[k] - tr.submit[k]) / max(tr.run[k], BSLD_BOUND)) for k in scored]
        rows.append(Row(prm, math.fsum(waits) / n, math.fsum(bslds) / n, 0.0, len(scored)))
    return rows


def score(rows: Sequence[Row], objective: str) -> list[Row]:
    """``rows`` with their scores; the first row is EASY's, the reference of ``mix``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: one of {', '.join(OBJECTIVES)}")
    easy = rows[0]
    return [dataclasses.replace(r, score=_objective(r, easy, objective)) for r in rows]


def _objective(r: Row, easy: Row, objective: str) -> float:
    """``r``'s score by ``objective`` (``mix``: its wait and bsld relative to ``easy``'s, averaged)."""

    def rel(v: float, ref: float) -> float:
        return v / ref if ref > 0 else (1.0 if v <= 0 else 2.0)

    if objective == "bsld":
        return r.bsld_avg
    if objective == "wait":
        return r.wait_avg
    return (rel(r.wait_avg, easy.wait_avg) + rel(r.bsld_avg, easy.bsld_avg)) / 2


def choose(
    history: Sequence[Job],
    ncores: int,
    current: Params,
    settings: Sequence[Params],
    objective: str = "mix",
    margin: float = MARGIN,
    min_jobs: int = MIN_JOBS,
    overhead: float = 120.0,
    score_from: float | None = None,
    guard: float = GUARD,
    evidence: Sequence[Any] = (),
) -> Decision:
    """The setting to adopt after replaying ``history`` (``settings[0]`` must be EASY; EASY-SJF is added where
    ``settings`` lacks it), judged on it pooled with the windows of ``evidence`` (the :attr:`Decision.window` of
    the tunings before, oldest first; the last ``POOL - 1`` are used).  See the module for the guard."""
    if not settings or (settings[0].policy, settings[0].backfill_order) != (Policy.EASY, BackfillOrder.QUEUE):
        raise ValueError("the first setting must be EASY, the reference")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: one of {', '.join(OBJECTIVES)}")
    if len(history) < min_jobs:
        return Decision((), None, None, f"{len(history)} jobs of history, fewer than {min_jobs}: kept")
    refs = references(settings[0])
    cand = list(settings)
    for extra in (refs[1], current):
        if not any(_same(extra, s) for s in cand):
            cand.append(extra)
    now_rows = replay(history, ncores, cand, overhead, score_from)
    window = {"jobs": now_rows[0].jobs, "rows": {r.label: [r.wait_avg, r.bsld_avg] for r in now_rows}}
    past = kept_windows([w for w in evidence if _usable(w)])
    ref_labels = [label(p) for p in refs]
    judged = [_pooled(r, ref_labels, [window, *past], objective) for r in now_rows]
    rows = [j[0] for j in judged]
    ei, si = (next(k for k, r in enumerate(rows) if _same(p, r.params)) for p in refs)

    def ok(k: int, g: float) -> bool:  # EASY is judged against EASY-SJF, any other against both
        r, easy, sjf, _ = judged[k]
        return k == si or passes(r, [sjf] if k == ei else [easy, sjf], g)

    passing = [k for k in range(len(rows)) if ok(k, guard)]
    best = rows[min(passing, key=lambda k: rows[k].score)]  # the first of equal scores: the earlier in the grid
    ni = next(k for k, r in enumerate(rows) if _same(current, r.params))
    now = rows[ni]
    over = f"over {judged[ni][3]} window{'s' if judged[ni][3] > 1 else ''}"
    if not ok(ni, 0.0 if ni == ei else guard):  # EASY, a reference, is held while no worse than EASY-SJF
        against = "easy backfill=shortest" if ni == ei else " or ".join(ref_labels)
        return Decision(
            tuple(rows),
            best,
            best.params,
            f"{label(current)} loses to {against} (in wait or bsld, by the {guard:.0%} guard, {over}): "
            f"{label(best.params)} at once",
            window,
        )
    if _same(best.params, current):
        return Decision(tuple(rows), best, None, f"the setting in force ({label(current)}) is the best: kept", window)
    if best.score < now.score and best.score <= now.score * (1 - margin):  # (equal scores of 0: no change)
        gain = 1 - best.score / now.score if now.score > 0 else 0.0
        why = f"{label(best.params)} beats {label(current)} by {gain:.1%} ({over})"
        return Decision(tuple(rows), best, best.params, why, window)
    why = f"{label(best.params)} is best but not by {margin:.0%} over {label(current)}: kept"
    return Decision(tuple(rows), best, None, why, window)


def kept_windows(evidence: Sequence[Any], new: Any = None) -> list[Any]:
    """The windows the next tuning pools with its own: the last ``POOL - 1`` of ``evidence`` (with ``new``
    after them, when given)."""
    windows = [*evidence, new] if new is not None else list(evidence)
    return windows[-(POOL - 1) :] if POOL > 1 else []


def _usable(w: Any) -> bool:
    """Whether ``w`` is a window as :attr:`Decision.window` records it (it may come from the state db)."""
    if not isinstance(w, dict) or not isinstance(w.get("rows"), dict):
        return False
    jobs = w.get("jobs")
    return isinstance(jobs, int) and not isinstance(jobs, bool) and jobs > 0


def _pooled(
    row: Row, ref_labels: list[str], windows: list[dict[str, Any]], objective: str
) -> tuple[Row, Row, Row, int]:
    """``row`` and the two references (EASY, EASY-SJF), each job-weighted over the windows that have all three
    (the first, this window, always has), ``row`` scored by ``objective``; and how many windows that is."""
    names = [row.label, *ref_labels]
    over = [windows[0]] + [w for w in windows[1:] if all(_pair(w["rows"].get(n)) for n in names)]
    n = sum(w["jobs"] for w in over)

    def avg(name: str, params: Params) -> Row:
        wait = math.fsum(w["jobs"] * float(w["rows"][name][0]) for w in over) / n
        bsld = math.fsum(w["jobs"] * float(w["rows"][name][1]) for w in over) / n
        return Row(params, wait, bsld, 0.0, n)

    r = avg(row.label, row.params)
    easy, sjf = (avg(name, row.params) for name in ref_labels)
    return dataclasses.replace(r, score=_objective(r, easy, objective)), easy, sjf, len(over)


def _pair(v: Any) -> bool:
    return (
        isinstance(v, (list, tuple))
        and len(v) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
    )


def passes(row: Row, refs: Sequence[Row], guard: float = GUARD) -> bool:
    """Whether ``row`` beats the better of ``refs`` (EASY's and EASY-SJF's rows) by ``guard`` in average wait and
    in average bounded slowdown."""
    wait = min(r.wait_avg for r in refs)
    bsld = min(r.bsld_avg for r in refs)
    return row.wait_avg <= wait * (1 - guard) and row.bsld_avg <= bsld * (1 - guard)


def _same(a: Params, b: Params) -> bool:
    if a.policy is not b.policy or a.backfill_order is not b.backfill_order:
        return False
    if a.policy is not Policy.CHECKPOINT_BACKFILL:
        return True
    if a.predictor is not Predictor.SCALED:
        return (a.threshold, a.predictor) == (b.threshold, b.predictor)
    return (a.p, a.threshold, a.predictor) == (b.p, b.threshold, b.predictor)


def in_replay(
    trace: object,
    every: float,
    window: float,
    settings: Sequence[Params],
    objective: str = "mix",
    margin: float = MARGIN,
    min_jobs: int = MIN_JOBS,
    overhead: float = 120.0,
    warmup: float = 0.0,
    guard: float = GUARD,
) -> Tuner:
    """A tuner for gsim's replay of ``trace`` (:class:`gridsched.sim.records.Tuner`): at each instant it
    chooses from the jobs of the replay that ended in the last ``window`` seconds, and from nothing else
    (no look-ahead: a job's run time is known once it has ended).  With ``warmup``, the jobs that ended in
    the ``warmup`` seconds before the window are replayed too, and only the jobs submitted in the window
    are scored.

    As the daemon does (:meth:`gridsched.daemon.tuner.Tuner.due`), until a tuning has had ``min_jobs`` jobs
    of history it is tried again every :data:`RETRY` seconds rather than every ``every``: the setting
    configured is not left unguarded for a whole ``every`` on a machine that is just starting.  Each tuning
    judges on its window pooled with those of the tunings before it (``choose``'s ``evidence``), as the
    daemon's do."""
    from gridsched.sim.swf import Trace

    assert isinstance(trace, Trace)
    submit, wall, run, size, user, ncores = (
        trace.submit,
        trace.walltime,
        trace.run,
        trace.size,
        trace.user,
        trace.ncores,
    )
    step = min(every, RETRY)
    due = [-math.inf]  # when the next tuning with history is due: at once until one has had enough
    evidence: list[dict[str, Any]] = []  # the windows of the tunings so far, as the daemon keeps them

    def pick(now: float, finished: list[int], end: list[float], current: Params) -> Params:
        if now < due[0]:
            return current
        since = now - window - warmup
        k = len(finished)  # they are in the order they ended: the window's jobs are the last ones
        while k > 0 and end[finished[k - 1]] >= since:
            k -= 1
        hist = [Job(submit[i], wall[i], run[i], size[i], user[i]) for i in finished[k:] if end[i] >= since]
        frm = now - window if warmup > 0 else None
        d = choose(hist, ncores, current, settings, objective, margin, min_jobs, overhead, frm, guard, evidence)
        if d.window is not None:
            evidence[:] = kept_windows(evidence, d.window)
        if d.best is not None:
            due[0] = now + every - step / 2  # (the step's instants are where the next one falls)
        return d.adopt if d.adopt is not None else current

    from gridsched.sim.records import Tuner

    return Tuner(step, pick)
