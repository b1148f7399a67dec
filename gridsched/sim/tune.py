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
it beats EASY-SJF by ``guard`` (5 %) in average wait AND in average bounded
slowdown; any other setting only when, on the replayed history, it beats the
better of the two in both, each by the guard: a setting that wins by the objective
but loses on either metric, or wins by less than the guard, is never put in
force.  The setting in force is held only while it is no worse than the
references it was judged against in either metric; on the first history where
it is worse, the tuner falls back at once (no hysteresis) to the best setting
that passes the guard, EASY-SJF when none does.  Between
settings that pass, the best by the objective replaces the one in force when it
beats it by ``margin`` (a hysteresis, so a setting is not changed back and forth
for noise).

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
from typing import TYPE_CHECKING

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
GUARD = 0.05  # a setting other than EASY and EASY-SJF must beat both, in wait and in bsld, by this share


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

    @property
    def label(self) -> str:
        return label(self.params)


@dataclass(frozen=True, slots=True)
class Decision:
    rows: tuple[Row, ...]  # EASY first, then the grid in order
    best: Row | None  # None: too little history
    adopt: Params | None  # the setting to put in force; None: keep the one in force
    why: str


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
        rows.append(Row(prm, math.fsum(waits) / n, math.fsum(bslds) / n, 0.0))
    return rows


def score(rows: Sequence[Row], objective: str) -> list[Row]:
    """``rows`` with their scores; the first row is EASY's, the reference of ``mix``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: one of {', '.join(OBJECTIVES)}")
    easy = rows[0]

    def rel(v: float, ref: float) -> float:
        return v / ref if ref > 0 else (1.0 if v <= 0 else 2.0)

    out = []
    for r in rows:
        if objective == "bsld":
            s = r.bsld_avg
        elif objective == "wait":
            s = r.wait_avg
        else:
            s = (rel(r.wait_avg, easy.wait_avg) + rel(r.bsld_avg, easy.bsld_avg)) / 2
        out.append(dataclasses.replace(r, score=s))
    return out


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
) -> Decision:
    """The setting to adopt after replaying ``history`` (``settings[0]`` must be EASY; EASY-SJF is added where
    ``settings`` lacks it; see the module for the guard)."""
    if not settings or (settings[0].policy, settings[0].backfill_order) != (Policy.EASY, BackfillOrder.QUEUE):
        raise ValueError("the first setting must be EASY, the reference")
    if len(history) < min_jobs:
        return Decision((), None, None, f"{len(history)} jobs of history, fewer than {min_jobs}: kept")
    refs = references(settings[0])
    cand = list(settings)
    for extra in (refs[1], current):
        if not any(_same(extra, s) for s in cand):
            cand.append(extra)
    rows = score(replay(history, ncores, cand, overhead, score_from), objective)
    ref_rows = [next(r for r in rows if _same(p, r.params)) for p in refs]
    easy, sjf = ref_rows

    def against(r: Row) -> list[Row]:  # EASY is judged against EASY-SJF, any other against both
        return [sjf] if r is easy else ref_rows

    passing = [r for r in rows if r is sjf or passes(r, against(r), guard)]
    best = min(passing, key=lambda r: r.score)  # the first of equal scores: the earlier in the grid
    now = next(r for r in rows if _same(current, r.params))
    if now is not sjf and not passes(now, against(now), 0.0):
        return Decision(
            tuple(rows),
            best,
            best.params,
            f"{label(current)} loses to {' or '.join(label(r.params) for r in against(now))} in wait or bsld: "
            f"{label(best.params)} at once",
        )
    if _same(best.params, current):
        return Decision(tuple(rows), best, None, f"the setting in force ({label(current)}) is the best: kept")
    if best.score < now.score and best.score <= now.score * (1 - margin):  # (equal scores of 0: no change)
        gain = 1 - best.score / now.score if now.score > 0 else 0.0
        return Decision(tuple(rows), best, best.params, f"{label(best.params)} beats {label(current)} by {gain:.1%}")
    return Decision(
        tuple(rows), best, None, f"{label(best.params)} is best but not by {margin:.0%} over {label(current)}: kept"
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
    configured is not left unguarded for a whole ``every`` on a machine that is just starting."""
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

    def pick(now: float, finished: list[int], end: list[float], current: Params) -> Params:
        if now < due[0]:
            return current
        since = now - window - warmup
        k = len(finished)  # they are in the order they ended: the window's jobs are the last ones
        while k > 0 and end[finished[k - 1]] >= since:
            k -= 1
        hist = [Job(submit[i], wall[i], run[i], size[i], user[i]) for i in finished[k:] if end[i] >= since]
        frm = now - window if warmup > 0 else None
        d = choose(hist, ncores, current, settings, objective, margin, min_jobs, overhead, frm, guard)
        if d.best is not None:
            due[0] = now + every - step / 2  # (the step's instants are where the next one falls)
        return d.adopt if d.adopt is not None else current

    from gridsched.sim.records import Tuner

    return Tuner(step, pick)
