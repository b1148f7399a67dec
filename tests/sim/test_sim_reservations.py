"""gsim with a reservation list beside the trace: the engine, the file reader, the command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from simtraces import swf_line

from gridsched.cli.gsim import main as gsim
from gridsched.core.types import Params, Policy
from gridsched.sim.engine import SimResv, simulate
from gridsched.sim.reservations import ResvFileError, read
from gridsched.sim.swf import read as read_trace

# 4 cores.  Worked by hand (every policy gives the same schedule here):
#   job 1: submit 0, 4 cores, runs 100 (request 200): starts at 0, ends at 100.
#   flexible R1: created at 10, 2 cores for 50 s: waits behind job 1, active over [100, 150).
#   job 2: submit 20, 2 cores, runs 30 (request 40): after R1 in the queue; starts at 100 beside it.
#   fixed R2: created at 0, 4 cores over [300, 360).
#   job 3: submit 150, 4 cores, runs 50 (request 200): [150, 350) would overlap R2, so it starts at 360.
LINES = [swf_line(1, 0, 100, 4, 200), swf_line(2, 20, 30, 2, 40), swf_line(3, 150, 50, 4, 200)]
RESVS = [SimResv(10.0, 2, 50.0), SimResv(0.0, 4, 60.0, start=300.0)]


@pytest.mark.parametrize("policy", list(Policy))
def test_reservations_are_replayed(write_trace, policy):
    tr = read_trace(write_trace(LINES))
    res = simulate(tr, Params(policy=policy), reservations=RESVS)
    assert res.activated == [100.0, 300.0]
    assert res.start == [0.0, 100.0, 360.0]
    assert res.end == [100.0, 130.0, 410.0]


def test_floating_units_of_a_reservation_are_respected(write_trace):
    # both reservations want the single licence: the second waits for the first to end
    tr = read_trace(write_trace([swf_line(1, 0, 10, 1, 10)]))
    rv = [SimResv(0.0, 1, 100.0, (("lic", 1),)), SimResv(5.0, 1, 100.0, (("lic", 1),))]
    res = simulate(tr, Params(policy=Policy.EASY), reservations=rv, floating={"lic": 1})
    assert res.activated == [0.0, 100.0]


def test_csv_and_toml_files(tmp_path):
    csv = tmp_path / "r.csv"
    csv.write_text("create,ncpus,duration,floating,start\n# a comment\n10,2,50,,\n0,4,1m,lic=1,300\n")
    lst = read(str(csv))
    assert lst.reservations == [SimResv(10.0, 2, 50.0), SimResv(0.0, 4, 60.0, (("lic", 1),), 300.0)]
    toml = tmp_path / "r.toml"
    toml.write_text(
        '[floating]\nlic = 2\n[[reservation]]\ncreate = 10\nncpus = 2\nduration = "50s"\n'
        "[[reservation]]\ncreate = 0\nncpus = 4\nduration = 60\nstart = 300\nfloating = { lic = 1 }\n"
    )
    lst = read(str(toml))
    assert lst.floating == {"lic": 2}
    assert lst.reservations == [SimResv(10.0, 2, 50.0), SimResv(0.0, 4, 60.0, (("lic", 1),), 300.0)]


@pytest.mark.parametrize(
    "text, msg",
    [
        ("create,ncpus\n1,2\n", "the header lacks duration"),
        ("create,ncpus,duration\n1,0,10\n", "ncpus 0: at least 1"),
        ("create,ncpus,duration\n1,2,-5\n", "duration"),
        ("create,ncpus,duration,start\n100,2,10,50\n", "before its creation"),
        ("create,ncpus,duration,floating\n1,2,10,lic\n", "expected NAME=COUNT"),
    ],
)
def test_bad_files(tmp_path, text, msg):
    p = tmp_path / "r.csv"
    p.write_text(text)
    with pytest.raises(ResvFileError, match=msg):
        read(str(p))


def test_gsim_run_reports_activation_delays(write_trace, tmp_path):
    trace = write_trace(LINES)
    rf = tmp_path / "r.csv"
    rf.write_text("create,ncpus,duration,start\n10,2,50,\n0,4,60,300\n")
    r = CliRunner().invoke(gsim, ["run", trace, "--policy", "easy", "--reservations", str(rf), "--json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)["reservations"]
    assert (rec["count"], rec["activated"], rec["never_activated"]) == (2, 2, 0)
    assert rec["activation_delays"] == [0.0, 90.0]  # fixed: at its start; flexible: 100 - 10
    assert rec["activation_delay_avg"] == 45.0 and rec["activation_delay_max"] == 90.0


@pytest.mark.parametrize(
    "content, extra, msg",
    [
        ("create,ncpus,duration\n0,8,60\n", [], "asks for 8 cores, the machine has 4"),
        ("create,ncpus,duration,floating\n0,1,60,lic=1\n", [], "unknown floating resource 'lic'"),
        ("create,ncpus,duration,floating\n0,1,60,lic=3\n", ["--floating", "lic=2"], "asks for lic=3"),
    ],
)
def test_gsim_refuses_impossible_reservations(write_trace, tmp_path, content, extra, msg):
    rf = tmp_path / "r.csv"
    rf.write_text(content)
    r = CliRunner().invoke(gsim, ["run", write_trace(LINES), "--reservations", str(rf), *extra])
    assert r.exit_code == 1 and msg in r.stderr


@pytest.mark.parametrize("policy", list(Policy))
def test_job_submitted_with_a_reservation_at_the_same_instant_goes_first(write_trace, policy):
    # job 2 and the 4-core R1 both arrive at 10, behind job 1 (4 cores until 100): job 2 is
    # ahead in the queue, starts at 100 and ends at 130; R1 gets the whole machine at 130.
    tr = read_trace(write_trace([swf_line(1, 0, 100, 4, 200), swf_line(2, 10, 30, 2, 40)]))
    res = simulate(tr, Params(policy=policy), reservations=[SimResv(10.0, 4, 50.0)])
    assert res.start == [0.0, 100.0]
    assert res.activated == [130.0]
