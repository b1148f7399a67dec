"""A plain replay under checkpoint-backfill takes most passes through the quick pass
(:func:`gridsched.core.policy.quick.ckpt_pass`, on the replay's state) and gives what the general pass gives,
job by job: the same
starts, ends, checkpoints, run segments, passes and series, with a tuner or without; and the lean loop of
:mod:`gridsched.sim.lean_ckpt`, which takes its events, gives what the general loop gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simtraces import outcome, small_traces

from gridsched.core.policy import quick
from gridsched.core.types import BackfillOrder, Params, Policy, Predictor, PriorityParams
from gridsched.sim import engine, lean_ckpt, tune
from gridsched.sim.engine import Mode, Result, Tuner, simulate
from gridsched.sim.swf import Trace, read

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
SETTINGS = [
    Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.1, threshold=600.0, backfill_order=BackfillOrder.SHORTEST),
    Params(policy=Policy.CHECKPOINT_BACKFILL),
    Params(policy=Policy.CHECKPOINT_BACKFILL, predictor=Predictor.USER_RATIO, threshold=60.0),
    Params(policy=Policy.CHECKPOINT_BACKFILL, predictor=Predictor.USER_HISTORY, backfill_order=BackfillOrder.SHORTEST),
]


def traces() -> st.SearchStrategy[Trace]:
    return small_traces([1, 10, 100, 1000, 2500, 5000, 20000], ["a", "b"])


def both(tr: Trace, params: Params, mode: Mode = Mode.CHECKPOINT, tuner: bool = False) -> tuple[Result, Result, int]:
    """The replay of ``tr`` as ``simulate`` makes it (its events in the lean loop of
    :mod:`gridsched.sim.lean_ckpt`, most passes by the quick pass) and through the general loop with the general
    pass alone; how many passes the quick pass decided.  The general loop with the quick pass gives the same."""
    decided = [0]
    plain = quick.ckpt_starts

    def counted(*parts):  # type: ignore[no-untyped-def]
        found = plain(*parts)
        decided[0] += found is not None
        return found

    def run(lean: bool = True) -> Result:
        t = None
        if tuner:  # every 10 minutes from the jobs that ended in the last hour, the grid of an "auto" p
            grid = tune.grid_for(params, True, False, False)
            t = tune.in_replay(tr, 600.0, 3600.0, grid, min_jobs=5, warmup=600.0)
        return simulate(tr, params, mode=mode, series=True, tuner=t, lean=lean)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(lean_ckpt, "ckpt_starts", counted)
        fast = run()
        general_quick = run(lean=False)
        mp.setattr(engine, "ckpt_pass", lambda *parts: None)
        general = run(lean=False)
    finally:
        mp.undo()
    assert outcome(general_quick) == outcome(general)
    return fast, general, decided[0]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tr=traces(),
    params=st.sampled_from(SETTINGS),
    mode=st.sampled_from([Mode.CHECKPOINT, Mode.REQUEUE, Mode.NONE]),
)
def test_the_quick_pass_replays_as_the_general_one(tr: Trace, params: Params, mode: Mode) -> None:
    fast, general, _ = both(tr, params, mode)
    assert outcome(fast) == outcome(general)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tr=traces(), params=st.sampled_from(SETTINGS[:2]))
def test_with_a_tuner_too(tr: Trace, params: Params) -> None:
    fast, general, _ = both(tr, params, tuner=True)
    assert outcome(fast) == outcome(general)


@pytest.mark.parametrize("params", SETTINGS[:3], ids=["shipped", "queue", "user-ratio"])
@pytest.mark.parametrize("name", ["KTH-SP2-1996-2.1-cln.swf", "SDSC-SP2-1998-4.2-cln.swf"])
def test_the_quick_pass_replays_trace_slices_as_the_general_one(name: str, params: Params) -> None:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"no trace at {path}")
    tr = read(str(path), limit=3000)
    fast, general, decided = both(tr, params)
    assert outcome(fast) == outcome(general)
    assert sum(fast.checkpoints) > 0  # (jobs were shortened, and made room)
    assert decided > 0.9 * fast.passes  # (the quick pass decided most passes: not the general one twice)


def test_a_plain_replay_takes_the_lean_loop_and_others_the_general_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons above are of the lean loop with the general one: a plain checkpoint-backfill replay (with
    a tuner or not) never enters the general loop; one with priorities does."""
    tr = Trace(
        "<t>",
        4,
        4,
        None,
        [1, 2, 3],
        [0.0, 0.0, 5.0],
        [4, 2, 1],
        [100.0, 50.0, 20.0],
        [90.0, 50.0, 20.0],
        ["a", "b", "c"],
    )

    def refuse(*args: object) -> None:
        raise AssertionError("the general loop")

    monkeypatch.setattr(engine, "_run", refuse)
    grid = tune.grid_for(SETTINGS[0], True, False, False)
    for t in (None, tune.in_replay(tr, 600.0, 3600.0, grid, min_jobs=1)):
        res = simulate(tr, SETTINGS[0], tuner=t)
        assert (res.start, res.end) == ([0.0, 90.0, 90.0], [90.0, 140.0, 110.0])
    weighted = dataclasses.replace(SETTINGS[0], priority=PriorityParams(weight_age=1.0))
    with pytest.raises(AssertionError, match="general loop"):
        simulate(tr, weighted)


CYCLE = [
    SETTINGS[0],
    Params(policy=Policy.EASY, backfill_order=BackfillOrder.SHORTEST),
    SETTINGS[2],
    Params(policy=Policy.EASY),
    SETTINGS[1],
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tr=traces(), every=st.sampled_from([7.0, 60.0, 450.0]), mode=st.sampled_from([Mode.CHECKPOINT, Mode.REQUEUE]))
def test_settings_changed_often_replay_as_in_the_general_loop(tr: Trace, every: float, mode: Mode) -> None:
    """A tuner that changes the settings at every instant, through checkpoint-backfill and easy (in queue order
    and shortest first): easy then finds jobs running on a planned end and preempted jobs waiting on what is
    left of their walltime, which the lean loop leaves to the general pass or replays itself."""

    def cycle(now: float, finished: list[int], end: list[float], current: Params) -> Params:
        return CYCLE[int(now // every) % len(CYCLE)]

    fast = simulate(tr, SETTINGS[0], mode=mode, series=True, tuner=Tuner(every, cycle))
    general = simulate(tr, SETTINGS[0], mode=mode, series=True, tuner=Tuner(every, cycle), lean=False)
    assert outcome(fast) == outcome(general)


def test_easy_after_checkpoint_backfill_backfills_a_preempted_job_on_what_is_left() -> None:
    """Seven jobs on 16 cores, the settings changed every 450 s: job 5 is checkpointed under
    checkpoint-backfill and waits on the rest of its walltime (not its walltime) while easy is in force with
    no job running on a planned end: the lean loop's easy pass reads that estimate, as the general pass does."""
    rows = [(0, 3, 2500, 2000), (300, 2, 2500, 2000), (300, 12, 1000, 500), (300, 13, 1, 0)]
    rows += [(600, 4, 5000, 2000), (600, 13, 1, 0), (600, 4, 5000, 0)]
    tr = Trace("<t>", 16, 16, None)
    for k, (submit, size, wall, run) in enumerate(rows):
        tr.ids.append(k + 1)
        tr.submit.append(float(submit))
        tr.size.append(size)
        tr.walltime.append(float(wall))
        tr.run.append(float(run))
        tr.user.append("a")

    def cycle(now: float, finished: list[int], end: list[float], current: Params) -> Params:
        return CYCLE[int(now // 450.0) % len(CYCLE)]

    fast = simulate(tr, SETTINGS[0], tuner=Tuner(450.0, cycle))
    assert fast.checkpoints[4] == 1
    assert outcome(fast) == outcome(simulate(tr, SETTINGS[0], tuner=Tuner(450.0, cycle), lean=False))
