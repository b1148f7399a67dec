"""gsim --memory: the SWF's requested memory (field 10, KiB per processor) against the machine's memory."""

from __future__ import annotations

import csv

from click.testing import CliRunner, Result
from simtraces import swf_line

from gridsched.cli.gsim import main

GIB_KIB = 1 << 20  # KiB in a GiB


def gsim(*args: str) -> Result:
    res = CliRunner().invoke(main, list(args), prog_name="gsim")
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def with_mem(line: str, kib_per_proc: int) -> str:
    f = line.split()
    f[9] = str(kib_per_proc)
    return " ".join(f)


def starts(out) -> dict[str, float]:
    return {r["id"]: float(r["start"]) for r in csv.DictReader(out.open())}


# 4 processors.  Jobs 1 and 2 (1 processor, 100 s) ask for 6 GiB each at 0; job 3 (2 processors, 50 s) does
# not say (-1) and arrives at 1.
LINES = [
    with_mem(swf_line(1, 0, 100, 1, 100), 6 * GIB_KIB),
    with_mem(swf_line(2, 0, 100, 1, 100), 6 * GIB_KIB),
    swf_line(3, 1, 50, 2, 50),
]


def test_without_memory_the_memory_is_not_counted(write_trace, tmp_path):
    out = tmp_path / "jobs.csv"
    res = gsim("run", write_trace(LINES, max_procs=4), "--policy", "easy", "--jobs-out", str(out))
    assert res.exit_code == 0, res.output
    assert starts(out) == {"1": 0.0, "2": 0.0, "3": 1.0}


def test_with_memory_jobs_wait_for_it_though_processors_are_free(write_trace, tmp_path):
    out = tmp_path / "jobs.csv"
    path = write_trace(LINES, max_procs=4)
    res = gsim("run", path, "--policy", "easy", "--memory", "--machine-memory", "8G", "--jobs-out", str(out))
    assert res.exit_code == 0, res.output
    assert starts(out) == {"1": 0.0, "2": 100.0, "3": 1.0}  # job 3 asks for no memory: it starts at once


def test_the_default_per_processor_and_the_reserved_memory_come_from_the_config(write_trace, tmp_path):
    out = tmp_path / "jobs.csv"
    cfg = tmp_path / "gridsched.toml"
    cfg.write_text('[jobs]\ndefault_mem_per_cpu = "1G"\n[machine]\nmemory_reserved = "1G"\n')
    path = write_trace(LINES, max_procs=4)
    args = ["run", path, "--policy", "easy", "--memory", "--machine-memory", "14G", "--config", str(cfg)]
    res = gsim(*args, "--jobs-out", str(out))
    assert res.exit_code == 0, res.output
    # 13 GiB handed out: jobs 1 and 2 hold 12, job 3 asks for 2 (1 GiB per processor): it waits for job 1
    assert starts(out) == {"1": 0.0, "2": 0.0, "3": 100.0}


def test_a_job_asking_for_more_than_the_machine_is_left_out(write_trace, tmp_path):
    out = tmp_path / "jobs.csv"
    lines = [*LINES, with_mem(swf_line(4, 2, 10, 2, 10), 5 * GIB_KIB)]  # 10 GiB
    path = write_trace(lines, max_procs=4)
    res = gsim("run", path, "--memory", "--machine-memory", "8G", "--jobs-out", str(out), "--json")
    assert res.exit_code == 0, res.output
    assert set(starts(out)) == {"1", "2", "3"}
    assert "more memory than the machine's" in res.stdout


def test_bad_memory_options_are_refused_in_one_line(write_trace):
    path = write_trace(LINES, max_procs=4)
    for args, words in (
        (["--machine-memory", "8G"], "--machine-memory goes with --memory"),
        (["--memory"], "--memory needs the machine's memory"),
        (["--memory", "--machine-memory", "lots"], "--machine-memory 'lots': not a memory size"),
        (["--memory", "--machine-memory", "8G", "--split-jobs-above", "1"], "--memory does not go with"),
    ):
        res = gsim("run", path, *args)
        assert res.exit_code == 2, (args, res.output)
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("gsim: error: ")
        assert words in res.stderr
