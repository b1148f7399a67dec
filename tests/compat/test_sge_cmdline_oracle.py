"""The same qsub command lines given to a real Grid Engine 8.1.9 (../shared/tools/gridengine-localhost, set up by
tests/compat/sge_localhost.sh) and to gsub: each accepts or refuses alike, and what both accept asks the same
slots, time limit, name, array and working directory (qsub submits it held and it is deleted).

Where no Grid Engine answers (as in CI), the tests are skipped with the reason printed.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.compat.test_sge_oracle import _ns, sge_env  # noqa: F401 - the fixture
from tests.conftest import BIN

ACCEPTED = [
    ["-cwd", "-pe", "smp", "4", "-l", "h_rt=1:00:00", "-terse"],
    ["-cwd", "-N", "named", "-t", "1-3", "-l", "h_rt=600"],
    ["-cwd", "-pe", "smp", "2", "-j", "y", "-V", "-v", "A=1"],
    ["-wd", "/tmp", "-pe", "smp", "3"],
    ["-cwd", "-b", "y"],  # job.sh run as a program: the job is named after it
]
# Grid Engine refuses these; so does gsub, with one line
REFUSED = [
    ["-cwd", "-foo"],
    ["-cwd", "-j", "maybe"],
    ["-cwd", "-t", "x"],
    ["-pe", "smp"],
    ["-cwd", "-W", "depend=afterok:1"],
]


def _qsub(env: dict[str, str], work: Path, args: list[str]) -> dict[str, object] | None:
    """What Grid Engine made of ``qsub ARGS job.sh`` (held, then deleted), or None when it refused it."""

    def run(*cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(_ns(*cmd), cwd=work, env=env, capture_output=True, text=True, timeout=60)

    sub = run("qsub", "-h", "-terse", *args, "job.sh")
    if sub.returncode != 0:
        return None
    jid = sub.stdout.strip().splitlines()[-1].split(".")[0]
    try:
        shown = run("qstat", "-j", jid).stdout
    finally:
        run("qdel", jid)
    f = dict((k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in shown.splitlines()) if k and v.strip())
    res = dict(kv.split("=", 1) for kv in f.get("hard resource_list", "").split(",") if "=" in kv)
    pe = re.search(r"range:\s*(\d+)", shown)
    tasks = f.get("job-array tasks")
    return {
        "ncpus": int(pe.group(1)) if pe else 1,
        "walltime": int(res["h_rt"]) if "h_rt" in res else None,
        "name": f["job_name"],
        "array": tasks.replace(":1", "") if tasks else None,
        "workdir": f.get("cwd"),
    }


def _gsub(tmp_path: Path, work: Path, args: list[str]) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    (tmp_path / "gs.toml").write_text("[machine]\ncores = 16\n[daemon]\nautostart = false\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update(GRIDSCHED_SPOOL=str(tmp_path / "spool"), GRIDSCHED_CONFIG=str(tmp_path / "gs.toml"))
    g = subprocess.run([str(BIN / "gsub"), *args, "job.sh"], cwd=work, env=env, capture_output=True, text=True)
    reqs = list((tmp_path / "spool" / "incoming").glob("submit-*.json"))
    return g, json.loads(reqs[0].read_text())["job"] if reqs else None


@pytest.mark.parametrize("args", ACCEPTED, ids=" ".join)
def test_qsub_command_lines_read_as_grid_engine_reads_them(sge_env, tmp_path, args):  # noqa: F811
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.sh").write_text("#!/bin/sh\ntrue\n")
    want = _qsub(sge_env, work, args)
    assert want is not None
    g, spec = _gsub(tmp_path, work, args)
    assert g.returncode == 0, g.stderr
    assert spec is not None
    got = {k: spec.get(k) for k in want}
    if want["walltime"] is None:
        got["walltime"] = None  # Grid Engine has no default limit; gsub's is jobs.default_walltime
    assert got == want


@pytest.mark.parametrize("args", REFUSED, ids=" ".join)
def test_qsub_command_lines_refused_alike(sge_env, tmp_path, args):  # noqa: F811
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.sh").write_text("#!/bin/sh\ntrue\n")
    assert _qsub(sge_env, work, args) is None
    g, spec = _gsub(tmp_path, work, args)
    assert (g.returncode, spec) == (2, None), g.stderr
    assert len(g.stderr.splitlines()) == 1 and g.stderr.startswith("gsub: error: command line: "), g.stderr
