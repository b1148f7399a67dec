"""The tuner's guard: it never puts in force a setting worse than EASY or EASY-SJF on the history it replayed."""

from __future__ import annotations

import random

import pytest

from gridsched.core.params import BackfillOrder, Params, Policy
from gridsched.sim import tune
from gridsched.sim.engine import simulate
from gridsched.sim.swf import Trace
from gridsched.sim.tune import GUARD, Job, choose, grid_for, label, passes

SJF = BackfillOrder.SHORTEST
CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, backfill_order=SJF)
DAY = 86400.0


def history(seed: int, factor: float, ncores: int, n: int = 240) -> list[Job]:
    """Mixed jobs a few minutes apart, walltimes ``factor`` times their run times (1: exact estimates)."""
    r = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += r.expovariate(1 / 300)
        run = r.choice([60, 300, 900, 3600, 7200]) * r.uniform(0.5, 1.5)
        out.append(Job(t, run * factor + 1, run, r.choice([1, 2, 4, 8, 16]), f"u{r.randrange(6)}"))
    return out


@pytest.mark.parametrize("seed, ncores", [(4, 16), (4, 24), (5, 24)])
@pytest.mark.parametrize("factor", [1.0, 10.0])
def test_what_is_in_force_after_a_tuning_never_loses_to_easy_or_easy_sjf_on_its_history(seed, ncores, factor):
    """Whatever the setting in force before, the one in force after is EASY, EASY-SJF, a setting that beats the
    better of them by the guard in wait and in bsld, or the setting in force when it is no worse than them."""
    hist = history(seed, factor, ncores)
    grid = grid_for(CKPT, True, False, False)
    for current in (CKPT, Params(policy=Policy.EASY), grid[5]):
        d = choose(hist, ncores, current, grid)
        easy, sjf = d.rows[0], d.rows[1]
        assert (label(easy.params), label(sjf.params)) == ("easy", "easy backfill=shortest")
        after = d.adopt if d.adopt is not None else current
        row = next(r for r in d.rows if label(r.params) == label(after))
        if row in (easy, sjf):
            continue
        if d.adopt is not None:
            assert passes(row, (easy, sjf), GUARD), d.why
            assert row.wait_avg <= min(easy.wait_avg, sjf.wait_avg) * (1 - GUARD)
            assert row.bsld_avg <= min(easy.bsld_avg, sjf.bsld_avg) * (1 - GUARD)
        else:  # held: no worse than the better reference in either metric
            assert row.wait_avg <= min(easy.wait_avg, sjf.wait_avg), d.why
            assert row.bsld_avg <= min(easy.bsld_avg, sjf.bsld_avg), d.why


def test_exact_estimates_the_aggressive_setting_loses_and_the_tuner_keeps_a_reference():
    """Walltimes equal to run times: shortening them only makes preemptions.  The tuner keeps (or falls back to)
    EASY or EASY-SJF, whichever it had, even when the objective alone would rank a checkpoint setting first."""
    hist = history(5, 1.0, 16)
    grid = grid_for(CKPT, True, False, False)
    losers = []
    for current in (CKPT, *grid[2:]):
        d = choose(hist, 16, current, grid)
        easy, sjf = d.rows[0], d.rows[1]
        now = next(r for r in d.rows if label(r.params) == label(current))
        if not passes(now, (easy, sjf), 0.0):
            losers.append(label(current))
            assert d.adopt is not None and " loses to easy or easy backfill=shortest" in d.why
            after = next(r for r in d.rows if label(r.params) == label(d.adopt))
            assert after in (easy, sjf) or passes(after, (easy, sjf))
    assert losers  # the history has settings that lose: the check above ran


def test_the_guard_asks_for_both_metrics_and_the_margin():
    """A row passes when it beats the better reference, metric by metric, by the guard; the setting in force is
    held (guard 0) while it is no worse."""
    prm = Params()
    easy, sjf = tune.Row(prm, 100.0, 10.0, 0.0), tune.Row(prm, 110.0, 9.0, 0.0)
    good = tune.Row(prm, 90.0, 8.0, 0.0)
    wait_only = tune.Row(prm, 50.0, 9.5, 0.0)  # far better in wait, worse than EASY-SJF in bsld
    small = tune.Row(prm, 97.0, 8.0, 0.0)  # 3 % better in wait: under the guard
    assert passes(good, (easy, sjf)) and not passes(wait_only, (easy, sjf)) and not passes(small, (easy, sjf))
    assert passes(small, (easy, sjf), 0.0) and not passes(wait_only, (easy, sjf), 0.0)


def trace(days: float = 10.0) -> Trace:
    r = random.Random(5)
    tr = Trace("synthetic", 16, 16, None)
    t, k = 0.0, 0
    while t < days * DAY:
        t += r.expovariate(1 / 900)
        run = r.choice([120, 600, 1800, 3600, 7200]) * r.uniform(0.5, 1.5)
        k += 1
        tr.ids.append(k)
        tr.submit.append(round(t))
        tr.size.append(r.choice([1, 2, 4, 8, 16]))
        tr.walltime.append(round(run) + 1)  # exact estimates
        tr.run.append(round(run))
        tr.user.append(f"u{r.randrange(4)}")
    return tr


def test_in_a_replay_the_first_tuning_comes_once_there_is_history_then_every(monkeypatch):
    """Tuned every 30 days over a 10-day trace: the tuner looks every day until a tuning has had 100 jobs of
    history (about a day of this trace), tunes then, and not again within the 30 days."""
    tr = trace()
    seen: list[tuple[float, int]] = []
    real = tune.choose

    def spy(history, *args, **kw):  # type: ignore[no-untyped-def]
        seen.append((max((j.submit for j in history), default=0.0), len(history)))
        return real(history, *args, **kw)

    monkeypatch.setattr(tune, "choose", spy)
    grid = grid_for(CKPT, True, False, False)
    tuner = tune.in_replay(tr, 30 * DAY, 6 * DAY, grid, warmup=DAY)
    assert tuner.every == tune.RETRY
    res = simulate(tr, CKPT, overhead=120.0, tuner=tuner)
    assert len(res.tunings) >= 9  # a look every day of the ten
    sizes = [n for _, n in seen]
    assert sizes and sizes[-1] >= tune.MIN_JOBS and all(n < tune.MIN_JOBS for n in sizes[:-1])
    assert len(sizes) <= 3  # 100 jobs (one every 15 minutes) have ended within a few days


def window(ckpt: tuple[float, float], easy=(1000.0, 10.0), sjf=(900.0, 9.0), jobs=10**6) -> dict:
    """A window of evidence, as a tuning records it: the averages of EASY, EASY-SJF and checkpoint-backfill at p 0.1
    over many more jobs than the history replayed now, so that the pooled averages are about its own."""
    grid = grid_for(CKPT, True, False, False)
    return {"jobs": jobs, "rows": {label(grid[0]): list(easy), label(grid[1]): list(sjf), label(grid[2]): list(ckpt)}}


def test_the_guard_judges_on_the_windows_before_too():
    """The history replayed now is one window; the tuner pools it with the windows of the tunings before (job-weighted).
    Where they say checkpoint-backfill beats both references by more than the guard in wait and in bsld, it is put in
    force; where it wins by far in wait but loses in bsld, or wins by less than the guard, EASY-SJF stays; and where
    it is in force and the windows say it no longer passes, EASY-SJF replaces it at once."""
    hist = history(4, 10.0, 16)
    grid = grid_for(CKPT, True, False, False)
    sjf, ckpt = grid[1], grid[2]
    alone = choose(hist, 16, sjf, grid)
    assert alone.adopt is None and alone.window is not None and alone.window["jobs"] == len(hist)
    assert set(alone.window["rows"]) == {label(p) for p in grid}

    wins = choose(hist, 16, sjf, grid, evidence=[window((600.0, 6.0))])
    assert wins.adopt == ckpt and "over 2 windows" in wins.why, wins.why
    row = next(r for r in wins.rows if label(r.params) == label(ckpt))
    now_wait, now_bsld = alone.window["rows"][label(ckpt)]
    n = len(hist)
    assert row.jobs == 10**6 + n
    assert (row.wait_avg, row.bsld_avg) == pytest.approx(
        ((600e6 + n * now_wait) / (1e6 + n), (6e6 + n * now_bsld) / (1e6 + n))
    )

    for losing in ((500.0, 9.1), (850.0, 8.5)):  # far better in wait, worse in bsld; 5.6 % better in both
        kept = choose(hist, 16, sjf, grid, evidence=[window(losing)])
        assert kept.adopt is None and kept.why.startswith("the setting in force (easy backfill=shortest)"), kept.why
        back = choose(hist, 16, ckpt, grid, evidence=[window(losing)])
        assert back.adopt == sjf and " loses to easy or easy backfill=shortest" in back.why, back.why
    held = choose(hist, 16, ckpt, grid, evidence=[window((600.0, 6.0))])
    assert held.adopt is None, held.why


def test_only_the_last_windows_count_and_bad_ones_are_left_out():
    """Of the evidence, the last POOL - 1 windows count (an older one saying otherwise is ignored), and windows that
    are not as a tuning records them (the state db may hold anything) are left out."""
    hist = history(4, 10.0, 16)
    grid = grid_for(CKPT, True, False, False)
    sjf, ckpt = grid[1], grid[2]
    recent = [window((600.0, 6.0), jobs=10**5)] * (tune.POOL - 1)
    d = choose(hist, 16, sjf, grid, evidence=[window((2000.0, 20.0), jobs=10**9), *recent])
    assert d.adopt == ckpt and f"over {tune.POOL} windows" in d.why, d.why
    bad = [None, {"jobs": "many", "rows": {}}, {"jobs": 5, "rows": {label(ckpt): ["a", 1.0]}}, {"jobs": True}]
    bad.append({"jobs": 10**6, "rows": {label(ckpt): [1.0, float("nan")], label(grid[0]): [1.0, 1.0]}})
    same = choose(hist, 16, sjf, grid, evidence=bad)
    alone = choose(hist, 16, sjf, grid)
    assert (same.adopt, same.why, same.rows) == (alone.adopt, alone.why, alone.rows)


def test_in_a_replay_each_tuning_is_given_the_windows_of_those_before(monkeypatch):
    """gsim's tuner keeps the windows of its tunings, the last POOL - 1, and hands them to the next, as the daemon."""
    tr = trace(12.0)
    given: list[list[dict]] = []
    real = tune.choose

    def spy(*args, **kw):  # type: ignore[no-untyped-def]
        given.append(list(args[10]) if len(args) > 10 else list(kw.get("evidence", ())))
        return real(*args, **kw)

    monkeypatch.setattr(tune, "choose", spy)
    tuner = tune.in_replay(tr, DAY, DAY, grid_for(CKPT, True, False, False), min_jobs=20)
    simulate(tr, CKPT, overhead=120.0, tuner=tuner)
    sizes = [len(g) for g in given]
    assert len(sizes) >= tune.POOL + 2
    assert sizes[: tune.POOL] == list(range(tune.POOL)) and set(sizes[tune.POOL :]) == {tune.POOL - 1}
    assert given[-1][-1]["jobs"] > 0 and given[-1][:-1] == given[-2][1:]
