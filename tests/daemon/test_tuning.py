"""The daemon tunes its "auto" settings from its own history, in a background process, and keeps them."""

from __future__ import annotations

import json
import time

import pytest

from gridsched.protocol.spool import Spool
from tests.cli.conftest import job_row, write_rows
from tests.cli.test_gctl_tune import history
from tests.conftest import wait_for

AUTO_CONFIG = """
[scheduler]
policy = "checkpoint-backfill"
p = "auto"
threshold = "auto"
tune_every = "1h"
tune_margin = 0.0
[jobs]
kill_grace = "1s"
[machine]
cores = 16
[daemon]
autostart = false
"""


def test_gctl_tune_adopts_from_the_history_and_the_setting_survives_a_restart(make_gs):
    gs = make_gs(AUTO_CONFIG, start=False)
    write_rows(Spool(gs.spool), *history(job_row, 150))  # walltimes ten times the run times
    gs.start()
    wait_for(lambda: "tuning: p, threshold, predictor auto" in gs.log(), 15, "the tuning line at start")
    assert "in force: p=0.2 threshold=1800s predictor=scaled" in gs.log()
    dry = gs.run("gctl", "tune", "--dry-run", "--json", check=True)
    table = json.loads(dry.stdout)
    # EASY, EASY-SJF, scaled at 4 p x 3 thresholds, user-ratio at 3 thresholds
    assert table["jobs"] == 150 and table["rows"][0]["setting"] == "easy" and len(table["rows"]) == 17
    r = gs.run("gctl", "tune", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    dec = json.loads(r.stdout)
    assert dec["jobs"] == 150 and dec["rows"] == table["rows"]  # the daemon replayed the same history
    # the best that passes the guard: no worse than EASY and EASY-SJF by the objective
    best = dec["best"]
    scores = {row["setting"]: row["score"] for row in dec["rows"]}
    assert scores[best] <= min(scores["easy"], scores["easy backfill=shortest"])
    if best == "p=0.2 threshold=1800s predictor=scaled backfill=shortest":  # the published setting was the best: kept
        assert dec["adopt"] is None
        pytest.skip("the published setting is the best on this history: nothing to adopt (reported)")
    assert dec["adopt"] == best
    wait_for(lambda: f"adopted {best}" in gs.log(), 15, "the adoption in the log")
    line = next(ln for ln in gs.log().splitlines() if f"adopted {best}" in ln)
    assert "150 jobs of history, objective mix" in line
    info = gs.run("gctl", "info", "--json", check=True)
    t = json.loads(info.stdout)["tuning"]
    assert t["auto"] and t["last"]["jobs"] == 150 and t["last"]["adopt_label"] == best
    text = gs.run("gctl", "info", check=True).stdout
    assert "tuning:         p, threshold, predictor auto" in text and "last tuning:" in text
    # jobs are scheduled with it, and a restart keeps it in force
    jid = gs.gsub("-n", "1", "-t", "30s", "--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
    gs.stop()
    gs.start()
    wait_for(lambda: gs.log().count("tuning: p, threshold, predictor auto") == 2, 15, "the second start's line")
    last = [ln for ln in gs.log().splitlines() if "tuning: p, threshold, predictor auto" in ln][-1]
    assert last.endswith(f"in force: {best}")


def test_gctl_tune_is_taken_whatever_setting_the_tuner_put_in_force(stub_daemon):
    """The daemon takes gctl tune when its configuration has auto settings, also once the tuner has put EASY
    or EASY-SJF in force (it looked at the settings in force for them, so that with EASY in force gctl tune was
    refused as if nothing were tuned)."""
    from gridsched.core.params import Policy
    from gridsched.sim.autotune import setting
    from gridsched.sim.tune import references

    d = stub_daemon(AUTO_CONFIG)
    for ref in references(d.file_cfg.params):  # EASY, EASY-SJF
        d.tuner.record = {"in_force": setting(ref)}
        d.cfg = d.tuner.effective(d.file_cfg)
        assert d.cfg.params.policy is Policy.EASY
        d.tuner.requested = False
        assert d.actions.tune() and d.tuner.requested


def test_the_tuner_runs_when_due_in_the_background(stub_daemon):
    """tune_every after the last tuning, the loop starts the tuner and only polls it; its answer is recorded."""
    now = time.time()
    d = stub_daemon(AUTO_CONFIG.replace('tune_every = "1h"', 'tune_every = "1m"'))
    assert now + 60 <= d.tuner.due(d.file_cfg) <= time.time() + 60  # a minute after the daemon's start
    d.tune(now + 30)  # not yet due
    assert d.tuner.proc is None
    d.tune(now + 61)
    assert d.tuner.proc is not None
    proc = d.tuner.proc
    # while it runs, the loop looks at it about once a second, not at every turn (no busy loop)
    assert d.tuner.due(d.file_cfg) == pytest.approx(now + 62)
    if proc.poll() is None:
        d.tune(now + 61.5)
        assert d.tuner.due(d.file_cfg) == pytest.approx(now + 62.5)
    wait_for(lambda: proc.poll() is not None, 120, "the tuner to end")
    d.tune(now + 62)
    assert d.tuner.proc is None
    rec = json.loads(d.db.meta()["tuning"])
    assert rec["last"]["jobs"] == 0 and "fewer than 100" in rec["last"]["why"]
    assert d.tuner.due(d.file_cfg) == pytest.approx(now + 61 + 60)


@pytest.mark.parametrize(
    "order, recorded, want",
    [
        ("", None, "shortest"),  # recorded before the order was a setting: the configured order stays
        ("", "queue", "shortest"),  # tuned under another configured order: the configured one stays
        ('backfill_order = "auto"', None, "queue"),  # the order tuned: the record's (queue before it was)
        ('backfill_order = "auto"', "shortest", "shortest"),
        ('backfill_order = "queue"', "shortest", "queue"),
    ],
)
def test_a_tuned_setting_in_force_keeps_the_configured_backfill_order(stub_daemon, order, recorded, want):
    d = stub_daemon(AUTO_CONFIG.replace("[jobs]", f"{order}\n[jobs]"))
    s = {"policy": "checkpoint-backfill", "p": 0.1, "threshold": 600.0, "predictor": "scaled"}
    if recorded is not None:
        s["backfill_order"] = recorded
    d.tuner.record = {"in_force": s}
    got = d.tuner.effective(d.file_cfg).params
    assert (got.p, got.threshold, got.backfill_order.value) == (0.1, 600.0, want)
    # EASY adopted is the tuner's EASY, in queue order, whatever the configuration's order
    d.tuner.record = {"in_force": dict(s, policy="easy", backfill_order="queue")}
    assert d.tuner.effective(d.file_cfg).params.backfill_order.value == "queue"


def test_until_a_tuning_has_had_history_the_tuner_is_tried_again_daily(stub_daemon):
    """Tuned every 21 days: after a tuning with too little history the next comes a day later, not 21 days
    later, so that the configured setting is not left unguarded on a machine just started; after one with
    history, tune_every applies."""
    from gridsched.sim.tune import RETRY

    d = stub_daemon(AUTO_CONFIG.replace('tune_every = "1h"', 'tune_every = "21d"'))
    d.tuner.last_at = 1000.0
    d.tuner.record = {"last": {"time": 1000.0, "jobs": 40, "best": None, "why": "40 jobs of history"}}
    assert d.tuner.due(d.file_cfg) == 1000.0 + RETRY == 1000.0 + 86400
    d.tuner.record = {"last": {"time": 1000.0, "jobs": 400, "best": "easy backfill=shortest"}}
    assert d.tuner.due(d.file_cfg) == 1000.0 + 21 * 86400
    d.tuner.record = {}  # a daemon that never tuned: a day after its start
    assert d.tuner.due(d.file_cfg) == 1000.0 + 86400


def test_each_tuning_keeps_its_window_and_the_next_judges_on_them_too(stub_daemon):
    """The daemon keeps the last POOL - 1 windows replayed (meta "tuning", "evidence") and hands them to the next
    tuning, which judges on them pooled with its own: windows where the setting in force loses to EASY-SJF in bounded
    slowdown make it give way at once, though it wins by far in wait."""
    from gridsched.sim import tune

    d = stub_daemon(AUTO_CONFIG)
    write_rows(d.spool, *history(job_row, 150))
    in_force = d.cfg.params
    names = [tune.label(p) for p in tune.grid_for(in_force, True, True, True, True)]
    rows = {n: [500.0, 12.0] for n in names}  # every checkpoint setting: far better in wait, worse in bsld
    rows.update({"easy": [1000.0, 10.0], "easy backfill=shortest": [900.0, 9.0]})
    old = {"jobs": 10**6, "rows": {"easy": [1.0, 1.0]}}  # the oldest: dropped when this tuning's is kept
    d.tuner.record = {"evidence": [old] + [{"jobs": 10**5, "rows": rows}] * (tune.POOL - 2)}
    d.tuner.requested = True
    now = time.time()
    d.tune(now)
    proc = d.tuner.proc
    assert proc is not None
    wait_for(lambda: proc.poll() is not None, 120, "the tuner to end")
    d.tune(now + 1)
    rec = json.loads(d.db.meta()["tuning"])
    assert rec["last"]["jobs"] == 150 and "window" not in rec["last"]
    assert f"{tune.label(in_force)} loses to easy or easy backfill=shortest" in rec["last"]["why"], rec["last"]["why"]
    assert f"over {tune.POOL - 1} windows" in rec["last"]["why"]  # this one and those of the evidence but the first
    ev = rec["evidence"]
    assert len(ev) == tune.POOL - 1 and old not in ev and ev[-1]["jobs"] == 150
    # the decision's rows are pooled: EASY's average wait over this window and those kept before it
    easy = next(r for r in rec["last"]["rows"] if r["setting"] == "easy")
    n = 10**5 * (tune.POOL - 2)
    assert easy["wait_avg"] == pytest.approx((n * 1000.0 + 150 * ev[-1]["rows"]["easy"][0]) / (n + 150))
    assert rec["in_force"]["policy"] == "easy" and rec["in_force"]["backfill_order"] == "shortest"


def test_a_tuning_run_outside_the_daemon_judges_on_the_windows_the_daemon_kept(tmp_path):
    """``gctl tune --dry-run`` replays in the command (sim.autotune.decide): without windows given, it reads those the
    daemon keeps in the state db, so that its table and decision are the daemon's; a bad record counts as none."""
    from gridsched.core.params import Params, Policy
    from gridsched.protocol.config_record import Tuning
    from gridsched.sim import autotune, tune

    spool = Spool(tmp_path / "spool")
    current = Params(policy=Policy.CHECKPOINT_BACKFILL)
    names = [tune.label(p) for p in tune.grid_for(current, True, True, False)]
    rows = {n: [500.0, 12.0] for n in names}  # every checkpoint setting: far better in wait, worse in bsld
    rows.update({"easy": [1000.0, 10.0], "easy backfill=shortest": [900.0, 9.0]})
    kept = {"evidence": [{"jobs": 10**5, "rows": rows}] * 3}
    write_rows(spool, *history(job_row, 150), meta={"tuning": json.dumps(kept)})
    t = Tuning(p=True, threshold=True, window=2 * 86400, warmup=0)
    dec = autotune.decide(spool.db, time.time(), 16, current, t)
    assert dec["jobs"] == 150 and "over 4 windows" in dec["why"] and dec["adopt"] is not None, dec["why"]
    assert f"{tune.label(current)} loses to easy or easy backfill=shortest" in dec["why"]
    alone = autotune.decide(spool.db, time.time(), 16, current, t, evidence=[])
    assert "over 4 windows" not in alone["why"] and alone["window"] == dec["window"]
    write_rows(spool, meta={"tuning": "not json"})
    assert autotune.kept_evidence(spool.db) == []
