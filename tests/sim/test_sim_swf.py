"""Reading SWF traces: fields, header, skipped jobs and every kind of bad input."""

from __future__ import annotations

import gzip

import pytest
from simtraces import HAND, swf_line, swf_text

from gridsched.sim import swf
from gridsched.sim.swf import BAD_LINE, NO_PROCS, NO_RUNTIME, TOO_LARGE, TraceError


def test_fields_and_header(write_trace):
    path = write_trace(HAND, max_procs=4, max_nodes=2)
    tr = swf.read(path)
    assert tr.ncores == 4 and tr.max_procs == 4 and tr.max_nodes == 2
    assert tr.ids == [1, 2, 3, 4]
    assert tr.submit == [0, 10, 20, 30]
    assert tr.size == [4, 2, 2, 1]
    assert tr.walltime == [200, 100, 60, 100]
    # job 4 ran 300 s on a 100 s request: cut at the request
    assert tr.run == [100, 50, 0, 100]
    assert tr.cut == 1
    assert tr.user == ["7", "8", "7", "9"]
    assert sum(tr.skipped.values()) == 0


def test_size_estimate_fallbacks_and_skips(write_trace):
    lines = [
        swf_line(1, 0, 50, -1, 100, alloc=3),  # no request: allocated processors
        swf_line(2, 5, 70, 2, -1),  # no requested time: the run time is the estimate
        swf_line(3, 6, -1, 2, 100, status=5),  # cancelled before it ran
        swf_line(4, 7, 10, -1, 100, alloc=-1),  # no processor count at all
        swf_line(5, 8, 10, 2, 0),  # requested time 0: treated as missing
    ]
    tr = swf.read(write_trace(lines))
    assert tr.ids == [1, 2, 5]
    assert tr.size == [3, 2, 2]
    assert tr.walltime == [100, 70, 10]
    assert tr.skipped[NO_RUNTIME] == 1 and tr.skipped[NO_PROCS] == 1


def test_requested_procs_win_over_allocated(write_trace):
    tr = swf.read(write_trace([swf_line(1, 0, 5, 2, 10, alloc=4)]))
    assert tr.size == [2]


def test_gzip_trace(tmp_path):
    p = tmp_path / "t.swf.gz"
    with gzip.open(p, "wt") as f:
        f.write(swf_text(HAND))
    tr = swf.read(str(p))
    assert tr.ids == [1, 2, 3, 4]


def test_procs_option_and_nodes(write_trace):
    path = write_trace([swf_line(1, 0, 5, 16, 10), swf_line(2, 1, 5, 9, 10)], max_procs=32, max_nodes=4)
    assert swf.read(path, procs=20).ncores == 20
    tr = swf.read(path, nodes=True)
    # 8 processors per node: 16 -> 2 nodes, 9 -> 2 nodes
    assert tr.ncores == 4 and tr.size == [2, 2]


def test_limit_keeps_first_job_lines(write_trace):
    tr = swf.read(write_trace(HAND), limit=2)
    assert tr.ids == [1, 2] and tr.lines == 2


@pytest.mark.parametrize(
    "line, why",
    [
        ("1 0 -1 10 1 -1 -1 1 20 -1 1 1 -1 -1 -1 -1 -1", "17 fields, expected 18"),
        ("1 0 -1 ten 1 -1 -1 1 20 -1 1 1 -1 -1 -1 -1 -1 -1", "field 4 is not a number: 'ten'"),
        ("1 0 -1 10 1 -1 -1 1 20 -1 1 1 -1 -1 -1 -1 -1 nan", "field 18 is not a number"),
        ("1 0 -1 10 1 inf -1 1 20 -1 1 1 -1 -1 -1 -1 -1 -1", "field 6 is not a number: 'inf'"),
        ("1 0 -1 10 1 -1 -1 1 2O -1 1 1 -1 -1 -1 -1 -1 -1", "field 9 is not a number: '2O'"),
        (swf_line(1, -3, 10, 1, 20), "negative submit time -3"),
        (swf_line(1, 0, -5, 1, 20), "negative run time -5"),
        (swf_line(1, 0, 5, 1, -20), "negative requested time -20"),
    ],
)
def test_bad_lines(write_trace, line, why):
    path = write_trace([swf_line(9, 0, 1, 1, 5), line])
    # header: 3 comment lines (Version, Computer, MaxProcs); the bad line is line 5
    with pytest.raises(TraceError) as e:
        swf.read(path, strict=True)
    assert str(e.value).startswith(f"{path}:5: {why}")
    tr = swf.read(path)
    assert tr.ids == [9]
    assert tr.skipped[BAD_LINE] == 1
    assert tr.problems[0].startswith(f"{path}:5: {why}")


def test_unsorted_submit_times(write_trace):
    path = write_trace([swf_line(1, 100, 1, 1, 5), swf_line(2, 50, 1, 1, 5), swf_line(3, 120, 1, 1, 5)])
    with pytest.raises(TraceError, match=r":5: submit time 50 is earlier"):
        swf.read(path, strict=True)
    assert swf.read(path).ids == [1, 3]


def test_job_larger_than_machine(write_trace):
    path = write_trace([swf_line(1, 0, 1, 2, 5), swf_line(2, 1, 1, 4, 5)], max_procs=4)
    with pytest.raises(TraceError, match=r":5: job 2 needs 4 processors, more than the machine's 3"):
        swf.read(path, procs=3, strict=True)
    tr = swf.read(path, procs=3)
    assert tr.ids == [1] and tr.skipped[TOO_LARGE] == 1


def test_empty_trace(write_trace):
    path = write_trace([])
    with pytest.raises(TraceError, match="no jobs in the trace"):
        swf.read(path)


def test_no_job_usable(write_trace):
    path = write_trace([swf_line(1, 0, -1, 2, 5)])
    with pytest.raises(TraceError, match="none of the 1 jobs can be simulated"):
        swf.read(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        swf.read(str(tmp_path / "nope.swf"))
    with pytest.raises(TraceError, match="is a directory"):
        swf.read(str(tmp_path))


def test_unknown_machine_size(write_trace):
    path = write_trace(HAND, max_procs=None)
    with pytest.raises(TraceError, match="machine size unknown"):
        swf.read(path)
    assert swf.read(path, procs=8).ncores == 8


def test_truncated_gzip(tmp_path):
    data = gzip.compress(swf_text(HAND * 50).encode())
    p = tmp_path / "t.swf.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="cannot read"):
        swf.read(str(p))


def test_whole_and_decimal_numbers_read_alike(write_trace):
    """A line of whole numbers and one with points, exponents or signs in the same fields give the same job."""
    plain = swf.read(write_trace([swf_line(1, 0, 10, 4, 20), swf_line(2, 5, 7, 2, 9)]))
    written = "1 0.0 -1 1e1 4 2.12 -1 +4 20.0 -1 1 1 -1 -1 -1 -1 -1 -1"
    other = swf.read(write_trace([written, swf_line(2, 5, 7, 2, 9)]))
    for col in ("ids", "submit", "size", "walltime", "run", "user"):
        assert getattr(plain, col) == getattr(other, col), col
    assert all(type(x) is float for x in other.submit + other.walltime + other.run)
    assert all(type(x) is float for x in plain.submit + plain.walltime + plain.run)
