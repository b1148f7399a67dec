"""gsim tune --write: the best setting of the grid into a configuration file the daemon loads."""

from __future__ import annotations

import json
import tomllib

from click.testing import CliRunner
from simtraces import HAND

from gridsched.cli.gsim import main
from gridsched.protocol.config import load


def gsim(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="gsim")


def test_the_best_setting_is_written_and_loads(write_trace, tmp_path):
    path = write_trace(HAND, max_procs=4)
    cfg = tmp_path / "site.toml"
    cfg.write_text('[jobs]\ndefault_walltime = "2h"\n')
    res = gsim("tune", path, "--p", "0.1,0.4", "--threshold", "5m,1h", "--json", "--write", str(cfg))
    assert res.exit_code == 0, res.output
    best = json.loads(res.stdout)["best"]
    data = tomllib.loads(cfg.read_text())
    assert data["scheduler"] == {"policy": "checkpoint-backfill", "p": best["p"], "threshold": int(best["threshold"])}
    assert data["jobs"] == {"default_walltime": "2h"}  # the file's other settings are kept
    loaded = load(str(cfg))
    assert (loaded.params.p, loaded.params.threshold) == (best["p"], best["threshold"])
    assert f"to {cfg} (the previous file: {cfg}.bak)" in res.stderr


def test_write_where_it_cannot(write_trace, tmp_path):
    res = gsim("tune", write_trace(HAND, max_procs=4), "--write", str(tmp_path / "no" / "such.toml"))
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines()[-1].startswith("gsim: error: --write: cannot write ")
    assert not (tmp_path / "no").exists()
