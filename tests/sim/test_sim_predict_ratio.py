"""The user-ratio predictor through gsim: the ratios the simulator learns, and a replay end to end."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner, Result
from simtraces import HAND, swf_line

from gridsched.cli.gsim import main
from gridsched.core.predict import RATIO_JOBS
from gridsched.core.types import Params, Plan, Policy, Predictor, Snapshot, Start
from gridsched.sim import engine, swf
from gridsched.sim.engine import simulate


def gsim(*args: str) -> Result:
    res = CliRunner().invoke(main, list(args), prog_name="gsim")
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


class Recorder:
    """Starts what fits in order, and keeps a copy of the ratios each pass was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, dict[str, tuple[float, ...]]]] = []

    def __call__(self, snap: Snapshot) -> Plan:
        self.seen.append((snap.now, dict(snap.ratios)))
        free = snap.ncores - sum(r.ncpus for r in snap.running)
        out = []
        for w in snap.pending:
            if w.ncpus <= free:
                out.append(Start(w.id))
                free -= w.ncpus
        return Plan(tuple(out))


def test_the_simulator_learns_each_users_ratios(write_trace, monkeypatch):
    # user 5 runs 25 s of 50 asked (ends 30); user 4 runs 5, 10, 15 s of 100 (ends 15, 30, 45)
    lines = [swf_line(1, 5, 25, 1, 50, user=5)]
    lines += [swf_line(k + 1, 10 * k, 5 * k, 1, 100, user=4) for k in range(1, 4)]
    tr = swf.read(write_trace(lines, max_procs=4))
    rec = Recorder()
    monkeypatch.setattr(engine, "schedule", rec)
    simulate(tr, Params(policy=Policy.FCFS, predictor=Predictor.USER_RATIO), fast=False)
    at = dict(rec.seen)
    assert at[15] == {"4": (0.05,)}
    assert at[30] == {"4": (0.05, 0.1), "5": (0.5,)}
    assert at[45] == {"4": (0.05, 0.1, 0.15), "5": (0.5,)}
    # another predictor: the core is not given the ratios
    rec = Recorder()
    monkeypatch.setattr(engine, "schedule", rec)
    simulate(tr, Params(policy=Policy.FCFS), fast=False)
    assert all(r == {} for _, r in rec.seen)


def test_the_simulator_keeps_the_last_ratio_jobs(write_trace, monkeypatch):
    n = RATIO_JOBS + 3
    lines = [swf_line(k, 100 * k, k, 1, 100, user=4) for k in range(1, n + 1)]
    tr = swf.read(write_trace(lines, max_procs=4))
    rec = Recorder()
    monkeypatch.setattr(engine, "schedule", rec)
    simulate(tr, Params(policy=Policy.FCFS, predictor=Predictor.USER_RATIO), fast=False)
    last = rec.seen[-1][1]["4"]
    assert last == pytest.approx(tuple(k / 100 for k in range(n - RATIO_JOBS + 1, n + 1)))


def backfill_trace(write_trace, user5: int) -> str:
    # 4 processors.  Jobs 1 and 2 (user 1) use a tenth of the 1000 s they ask for: ratio 0.1.
    # Job 3 holds 2 processors over 200-2200; job 4 (all 4) waits for it: its reservation is 2200.
    # Job 5 asks for 2 processors and 5000 s and runs 400 s: at 220 user 1's ratio predicts
    # 500 s, ending by 720 < 2200, so it is backfilled; another user's has no history: it waits
    # for job 4 (2200-2300).
    return write_trace(
        [
            swf_line(1, 0, 100, 1, 1000, user=1),
            swf_line(2, 0, 100, 1, 1000, user=1),
            swf_line(3, 200, 2000, 2, 2000, user=3),
            swf_line(4, 210, 100, 4, 100, user=3),
            swf_line(5, 220, 400, 2, 5000, user=user5),
        ],
        name=f"u{user5}.swf",
        max_procs=4,
    )


def starts(out) -> dict[str, str]:
    return {r["id"]: r["start"] for r in csv.DictReader(out.open())}


@pytest.mark.parametrize("user5, start5", [(1, "220"), (2, "2300")])
def test_gsim_replays_with_user_ratio(write_trace, tmp_path, user5, start5):
    out = tmp_path / "jobs.csv"
    path = backfill_trace(write_trace, user5)
    res = gsim("run", path, "--policy", "checkpoint-backfill", "--predictor", "user-ratio", "--threshold", "60")
    assert res.exit_code == 0, res.output
    res = gsim("run", path, "--predictor", "user-ratio", "--threshold", "60", "--jobs-out", str(out), "--json")
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["predictor"] == "user-ratio" and rec["jobs"] == 5 and rec["checkpoints"] == 0
    got = starts(out)
    assert (got["4"], got["5"]) == ("2200", start5)


def test_unknown_predictor_is_refused_in_one_line(write_trace, tmp_path):
    path = write_trace(HAND, max_procs=4)
    res = gsim(path, "--predictor", "oracle")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("gsim: error: ")
    assert "user-ratio" in res.stderr
    cfg = tmp_path / "gridsched.toml"
    cfg.write_text('[scheduler]\npolicy = "checkpoint-backfill"\npredictor = "oracle"\n')
    res = gsim(path, "--config", str(cfg))
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("gsim: error: config ")
    assert 'must be one of scaled, user-history, user-ratio, or "auto"' in res.stderr
    cfg.write_text('[scheduler]\npolicy = "checkpoint-backfill"\npredictor = "user-ratio"\n')
    rec = json.loads(gsim(path, "--config", str(cfg), "--json").stdout)
    assert rec["predictor"] == "user-ratio"
