"""Why pending jobs wait, in the real daemon: the core's reasons as gstat shows them.

The default test machine: 8 declared cores, fcfs.
"""

from __future__ import annotations

import json

from tests.conftest import wait_for
from tests.daemon.test_topology import WAIT_GO


def jobs(gs) -> tuple[str, dict[int, dict]]:
    out = gs.run("gstat", "--json", check=True).stdout
    return out, {j["id"]: j for j in json.loads(out)["jobs"]}


def test_gstat_shows_resources_priority_and_never(gs):
    gs.run("gctl", "drain", "6-7", "--reason", "fan", check=True)
    blocker = gs.gsub("-n", "6", "-t", "60s", "--wrap", WAIT_GO)
    gs.wait_state(blocker, "RUNNING")
    nxt = gs.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    after = gs.gsub("-n", "4", "-t", "60s", "--wrap", "true")
    never = gs.gsub("-n", "7", "-t", "60s", "--wrap", "true")

    def told() -> tuple[str, dict[int, dict]] | None:
        out, js = jobs(gs)
        return (
            (out, js)
            if all(js[j]["reason"].startswith(("Resources", "Priority", "can")) for j in (nxt, after, never))
            else None
        )

    out, js = wait_for(told, 20, "the reasons")
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
    table = {
        line.split()[0]: line
        for line in gs.run("gstat", check=True).stdout.splitlines()[1:]
        if line.split() and line.split()[0].isdigit()
    }
    assert "Resources" in table[str(nxt)] and "Priority" in table[str(after)]
    assert "can never start" in table[str(never)]
    # the blocker ends: both start and lose their reason; the 7-core job still never starts
    (gs.work / "go").touch()
    gs.wait_state(nxt, "COMPLETED", "RUNNING")
    gs.wait_state(after, "COMPLETED", "RUNNING")
    assert gs.job(nxt)["reason"] == "" and gs.job(after)["reason"] == ""
    assert gs.job(never)["state"] == "PENDING"
    gs.run("gctl", "resume", "6-7", check=True)
    gs.wait_state(never, "RUNNING", "COMPLETED")


def test_the_daemon_words_each_reason_the_core_gives():
    from types import SimpleNamespace

    from gridsched.core.placement import Request
    from gridsched.core.types import Wait, WaitKind
    from gridsched.daemon import reasons

    rec = SimpleNamespace(place=Request(5, "board"), begin=None)
    words = {
        Wait(WaitKind.NEVER_FITS, what="cores", asks=12, has=8): (
            "can never start with the cores of this machine: it asks for 12, 8 are in service (see gctl topology)"
        ),
        Wait(WaitKind.NEVER_FITS, what="placement", asks=5, has=4): (
            "can never start with the cores of this machine: it asks for 5 cores with --place board, "
            "and no board has more than 4 in service (see gctl topology)"
        ),
        Wait(WaitKind.NEVER_FITS, what="matlab", asks=3, has=2): (
            "can never start: it asks for matlab=3, the machine has matlab=2"
        ),
        Wait(WaitKind.NEVER_FITS, what="unknown", text="nope"): "can never start: the machine has no resource nope",
        Wait(WaitKind.DRAINED, cores=frozenset({4, 5, 6, 7})): (
            "waiting for cores, while cores 4-7 are drained (see gctl topology)"
        ),
        Wait(WaitKind.RESERVATION, resv=9): "Reservation: waiting for reservation 9 to be activated",
        Wait(WaitKind.RESOURCES, resv=9): "Resources: waiting for room in reservation 9",
        Wait(WaitKind.DEPENDENCY, "waiting for dependency afterok:3: job 3 is RUNNING"): (
            "waiting for dependency afterok:3: job 3 is RUNNING"
        ),
    }
    for wait, text in words.items():
        assert reasons.text(None, rec, wait) == text  # type: ignore[arg-type]
    from gridsched.core.devices import DeviceAsk

    gpu = SimpleNamespace(place=None, begin=None, dev_asks=(DeviceAsk("gpu", 3, "H100"),))
    for wait in (
        Wait(WaitKind.NEVER_FITS, what="device:gpu:H100", asks=3, has=2),
        Wait(WaitKind.NEVER_FITS, what="unknown", text="device:gpu:H100"),
    ):
        assert reasons.text(None, gpu, wait) == (  # type: ignore[arg-type]
            "can never start: --gpus H100:3: the machine does not have these devices (gctl topology)"
        )


LICENCE = """
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
[machine]
cores = 4
[resources.floating]
matlab = 2
[daemon]
autostart = false
"""


def _coded(gs, ids: list[int], want: dict[int, str]) -> dict[int, dict]:
    """gstat --json's records of ``ids`` once each has the REASON code ``want`` gives it."""

    def ok() -> dict[int, dict] | None:
        _, js = jobs(gs)
        return js if all(js[j]["reason_code"] == want[j] for j in ids) else None

    try:
        return wait_for(ok, 20, f"the reason codes {want}")
    except AssertionError:
        raise AssertionError(f"not the codes {want}: {jobs(gs)[0]}") from None


def test_a_job_short_only_of_a_licence_shows_licenses(make_gs):
    gs = make_gs(LICENCE)
    holder = gs.gsub("-n", "1", "-l", "matlab=2", "--wrap", WAIT_GO)
    gs.wait_state(holder, "RUNNING")
    # next to start, it lacks cores (Resources, with the counts); behind it, a job that lacks only the
    # licence (easy would backfill it on the free cores): Licenses
    big = gs.gsub("-n", "4", "--wrap", "true")
    lic = gs.gsub("-n", "1", "-l", "matlab=1", "--wrap", "true")
    js = _coded(gs, [lic, big], {lic: "Licenses", big: "Resources"})
    assert js[lic]["reason"] == "Licenses: waiting for matlab=1 (0 of 2 free)"
    assert js[big]["reason"] == "Resources: next to start, waiting for 4 cores (3 of 4 free)"
    assert js[holder]["reason_code"] == ""
    # the table's REASON column has the same codes
    table = {
        line.split()[0]: line.split()
        for line in gs.run("gstat", check=True).stdout.splitlines()[1:]
        if line.split() and line.split()[0].isdigit()
    }
    assert "Licenses" in table[str(lic)] and "Resources" in table[str(big)]
    (gs.work / "go").touch()
    for j in (holder, lic, big):
        gs.wait_state(j, "COMPLETED")
    assert gs.job(lic)["reason"] == ""


def test_a_job_short_only_of_gpus_names_them(make_gs):
    from tests.daemon.test_devices import topo_config

    gs = make_gs(start=False)
    gs.cfgfile.write_text(topo_config(gs.root))
    gs.start()
    holders = [gs.gsub("-n", "1", "--gpus", "2", "--wrap", WAIT_GO) for _ in range(2)]
    for j in holders:
        gs.wait_state(j, "RUNNING")
    gpu = gs.gsub("-n", "1", "--gpus", "2", "--wrap", "true")
    js = _coded(gs, [gpu], {gpu: "Resources"})
    assert js[gpu]["reason"] == "Resources: next to start, waiting for 2 gpu (4 of 4 in use)"
    out = gs.run("gstat", "-f", str(gpu), check=True).stdout
    assert "waiting for 2 gpu (4 of 4 in use)" in out
    (gs.work / "go").touch()
    gs.wait_state(gpu, "COMPLETED")
