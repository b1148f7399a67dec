"""gsim --topology: jobs placed on a machine map instead of counted."""

from __future__ import annotations

import csv
import json

from click.testing import CliRunner

from gridsched.cli import gsim

TRACE = """; MaxProcs: 8
1 0 -1 100 3 -1 -1 3 200 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 50 3 -1 -1 3 100 -1 1 2 1 -1 -1 -1 -1 -1
3 5 -1 30 2 -1 -1 2 60 -1 1 1 1 -1 -1 -1 -1 -1
4 6 -1 20 6 -1 -1 6 40 -1 1 3 1 -1 -1 -1 -1 -1
5 7 -1 10 1 -1 -1 1 20 -1 1 2 1 -1 -1 -1 -1 -1
"""
TOPOLOGY = '[[board]]\ncores = "0-3"\n[[board]]\ncores = "4-7"\n'


def run(tmp_path, *extra: str) -> tuple[dict, list[dict]]:
    trace = tmp_path / "t.swf"
    trace.write_text(TRACE)
    topo = tmp_path / "topo.toml"
    topo.write_text(TOPOLOGY)
    out = tmp_path / f"jobs{len(extra)}{'-'.join(extra).replace('/', '_')}.csv"
    args = ["run", str(trace), "--policy", "easy", "--json", "--jobs-out", str(out)]
    args += [a.replace("TOPO", str(topo)) for a in extra]
    r = CliRunner().invoke(gsim.main, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout), list(csv.DictReader(out.open()))


def test_pack_on_a_map_schedules_as_counting_does(tmp_path):
    # pack can always place a job whose cores are free, so the schedule is the same
    _, counted = run(tmp_path)
    _, placed = run(tmp_path, "--topology", "TOPO")
    assert [r["start"] for r in placed] == [r["start"] for r in counted]


def test_board_placement_delays_jobs_and_skips_what_no_board_holds(tmp_path):
    _, counted = run(tmp_path)
    rec, placed = run(tmp_path, "--topology", "TOPO", "--place", "board")
    assert rec["skipped_by"].get("cannot be placed on the topology") == 1  # the 6-core job
    assert [r["id"] for r in placed] == ["1", "2", "3", "5"]
    starts = {r["id"]: float(r["start"]) for r in placed}
    # jobs 1 and 2 (3 cores each) leave one free core on each board: job 3 (2 cores) fits
    # them by counting at once, but on one board only when job 2 ends, at 50
    assert float({r["id"]: r for r in counted}["3"]["start"]) < starts["3"]
    assert starts["3"] == 50


def test_place_without_topology_is_refused(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(TRACE)
    r = CliRunner().invoke(gsim.main, ["run", str(trace), "--place", "board"])
    assert r.exit_code == 2 and "--place needs --topology" in r.output
