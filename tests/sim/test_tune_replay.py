"""gsim's auto settings: tuned during the replay from the jobs that have ended, and from nothing later."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from simtraces import swf_line

from gridsched.cli.gsim import main
from gridsched.core.params import BackfillOrder, Params, Policy
from gridsched.sim import tune
from gridsched.sim.engine import Tuner, simulate
from gridsched.sim.swf import Trace

# shortest-first, as shipped: the tuner's checkpoint-backfill settings can beat EASY-SJF, its second reference
CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, backfill_order=BackfillOrder.SHORTEST)
DAY = 86400.0
CHANGE = 6 * DAY  # the two traces differ only in the jobs submitted from here on


def trace(later_factor: float, seed: int = 5) -> Trace:
    """Ten days of jobs on 32 cores asking ten times their run time; from CHANGE on, ``later_factor`` times."""
    r = random.Random(seed)
    tr = Trace("synthetic", 32, 32, None)
    t = 0.0
    k = 0
    while t < 10 * DAY:
        t += r.expovariate(1 / 900)
        run = r.choice([120, 600, 1800, 3600, 7200]) * r.uniform(0.5, 1.5)
        factor = 10.0 if t < CHANGE else later_factor
        k += 1
        tr.ids.append(k)
        tr.submit.append(round(t))
        tr.size.append(r.choice([1, 2, 4, 8, 16]))
        tr.walltime.append(round(run * factor) + 1)
        tr.run.append(round(run))
        tr.user.append(f"u{r.randrange(4)}")
    return tr


def decisions(tr: Trace, tuner: Tuner) -> list[tuple[float, str]]:
    res = simulate(tr, CKPT, overhead=120.0, tuner=tuner)
    return [(t, tune.label(p)) for t, p in res.tunings]


def until_change(tuner: Tuner) -> Tuner:
    """``tuner`` at the instants up to CHANGE, the settings in force after it: the decisions compared are
    those made by CHANGE, and a tuner's later instants (each a replay of its own) cannot change them."""

    def choose(now: float, finished: list[int], end: list[float], current: Params) -> Params:
        return tuner.choose(now, finished, end, current) if now <= CHANGE else current

    return Tuner(tuner.every, choose)


def honest(tr: Trace, warmup: float = 0.0, window: float = 14 * DAY) -> Tuner:
    grid = tune.grid_for(CKPT, True, False, False)
    return tune.in_replay(tr, DAY, window, grid, "mix", 0.0, min_jobs=100, warmup=warmup)


def peeking(tr: Trace) -> Tuner:
    """A tuner that looks ahead: it replays every job of the trace, ended or not (what must not be done); with a
    guard of 5 %, under which its choice on these traces depends on their later jobs."""
    jobs = [tune.Job(tr.submit[i], tr.walltime[i], tr.run[i], tr.size[i], tr.user[i]) for i in range(len(tr))]

    def pick(now: float, finished: list[int], end: list[float], current: Params) -> Params:
        grid = tune.grid_for(CKPT, True, False, False)
        d = tune.choose(jobs, tr.ncores, current, grid, "mix", 0.0, guard=0.05)
        return d.adopt if d.adopt is not None else current

    return Tuner(DAY, pick)


@pytest.mark.parametrize("warmup", [0.0, 2 * DAY], ids=["no-warmup", "warmup"])
def test_a_history_changed_after_a_tuning_instant_does_not_change_that_decision(warmup: float):
    a, b = trace(10.0), trace(1.0)  # b's later jobs ask for exactly their run time
    for tr in (a, b):  # on 16 cores, loaded enough for checkpoint-backfill to beat EASY-SJF by the guard
        tr.ncores = tr.max_procs = 16
    assert a.submit == b.submit and a.walltime != b.walltime
    window = 14 * DAY if not warmup else 3 * DAY  # with a warm-up: a window short enough for it to matter
    da, db = (decisions(tr, until_change(honest(tr, warmup, window))) for tr in (a, b))
    before = [d for d in da if d[0] <= CHANGE]
    assert len(before) >= 3 and before == [d for d in db if d[0] <= CHANGE]


def test_the_replay_check_can_fail_a_tuner_that_peeks_at_later_jobs():
    """The check above can fail: a tuner that peeks at later jobs decides differently before the change."""
    a, b = trace(10.0), trace(1.0)
    for tr in (a, b):
        tr.ncores = tr.max_procs = 16
    pa, pb = (decisions(tr, until_change(peeking(tr))) for tr in (a, b))
    assert [d for d in pa if d[0] <= CHANGE] != [d for d in pb if d[0] <= CHANGE]


def test_gsim_run_p_auto(tmp_path):
    tr = trace(10.0)
    path = tmp_path / "t.swf"
    path.write_text(
        "; MaxProcs: 32\n"
        + "\n".join(swf_line(tr.ids[i], tr.submit[i], tr.run[i], tr.size[i], tr.walltime[i]) for i in range(len(tr)))
        + "\n"
    )
    r = CliRunner().invoke(
        main, ["run", str(path), "--p", "auto", "--backfill-order", "shortest", "--tune-every", "1d", "--json"]
    )
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert rec["p"] == "auto" and rec["threshold"] == 1800.0 and rec["tunings"] >= 5
    assert rec["settings"][0] == {"from": 0.0, "setting": "p=0.2 threshold=1800s predictor=scaled backfill=shortest"}
    for s in rec["settings"][1:]:  # EASY, EASY-SJF, or p varied: threshold, predictor and order are fixed
        label = s["setting"]
        assert label in ("easy", "easy backfill=shortest") or label.endswith(
            "threshold=1800s predictor=scaled backfill=shortest"
        )
    bad = CliRunner().invoke(main, ["run", str(path), "--p", "auto", "--policy", "easy"])
    assert bad.exit_code == 2 and "auto settings tune checkpoint-backfill" in bad.output
    bad = CliRunner().invoke(main, ["run", str(path), "--p", "auto", "--tune-every", "10s"])
    assert bad.exit_code == 2 and "--tune-every: must be at least a minute" in bad.output


def test_gsim_run_tune_warmup_replays_the_tuner_with_that_warm_up(tmp_path):
    """--tune-warmup reaches the tuner: gsim's settings are those of in_replay with the same warm-up, and a
    bad value is refused in one line.  On 16 cores the queue is long enough for the warm-up to change
    decisions."""
    tr = trace(10.0)
    tr.ncores = tr.max_procs = 16
    path = tmp_path / "t.swf"
    path.write_text(
        "; MaxProcs: 16\n"
        + "\n".join(swf_line(tr.ids[i], tr.submit[i], tr.run[i], tr.size[i], tr.walltime[i]) for i in range(len(tr)))
        + "\n"
    )
    args = [
        "run",
        str(path),
        "--p",
        "auto",
        "--tune-every",
        "1d",
        "--tune-window",
        "3d",
        "--tune-margin",
        "0",
        "--backfill-order",
        "shortest",
        "--json",
    ]
    got = {}
    for warmup in (0.0, 2 * DAY):
        r = CliRunner().invoke(main, [*args, "--tune-warmup", f"{warmup:g}"])
        assert r.exit_code == 0, r.output
        got[warmup] = json.loads(r.stdout)["settings"]
        res = simulate(tr, CKPT, overhead=120.0, tuner=honest(tr, warmup, 3 * DAY))
        want = [(0.0, CKPT)] + [
            (t, p) for k, (t, p) in enumerate(res.tunings) if p != (res.tunings[k - 1][1] if k else CKPT)
        ]
        assert got[warmup] == [{"from": t, "setting": tune.label(p)} for t, p in want]
    assert got[0.0] != got[2 * DAY]
    bad = CliRunner().invoke(main, [*args, "--tune-warmup", "-1"])
    assert bad.exit_code == 2 and "must be zero or more seconds" in bad.output
