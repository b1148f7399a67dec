"""Begin times (sbatch --begin, qsub -a) and signals before the walltime (sbatch --signal) as gsub reads
them: pure parsers given a fixed "now", the directives that carry them, and the one line bad input gets."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridsched.cli import gsub
from gridsched.protocol import requests as rq
from gridsched.submission import compat
from tests.fuzz.test_requests import valid_job

NOW = time.mktime((2026, 6, 10, 10, 0, 0, 0, 0, -1))  # a Wednesday, 10:00 local time


def at(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> float:
    return time.mktime((y, mo, d, h, mi, s, 0, 0, -1))


@pytest.mark.parametrize(
    "text, want",
    [
        ("now+60", NOW + 60),
        ("now+60seconds", NOW + 60),
        ("now+60minutes", NOW + 3600),
        ("now+2hours", NOW + 7200),
        ("now+1days", NOW + 86400),
        ("now+1weeks", NOW + 7 * 86400),
        ("16:00", at(2026, 6, 10, 16)),
        ("16:00:30", at(2026, 6, 10, 16, 0, 30)),
        ("09:00", at(2026, 6, 11, 9)),  # already past today: tomorrow
        ("today", at(2026, 6, 10)),
        ("tomorrow", at(2026, 6, 11)),
        ("midnight", at(2026, 6, 11)),
        ("noon", at(2026, 6, 10, 12)),
        ("teatime", at(2026, 6, 10, 16)),
        ("2026-12-01T08:00", at(2026, 12, 1, 8)),
        ("2026-12-01T08:00:15", at(2026, 12, 1, 8, 0, 15)),
        ("2026-12-01", at(2026, 12, 1)),
        ("2024-02-29", at(2024, 2, 29)),  # a leap day (in the past: the job starts at once)
    ],
)
def test_sbatch_begin_forms(text, want):
    assert compat.parse_begin(text, NOW) == want


@pytest.mark.parametrize("text", ["2026-02-30", "2025-02-29", "2026-04-31", "someday", "now+3fortnights", "24:00"])
def test_bad_begin_names_the_value_and_the_forms(text):
    with pytest.raises(ValueError) as e:
        compat.parse_begin(text, NOW)
    msg = str(e.value)
    assert msg.startswith(f"'{text}': ") and "(use " in msg and "weeks" in msg and "\n" not in msg


@given(st.integers(0, 10**7), st.sampled_from(["", "s", "seconds", "minutes", "hours", "days", "weeks"]))
def test_relative_begin_is_now_plus_that_many_units(n, unit):
    scale = {"": 1, "s": 1, "seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}[unit]
    assert compat.parse_begin(f"now+{n}{unit}", NOW) == NOW + n * scale


@given(st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_a_time_of_day_is_the_next_one(h, m, s):
    t = compat.parse_begin(f"{h:02d}:{m:02d}:{s:02d}", NOW)
    assert NOW < t <= NOW + 86400 + 3600  # a day ahead at most (an hour more across a clock change)
    assert time.localtime(t)[3:6] == (h, m, s)


@pytest.mark.parametrize(
    "text, want",
    [
        ("1600", at(2026, 6, 10, 16)),
        ("1600.30", at(2026, 6, 10, 16, 0, 30)),
        ("0900", at(2026, 6, 11, 9)),  # passed today: tomorrow
        ("151600", at(2026, 6, 15, 16)),  # DDhhmm: this month
        ("050900", at(2026, 7, 5, 9)),  # the 5th has passed: next month
        ("311200", at(2026, 7, 31, 12)),  # no 31 June: the next month that has one
        ("12010800", at(2026, 12, 1, 8)),  # MMDDhhmm
        ("01010000", at(2027, 1, 1)),  # passed this year: next year
        ("2612010800", at(2026, 12, 1, 8)),  # YYMMDDhhmm
        ("202612010800.05", at(2026, 12, 1, 8, 0, 5)),  # CCYYMMDDhhmm.SS
        ("202601010000", at(2026, 1, 1)),  # in the past: the job starts at once
    ],
)
def test_qsub_a_forms(text, want):
    assert compat.parse_pbs_begin(text, NOW) == want


@pytest.mark.parametrize("text", ["16", "160", "2460", "1660", "202602300800", "1600.61", "tomorrow", "13011200"])
def test_bad_qsub_a_names_the_value_and_the_form(text):
    with pytest.raises(ValueError) as e:
        compat.parse_pbs_begin(text, NOW)
    assert str(e.value).startswith(f"'{text}': ") and "[[[[CC]YY]MM]DD]hhmm[.SS]" in str(e.value)


def test_pbs_a_directive_becomes_a_begin_time():
    tr = compat.translate("#!/bin/sh\n#PBS -a 202612010800\ntrue\n", "j.sh")
    assert tr.warnings == [] and tr.settings == [(2, ["--begin", "2026-12-01T08:00:00"])]


def test_bad_pbs_a_directive_names_file_line_and_value():
    with pytest.raises(compat.CompatError) as e:
        compat.translate("#!/bin/sh\n#PBS -a 202602300800\ntrue\n", "j.sh")
    assert str(e.value).startswith("j.sh:2: #PBS -a 202602300800: '202602300800': not a date and time")


# -- signals before the walltime (sbatch --signal) ----------------------------------------------


@pytest.mark.parametrize(
    "text, want",
    [
        ("USR1", rq.JobSignal(signal.SIGUSR1, 60, False)),
        ("SIGUSR2@30", rq.JobSignal(signal.SIGUSR2, 30, False)),
        ("B:USR1@90", rq.JobSignal(signal.SIGUSR1, 90, True)),
        ("b:sigterm@0", rq.JobSignal(signal.SIGTERM, 0, True)),
        ("10@65535", rq.JobSignal(10, 65535, False)),
        ("INT", rq.JobSignal(signal.SIGINT, 60, False)),
    ],
)
def test_signal_forms(text, want):
    got = rq.parse_signal(text)
    assert got == want and rq.parse_signal(got.text()) == got


@pytest.mark.parametrize(
    "text, walltime, why",
    [
        ("FROB", None, "unknown signal 'FROB'"),
        ("99", None, "unknown signal 99"),
        ("USR1@soon", None, "'soon' is not a number of seconds"),
        ("USR1@", None, "'' is not a number of seconds"),
        ("USR1@-5", None, "'-5' is not a number of seconds"),
        ("USR1@65536", None, "65536 seconds is more than 65535"),
        ("USR1@120", 60, "120 seconds before the end is longer than the walltime (60s)"),
        ("USR1", 30, "60 seconds before the end is longer than the walltime (30s)"),
    ],
)
def test_bad_signals_say_why_in_one_line(text, walltime, why):
    with pytest.raises(ValueError) as e:
        rq.parse_signal(text, walltime)
    assert str(e.value).startswith(f"'{text}': {why}") and "\n" not in str(e.value)


def test_the_daemon_refuses_a_raw_signal_with_the_same_words():
    sender = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), False)
    for value, why in [("FROB@10", "unknown signal 'FROB'"), ("USR1@120", "longer than the walltime (60s)")]:
        with pytest.raises(rq.Refused) as e:
            rq.parse({"type": "submit", "job": {**valid_job(5), "signal": value}}, rq.id_name(5), sender)
        assert f"field 'signal' '{value}': " in str(e.value) and why in str(e.value)
    with pytest.raises(rq.Refused, match="field 'signal'"):
        rq.parse({"type": "submit", "job": {**valid_job(5), "signal": 10}}, rq.id_name(5), sender)
    ok = rq.parse({"type": "submit", "job": {**valid_job(5), "signal": "B:USR1@30"}}, rq.id_name(5), sender)
    assert ok.job.signal == rq.JobSignal(signal.SIGUSR1, 30, True)
    assert ok.job.to_spec()["signal"] == "B:USR1@30"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_gsub_signal_reaches_the_request(env, run, submits):
    assert run(gsub.cli, ["-t", "10:00", "--signal", "B:sigusr1@120", "--wrap", "true"]).exit_code == 0
    write(env / "s.sh", "#!/bin/sh\n#SBATCH --time=5 --signal=USR2@30\ntrue\n")
    assert run(gsub.cli, ["s.sh"]).exit_code == 0
    write(env / "p.sh", "#!/bin/sh\n#PBS -a 202612010800\n#PBS -l walltime=00:10:00\ntrue\n")
    assert run(gsub.cli, ["p.sh"]).exit_code == 0
    a, b, c = submits()
    assert a["signal"] == "B:USR1@120" and b["signal"] == "USR2@30" and "signal" not in c
    assert c["begin"] == time.mktime((2026, 12, 1, 8, 0, 0, 0, 0, -1))


@pytest.mark.parametrize(
    "args, why",
    [
        (["--signal", "FROB"], "unknown signal 'FROB'"),
        (["--signal", "USR1@soon"], "'soon' is not a number of seconds"),
        (["-t", "1", "--signal", "USR1@120"], "120 seconds before the end is longer than the walltime (60s)"),
        (["--begin", "2026-02-30"], "'2026-02-30': not a date and time (use now+N"),
    ],
)
def test_gsub_refuses_bad_values_in_one_line(env, run, submits, args, why):
    r = run(gsub.cli, [*args, "--wrap", "true"])
    assert r.exit_code == 2 and r.stderr.startswith("gsub: error: ") and why in r.stderr
    assert len(r.stderr.splitlines()) == 1 and submits() == []


def test_bad_directives_name_the_line(env, run, submits):
    write(env / "s.sh", "#!/bin/sh\n#SBATCH --signal=USR1@x\ntrue\n")
    r = run(gsub.cli, ["s.sh"])
    assert r.exit_code == 2 and "s.sh:2: #SBATCH --signal=USR1@x: 'USR1@x': 'x' is not a number" in r.stderr
    write(env / "p.sh", "#!/bin/sh\n#PBS -a 1699\ntrue\n")
    r = run(gsub.cli, ["p.sh"])
    assert r.exit_code == 2 and "p.sh:2: #PBS -a 1699: '1699': not a date and time" in r.stderr
    assert submits() == []


def test_emit_carries_the_signal_to_sbatch_and_says_pbs_has_none(env, run):
    r = run(gsub.cli, ["--emit", "slurm", "--signal", "B:USR1@30", "--wrap", "true"])
    assert "#SBATCH --signal=B:USR1@30" in r.stdout
    r = run(gsub.cli, ["--emit", "pbs", "--signal", "USR1@30", "--wrap", "true"])
    assert "# gridsched: dropped --signal USR1@30 (PBS has no signal before the walltime)" in r.stdout


# -- estimates (gsub --estimate, PBS soft_walltime) -----------------------------------------------


def test_estimate_reaches_the_request(env, run, submits):
    assert run(gsub.cli, ["-t", "2:00:00", "--estimate", "30", "--wrap", "true"]).exit_code == 0
    write(env / "p.sh", "#!/bin/sh\n#PBS -l walltime=01:00:00,soft_walltime=00:20:00\ntrue\n")
    assert run(gsub.cli, ["p.sh"]).exit_code == 0
    a, b = submits()
    assert (a["walltime"], a["estimate"]) == (7200, 1800) and (b["walltime"], b["estimate"]) == (3600, 1200)


def test_an_estimate_longer_than_the_walltime_is_refused(env, run, submits):
    r = run(gsub.cli, ["-t", "10", "--estimate", "20", "--wrap", "true"])
    assert r.exit_code == 2
    assert r.stderr == "gsub: error: --estimate 1200s is longer than the walltime (600s): the walltime ends the job\n"
    sender = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), False)
    with pytest.raises(rq.Refused, match="field 'estimate' 120s is longer than the walltime \\(60s\\)"):
        rq.parse({"type": "submit", "job": {**valid_job(5), "estimate": 120}}, rq.id_name(5), sender)
    with pytest.raises(rq.Refused, match="field 'estimate'"):
        rq.parse({"type": "submit", "job": {**valid_job(5), "estimate": 0}}, rq.id_name(5), sender)
    assert submits() == []


def test_emit_carries_the_estimate_to_pbs(env, run):
    r = run(gsub.cli, ["--emit", "pbs", "-t", "60", "--estimate", "90s", "--wrap", "true"])
    assert "#PBS -l soft_walltime=00:01:30" in r.stdout
    r = run(gsub.cli, ["--emit", "slurm", "-t", "60", "--estimate", "90s", "--wrap", "true"])
    assert "# gridsched: dropped --estimate" in r.stdout
