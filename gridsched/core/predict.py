"""Run-time predictors for checkpoint-based backfilling.

When checkpoint-backfill decides whether a checkpointable job (``preemptable``)
that is not the head job can start in a hole, it may rely on a prediction
shorter than the user's estimate.  A predictor maps a pending job to that
shortened estimate, or to ``None`` when it does not shorten the job (the
user's estimate is then used, and the job is not marked as relying on a
prediction).  Only jobs whose remaining estimate exceeds ``Params.threshold``
are ever shortened, with either predictor.

``scaled`` (the default)
    ``estimate * p`` when ``estimate > threshold``.  For a job that was
    checkpointed, ``estimate`` is already what is left of its walltime.

``user-history`` (after Tsafrir, Etsion and Feitelson's EASY++)
    The mean of the actual run times of the same user's last two finished jobs
    (``Snapshot.history[user]``, newest last; one run time if only one is
    known), minus the time the job has already run (``Waiting.elapsed``),
    capped by the estimate.  Without history for the user, or when the job has
    already run longer than the mean, the job is not shortened: the prediction
    falls back to the user's own estimate, not to the scaled rule, so that a
    user's first jobs are never treated as shorter than they said.  A running
    job that outlives its prediction is counted at its user estimate end by the
    policy (the "correction upward" of EASY++).

``user-ratio``
    The job's walltime times a ratio of actual to requested run time learned
    from the same user's finished jobs: the lower quartile of the ratios
    ``run time / walltime`` of their last ``RATIO_JOBS`` finished jobs
    (``Snapshot.ratios[user]``, newest last).  A user who asks for ten hours
    and runs for two is predicted at a fifth of any walltime they ask for,
    whatever its length; a user whose jobs run to their walltime is never
    shortened.  For a checkpointed job the walltime is what is left of it plus
    the time it has run (``Waiting.elapsed``), and the prediction is what is
    left of the predicted run time, capped by the estimate.  Without history
    for the user, or when the job has already run longer than predicted, the
    job is not shortened, as with ``user-history``.

A job that outlives its prediction is not predicted again: while it runs it
is counted at its user estimate end from then on (:mod:`gridsched.core.end_time`,
``PLANNED``), which is the correction upward of EASY++ in its simplest and
safest form (Tsafrir, Etsion and Feitelson also tried extending the prediction
in steps; counting the estimate never lets a prediction that proved wrong
delay the head job again).  A checkpointed job that restarts is predicted
from what it has already run, so with ``user-history`` and ``user-ratio`` a
job that outlived its prediction comes back unshortened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gridsched.core.types import Params, Predictor, Waiting

PredictFn = Callable[[Waiting], "float | None"]


def scaled(estimate: float, p: float, threshold: float) -> float | None:
    """``estimate * p`` if ``estimate > threshold``, else ``None``."""
    if estimate > threshold:
        return estimate * p
    return None


def history_mean(runs: tuple[float, ...]) -> float | None:
    """The mean of the last two run times in ``runs`` (newest last), ``None`` if empty."""
    if not runs:
        return None
    last = runs[-2:]
    return sum(last) / len(last)


def user_history(job: Waiting, mean: float | None, threshold: float) -> float | None:
    """The user-history prediction of ``job`` given its user's ``mean`` run time."""
    if mean is None or job.estimate <= threshold:
        return None
    left = mean - job.elapsed
    # a job checkpointed at (or, up to rounding, at) its predicted length has outlived it
    if left <= mean * 1e-9 or left >= job.estimate:
        return None
    return left


# How many of a user's last finished jobs the user-ratio predictor learns from, and the quantile of
# their ratios it takes: the lower quartile.  Replaying KTH-SP2, SDSC-SP2 and SDSC-BLUE, it lowered
# bounded slowdown more than the mean or the median, with fewer checkpoints than the minimum.
RATIO_JOBS = 16
RATIO_QUANTILE = 0.25


def run_ratio(run: float, walltime: float) -> float:
    """The ratio a finished job adds to its user's history: its run time over its walltime, in [0, 1]."""
    if walltime <= 0:
        return 1.0
    r = run / walltime
    return 0.0 if r < 0 else 1.0 if r > 1 else r


def learned_ratio(ratios: tuple[float, ...], quantile: float = RATIO_QUANTILE) -> float | None:
    """The ``quantile`` of the last ``RATIO_JOBS`` ratios (interpolated), ``None`` if there are none."""
    if not ratios:
        return None
    xs = sorted(ratios[-RATIO_JOBS:])
    pos = quantile * (len(xs) - 1)
    i = int(pos)
    if i + 1 >= len(xs):
        return xs[-1]
    return xs[i] + (xs[i + 1] - xs[i]) * (pos - i)


def user_ratio(job: Waiting, ratio: float | None, threshold: float) -> float | None:
    """The user-ratio prediction of ``job`` given its user's learned ``ratio``."""
    if ratio is None or job.estimate <= threshold:
        return None
    total = (job.estimate + job.elapsed) * ratio  # the predicted run time of the whole walltime
    left = total - job.elapsed
    if left <= total * 1e-9 or left >= job.estimate:
        return None
    return left


_BY_USER = Predictor.USER_HISTORY  # a plain name: reading an Enum member is slow
_BY_RATIO = Predictor.USER_RATIO
# the predictors whose prediction of a job depends on its user and elapsed time, not on its estimate alone
READS_USER = frozenset({Predictor.USER_HISTORY, Predictor.USER_RATIO})


def make_predictor(
    params: Params,
    history: Mapping[str, tuple[float, ...]],
    ratios: Mapping[str, tuple[float, ...]] | None = None,
) -> PredictFn:
    """The predictor ``params`` selects, as a function of one pending job."""
    p, threshold = params.p, params.threshold
    if params.predictor is _BY_RATIO:
        learned: dict[str, float | None] = {}
        by_user = ratios or {}

        def predict_ratio(job: Waiting) -> float | None:
            user = job.user
            if user in learned:
                ratio = learned[user]
            else:
                ratio = learned[user] = learned_ratio(tuple(by_user.get(user, ())))
            return user_ratio(job, ratio, threshold)

        return predict_ratio
    if params.predictor is _BY_USER:
        means: dict[str, float | None] = {}

        def predict_history(job: Waiting) -> float | None:
            user = job.user
            if user in means:
                mean = means[user]
            else:
                mean = means[user] = history_mean(tuple(history.get(user, ())))
            return user_history(job, mean, threshold)

        return predict_history

    def predict_scaled(job: Waiting) -> float | None:
        est = job.estimate
        return est * p if est > threshold else None

    return predict_scaled
