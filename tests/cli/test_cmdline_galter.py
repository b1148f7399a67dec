"""galter with sbatch's words: -p and -q warned of as gsub warns of them, --mem-per-cpu with the cores."""

from __future__ import annotations

import json
import os

from gridsched.cli import galter, gsub
from gridsched.protocol.spool import Spool
from tests.cli.conftest import submitted

GiB = 1 << 30


def pending(spool: Spool, run, put_rows, make_row) -> None:
    """Job 1, pending: submitted by gsub, its row written as the daemon writes it."""
    assert run(gsub.cli, ["--wrap", "true"]).exit_code == 0
    spec = submitted(spool)[-1]
    for p in spool.incoming.glob("submit-*.json"):
        p.unlink()
    put_rows(make_row(1, uid=os.getuid(), user=spec["user"], spec=spec))


def requests(spool: Spool) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(spool.incoming.glob("alter-*.json"))]


def test_mem_per_cpu_is_the_size_times_the_cores(env, spool, run, put_rows, make_row):
    pending(spool, run, put_rows, make_row)
    r = run(galter.cli, ["--mem-per-cpu", "1G", "-n", "3", "1"])
    assert r.exit_code == 0, r.stderr
    (req,) = requests(spool)
    assert (req["changes"]["mem"], req["changes"]["ncpus"]) == (3 * GiB, 3)


def test_mem_per_cpu_refusals_are_one_line_and_send_nothing(env, spool, run, put_rows, make_row):
    pending(spool, run, put_rows, make_row)
    for args, line in (
        (["--mem-per-cpu", "1G", "1"], "galter: error: --mem-per-cpu needs -n here"),
        (["--mem-per-cpu", "1G", "--mem", "2G", "-n", "2", "1"], "galter: error: --mem and --mem-per-cpu exclude"),
    ):
        r = run(galter.cli, args)
        assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith(line), r.stderr
    assert requests(spool) == []


def test_partition_and_qos_are_warned_of(env, spool, run, put_rows, make_row):
    pending(spool, run, put_rows, make_row)
    r = run(galter.cli, ["-p", "debug", "-q", "high", "1"])
    assert r.exit_code == 0, r.stderr
    assert r.stderr.splitlines() == [
        "galter: warning: --partition debug ignored: no partitions on one machine",
        "galter: warning: --qos high ignored: no QOS",
    ]
    assert requests(spool) == []
    r = run(galter.cli, ["-p", "debug", "-t", "10", "1"])
    assert r.exit_code == 0, r.stderr
    assert "galter: warning: --partition debug ignored" in r.stderr
    (req,) = requests(spool)
    assert req["changes"] == {"walltime": 600}
