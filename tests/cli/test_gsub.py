"""gsub in-process: the spec it writes, directives, output paths and every refusal."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from gridsched.cli import gsub
from gridsched.core.feasible import infeasible
from gridsched.protocol.jobs import SPEC_KEYS
from gridsched.protocol.state import StateDB

SCRIPT = """#!/bin/sh
#GS -N fromdirective -n 2
# a comment
#GS -t 10:00

echo hello
"""


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("gsub: error: "), lines[0]
    return lines[0]


def test_submit_writes_the_whole_spec(env, run, submits):
    write(env / "job.sh", SCRIPT)
    r = run(gsub.cli, ["-n", "3", "job.sh", "a", "-n", "b c"])
    assert r.exit_code == 0
    assert r.stdout == "1\n"
    [spec] = submits()
    assert set(spec) == set(SPEC_KEYS)
    assert spec["id"] == 1
    assert spec["name"] == "fromdirective"  # from #GS -N
    assert spec["ncpus"] == 3  # the command line wins over #GS -n 2
    assert spec["walltime"] == 600  # from #GS -t 10:00
    assert spec["args"] == ["a", "-n", "b c"]  # after the script: the script's, not gsub's
    assert spec["script"] == SCRIPT
    assert spec["uid"] == os.getuid() and spec["gid"] == os.getgid()
    assert spec["workdir"] == str(env) and spec["submit_dir"] == str(env)
    assert spec["stdout"] == str(env / "fromdirective.o1")
    assert spec["stderr"] == str(env / "fromdirective.e1")
    assert spec["env"]["GRIDSCHED_SPOOL"] == os.environ["GRIDSCHED_SPOOL"]
    assert spec["checkpoint"] == "none" and spec["hold"] is False and spec["mem"] is None
    assert abs(spec["submit_time"] - time.time()) < 60


def test_defaults_come_from_the_config(env, run, submits):
    (env / "cfg.toml").write_text(
        "[daemon]\nautostart = false\n[machine]\ncores = 16\n"
        '[jobs]\ndefault_walltime = "5m"\ndefault_ncpus = 2\ncheckpoint = "requeue"\n'
    )
    write(env / "plain.sh", "#!/bin/sh\ntrue\n")
    assert run(gsub.cli, ["plain.sh"]).exit_code == 0
    [spec] = submits()
    assert (spec["name"], spec["walltime"], spec["ncpus"], spec["checkpoint"]) == ("plain.sh", 300, 2, "requeue")


def test_ids_increase(env, run, submits):
    write(env / "job.sh", SCRIPT)
    assert [run(gsub.cli, ["job.sh"]).stdout for _ in range(3)] == ["1\n", "2\n", "3\n"]
    assert [s["id"] for s in submits()] == [1, 2, 3]


def test_options(env, run, submits):
    write(env / "job.sh", "#!/bin/sh\ntrue\n")
    r = run(gsub.cli, ["--hold", "--mem", "2G", "--checkpoint", "signal", "-t", "1-00:00:00", "job.sh"])
    assert r.exit_code == 0
    [spec] = submits()
    assert spec["hold"] is True
    assert spec["mem"] == 2 * 1024**3
    assert spec["checkpoint"] == "signal"
    assert spec["walltime"] == 86400


def test_json_output(env, run, submits):
    write(env / "job.sh", SCRIPT)
    r = run(gsub.cli, ["--json", "job.sh"])
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["id"] == 1 and doc["name"] == "fromdirective" and doc["ncpus"] == 2
    assert doc["spool"] == os.environ["GRIDSCHED_SPOOL"]


def test_stdin_script(env, run, submits):
    text = "#GS -n 2\necho from stdin\n"
    r = run(gsub.cli, [], input=text)
    assert r.exit_code == 0 and r.stdout == "1\n"
    r = run(gsub.cli, ["-N", "named", "-"], input=text)
    assert r.exit_code == 0 and r.stdout == "2\n"
    a, b = submits()
    assert (a["name"], a["ncpus"], a["script"]) == ("stdin", 2, text)
    assert (b["name"], b["script"]) == ("named", text)


def test_wrap(env, run, submits):
    r = run(gsub.cli, ["--wrap", "echo 'a b' > out.txt", "-n", "2"])
    assert r.exit_code == 0
    [spec] = submits()
    assert spec["name"] == "wrap"
    assert spec["script"] == "#!/bin/sh\necho 'a b' > out.txt\n"
    assert spec["ncpus"] == 2


def test_directives_stop_at_the_first_command(env, run, submits):
    write(env / "job.sh", "#!/bin/bash\n#GS -n 2\necho hi\n#GS -n 4\n")
    assert run(gsub.cli, ["job.sh"]).exit_code == 0
    assert submits()[0]["ncpus"] == 2


def test_later_directive_wins_and_quotes_work(env, run, submits):
    write(env / "job.sh", "#!/bin/sh\n#GS -n 2 -N 'first name'\n#GS -n 3  # trailing comment\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0
    [spec] = submits()
    assert spec["ncpus"] == 3 and spec["name"] == "first name"


def test_directive_scan_unit():
    text = "#!/bin/sh\n\n#GS -n 1\n#GSX not one\n  #GS -t 5\n# x\ncmd\n#GS -n 9\n"
    assert gsub.directives(text) == [(3, "-n 1"), (5, "-t 5")]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("#GS -t abc", "job.sh:3: walltime 'abc': not a duration"),
        ("#GS --bogus", "job.sh:3: unknown option --bogus"),
        ("#GS -n 0", "job.sh:3: ncpus '0': must be at least 1"),
        ("#GS extra.sh", "job.sh:3: an argument ('extra.sh'): directives take options only"),
        ("#GS --spool /tmp/elsewhere", "job.sh:3: --spool cannot be given in a directive"),
        ("#GS --wrap true", "job.sh:3: --wrap cannot be given in a directive"),
        ("#GS -N 'unclosed", "job.sh:3: no closing quotation"),
        ("#GS --help", "job.sh:3: unknown option --help"),
        ("#GS -t", "job.sh:3: option '-t' requires an argument"),
    ],
)
def test_bad_directive_names_the_line(env, run, submits, line, expected):
    write(env / "job.sh", f"#!/bin/sh\n# first\n{line}\ntrue\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 2
    assert one_error_line(r.stderr).startswith(f"gsub: error: {expected}")
    assert r.stdout == ""
    assert submits() == []


@pytest.mark.parametrize(
    "args, code, expected",
    [
        (["--nmae", "x", "job.sh"], 2, "unknown option --nmae (did you mean --name"),
        (["-t", "-5", "job.sh"], 2, "walltime '-5': must be positive"),
        (["-t", "99:99:99:99", "job.sh"], 2, "walltime '99:99:99:99': too many fields"),
        (["-t", "abc", "job.sh"], 2, "walltime 'abc': not a duration"),
        (["-t", "8d", "job.sh"], 1, "walltime 8-00:00:00 is longer than the maximum 7-00:00:00"),
        (["-n", "0", "job.sh"], 2, "ncpus '0': must be at least 1"),
        (["-n", "two", "job.sh"], 2, "ncpus 'two': not a whole number"),
        (["-n", "100000", "job.sh"], 1, "job can never run: it asks for 100000 cores, the machine has 16"),
        (["-n", "17", "job.sh"], 1, "job can never run: it asks for 17 cores, the machine has 16"),
        (["--mem", "lots", "job.sh"], 2, "mem 'lots': not a memory size"),
        (["--checkpoint", "magic", "job.sh"], 2, "checkpoint 'magic': must be one of none, signal"),
        (["missing.sh"], 1, "missing.sh: no such file"),
        (["adir"], 1, "adir: is a directory, not a script"),
        (["binary.sh"], 1, "binary.sh: binary file (NUL bytes)"),
        (["latin1.sh"], 1, "latin1.sh: not UTF-8 text"),
        (["empty.sh"], 1, "empty.sh: empty script"),
        (["comments.sh"], 1, "comments.sh: empty script"),
        (["-o", "nodir/out.txt", "job.sh"], 1, "output '{env}/nodir/out.txt': directory {env}/nodir does not exist"),
        (["-e", "/nonexistent/dir/%j.err", "job.sh"], 1, "error '/nonexistent/dir/1.err': directory"),
        (["-D", "nowhere", "job.sh"], 1, "chdir 'nowhere': no such directory"),
        (["-N", "a/b", "job.sh"], 2, "name 'a/b': must be non-empty, without '/'"),
        (["--wrap", "true", "job.sh"], 2, "--wrap and a script file exclude each other"),
        (["--wrap", "  "], 1, "--wrap: empty command"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_submitted(env, run, submits, args, code, expected):
    write(env / "job.sh", SCRIPT)
    (env / "adir").mkdir()
    write(env / "binary.sh", b"#!/bin/sh\necho \x00\n")
    write(env / "latin1.sh", "#!/bin/sh\necho caf\u00e9\n".encode("latin-1"))
    write(env / "empty.sh", "")
    write(env / "comments.sh", "#!/bin/sh\n# nothing\n\n#GS -n 2\n")
    r = run(gsub.cli, args)
    assert r.exit_code == code
    assert one_error_line(r.stderr).startswith("gsub: error: " + expected.format(env=env))
    assert r.stdout == ""
    assert submits() == []


def test_empty_stdin_is_refused(env, run, submits):
    r = run(gsub.cli, [], input="")
    assert r.exit_code == 1
    assert one_error_line(r.stderr) == "gsub: error: stdin: empty script (nothing but blank lines and comments)"


@pytest.mark.skipif(shutil.which("criu") is not None, reason="criu is installed here: the refusal path needs it absent")
def test_criu_refused_without_criu(env, run, submits):
    write(env / "job.sh", SCRIPT)
    r = run(gsub.cli, ["--checkpoint", "criu", "job.sh"])
    assert r.exit_code == 1
    line = one_error_line(r.stderr)
    assert "transparent checkpointing is not available on this host (no criu binary found)" in line
    assert submits() == []


def test_machine_size_from_the_state_db(env, run, submits, put_rows):
    put_rows(meta={"machine": json.dumps({"ncores": 4, "host_cpus": [0, 1]})})
    write(env / "job.sh", SCRIPT)
    r = run(gsub.cli, ["-n", "5", "job.sh"])
    assert r.exit_code == 1
    assert "asks for 5 cores, the machine has 4" in one_error_line(r.stderr)
    assert run(gsub.cli, ["-n", "4", "job.sh"]).exit_code == 0
    assert [s["ncpus"] for s in submits()] == [4]


def test_output_paths(env, run, submits):
    write(env / "job.sh", "#!/bin/sh\n#GS -o logs/%x-%j.out\ntrue\n")
    work = env / "work"
    (work / "logs").mkdir(parents=True)
    (env / "errs").mkdir()
    r = run(gsub.cli, ["-N", "sim", "-D", "work", "-e", str(env / "errs"), "job.sh"])
    assert r.exit_code == 0
    r = run(gsub.cli, ["-N", "sim", "-o", "100%%-%j", "job.sh"])
    assert r.exit_code == 0
    a, b = submits()
    assert a["workdir"] == str(work)
    assert a["stdout"] == str(work / "logs" / "sim-1.out")  # relative to the working directory
    assert a["stderr"] == str(env / "errs" / "sim.e1")  # a directory receives the default name
    assert b["stdout"] == str(env / "100%-2")
    assert b["stderr"] == str(env / "sim.e2")  # default: in the submit directory


def test_output_path_unit(tmp_path):
    p = gsub.output_path("o/%x.%j.%%", "d", 7, "nm", tmp_path, Path("/submit"))
    assert p == tmp_path / "o" / "nm.7.%"
    assert gsub.output_path(None, "nm.o7", 7, "nm", tmp_path, Path("/submit")) == Path("/submit/nm.o7")
    assert gsub.output_path("/abs/%j", "d", 7, "nm", tmp_path, Path("/s")) == Path("/abs/7")


def test_spool_option_wins_over_the_environment(env, run, submits):
    write(env / "job.sh", SCRIPT)
    other = env / "other"
    assert run(gsub.cli, ["--spool", str(other), "job.sh"]).exit_code == 0
    assert len(list((other / "incoming").glob("submit-*.json"))) == 1
    assert submits() == []


def test_config_spool_is_used_without_option_or_environment(env, run, monkeypatch):
    monkeypatch.delenv("GRIDSCHED_SPOOL")
    (env / "cfg.toml").write_text(f'[daemon]\nautostart = false\nspool = "{env / "cfgspool"}"\n')
    write(env / "job.sh", SCRIPT)
    assert run(gsub.cli, ["job.sh"]).exit_code == 0
    assert len(list((env / "cfgspool" / "incoming").glob("submit-*.json"))) == 1


def test_bad_config_is_one_line(env, run):
    (env / "cfg.toml").write_text("[jobs]\ndefault_ncpus = 0\n")
    write(env / "job.sh", SCRIPT)
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 1
    assert "jobs.default_ncpus = 0: must be positive" in one_error_line(r.stderr)


def test_autostart(env, run, monkeypatch):
    calls = []

    class Gone:  # the spawned daemon, faked: it has already exited (so nothing waits for it)
        def poll(self) -> int:
            return 0

    def spawn(spool, config_file):
        calls.append((spool.root, config_file))
        return Gone()

    monkeypatch.setattr("gridsched.protocol.spool.spawn_daemon", spawn)
    write(env / "job.sh", SCRIPT)
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0 and calls == []
    assert "no daemon runs on" in r.stderr
    (env / "cfg.toml").write_text("[daemon]\nautostart = true\n")
    r = run(gsub.cli, ["job.sh"])
    assert r.exit_code == 0
    assert calls == [(env / "spool", None)]
    assert (
        r.stderr.startswith(f"gsub: note: started a personal daemon on {env / 'spool'} ") and r.stderr.count("\n") == 1
    )
    r = run(gsub.cli, ["job.sh"])  # the spawn is faked: no daemon answers, so it is started (and said) again
    assert calls[-1] == (env / "spool", None) and "started a personal daemon" in r.stderr


def finish_job_later(spool, put_rows, row) -> threading.Thread:
    """Stand in for the daemon: once the submit request appears, record the job as finished, and its id as
    taken from that request (the digest of its bytes, as the daemon records it: gsub then knows the id is its
    own, however early the daemon takes the request in)."""

    def work() -> None:
        deadline = time.monotonic() + 20
        path = spool.incoming / f"submit-{row['id']:010d}.json"
        while True:
            try:
                data = path.read_bytes()
                break
            except FileNotFoundError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)
        db = StateDB(spool.db, write=True)
        db.begin()
        db.put_id(row["id"], os.getuid(), hashlib.sha256(data).hexdigest(), time.time())
        db.commit()
        db.close()
        put_rows(row)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize(
    "fields, status",
    [
        ({"state": "COMPLETED", "exit_code": 3}, 3),
        ({"state": "COMPLETED", "exit_code": 0}, 0),
        ({"state": "TIMEOUT", "exit_signal": 9}, 137),
        ({"state": "CANCELLED"}, 1),
    ],
)
def test_wait_exits_with_the_jobs_status(env, run, spool, put_rows, make_row, fields, status):
    write(env / "job.sh", SCRIPT)
    t = finish_job_later(spool, put_rows, make_row(1, **fields))
    r = run(gsub.cli, ["--wait", "job.sh"])
    t.join(timeout=20)
    assert r.exit_code == status
    assert r.stdout == "1\n"


def test_exit_status_unit():
    assert gsub.job_exit_status({"state": "COMPLETED", "exit_code": None, "exit_signal": None}) == 0
    assert gsub.job_exit_status({"state": "FAILED", "exit_code": None, "exit_signal": None}) == 1
    assert gsub.job_exit_status({"state": "FAILED", "exit_code": 2, "exit_signal": None}) == 2
    assert gsub.job_exit_status({"state": "CANCELLED", "exit_code": None, "exit_signal": 15}) == 143


def test_infeasible():
    assert infeasible(1, 1) is None
    assert infeasible(16, 16) is None
    assert infeasible(100000, 16) == "asks for 100000 cores, the machine has 16"
    assert infeasible(0, 16) is not None


def test_sbatchs_everyday_options_on_the_command_line(env, run, submits):
    r = run(gsub.cli, ["-c", "3", "-p", "gpu", "-A", "proj", "-q", "high", "--parsable", "--wrap", "true"])
    assert r.exit_code == 0 and r.stdout == "1\n"  # the id alone, as sbatch --parsable prints it
    assert submits()[0]["ncpus"] == 3 and submits()[0]["account"] == "proj"
    assert [x for x in r.stderr.splitlines() if "ignored" in x] == [
        "gsub: warning: --partition gpu ignored: no partitions on one machine",
        "gsub: warning: --qos high ignored: no QOS",
    ]


def test_short_and_long_options_submit_the_same_and_errors_name_the_option_as_typed(env, run, submits):
    write(env / "job.sh", "#!/bin/sh\ntrue\n")
    short = run(gsub.cli, ["-n", "2", "-t", "30", "-N", "x", "-j", "oe", "job.sh"])
    long = run(gsub.cli, ["--ncpus", "2", "--walltime", "30", "--name", "x", "--join", "oe", "job.sh"])
    assert short.exit_code == long.exit_code == 0, short.stderr + long.stderr
    a, b = submits()
    for k in ("ncpus", "walltime", "name"):
        assert a[k] == b[k]
    assert (a["ncpus"], a["walltime"], a["name"]) == (2, 1800, "x")
    assert a["stderr"] == a["stdout"] and b["stderr"] == b["stdout"]  # -j oe as --join oe
    r = run(gsub.cli, ["job.sh", "-n"])  # after the script: the script's own argument
    assert r.exit_code == 0
    r = run(gsub.cli, ["-n"])
    assert r.exit_code == 2
    assert "'-n' requires an argument" in one_error_line(r.stderr)
