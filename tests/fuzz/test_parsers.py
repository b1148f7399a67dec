"""Property and fuzz tests of the parsers that read what users type or write.

Every parser either accepts its input or refuses it with its own error type and
a message; none raises anything else, and none takes long.  Round trips hold
where a canonical form exists.
"""

from __future__ import annotations

import gzip
import math
import string

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gridsched.cli import gsub
from gridsched.core import cpuset, units
from gridsched.sim import swf

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- durations and sizes -----------------------------------------------------

DURATION_CHARS = string.digits + ":-.smhdSMHD \t" + "²٣\u00a0x"


@FUZZ
@given(st.one_of(st.text(DURATION_CHARS, max_size=40), st.text(max_size=40)))
@example("99:99:99:99")
@example("-5")
@example("1" + "0" * 400 + "d")
@example("9" * 5000)
@example("1-²")
def test_parse_duration_accepts_or_says_why(text):
    try:
        secs = units.parse_duration(text)
    except units.UnitError as e:
        assert str(e).startswith(f"'{text}'")
        return
    assert isinstance(secs, int)
    assert 0 < secs <= units.MAX_DURATION


@FUZZ
@given(st.integers(1, units.MAX_DURATION))
def test_duration_round_trip(secs):
    assert units.parse_duration(units.format_duration(secs)) == secs


SIZE_CHARS = string.digits + ".kmgtKMGTiIbB \t" + "²x"


@FUZZ
@given(st.one_of(st.text(SIZE_CHARS, max_size=30), st.text(max_size=30)))
@example("1" + "0" * 400)
@example("0.0000001k")
def test_parse_size_accepts_or_says_why(text):
    try:
        n = units.parse_size(text)
    except units.UnitError as e:
        assert str(e).startswith(f"'{text}'")
        return
    assert isinstance(n, int) and n > 0


@FUZZ
@given(st.integers(1, 1 << 50))
def test_size_round_trip_when_exact(n):
    text = units.format_size(n)
    if text[:-1].isdigit() and text[-1] in "KMGT":  # whole units: exact; other sizes print rounded
        assert units.parse_size(text) == n


# -- cpu lists ----------------------------------------------------------------


@FUZZ
@given(st.sets(st.integers(0, 4096), max_size=200))
def test_cpuset_format_parse_round_trip(cores):
    text = cpuset.format(cores)
    assert cpuset.parse(text) == frozenset(cores)
    assert cpuset.format(cpuset.parse(text)) == text  # canonical: printing again changes nothing


@FUZZ
@given(st.one_of(st.text(string.digits + ",-: \t", max_size=30), st.text(max_size=30)))
@example("9" * 5000)
@example("²")
@example("0-1000001")
def test_cpuset_parse_accepts_or_says_why(text):
    try:
        cores = cpuset.parse(text)
    except cpuset.CpuListError:
        return
    assert all(isinstance(c, int) and c >= 0 for c in cores)
    assert cpuset.parse(cpuset.format(cores)) == cores


# -- #GS directives ---------------------------------------------------------------

OPTION_WORDS = [
    "-n",
    "-t",
    "--mem",
    "-N",
    "-o",
    "-e",
    "-D",
    "--hold",
    "--checkpoint",
    "-d",
    "--wait",
    "--wrap",
    "--emit",
    "--spool",
    "--bogus",
    "-x",
    "--",
    "4",
    "0",
    "-5",
    "1:00",
    "99:99:99:99",
    "signal",
    "criu",
    "afterok:1",
    "'unclosed",
    '"q"',
    "#",
    "\\",
    "%j",
    "x" * 300,
]
directive_line = st.builds(
    lambda head, words: head + " ".join(words),
    st.sampled_from(["#GS ", "#GS", "#SBATCH ", "#PBS ", "#PBS -l ", "# GS ", "#gs "]),
    st.lists(st.one_of(st.sampled_from(OPTION_WORDS), st.text(max_size=12)), max_size=6),
)
script_text = st.builds(
    lambda shebang, lines, body: shebang + "\n".join(lines) + "\n" + body,
    st.sampled_from(["#!/bin/sh\n", "", "#!/usr/bin/env python3\n"]),
    st.lists(st.one_of(directive_line, st.sampled_from(["", "# comment", "echo early"])), max_size=8),
    st.sampled_from(["echo hi\n", "", "\x00\n", "true"]),
)


@FUZZ
@given(st.one_of(script_text, st.text(max_size=200)))
@example("#!/bin/sh\n#GS -n 4 -t 99:99:99:99\necho\n")
@example("#!/bin/sh\n#GS 'unclosed\necho\n")
@example("#!/bin/sh\n#GS script.sh\necho\n")
def test_gsub_directives_accept_or_refuse_in_one_line(text):
    # --emit parses every directive and prints the translation; it submits nothing
    r = CliRunner().invoke(
        gsub.cli,
        ["--emit", "slurm", "-"],
        input=text.encode("utf-8", "surrogatepass"),
        prog_name="gsub",
        catch_exceptions=True,
    )
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2)
    errs = r.stderr.splitlines()
    assert all(line.startswith("gsub: ") for line in errs), errs
    if r.exit_code == 0:
        assert "#SBATCH" in r.stdout or r.stdout.strip()
    else:
        assert errs and errs[-1].startswith("gsub: error: "), errs
        assert sum(1 for line in errs if "error:" in line) == 1


@FUZZ
@given(st.text(max_size=300))
def test_directive_scan_never_raises(text):
    for lineno, body in gsub.directives(text):
        assert isinstance(lineno, int) and lineno >= 1 and isinstance(body, str)


# -- SWF traces ------------------------------------------------------------------

swf_field = st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["-1", "nan", "inf", "1e400", "x", "1.5"]))
swf_line = st.one_of(
    st.lists(swf_field, min_size=18, max_size=18).map(" ".join),
    st.lists(swf_field, max_size=20).map(" ".join),
    st.sampled_from(["; MaxProcs: 64", "; MaxProcs: x", "; MaxNodes: 8", ";", ""]),
    st.text(max_size=40),
)


@FUZZ
@given(st.lists(swf_line, max_size=30), st.booleans(), st.booleans())
def test_swf_reader_accepts_or_says_why(tmp_path_factory, lines, strict, compress):
    d = tmp_path_factory.mktemp("swf")
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    path = d / ("t.swf.gz" if compress else "t.swf")
    path.write_bytes(gzip.compress(data) if compress else data)
    try:
        trace = swf.read(str(path), strict=strict)
    except swf.TraceError as e:
        assert str(e).startswith(str(path))
        return
    assert len(trace) > 0 and trace.ncores > 0
    assert len(trace.submit) == len(trace.size) == len(trace.walltime) == len(trace.run) == len(trace)
    assert all(0 < n <= trace.ncores for n in trace.size)
    assert all(math.isfinite(t) for t in trace.submit + trace.run + trace.walltime)
    assert trace.submit == sorted(trace.submit)
    assert all(r <= w for r, w in zip(trace.run, trace.walltime))


@pytest.mark.parametrize("data", [b"\x1f\x8b\x08garbage", b"\xff\xfe\x00binary\x00" * 100, b"; MaxProcs: 4\n" * 3])
def test_swf_reader_refuses_binary_and_truncated_files(tmp_path, data):
    p = tmp_path / "bad.swf"
    p.write_bytes(data)
    with pytest.raises(swf.TraceError) as e:
        swf.read(str(p))
    assert str(e.value).startswith(str(p))
