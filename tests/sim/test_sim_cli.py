"""gsim's command line, in process."""

from __future__ import annotations

import csv
import json
import sys

import pytest
from click.testing import CliRunner, Result
from simtraces import HAND, swf_line

from gridsched.cli.gsim import main


def gsim(*args: str) -> Result:
    res = CliRunner().invoke(main, list(args), prog_name="gsim")
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def one_json(res: Result) -> dict:
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_run_is_the_default_command(write_trace):
    path = write_trace(HAND, max_procs=4)
    a = one_json(gsim(path, "--policy", "fcfs", "--json"))
    b = one_json(gsim("run", path, "--policy", "fcfs", "--json"))
    # the FCFS schedule of the hand workload (see test_sim_engine.py)
    for rec in (a, b):
        assert rec["jobs"] == 4 and rec["makespan"] == 200
        assert rec["wait_avg"] == pytest.approx(60) and rec["bsld_avg"] == pytest.approx(3.375)
        assert rec["utilization"] == pytest.approx(0.75) and rec["cut_at_walltime"] == 1


def test_human_summary(write_trace):
    res = gsim(write_trace(HAND, max_procs=4), "--policy", "fcfs")
    assert res.exit_code == 0
    assert "average bounded slowdown" in res.stdout and "3.38" in res.stdout
    assert "00:01:00" in res.stdout  # average wait 60 s
    assert res.stderr == ""  # no progress bar when stderr is not a terminal


def test_strict_bad_line_is_fatal(write_trace):
    path = write_trace(HAND[:1] + ["1 2 3"] + HAND[1:], max_procs=4)
    res = gsim(path, "--strict", "--policy", "fcfs")
    assert res.exit_code == 1
    assert res.stderr == f"gsim: error: {path}:5: 3 fields, expected 18\n"
    res = gsim(path, "--policy", "fcfs", "--json")
    rec = one_json(res)
    assert rec["jobs"] == 4 and rec["skipped_by"] == {"bad line": 1}
    assert f"gsim: warning: skipped {path}:5: 3 fields, expected 18" in res.stderr


def test_missing_trace():
    res = gsim("/nonexistent/trace.swf")
    assert res.exit_code == 1
    assert res.stderr == "gsim: error: /nonexistent/trace.swf: no such file\n"


def test_procs_smaller_than_largest_job(write_trace):
    path = write_trace(HAND, max_procs=4)
    res = gsim(path, "--procs", "3", "--strict")
    # the header has 3 comment lines: job 1 is on line 4
    assert res.exit_code == 1
    assert res.stderr == f"gsim: error: {path}:4: job 1 needs 4 processors, more than the machine's 3\n"
    rec = one_json(gsim(path, "--procs", "3", "--policy", "fcfs", "--json"))
    assert rec["ncores"] == 3 and rec["jobs"] == 3 and rec["skipped_by"] == {"larger than the machine": 1}


def test_bad_options(write_trace):
    path = write_trace(HAND, max_procs=4)
    res = gsim(path, "--p", "1.5")
    assert res.exit_code == 2 and res.stderr.startswith("gsim: error: p '1.5': must be between 0 and 1")
    res = gsim(path, "--policy", "lottery")
    assert res.exit_code == 2 and "must be one of fcfs, easy" in res.stderr
    res = gsim(path, "--checkpoint-overhead", "-5")
    assert res.exit_code == 2 and "'-5': must be zero or more seconds" in res.stderr


def test_jobs_out_csv(write_trace, tmp_path):
    out = tmp_path / "jobs.csv"
    res = gsim(write_trace(HAND, max_procs=4), "--policy", "fcfs", "--jobs-out", str(out), "--json")
    assert res.exit_code == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["id"] for r in rows] == ["1", "2", "3", "4"]
    assert [(r["start"], r["end"]) for r in rows] == [("0", "100"), ("100", "150"), ("100", "100"), ("100", "200")]
    assert rows[1]["segments"] == "100-150" and rows[1]["checkpoints"] == "0"


def test_config_file_sets_policy(write_trace, tmp_path):
    cfg = tmp_path / "gridsched.toml"
    cfg.write_text('[scheduler]\npolicy = "fcfs"\np = 0.3\nthreshold = "1h"\n')
    rec = one_json(gsim(write_trace(HAND, max_procs=4), "--config", str(cfg), "--json"))
    assert (rec["policy"], rec["p"], rec["threshold"]) == ("fcfs", 0.3, 3600)
    rec = one_json(gsim(write_trace(HAND, max_procs=4), "--config", str(cfg), "--policy", "easy", "--json"))
    assert rec["policy"] == "easy" and rec["p"] == 0.3
    cfg.write_text('[scheduler]\npolicy = "lottery"\n')
    res = gsim(write_trace(HAND, max_procs=4), "--config", str(cfg))
    assert res.exit_code == 1 and res.stderr.startswith("gsim: error: config ") and "policy" in res.stderr


def test_checkpoint_modes_and_cascade(write_trace):
    lines = [swf_line(1, 0, 1000, 2, 1000), swf_line(2, 10, 500, 4, 500), swf_line(3, 20, 3000, 2, 4000)]
    path = write_trace(lines, max_procs=4)
    ck = one_json(gsim(path, "--json"))  # checkpoint-backfill, p 0.2, 30 min, overhead 120 s
    assert ck["checkpoints"] == 1 and ck["overhead_core_hours"] == pytest.approx(480 / 3600)
    rq = one_json(gsim(path, "--mode", "requeue", "--json"))
    assert rq["checkpoints"] == 1 and rq["rerun_core_hours"] == pytest.approx(1960 / 3600)
    no = one_json(gsim(path, "--checkpoint", "none", "--json"))
    assert no["checkpoints"] == 0
    zero = one_json(gsim(path, "--checkpoint-overhead", "0", "--json"))
    assert zero["overhead_core_hours"] == 0
    cas = one_json(gsim(path, "--cascade", "--json"))
    assert cas["cascade"] is True


def test_compare(write_trace):
    path = write_trace(HAND, max_procs=4)
    res = gsim("compare", path, "--policies", "fcfs,easy,conservative,checkpoint-backfill", "--json")
    out = one_json(res)
    assert out["baseline"] == "easy"
    assert [r["policy"] for r in out["results"]] == ["fcfs", "easy", "conservative", "checkpoint-backfill"]
    easy = out["results"][1]
    assert easy["change"]["wait_avg"] == 0
    for r in out["results"]:
        assert r["change"]["wait_avg"] == pytest.approx((r["wait_avg"] - easy["wait_avg"]) / easy["wait_avg"])
    res = gsim("compare", path, "--policies", "fcfs,easy")
    assert res.exit_code == 0 and "change against easy" in res.stdout


def test_tune(write_trace):
    lines = [swf_line(1, 0, 1000, 2, 1000), swf_line(2, 10, 500, 4, 500), swf_line(3, 20, 3000, 2, 4000)]
    path = write_trace(lines, max_procs=4)
    out = one_json(gsim("tune", path, "--p", "0.1,0.9", "--threshold", "10m,2h", "--metric", "wait", "--json"))
    assert len(out["results"]) == 4
    best = min(out["results"], key=lambda r: r["wait_avg"])
    assert out["best"] == {"p": best["p"], "threshold": best["threshold"], "wait_avg": best["wait_avg"]}
    # p=0.9 counts C as 3600 s, too long for the 980 s hole; with threshold 2h C is never shortened.
    by = {(r["p"], r["threshold"]): r for r in out["results"]}
    assert by[(0.1, 600)]["checkpoints"] == 1
    assert by[(0.9, 600)]["checkpoints"] == 0 and by[(0.1, 7200)]["checkpoints"] == 0
    res = gsim("tune", path, "--p", "0.1,0.2", "--threshold", "30m")
    assert res.exit_code == 0 and "best: p=" in res.stdout


def test_plot_without_matplotlib(write_trace, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    res = gsim(write_trace(HAND, max_procs=4), "--plot", "x.png")
    assert res.exit_code == 1
    assert res.stderr == "gsim: error: --plot needs matplotlib: pip install gridsched[plot]\n"


def test_plot_writes_png(write_trace, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (the optional plot extra) is not installed")
    out = tmp_path / "u.png"
    res = gsim(write_trace(HAND, max_procs=4), "--plot", str(out), "--json")
    assert res.exit_code == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    heat = tmp_path / "h.png"
    res = gsim(
        "tune", write_trace(HAND, max_procs=4), "--p", "0.1,0.2", "--threshold", "10m,1h", "--plot", str(heat), "--json"
    )
    assert res.exit_code == 0 and heat.read_bytes()[:4] == b"\x89PNG"


def test_gantt_writes_png_of_the_window(write_trace, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (the optional plot extra) is not installed")
    from gridsched.core.types import Params, Policy
    from gridsched.sim import swf
    from gridsched.sim.engine import simulate
    from gridsched.sim.plot import gantt_plot

    path = write_trace(HAND, max_procs=4)
    out = tmp_path / "g.png"
    res = gsim(path, "--gantt", str(out), "--json")
    assert res.exit_code == 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tr = swf.read(path)
    result = simulate(tr, Params(policy=Policy.EASY))
    t0 = min(tr.submit)
    assert gantt_plot(str(tmp_path / "all.png"), result, t0, 24.0) == len(tr)
    # a window that starts after the last submission holds no job
    assert gantt_plot(str(tmp_path / "none.png"), result, max(tr.submit) + 1, 1.0) == 0


def test_limit(write_trace):
    rec = one_json(gsim(write_trace(HAND, max_procs=4), "--limit", "2", "--policy", "fcfs", "--json"))
    assert rec["jobs"] == 2


FAIR_TRACE = [
    swf_line(1, 0, 100, 1, 100, user=1),  # user 1 uses the machine first
    swf_line(2, 1, 10, 1, 10, user=1),
    swf_line(3, 2, 10, 1, 10, user=2),
]


def test_per_user_waits_and_fair_share_by_swf_user(write_trace, tmp_path):
    path = write_trace(FAIR_TRACE, max_procs=1)
    plain = one_json(gsim("run", path, "--policy", "fcfs", "--per-user", "--json"))
    assert plain["per_user"] == [
        {"user": "1", "jobs": 2, "wait_avg": pytest.approx(49.5)},  # job 2 waits 99 behind job 1
        {"user": "2", "jobs": 1, "wait_avg": pytest.approx(108)},  # job 3 after job 2, in submission order
    ]
    cfg = tmp_path / "fair.toml"
    cfg.write_text('[scheduler]\npolicy = "fcfs"\n[priority]\nweight_fairshare = 1000\nhalf_life = 0\n')
    fair = one_json(gsim("run", path, "--config", str(cfg), "--per-user", "--json"))
    assert fair["per_user"] == [
        {"user": "1", "jobs": 2, "wait_avg": pytest.approx(54.5)},  # job 2 now after user 2's job
        {"user": "2", "jobs": 1, "wait_avg": pytest.approx(98)},
    ]
    res = gsim("run", path, "--config", str(cfg), "--per-user")
    assert res.exit_code == 0
    rows = [line.strip("│┃ ").split() for line in res.stdout.split("per user", 1)[1].splitlines()]
    rows = [[c for c in r if c != "│"] for r in rows if r and r[0] in ("1", "2")]
    assert rows == [["1", "2", "00:00:54"], ["2", "1", "00:01:38"]]


def test_plain_run_leaves_out_what_it_does_not_use(write_trace):
    """A replay of a plain trace without --config, devices, a workload or fair share loads neither the
    config module (tomllib), nor the devices or workload modules, nor sqlite3: gsim's start-up counts."""
    import subprocess

    path = write_trace(HAND, max_procs=4)
    code = (
        "import sys\n"
        "from gridsched.cli.gsim import main\n"
        f"sys.argv = ['gsim', 'run', {path!r}, '--policy', 'easy', '--json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "names = ('gridsched.protocol.config', 'tomllib', 'gridsched.sim.devices', 'gridsched.sim.workload',\n"
        "         'sqlite3')\n"
        "print(sorted(m for m in names if m in sys.modules), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 4
    assert r.stderr.strip() == "[]"
    # with --config the config is read, and a bad one refused in one line, as before
    r = subprocess.run(
        [sys.executable, "-c", code.replace("'--json']", "'--json', '--config', '/nonexistent/gridsched.toml']")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "gsim: error: config /nonexistent/gridsched.toml: no such file" in r.stderr
    assert "['gridsched.protocol.config', 'tomllib']" in r.stderr
