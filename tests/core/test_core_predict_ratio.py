"""The user-ratio predictor on hand-made histories; expected values are worked out in the comments."""

from __future__ import annotations

import pytest

from gridsched.core.policy import schedule
from gridsched.core.predict import RATIO_JOBS, learned_ratio, make_predictor, run_ratio, user_ratio
from gridsched.core.types import Params, Policy, Predictor, Running, Snapshot, Start, Waiting

R, W = Running, Waiting
RATIO = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.5, threshold=10.0, predictor=Predictor.USER_RATIO)
BUSY = [R(90, 4, 0, 100), R(91, 2, 0, 50)]  # 8 cores: 2 free now, 4 more at 50, all at 100


def test_run_ratio_is_run_over_walltime_within_0_and_1():
    assert run_ratio(50.0, 200.0) == 0.25
    assert run_ratio(300.0, 200.0) == 1.0  # ran past its walltime (a yielding parent's credit)
    assert run_ratio(0.0, 200.0) == 0.0
    assert run_ratio(10.0, 0.0) == 1.0  # no walltime to learn from: never shortened


def test_learned_ratio_is_the_lower_quartile_of_the_last_jobs():
    assert learned_ratio(()) is None
    assert learned_ratio((0.3,)) == 0.3
    # sorted 0.1 0.2 0.4 0.8 1.0: position 0.25 * 4 = 1 -> 0.2
    assert learned_ratio((1.0, 0.4, 0.1, 0.8, 0.2)) == pytest.approx(0.2)
    # sorted 0.2 0.6: position 0.25 -> 0.2 + 0.25 * 0.4 = 0.3
    assert learned_ratio((0.6, 0.2)) == pytest.approx(0.3)
    # only the last RATIO_JOBS count: older jobs that ran to their walltime are forgotten
    assert learned_ratio((1.0,) * 5 + (0.5,) * RATIO_JOBS) == 0.5
    assert learned_ratio((0.5,) * RATIO_JOBS + (1.0,) * RATIO_JOBS) == 1.0


def test_user_ratio_prediction():
    # ratio 0.1, threshold 10: walltime 500 -> 50, walltime 2000 -> 200 (scales with the walltime)
    assert user_ratio(W(1, 1, 500), 0.1, 10.0) == pytest.approx(50.0)
    assert user_ratio(W(1, 1, 2000), 0.1, 10.0) == pytest.approx(200.0)
    # no history for the user: not shortened (the user's own estimate), never the scaled rule
    assert user_ratio(W(1, 1, 500), None, 10.0) is None
    # capped by the walltime: a user whose jobs run to their walltime is never shortened
    assert user_ratio(W(1, 1, 500), 1.0, 10.0) is None
    # the threshold is respected: a walltime of 10 is not above it
    assert user_ratio(W(1, 1, 10), 0.1, 10.0) is None
    assert user_ratio(W(1, 1, 10.5), 0.5, 10.0) == pytest.approx(5.25)
    # checkpointed after 100 s with 400 s of walltime left: walltime 500 * 0.5 = 250 in all,
    # 150 left
    assert user_ratio(W(1, 1, 400, elapsed=100.0), 0.5, 10.0) == pytest.approx(150.0)
    # ... after 250 s or more it has outlived the prediction: not shortened again
    assert user_ratio(W(1, 1, 250, elapsed=250.0), 0.5, 10.0) is None
    assert user_ratio(W(1, 1, 200, elapsed=300.0), 0.5, 10.0) is None


def test_make_predictor_reads_the_ratios_not_the_run_times():
    pred = make_predictor(RATIO, {"ann": (5.0, 5.0)}, {"ann": (0.2, 0.2, 0.2, 0.2)})
    assert pred(W(9, 1, 900, True, user="ann")) == pytest.approx(180.0)
    assert pred(W(9, 1, 900, True, user="bob")) is None  # no history
    assert make_predictor(RATIO, {"ann": (5.0, 5.0)})(W(9, 1, 900, True, user="ann")) is None


def snap(pending, ratios, floating=None):
    return Snapshot(0.0, 8, tuple(BUSY), tuple(pending), RATIO, ratios=ratios, floating=floating or {})


def test_user_ratio_predictor_in_the_policy():
    # head 1 needs 7: shadow 100, extra 1.  ann: ratio 0.1 -> 900 * 0.1 = 90 <= 100: starts,
    # planned 90.  bob, no history: own estimate 900, 2 cores > extra 1: waits.
    pending = [W(1, 7, 10), W(2, 2, 900, True, user="bob"), W(3, 2, 900, True, user="ann")]
    plan = schedule(snap(pending, {"ann": (0.1, 0.1, 0.1, 0.1)}))
    assert plan.starts == (Start(3, (), True, 90.0),)
    # ann's jobs used 0.2 of their walltime: 180 > 100, so she waits too
    plan = schedule(snap(pending, {"ann": (0.2, 0.2)}))
    assert plan.starts == ()


def test_a_refused_job_of_one_user_does_not_refuse_anothers():
    # with a floating resource the pass builds its profiles and remembers what it turned down:
    # bob's job (2 cores, 900 s) is refused, ann's identical one must still be looked at
    pending = [W(1, 7, 10), W(2, 2, 900, True, user="bob"), W(3, 2, 900, True, user="ann")]
    plan = schedule(snap(pending, {"ann": (0.1,)}, floating={"lic": 4}))
    assert plan.starts == (Start(3, (), True, 90.0),)
