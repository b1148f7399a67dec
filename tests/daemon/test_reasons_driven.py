"""Why pending jobs wait, in the daemon (in process: stub executor, driven clock): the core's reasons as gstat
shows them.

The default test machine: 8 declared cores, fcfs.  gstat runs in process on the daemon's spool.
"""

from __future__ import annotations

import json

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven
from tests.daemon.test_reasons import LICENCE


def jobs(dr: Driven) -> tuple[str, dict[int, dict]]:
    out = dr.command("gstat", "--json", turn=False).stdout
    return out, {j["id"]: j for j in json.loads(out)["jobs"]}


def table(dr: Driven) -> dict[str, str]:
    return {
        line.split()[0]: line
        for line in dr.command("gstat", turn=False).stdout.splitlines()[1:]
        if line.split() and line.split()[0].isdigit()
    }


def test_gstat_shows_resources_priority_and_never(stub_daemon):
    dr = Driven(stub_daemon(DEFAULT_CONFIG))
    dr.command("gctl", "drain", "6-7", "--reason", "fan")
    blocker = dr.gsub("-n", "6", "-t", "60s", "--wrap", "wait for go", work=None)
    assert dr.running(blocker)
    nxt = dr.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    after = dr.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    never = dr.gsub("-n", "7", "-t", "60s", "--wrap", "true")
    out, js = jobs(dr)
    # the next job waits for the blocker's cores; the one after it for it (the drained cores would not
    # be enough for either: both wait for the blocker, not for the drain)
    assert js[nxt]["reason"] == "Resources: next to start, waiting for 4 cores (0 of 6 free)"
    assert js[after]["reason"] == "Priority: waiting for jobs ahead of it in the queue to start first"
    assert js[nxt]["predicted_start"] is not None and js[after]["predicted_start"] is not None
    # seven cores, with two drained: never, no predicted start, and no Infinity in the JSON
    assert js[never]["reason"] == "can never start while cores 6-7 are drained (see gctl topology)"
    assert js[never]["predicted_start"] is None
    assert "Infinity" not in out and "NaN" not in out
    # the table's NOTE: Slurm's word for each
    t = table(dr)
    assert "Resources" in t[str(nxt)] and "Priority" in t[str(after)]
    assert "can never start" in t[str(never)]
    # the blocker ends: both start and lose their reason; the 7-core job still never starts
    dr.finish(blocker)
    dr.run_until(lambda: dr.state(after) in ("RUNNING", "COMPLETED"), 5)
    assert dr.state(nxt) in ("RUNNING", "COMPLETED")
    assert dr.job(nxt)["reason"] == "" and dr.job(after)["reason"] == ""
    assert dr.state(never) == "PENDING"
    dr.command("gctl", "resume", "6-7")
    dr.run_until(lambda: dr.state(never) in ("RUNNING", "COMPLETED"), 5)


def test_a_job_short_only_of_a_licence_shows_licenses(stub_daemon):
    dr = Driven(stub_daemon(LICENCE))
    holder = dr.gsub("-n", "1", "-l", "matlab=2", "--wrap", "wait for go", work=None)
    assert dr.running(holder)
    # next to start, it lacks cores (Resources, with the counts); behind it, a job that lacks only the
    # licence (easy would backfill it on the free cores): Licenses
    big = dr.gsub("-n", "4", "--wrap", "true")
    lic = dr.gsub("-n", "1", "-l", "matlab=1", "--wrap", "true")
    _, js = jobs(dr)
    assert (js[lic]["reason_code"], js[big]["reason_code"]) == ("Licenses", "Resources")
    assert js[lic]["reason"] == "Licenses: waiting for matlab=1 (0 of 2 free)"
    assert js[big]["reason"] == "Resources: next to start, waiting for 4 cores (3 of 4 free)"
    assert js[holder]["reason_code"] == ""
    # the table's REASON column has the same codes
    t = table(dr)
    assert "Licenses" in t[str(lic)] and "Resources" in t[str(big)]
    dr.finish(holder)
    dr.run_until(lambda: all(dr.state(j) == "COMPLETED" for j in (holder, lic, big)), 5)
    assert dr.job(lic)["reason"] == ""


def test_a_job_short_only_of_gpus_names_them(stub_daemon, tmp_path):
    from tests.daemon.test_devices import topo_config

    dr = Driven(stub_daemon(topo_config(tmp_path)))
    holders = [dr.gsub("-n", "1", "--gpus", "2", "--wrap", "wait for go", work=None) for _ in range(2)]
    assert all(dr.running(j) for j in holders)
    gpu = dr.gsub("-n", "1", "--gpus", "2", "--wrap", "true")
    _, js = jobs(dr)
    assert js[gpu]["reason_code"] == "Resources"
    assert js[gpu]["reason"] == "Resources: next to start, waiting for 2 gpu (4 of 4 in use)"
    out = dr.command("gstat", "-f", str(gpu), turn=False).stdout
    assert "waiting for 2 gpu (4 of 4 in use)" in out
    dr.finish(holders[0])
    dr.run_until(lambda: dr.state(gpu) == "COMPLETED", 5)
