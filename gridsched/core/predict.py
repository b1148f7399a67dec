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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .types import Params, Predictor, Waiting

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


_BY_USER = Predictor.USER_HISTORY  # a plain name: reading an Enum member is slow


def make_predictor(params: Params, history: Mapping[str, tuple[float, ...]]) -> PredictFn:
    """The predictor ``params`` selects, as a function of one pending job."""
    p, threshold = params.p, params.threshold
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
