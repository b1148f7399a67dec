"""gsub refuses what the daemon would refuse under [limits], in one line, from the configuration it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridsched.cli import gsub
from gridsched.protocol.config import ConfigError, parse
from tests.cli.conftest import submitted
from tests.cli.test_gsub import one_error_line


def limited(env: Path) -> None:
    cfg = env / "cfg.toml"
    cfg.write_text(cfg.read_text() + "[limits]\nmax_array_tasks = 10\nmax_cpus_per_user = 4\n")


def test_gsub_refuses_an_array_over_max_array_tasks(env, spool, run):
    limited(env)
    r = run(gsub.cli, ["--array", "0-10", "--wrap", "true"])
    assert r.exit_code == 1
    assert one_error_line(r.stderr) == (
        "gsub: error: array of 11 tasks: at most 10 tasks per array (limits.max_array_tasks)"
    )
    assert submitted(spool) == []
    assert run(gsub.cli, ["--array", "0-99:10", "--wrap", "true"]).exit_code == 0  # ten tasks


def test_gsub_refuses_a_job_over_max_cpus_per_user(env, spool, run):
    limited(env)
    r = run(gsub.cli, ["-n", "5", "--wrap", "true"])
    assert r.exit_code == 1
    assert one_error_line(r.stderr) == (
        "gsub: error: job of 5 cores: a user's running jobs may hold at most 4 (limits.max_cpus_per_user)"
    )
    assert submitted(spool) == []
    assert run(gsub.cli, ["-n", "4", "--wrap", "true"]).exit_code == 0


def test_the_configuration_checks_the_new_keys():
    cfg = parse({"limits": {"max_submit_jobs_per_user": 5}, "reservations": {"users": ["bob", "*"]}})
    assert cfg.max_submit_jobs_per_user == 5 and cfg.resv_users == ("bob", "*")
    assert parse({"reservations": {"max_duration_per_user": "2h"}}).resv_max_duration_per_user == 7200
    for data, key in (
        ({"limits": {"max_cpus_per_user": -1}}, "limits.max_cpus_per_user"),
        ({"limits": {"max_array_tasks": "x"}}, "limits.max_array_tasks"),
        ({"limits": {"nosuch": 1}}, "limits.nosuch"),
        ({"reservations": {"users": "bob"}}, "reservations.users"),
        ({"reservations": {"users": [""]}}, "reservations.users"),
        ({"reservations": {"max_duration_per_user": "soon"}}, "reservations.max_duration_per_user"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            parse(data)
