"""gsim replays a Slurm cluster's history read from sacct --parsable2 output."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st
from simtraces import swf_line

from gridsched.cli.gsim import main
from gridsched.sim import sacct

HEADER = "JobID|Submit|Start|End|Elapsed|Timelimit|AllocCPUS|ReqCPUS|ReqMem|User|State|AllocTRES"
# An hour of a small cluster's history, as sacct prints it (steps, an array, a pending task, a job
# cancelled before it started, one without a time limit).
HISTORY = f"""{HEADER}
101|2026-11-02T09:00:00|2026-11-02T09:00:01|2026-11-02T09:30:01|00:30:00|01:00:00|4|4|4G|alice|COMPLETED|billing=4,cpu=4,mem=4G,node=1
101.batch|2026-11-02T09:00:01|2026-11-02T09:00:01|2026-11-02T09:30:01|00:30:00||4|4||alice|COMPLETED|cpu=4,mem=4G,node=1
101.extern|2026-11-02T09:00:01|2026-11-02T09:00:01|2026-11-02T09:30:01|00:30:00||4|4||alice|COMPLETED|cpu=4,mem=4G,node=1
102|2026-11-02T09:05:00|2026-11-02T09:30:01|2026-11-02T10:30:01|01:00:00|02:00:00|8|8|8G|bob|TIMEOUT|cpu=8
103_1|2026-11-02T09:06:00|2026-11-02T09:06:00|2026-11-02T09:08:00|00:02:00|00:10:00|2|2|1G|alice|FAILED|cpu=2
103_2|2026-11-02T09:06:00|Unknown|Unknown|00:00:00|00:10:00|0|2|1G|alice|PENDING|
104|2026-11-02T09:07:00|None|2026-11-02T09:08:00|00:00:00|1-00:00:00|0|16|1G|carol|CANCELLED by 0|
105|2026-11-02T09:10:00|2026-11-02T09:10:00|2026-11-02T09:15:00|00:05:00|UNLIMITED|1|1|1G|carol|CANCELLED by 1000|cpu=1
106|2026-11-02T09:20:00|2026-11-02T09:20:00|2026-11-02T09:21:00|00:01:00|00:30:00|1|1|1G|bob|OUT_OF_MEMORY|cpu=1
106.batch|2026-11-02T09:20:00|2026-11-02T09:20:00|2026-11-02T09:21:00|00:01:00||1|1||bob|OUT_OF_MEMORY|cpu=1
"""


def gsim(*args: str) -> Result:
    res = CliRunner().invoke(main, list(args), prog_name="gsim")
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def test_history_is_read_as_slurm_wrote_it(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(HISTORY)
    tr = sacct.read(str(path), procs=8)
    # steps left out; the pending task and the job cancelled before it started have no run time
    assert tr.skipped["no run time"] == 2 and tr.lines == 7
    assert tr.submit == [0.0, 300.0, 360.0, 600.0, 1200.0]
    assert tr.size == [4, 8, 2, 1, 1]
    assert tr.walltime == [3600.0, 7200.0, 600.0, 300.0, 1800.0]  # UNLIMITED: its run time
    assert tr.run == [1800.0, 3600.0, 120.0, 300.0, 60.0]
    assert tr.user == ["alice", "bob", "alice", "carol", "bob"]
    assert tr.status == {2: 0, 3: 0, 4: 5, 5: 0}  # TIMEOUT, FAILED, OUT_OF_MEMORY failed; CANCELLED cancelled


def test_easy_replay_of_the_history(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(HISTORY.replace("\n", "|\n"))  # --parsable: a | at the end of each line
    res = gsim("run", "--slurm-sacct", str(path), "--procs", "8", "--policy", "easy", "--json")
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    # By hand: 101 runs 0-1800 on 4 CPUs; 102 (8 CPUs) is the head from 300, reserved at 101's
    # limit (3600); 103_1 (ends by 960), 105 (by 900) and 106 (by 3000) are backfilled at once;
    # 102 starts when 101 really ends, at 1800, and runs to 5400.
    assert rec["jobs"] == 5 and rec["skipped"] == 2
    assert rec["wait_avg"] == pytest.approx(1500 / 5) and rec["makespan"] == pytest.approx(5400)


def test_bad_histories(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(HISTORY)
    res = gsim("run", "--slurm-sacct", str(path))
    assert res.exit_code == 1 and res.stderr.strip().endswith("give --procs (the cluster's CPUs)")
    res = gsim("run", "--slurm-sacct", str(path), "--procs", "8", "--nodes")
    assert res.exit_code == 2 and "--nodes does not apply" in res.stderr
    (tmp_path / "n.txt").write_text("JobID|State\n1|COMPLETED\n")
    res = gsim("run", "--slurm-sacct", str(tmp_path / "n.txt"), "--procs", "8")
    assert res.exit_code == 1 and "no field Submit, Elapsed, ReqCPUS or AllocCPUS" in res.stderr
    broken = HISTORY.replace("|00:02:00|00:10:00|", "|two minutes|00:10:00|")
    (tmp_path / "b.txt").write_text(broken)
    res = gsim("run", "--slurm-sacct", str(tmp_path / "b.txt"), "--procs", "8", "--json")
    assert res.exit_code == 0 and "b.txt:6: Elapsed is not a duration: 'two minutes'" in res.stderr
    res = gsim("run", "--slurm-sacct", str(tmp_path / "b.txt"), "--procs", "8", "--strict")
    assert res.exit_code == 1 and "b.txt:6: Elapsed is not a duration" in res.stderr
    res = gsim("run", "--slurm-sacct", str(path), "--procs", "4", "--json")  # 102 needs 8
    assert res.exit_code == 0 and "a job of 8 CPUs, more than the machine's 4" in res.stderr


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:30:00", 1800),
        ("1-00:00:00", 86400),
        ("2-03", 2 * 86400 + 3 * 3600),
        ("2-03:04", 2 * 86400 + 3 * 3600 + 4 * 60),
        ("10:05", 605),
        ("45", 2700),
        ("00:00:01.500", 1.5),
    ],
)
def test_slurm_durations(text, seconds):
    assert sacct.duration(text) == seconds


@pytest.mark.parametrize("text", ["", "a:b", "1:2:3:4", "-1-00:00:00", "1-", "UNLIMITED"])
def test_slurm_durations_refused(text):
    with pytest.raises(ValueError):
        sacct.duration(text)


def _hms(sec: int) -> str:
    d, rest = divmod(sec, 86400)
    text = time.strftime("%H:%M:%S", time.gmtime(rest))
    return f"{d}-{text}" if d else text


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 500), st.integers(1, 4000), st.integers(1, 8), st.integers(1, 5000)),
        min_size=1,
        max_size=25,
    ),
    st.sampled_from(["fcfs", "easy", "conservative"]),
)
def test_same_history_as_swf_and_as_sacct_replays_the_same(tmp_path_factory, jobs, policy):
    """The same jobs written as an SWF log and as sacct output give the same replay."""
    d = tmp_path_factory.mktemp("h")
    swf, rows, t = ["; MaxProcs: 8"], [HEADER], 0
    base = 1_793_000_000  # a submit time in 2026, as sacct prints it (no time zone)
    for k, (gap, run, cpus, limit) in enumerate(jobs, 1):
        t += gap
        swf.append(swf_line(k, t, run, cpus, limit))
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base + t))
        rows.append(f"{k}|{when}|{when}|{when}|{_hms(run)}|{_hms(limit)}|{cpus}|{cpus}|1G|u1|COMPLETED|cpu={cpus}")
    (d / "t.swf").write_text("\n".join(swf) + "\n")
    (d / "s.txt").write_text("\n".join(rows) + "\n")
    a = gsim("run", str(d / "t.swf"), "--policy", policy, "--json")
    b = gsim("run", "--slurm-sacct", str(d / "s.txt"), "--procs", "8", "--policy", policy, "--json")
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    for key in ("jobs", "makespan", "wait_avg", "bsld_avg", "cut_at_walltime"):
        assert ra[key] == pytest.approx(rb[key]), key


# Recorded from a real Slurm 22.05 with slurmdbd and MariaDB by scripts/record_sacct.sh, on a node of
# 16 CPUs.  Its workload, by the job ids in the file:
#   1     TIMEOUT        1 CPU, --time=1, slept past its limit (killed at the next limit check)
#   2 3 4 COMPLETED      1, 4 and 6 CPUs, limits of 2, 5 and 10 minutes
#   5     COMPLETED      2 CPUs, two srun steps (5.0 and 5.1)
#   6     FAILED         exit 3
#   7     OUT_OF_MEMORY  --mem=64M, wrote 512 MiB
#   8_1 8_2 8_3          an array (--array=1-3) of COMPLETED tasks
#   9     CANCELLED      while it ran
#   11    COMPLETED      run as user nobody
#   14    CANCELLED      16 CPUs, while it waited for CPUs: never ran (Start equal to End, no AllocTRES)
# The script's job 10, held and cancelled while pending, was never eligible, so sacct's --starttime
# selection leaves it out of the file; the ids missing besides went to the array's tasks.
RECORDED = Path(__file__).parent / "data" / "slurm-localhost.sacct"
RECORDED_JOBS = 13  # 12 submitted, the array counting 3, less the held one
RECORDED_STEPS = 14  # a .batch step for each of the 12 jobs that ran, and 5.0, 5.1
RECORDED_NEVER_RAN = 1  # job 14
RECORDED_STATES = {"COMPLETED": 8, "TIMEOUT": 1, "FAILED": 1, "OUT_OF_MEMORY": 1, "CANCELLED": 2}


def _recorded_rows() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The recorded file's job lines and step lines, split on | by the header."""
    lines = RECORDED.read_text().splitlines()
    header = lines[0].split("|")
    rows = [dict(zip(header, ln.split("|"), strict=True)) for ln in lines[1:] if ln]
    return [r for r in rows if "." not in r["JobID"]], [r for r in rows if "." in r["JobID"]]


def _seconds(text: str) -> int:
    """[D-]HH:MM:SS, as sacct prints Elapsed and Timelimit, in seconds."""
    days, _, hms = text.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def test_recorded_history_has_the_workload():
    jobs, steps = _recorded_rows()
    assert len(jobs) == RECORDED_JOBS and len(steps) == RECORDED_STEPS
    states = [r["State"].split(" ")[0] for r in jobs]
    assert {s: states.count(s) for s in set(states)} == RECORDED_STATES
    assert [r["JobID"] for r in jobs if r["AllocTRES"] == ""] == ["14"]
    assert {r["User"] for r in jobs} == {"root", "nobody"}


def test_recorded_history_is_read():
    jobs, _ = _recorded_rows()
    tr = sacct.read(str(RECORDED), procs=16)
    # steps left out; the job cancelled while it waited is skipped though Slurm gave it a Start
    assert tr.lines == RECORDED_JOBS
    assert tr.skipped["no run time"] == RECORDED_NEVER_RAN
    assert sum(tr.skipped.values()) == RECORDED_NEVER_RAN and tr.problems == []
    ran = sorted((r for r in jobs if r["AllocTRES"]), key=lambda r: r["Submit"])  # stable: file order
    assert len(tr.ids) == len(ran) == RECORDED_JOBS - RECORDED_NEVER_RAN
    first = datetime.fromisoformat(ran[0]["Submit"])
    assert tr.submit == [(datetime.fromisoformat(r["Submit"]) - first).total_seconds() for r in ran]
    assert tr.size == [int(r["ReqCPUS"]) for r in ran]
    assert tr.user == [r["User"] for r in ran]
    assert tr.walltime == [_seconds(r["Timelimit"]) for r in ran]
    # run time: Elapsed, cut at the limit (Slurm kills at its limit or a limit check later, so the
    # TIMEOUT job's Elapsed may exceed its Timelimit; in this recording by 29 s)
    elapsed = [_seconds(r["Elapsed"]) for r in ran]
    limits = [_seconds(r["Timelimit"]) for r in ran]
    (timeout,) = [k for k, r in enumerate(ran) if r["State"] == "TIMEOUT"]
    assert elapsed[timeout] >= limits[timeout]
    over = [k for k, (e, lim) in enumerate(zip(elapsed, limits)) if e > lim]
    assert over in ([], [timeout]) and tr.cut == len(over)
    assert tr.run == [min(e, lim) for e, lim in zip(elapsed, limits)]
    assert all(tr.run[k] == elapsed[k] for k in range(len(ran)) if k not in over)
    status = {"CANCELLED": 5, "FAILED": 0, "TIMEOUT": 0, "OUT_OF_MEMORY": 0}
    want = {k + 1: status[r["State"].split(" ")[0]] for k, r in enumerate(ran) if r["State"] != "COMPLETED"}
    assert tr.status == want
    assert sorted(want.values()) == [0, 0, 0, 5]  # TIMEOUT, FAILED, OUT_OF_MEMORY; one CANCELLED ran


def test_recorded_history_replays_with_easy():
    res = gsim("run", "--slurm-sacct", str(RECORDED), "--procs", "16", "--policy", "easy", "--json")
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["jobs"] == RECORDED_JOBS - RECORDED_NEVER_RAN and rec["skipped"] == RECORDED_NEVER_RAN
