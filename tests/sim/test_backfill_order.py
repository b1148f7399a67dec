"""The backfill order (``scheduler.backfill_order``, ``gsim --backfill-order``) through gsim, the config and
the tuner."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest
from click.testing import CliRunner, Result
from simtraces import swf_line

from gridsched.cli.gsim import main
from gridsched.core.types import BackfillOrder, Params, Policy, Predictor
from gridsched.protocol import config
from gridsched.sim import autotune as tuning
from gridsched.sim import tune


def gsim(*args: str) -> Result:
    res = CliRunner().invoke(main, list(args), prog_name="gsim")
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def starts(out) -> dict[str, str]:
    return {r["id"]: r["start"] for r in csv.DictReader(out.open())}


# 4 processors.  Job 1 (2, 100 s) runs from 0; job 2 (4, 10 s) arrives at 1 and is the head: its
# reservation is at 100.  Jobs 3 (2 processors, 95 s asked, 90 run) and 4 (2, 20 s) arrive together at
# 2; both would end by 100, but only one fits in the 2 free processors.
#  queue order: 3 starts at 2 (ends 92); 4 waits for the head (100-110) and starts at 110.
#  shortest first: 4 starts at 2 (ends 22); at 22, 3 would end at 117, after the reservation: it waits
#  for the head and starts at 110.
LINES = [
    swf_line(1, 0, 100, 2, 100),
    swf_line(2, 1, 10, 4, 10),
    swf_line(3, 2, 90, 2, 95),
    swf_line(4, 2, 20, 2, 20),
]


@pytest.mark.parametrize(
    "policy, order, want",
    [
        ("easy", "queue", {"3": "2", "4": "110"}),
        ("easy", "shortest", {"3": "110", "4": "2"}),
        ("checkpoint-backfill", "queue", {"3": "2", "4": "110"}),
        ("checkpoint-backfill", "shortest", {"3": "110", "4": "2"}),
    ],
)
def test_gsim_backfills_in_the_order_asked(write_trace, tmp_path, policy, order, want):
    out = tmp_path / "jobs.csv"
    path = write_trace(LINES, max_procs=4)
    res = gsim("run", path, "--policy", policy, "--backfill-order", order, "--jobs-out", str(out), "--json")
    assert res.exit_code == 0, res.output
    got = starts(out)
    assert {k: got[k] for k in ("3", "4")} == want
    assert got["2"] == "100"  # the head's start does not depend on the order
    assert json.loads(res.stdout)["backfill_order"] == order


def test_the_config_order_is_used_and_bad_orders_are_refused_in_one_line(write_trace, tmp_path):
    out = tmp_path / "jobs.csv"
    path = write_trace(LINES, max_procs=4)
    cfg = tmp_path / "gridsched.toml"
    cfg.write_text('[scheduler]\npolicy = "easy"\nbackfill_order = "shortest"\n')
    res = gsim("run", path, "--config", str(cfg), "--jobs-out", str(out))
    assert res.exit_code == 0, res.output
    assert starts(out)["4"] == "2"
    res = gsim("run", path, "--backfill-order", "longest")
    assert res.exit_code == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    assert res.stderr.startswith("gsim: error: ") and "shortest" in res.stderr
    cfg.write_text('[scheduler]\nbackfill_order = "longest"\n')
    res = gsim("run", path, "--config", str(cfg))
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert "scheduler.backfill_order" in res.stderr and 'must be one of queue, shortest, or "auto"' in res.stderr
    with pytest.raises(config.ConfigError, match="backfill_order"):
        config.load(str(cfg))
    res = gsim("compare", path, "--backfill-order", "auto")
    assert res.exit_code == 2 and "only gsim run tunes" in res.stderr


def test_the_shipped_config_backfills_shortest_first_and_tunes_the_predictor():
    cfg = config.load(str(config.PACKAGED))
    assert cfg.params.backfill_order is BackfillOrder.SHORTEST
    # p 0.1 and threshold 10 min fixed, the predictor tuned: four settings a tuning (EASY, EASY-SJF, scaled,
    # user-ratio), so that a replay of the shipped configuration stays cheap
    assert (cfg.params.p, cfg.params.threshold) == (0.1, 600.0)
    assert cfg.tuning.predictor and not (cfg.tuning.p or cfg.tuning.threshold or cfg.tuning.backfill_order)


def test_the_grid_varies_the_order_only_when_it_is_auto():
    base = Params(policy=Policy.CHECKPOINT_BACKFILL, backfill_order=BackfillOrder.SHORTEST)
    fixed = tune.grid_for(base)
    both = tune.grid_for(base, order=True)
    # EASY, the reference, is plain EASY (the queue's order) either way
    assert fixed[0] == dataclasses.replace(base, policy=Policy.EASY, backfill_order=BackfillOrder.QUEUE)
    assert both[0] == fixed[0]
    assert {p.backfill_order for p in fixed[1:]} == {BackfillOrder.SHORTEST}
    assert both[:2] == fixed[:2]  # EASY and EASY-SJF, the references
    assert len(both) - 2 == 2 * (len(fixed) - 2)
    assert {p.backfill_order for p in both[1:]} == {BackfillOrder.SHORTEST, BackfillOrder.QUEUE}
    assert len({tune.label(p) for p in both}) == len(both)  # every setting told apart
    assert tune.label(fixed[1]).endswith(" backfill=shortest")
    assert tune.label(both[0]) == "easy"


def test_a_tuned_setting_keeps_its_order_and_an_older_record_means_the_queue():
    p = Params(
        policy=Policy.CHECKPOINT_BACKFILL, p=0.3, predictor=Predictor.USER_RATIO, backfill_order=BackfillOrder.SHORTEST
    )
    s = tuning.setting(p)
    assert s["backfill_order"] == "shortest"
    assert tuning.applied(Params(), json.loads(json.dumps(s))) == dataclasses.replace(
        Params(),
        **{
            "policy": p.policy,
            "p": p.p,
            "threshold": p.threshold,
            "predictor": p.predictor,
            "backfill_order": p.backfill_order,
        },
    )
    del s["backfill_order"]  # recorded by a daemon from before the order was a setting
    assert tuning.applied(Params(backfill_order=BackfillOrder.SHORTEST), s).backfill_order is BackfillOrder.QUEUE


def test_gsim_tunes_the_order_when_asked(write_trace):
    # 399 jobs of 1 to 3 processors, a minute apart: once 100 have ended the tuner runs at each instant
    lines = [swf_line(k, 60 * k, 30, 1 + k % 3, 600) for k in range(1, 400)]
    path = write_trace(lines, max_procs=4)
    res = gsim("run", path, "--backfill-order", "auto", "--tune-every", "1h", "--tune-window", "1d", "--json")
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["backfill_order"] == "auto" and rec["tunings"] > 0
    res = gsim("run", path, "--policy", "easy", "--backfill-order", "auto")
    assert res.exit_code == 2 and "not with --policy easy" in res.stderr
