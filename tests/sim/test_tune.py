"""The tuner: a pure function of a job history that replays it under EASY and a grid of settings."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from simtraces import swf_line

from gridsched.cli.gsim import main
from gridsched.core.params import Params, Policy
from gridsched.sim.tune import Job, choose, grid, passes, replay

CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL)  # the published defaults: p 0.2, threshold 30 min


def history(n: int = 200, seed: int = 1, factor: float = 1.0) -> list[Job]:
    r = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += r.expovariate(1 / 400)
        run = r.choice([60, 300, 900, 3600, 7200]) * r.uniform(0.5, 1.5)
        out.append(Job(t, run * factor, run, r.choice([1, 2, 4, 8, 16, 32]), f"u{r.randrange(5)}"))
    return out


def test_too_little_history_keeps_the_setting_in_force():
    d = choose(history(50), 64, CKPT, grid(CKPT), min_jobs=100)
    assert d.adopt is None and d.best is None and d.why == "50 jobs of history, fewer than 100: kept"


def test_jobs_of_the_whole_machine_leave_nothing_to_backfill():
    """Every job asks for every core: every setting makes the same schedule, so all tie.  The best is EASY-SJF, the
    guard's fallback; the checkpoint setting in force, which does not beat it by the guard, gives way to it at
    once, and EASY-SJF in force stays."""
    jobs = [Job(60.0 * k, 600.0, 100.0 + k, 64) for k in range(120)]
    d = choose(jobs, 64, CKPT, grid(CKPT), objective="bsld")
    assert len({(r.wait_avg, r.bsld_avg) for r in d.rows}) == 1
    assert d.best is d.rows[1] and d.best.label == "easy backfill=shortest"
    assert d.adopt == d.best.params and " loses to easy or easy backfill=shortest" in d.why
    kept = choose(jobs, 64, d.adopt, grid(CKPT), objective="bsld")
    assert kept.adopt is None and kept.why.startswith("the setting in force (easy backfill=shortest)")


def test_the_best_is_adopted_only_by_a_margin_over_easy_and_the_setting_in_force():
    jobs = history(200, factor=10.0)
    d = choose(jobs, 64, CKPT, grid(CKPT), objective="mix", margin=0.0)
    easy, sjf, now = d.rows[0], d.rows[1], next(r for r in d.rows if r.params == CKPT)
    # EASY-SJF, the fallback; EASY if it beats EASY-SJF by the guard; any other if it beats both by it
    passing = [sjf] + [r for r in d.rows if passes(r, (sjf,) if r is easy else (easy, sjf))]
    assert d.best is not None and d.best.score == min(r.score for r in passing)
    assert d.best.score <= min(easy.score, sjf.score)
    if passes(now, (easy, sjf)):  # the setting in force still passes the guard: replaced only by a better score
        assert d.adopt is None or d.best.score < now.score
    else:  # it no longer beats EASY and EASY-SJF by the guard: the best that passes replaces it at once
        assert d.adopt == d.best.params and " loses to easy or easy backfill=shortest" in d.why
    # nothing beats anything by 100 %: EASY-SJF in force is kept
    never = choose(jobs, 64, sjf.params, grid(CKPT), objective="mix", margin=1.0)
    assert never.adopt is None and never.why.endswith(": kept"), never.why
    best = d.best.params
    kept = choose(jobs, 64, best, grid(CKPT), objective="mix", margin=0.0)
    assert kept.adopt is None and kept.why.startswith("the setting in force")


def test_the_replay_is_gsim_s(tmp_path):
    """The tuner's replay of a history and gsim's of the same jobs as an SWF log give the same averages."""
    jobs = [Job(float(k * 37), float(600 + 60 * (k % 7)), float(100 + 13 * (k % 11)), 1 + k % 8) for k in range(80)]
    rows = replay(jobs, 16, [Params(policy=Policy.EASY), CKPT])
    lines = [swf_line(k + 1, j.submit, j.run, j.ncpus, j.walltime) for k, j in enumerate(jobs)]
    runner = CliRunner()
    for row, policy in zip(rows, ("easy", "checkpoint-backfill")):
        trace = tmp_path / "t.swf"
        trace.write_text("; MaxProcs: 16\n" + "\n".join(lines) + "\n")
        res = runner.invoke(main, ["run", str(trace), "--policy", policy, "--json"], prog_name="gsim")
        rec = json.loads(res.stdout)
        assert (row.wait_avg, row.bsld_avg) == pytest.approx((rec["wait_avg"], rec["bsld_avg"]))


def test_bad_settings():
    with pytest.raises(ValueError, match="the first setting must be EASY"):
        choose(history(), 64, CKPT, grid(CKPT)[1:])
    with pytest.raises(ValueError, match="objective 'speed': one of bsld, wait, mix"):
        choose(history(), 64, CKPT, grid(CKPT), objective="speed")
