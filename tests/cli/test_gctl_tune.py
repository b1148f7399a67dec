"""gctl tune over a recorded history in the state db: the table, the choice, and its adoption."""

from __future__ import annotations

import json
import random
import time
import tomllib

import pytest

from gridsched.cli import gctl
from gridsched.protocol.config import load
from gridsched.sim.tune import label


def history(make_row, n: int, seed: int = 3) -> list[dict]:
    """``n`` jobs that ended within the last day, their walltimes ten times their run times."""
    r = random.Random(seed)
    now = time.time()
    t = now - 86400
    rows = []
    for k in range(1, n + 1):
        t += r.expovariate(1 / 300)
        run = r.choice([60, 300, 900, 3600]) * r.uniform(0.5, 1.5)
        start = t + r.uniform(0, 600)
        end = min(start + run, now - 1)
        rows.append(
            make_row(
                k,
                state="COMPLETED",
                ncpus=r.choice([1, 2, 4, 8]),
                walltime=int(run * 10),
                submit_time=t,
                start_time=start,
                end_time=end,
                elapsed=end - start,
            )
        )
    return rows


FIXED = '[scheduler]\np = 0.2\nthreshold = "30m"\npredictor = "scaled"\n'


@pytest.fixture
def fixed(env):
    """A configuration whose settings are fixed (not auto): gctl tune writes what it adopts into it."""
    with open(env / "cfg.toml", "a") as f:
        f.write(FIXED)
    return env


def test_too_little_history_changes_nothing(fixed, run, put_rows, make_row):
    env = fixed
    put_rows(*history(make_row, 40))
    before = (env / "cfg.toml").read_text()
    r = run(gctl.cli, ["tune"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "40 jobs ended in the last 6-00:00:00 on 16 cores; objective mix",
        "gctl: 40 jobs of history, fewer than 100: kept",
    ]
    assert (env / "cfg.toml").read_text() == before


def test_dry_run_then_adoption(fixed, run, put_rows, make_row):
    env = fixed
    put_rows(*history(make_row, 150))
    before = (env / "cfg.toml").read_text()
    r = run(gctl.cli, ["tune", "--dry-run", "--json", "--margin", "0"])
    assert r.exit_code == 0, r.stderr
    table = json.loads(r.stdout)
    # EASY, EASY-SJF, scaled at 4 p x 3 thresholds, user-ratio at 3 thresholds
    assert table["jobs"] == 150 and table["rows"][0]["setting"] == "easy" and len(table["rows"]) == 17
    assert table["rows"][1]["setting"] == "easy backfill=shortest"
    assert (env / "cfg.toml").read_text() == before  # a dry run writes nothing
    # the best is the lowest score of the settings that pass the guard: EASY, EASY-SJF, or one that beats both
    best = table["best"]
    scores = {row["setting"]: row["score"] for row in table["rows"]}
    assert scores[best] <= min(scores["easy"], scores["easy backfill=shortest"])
    r = run(gctl.cli, ["tune", "--margin", "0"])
    assert r.exit_code == 0, r.stderr
    if table["adopt"] is None:  # the setting in force was the best
        assert (env / "cfg.toml").read_text() == before
        return
    assert table["adopt"] == best
    assert r.stdout.splitlines()[-1].startswith(f"gctl: adopted {best} in {env / 'cfg.toml'}")
    cfg = load(str(env / "cfg.toml"))
    data = tomllib.loads((env / "cfg.toml").read_text())["scheduler"]
    assert data["policy"] == cfg.params.policy.value
    if best != "easy":
        assert best == label(cfg.params)
    # tuned again at once, with the same history: the setting in force is now the best
    r = run(gctl.cli, ["tune", "--margin", "0", "--dry-run"])
    assert r.stdout.splitlines()[-1].startswith("gctl: the setting in force")


def test_nothing_beats_by_a_whole_margin(fixed, run, put_rows, make_row):
    env = fixed
    put_rows(*history(make_row, 150))
    before = (env / "cfg.toml").read_text()
    r = run(gctl.cli, ["tune", "--margin", "1"])
    # the setting in force (p 0.2, 30 min, scaled) loses to EASY-SJF on this history: the guard replaces it at
    # once, whatever the margin; then nothing beats the setting in force by 100 %, and it is kept
    assert r.exit_code == 0 and "loses to easy or easy backfill=shortest" in r.stdout, r.stdout
    assert (env / "cfg.toml").read_text() != before
    before = (env / "cfg.toml").read_text()
    r = run(gctl.cli, ["tune", "--margin", "1"])
    assert r.exit_code == 0 and r.stdout.splitlines()[-1].endswith(": kept"), r.stdout
    assert (env / "cfg.toml").read_text() == before
    r = run(gctl.cli, ["tune", "--window", "soon"])
    assert r.exit_code == 2 and r.stderr.startswith("gctl: error: --window")


def test_auto_settings_vary_only_what_is_auto(env, run, put_rows, make_row):
    """p auto, threshold and predictor fixed: the dry run's grid is EASY, EASY-SJF and the four values of p (in the
    shipped backfill order, shortest first; EASY, the reference, in queue order)."""
    with open(env / "cfg.toml", "a") as f:
        f.write('[scheduler]\np = "auto"\nthreshold = "1h"\npredictor = "scaled"\ntune_objective = "bsld"\n')
    put_rows(*history(make_row, 150))
    r = run(gctl.cli, ["tune", "--dry-run", "--json"])
    assert r.exit_code == 0, r.stderr
    table = json.loads(r.stdout)
    assert [row["setting"] for row in table["rows"]] == ["easy", "easy backfill=shortest"] + [
        f"p={p} threshold=3600s predictor=scaled backfill=shortest" for p in ("0.1", "0.2", "0.3", "0.5")
    ]
    assert table["objective"] == "bsld"
    assert [row["score"] for row in table["rows"]] == [row["bsld_avg"] for row in table["rows"]]


def test_auto_settings_are_tuned_by_the_daemon(env, run, put_rows, make_row):
    """Without a daemon, gctl tune of auto settings says who tunes them, in one line, and writes nothing."""
    put_rows(*history(make_row, 150))
    before = (env / "cfg.toml").read_text()
    r = run(gctl.cli, ["tune"])
    assert r.exit_code == 1
    assert r.stderr.startswith("gctl: error: no daemon runs on ") and "tuned by the daemon" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert (env / "cfg.toml").read_text() == before


@pytest.mark.parametrize(
    "value, seconds",
    [(None, 86400), ('"3d"', 3 * 86400), ("0", 0), ('"0"', 0), ("3600", 3600)],
)
def test_tune_warmup_is_read_from_the_configuration(tmp_path, value, seconds):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[scheduler]\n" + (f"tune_warmup = {value}\n" if value is not None else ""))
    assert load(str(cfg)).tuning.warmup == seconds


@pytest.mark.parametrize(
    "value, words",
    [
        ("-1", "must be positive"),
        ('"soon"', "tune_warmup"),
        ('"400d"', "longer than a year"),
        ("400000000", "must be at most a year"),
        ("true", ""),
    ],
)
def test_a_bad_tune_warmup_is_refused_in_one_line(tmp_path, value, words):
    from gridsched.protocol.config import ConfigError

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f"[scheduler]\ntune_warmup = {value}\n")
    with pytest.raises(ConfigError) as e:
        load(str(cfg))
    said = str(e.value)
    assert "scheduler.tune_warmup" in said and words in said and "\n" not in said


def test_warmup_option_of_a_dry_run(fixed, run, put_rows, make_row):
    """--warmup replaces scheduler.tune_warmup for this run: the jobs ended in the day before a 12-hour window
    are replayed ahead of it with the default 7 days, none with --warmup 0."""
    put_rows(*history(make_row, 150))  # ended over the last day
    with_warmup = json.loads(run(gctl.cli, ["tune", "--dry-run", "--json", "--window", "12h"]).stdout)
    without = json.loads(run(gctl.cli, ["tune", "--dry-run", "--json", "--window", "12h", "--warmup", "0"]).stdout)
    assert with_warmup["warmup_jobs"] > 0 and without["warmup_jobs"] == 0
    assert with_warmup["jobs"] == without["jobs"] and with_warmup["jobs"] + with_warmup["warmup_jobs"] <= 150
    for bad, words in (("soon", "--warmup"), ("400d", "longer than a year")):
        r = run(gctl.cli, ["tune", "--dry-run", "--warmup", bad])
        assert r.exit_code == 2 and r.stderr.startswith("gctl: error: --warmup") and words in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["--window", "1d"], ["--warmup", "0"], ["--margin", "0.1", "--objective", "wait"]])
def test_options_the_daemon_would_not_use_are_refused_without_dry_run(env, run, put_rows, make_row, args):
    """With auto settings the daemon tunes with its configuration's window, warm-up, objective and margin: asking
    it for others is refused in one line rather than silently ignored."""
    put_rows(*history(make_row, 150))
    before = (env / "cfg.toml").read_text()
    r = run(gctl.cli, ["tune", *args])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("gctl: error: ") and args[0] in r.stderr and "--dry-run" in r.stderr
    assert (env / "cfg.toml").read_text() == before
    assert run(gctl.cli, ["tune", "--dry-run", *args]).exit_code == 0


def test_info_names_the_settings_in_force_before_any_tuning(env, run):
    """Before any tuning, gctl info says the configured settings are in force (the published ones where a
    setting is auto), in the configured backfill order: the shipped p and threshold with the published
    predictor; then every setting auto and the queue order."""
    from gridsched.protocol.config import load

    shipped = load(None).params  # the packaged configuration, as the daemon reads it
    r = run(gctl.cli, ["info"])
    assert r.exit_code == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "in force:" in ln)
    want = f"(p={shipped.p:g} threshold={shipped.threshold:g}s predictor=scaled backfill=shortest), none adopted"
    assert want in line
    with open(env / "cfg.toml", "a") as f:
        f.write('[scheduler]\nbackfill_order = "queue"\np = "auto"\nthreshold = "auto"\n')
    r = run(gctl.cli, ["info"])
    line = next(ln for ln in r.stdout.splitlines() if "in force:" in ln)
    assert "(p=0.2 threshold=1800s predictor=scaled), none adopted yet" in line
