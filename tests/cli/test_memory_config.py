"""The memory pool's settings: [machine] memory_reserved, [jobs] default_mem_per_cpu, and the reserved name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridsched.cli import gsub
from gridsched.core.memory import MemoryPool, pool
from gridsched.protocol.config import ConfigError, parse
from tests.cli.conftest import submitted
from tests.cli.test_gsub import one_error_line


def test_the_settings_are_read_in_mebibytes():
    cfg = parse({"machine": {"memory_reserved": "4G"}, "jobs": {"default_mem_per_cpu": "1536M"}})
    assert (cfg.memory_reserved, cfg.default_mem_per_cpu) == (4096, 1536)
    assert parse({"jobs": {"default_mem_per_cpu": 2048}}).default_mem_per_cpu == 2048  # a bare number: MiB
    default = parse({})
    assert (default.memory_reserved, default.default_mem_per_cpu) == (0, 0)


@pytest.mark.parametrize(
    "data, line",
    [
        ({"machine": {"memory_reserved": "lots"}}, "machine.memory_reserved = 'lots': not a memory size"),
        ({"machine": {"memory_reserved": -1}}, "machine.memory_reserved = -1: must be a memory size"),
        ({"jobs": {"default_mem_per_cpu": True}}, "jobs.default_mem_per_cpu = True: must be a memory size"),
        ({"jobs": {"default_mem_per_cpu": "2X"}}, "jobs.default_mem_per_cpu = '2X': not a memory size"),
        ({"resources": {"floating": {"mem": 4}}}, "resources.floating.mem: the name is the machine's memory"),
    ],
)
def test_bad_values_are_refused_in_one_line(data, line):
    with pytest.raises(ConfigError) as e:
        parse(data, "cfg.toml")
    assert str(e.value).startswith(f"cfg.toml: {line}")
    assert "\n" not in str(e.value)


def test_a_command_refuses_a_floating_resource_named_mem(env: Path, spool, run):
    cfg = env / "cfg.toml"
    cfg.write_text(cfg.read_text() + "[resources.floating]\nmem = 4\n")
    r = run(gsub.cli, ["--wrap", "true"])
    assert r.exit_code != 0
    assert "resources.floating.mem: the name is the machine's memory" in one_error_line(r.stderr)
    assert submitted(spool) == []


def test_the_pool_and_the_asks():
    assert pool(None, 0, 0) is None  # memory unknown: not counted
    assert pool(16 << 30, 17 * 1024, 0) is None  # nothing left to hand out
    p = pool(16 << 30, 4096, 512)
    assert p == MemoryPool(12 * 1024, 512, 4096)
    assert p.ask(3 << 30, 4) == 3072 and p.ask((1 << 20) + 1, 1) == 2  # whole MiB, rounded up
    assert p.ask(None, 4) == 2048  # the default per core
    assert p.asks((("matlab", 1),), None, 1) == (("matlab", 1), ("mem", 512))
    assert MemoryPool(1024).asks((("matlab", 1),), None, 8) == (("matlab", 1),)  # no default: none


def test_gresv_create_holds_memory(env: Path, spool, run):
    from gridsched.cli import gresv
    from tests.cli.test_gresv import requests

    r = run(gresv.cli, ["create", "-n", "1", "-t", "1h", "-l", "mem=1G", "-l", "mem=512"])
    assert r.exit_code == 0, r.stderr
    (req,) = requests(spool, "resv_create")
    assert req["resv"]["resources"] == {"mem": 1536}  # MiB; a bare number is MiB
    for item, words in (("mem=lots", "resource 'mem=lots': not a memory size"), ("mem=1000T", "the machine has")):
        r = run(gresv.cli, ["create", "-n", "1", "-t", "1h", "-l", item])
        assert r.exit_code != 0
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("gresv: error: ") and words in r.stderr
    r = run(gsub.cli, ["--json", "-l", "mem=1gb", "--wrap", "true"])  # gsub -l mem= is qsub's: PBS's job memory
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["mem"] == 1 << 30


def test_gsub_checks_mem_against_what_the_scheduler_hands_out(env: Path, spool, run):
    """A machine of 16G with 6G left to the system: --mem 12G can never start (the pass would hold it with
    "the scheduler hands out 10G"), so gsub refuses it in one line; 10G, all of the pool, is taken."""
    topo = env / "topo.toml"
    topo.write_text('[[board]]\nid = 0\ncores = "0-15"\nmemory = "16G"\nhost_cpus = "0"\n')
    cfg = env / "cfg.toml"
    text = cfg.read_text().replace("[machine]\n", f'[machine]\ntopology = "{topo}"\nmemory_reserved = "6G"\n', 1)
    assert "memory_reserved" in text
    cfg.write_text(text)
    for flags in (["--mem", "12G"], ["--mem-per-cpu", "6G", "-n", "2"]):
        r = run(gsub.cli, [*flags, "--wrap", "true"])
        assert r.exit_code != 0
        assert one_error_line(r.stderr).endswith(
            "job can never run: it asks for 12G of memory, the scheduler hands out 10G "
            "(the machine's 16G less machine.memory_reserved 6G)"
        ), r.stderr
    assert submitted(spool) == []
    r = run(gsub.cli, ["--mem", "10G", "--wrap", "true"])
    assert r.exit_code == 0, r.stderr
    assert [s["mem"] for s in submitted(spool)] == [10 << 30]
