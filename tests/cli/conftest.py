"""Fixtures for the command tests: a temporary spool and a config that never starts a daemon."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB

MACHINE_CORES = 16  # the config below declares a 16-core machine


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with ``cfg.toml`` (no autostart, 16 cores) and ``spool/`` selected by the environment."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f"[daemon]\nautostart = false\n[machine]\ncores = {MACHINE_CORES}\n")
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(cfg))
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(tmp_path / "spool"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def spool(env: Path) -> Spool:
    return Spool(env / "spool")


@pytest.fixture
def run() -> Callable[..., Result]:
    """Invoke a command in-process; prints its output and exception on failure to ease debugging."""

    def invoke(cmd: click.Command, args: list[str], input: str | bytes | None = None) -> Result:
        result = CliRunner().invoke(cmd, args, input=input, prog_name=cmd.name, catch_exceptions=True)
        print(f"$ {cmd.name} {' '.join(args)} -> {result.exit_code}")
        print("stdout:", result.stdout)
        print("stderr:", result.stderr)
        if result.exception and not isinstance(result.exception, SystemExit):
            import traceback

            traceback.print_exception(result.exception)
        return result

    return invoke


def submitted(spool: Spool) -> list[dict[str, Any]]:
    """The job specs in the spool's submit requests, read back from the files."""
    out = []
    for p in sorted(spool.incoming.glob("submit-*.json")):
        req = json.loads(p.read_text())
        assert req["type"] == "submit"
        out.append(req["job"])
    return out


def job_row(job_id: int, **fields: Any) -> dict[str, Any]:
    """A complete job-table row, as the daemon writes it."""
    now = time.time()
    row: dict[str, Any] = {
        "id": job_id,
        "state": "PENDING",
        "user": "root",
        "uid": os.getuid(),
        "name": f"job{job_id}",
        "ncpus": 1,
        "walltime": 3600,
        "submit_time": now - 100,
        "start_time": None,
        "end_time": None,
        "cores": "",
        "exit_code": None,
        "exit_signal": None,
        "reason": "",
        "backfilled": 0,
        "restarts": 0,
        "preemptions": 0,
        "checkpoints": 0,
        "elapsed": 0.0,
        "lost": 0.0,
        "predicted_start": None,
        "segments": [],
        "run": {},
        "spec": {"stdout": f"/w/job{job_id}.o{job_id}", "stderr": f"/w/job{job_id}.e{job_id}", "workdir": "/w"},
    }
    row.update(fields)
    return row


def write_rows(spool: Spool, *rows: dict[str, Any], meta: dict[str, str] | None = None) -> None:
    """Write job rows (and meta keys) into the spool's state db, as the daemon would."""
    spool.ensure()
    db = StateDB(spool.db, write=True)
    try:
        db.begin()
        for r in rows:
            db.put(r)
        for k, v in (meta or {}).items():
            db.set_meta(k, v)
        db.commit()
    finally:
        db.close()


@pytest.fixture
def submits(spool: Spool) -> Callable[[], list[dict[str, Any]]]:
    return lambda: submitted(spool)


@pytest.fixture
def make_row() -> Callable[..., dict[str, Any]]:
    return job_row


@pytest.fixture
def put_rows(spool: Spool) -> Callable[..., None]:
    return lambda *rows, meta=None: write_rows(spool, *rows, meta=meta)
