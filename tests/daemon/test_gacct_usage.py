"""gacct on a real daemon: what jobs used (MaxRSS, CPU time), --format and --parsable read back, and
OUT_OF_MEMORY for a job its memory cgroup killed.  Array tasks as ID_N: test_gacct_driven.py; an unknown
field: tests/cli/test_gacct.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gridsched.daemon import cgroup
from tests.conftest import wait_for


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs: the module's daemon serves them all."""
    return shared_gs


PY = sys.executable
# touches every page of 60 MiB, so that it is resident, then holds it a moment
ALLOC = f"{PY} -c 'import time; b = bytearray(60 << 20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(0.2)'"
BUSY = f"{PY} -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass'"
MiB = 1 << 20


def acct(gs, *args: str) -> dict[str, dict]:
    r = gs.run("gacct", "--json", *args, check=True)
    return {j["jobid"]: j for j in json.loads(r.stdout)["jobs"]}


def exit_record(gs, jid: int, seg: int = 1) -> dict:
    return json.loads(Path(gs.spool, "jobs", str(jid), f"seg-{seg}.exit").read_text())


def test_max_rss_and_cpu_time_are_measured(gs):
    mem = gs.gsub("-t", "1m", "--wrap", ALLOC)
    busy = gs.gsub("-t", "1m", "--wrap", BUSY)
    idle = gs.gsub("-t", "1m", "--wrap", "sleep 0.5")
    for jid in (mem, busy, idle):
        gs.wait_state(jid, "COMPLETED")
    a = acct(gs)
    m, b, i = a[str(mem)], a[str(busy)], a[str(idle)]
    print("MaxRSS of the 60 MiB job:", m["max_rss"], "TotalCPU of the 1 s loop:", b["total_cpu"])
    assert 60 * MiB <= m["max_rss"] < 200 * MiB
    assert exit_record(gs, mem)["usage"]["rss_from"] == "rusage"  # no --mem: no cgroup
    assert b["total_cpu"] >= 0.8 and b["cpu_user"] > 0  # the clock reads of the loop are system time
    assert b["total_cpu"] == pytest.approx(b["cpu_user"] + b["cpu_sys"], abs=1e-5)
    assert i["total_cpu"] < 0.5 and i["max_rss"] < 60 * MiB

    r = gs.run("gacct", "-j", f"{mem},{busy}", "-o", "JobID,State,MaxRSS,TotalCPU,UserCPU,SystemCPU", "-P", check=True)
    head, *lines = (ln.split("|") for ln in r.stdout.splitlines())
    assert head == ["JobID", "State", "MaxRSS", "TotalCPU", "UserCPU", "SystemCPU"]
    rows = {ln[0]: ln for ln in lines}
    assert set(rows) == {str(mem), str(busy)} and all(len(ln) == 6 for ln in lines)
    rss = rows[str(mem)][2]
    assert rss[-1] in "KMG" and int(rss[:-1]) * {"K": 1024, "M": MiB, "G": 1 << 30}[rss[-1]] >= 60 * MiB
    minutes, seconds = rows[str(busy)][3].split(":")
    assert int(minutes) == 0 and float(seconds) >= 0.8  # MM:SS.mmm


def test_usage_from_the_cgroup_of_a_job_with_mem(gs):
    if cgroup.hierarchy() is None:
        print("no writable memory cgroup on this host: usage comes from rusage alone")
        pytest.skip("no writable memory cgroup on this host")
    jid = gs.gsub("-t", "1m", "--mem", "300M", "--wrap", ALLOC)
    gs.wait_state(jid, "COMPLETED")
    usage = exit_record(gs, jid)["usage"]
    assert usage["rss_from"] == "cgroup"
    print("MaxRSS of the 60 MiB job, from its cgroup:", usage["max_rss"])
    assert 60 * MiB <= acct(gs)[str(jid)]["max_rss"] < 300 * MiB


def test_usage_survives_a_restart_of_the_daemon(make_gs):
    gs = make_gs()  # a daemon of its own: it is killed and stopped
    go, started = gs.work / "go", gs.work / "started"
    wait_go = f"i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"
    jid = gs.gsub("-t", "1m", "--wrap", f"touch {started}; {wait_go}; {BUSY}")
    gs.wait_state(jid, "RUNNING")
    wait_for(started.exists, 15, "the job to be under way")  # RUNNING is shown from the start's decision on
    gs.kill9()
    go.touch()  # the job runs its loop and ends while the daemon is down: its shepherd measures it
    wait_for(lambda: Path(gs.spool, "jobs", str(jid), "seg-1.exit").exists(), 20, "the job to end")
    gs.start()
    gs.wait_state(jid, "COMPLETED")
    assert acct(gs)[str(jid)]["total_cpu"] >= 0.8
    gs.stop()
    gs.start()
    assert acct(gs)[str(jid)]["total_cpu"] >= 0.8  # kept in the state db


HOG = f'{PY} -c \'b = bytearray(200 << 20); b[::4096] = b"x" * len(b[::4096]); print("survived")\''


def test_out_of_memory_is_a_state_of_its_own(gs):
    if cgroup.hierarchy() is None:
        print("no writable memory cgroup on this host: --mem is RLIMIT_AS, a failed allocation is FAILED")
        pytest.skip("no writable memory cgroup on this host: OUT_OF_MEMORY cannot be told apart")
    hog = gs.gsub("-t", "1m", "--mem", "50M", "--wrap", f"exec {HOG}")
    ok = gs.gsub("-t", "1m", "-d", f"afterok:{hog}", "--wrap", "touch ok-ran")
    notok = gs.gsub("-t", "1m", "-d", f"afternotok:{hog}", "--wrap", "touch notok-ran")
    j = gs.wait_state(hog, "OUT_OF_MEMORY", timeout=30)
    assert j["exit_signal"] == 9 and "out of memory (limit 50M)" in j["reason"]
    gs.wait_state(notok, "COMPLETED")
    assert (gs.work / "notok-ran").exists()
    wait_for(lambda: "never satisfied" in gs.job(ok)["reason"], 10, "the afterok dependent to be never satisfied")
    assert gs.job(ok)["state"] == "PENDING" and not (gs.work / "ok-ran").exists()
    rec = acct(gs, "-s", "OOM")
    assert list(rec) == [str(hog)] and rec[str(hog)]["max_rss"] <= 60 * MiB
    r = gs.run("gacct", "-j", str(hog), "-o", "JobID,State,ExitCode,ReqMem", "-P", "-n", check=True)
    assert r.stdout == f"{hog}|OUT_OF_MEMORY|0:9|50M\n"
    r = gs.run("gstat", "-a", "-j", str(hog), "--format", "%i %t", check=True)
    assert r.stdout.splitlines()[1].split() == [str(hog), "OOM"]  # Slurm's short code


def test_a_checkpointed_job_sums_its_segments(gs):
    # the first segment saves its state (exit 75) after a busy second; the second one runs another second
    jid = gs.gsub(
        "-t",
        "1m",
        "--checkpoint",
        "signal",
        "--wrap",
        f'{BUSY}; [ "$GS_RESTART_COUNT" = 0 ] && exit 75; {ALLOC}',
    )
    j = gs.wait_state(jid, "COMPLETED")
    assert j["restarts"] == 1
    first, second = (exit_record(gs, jid, seg)["usage"] for seg in (1, 2))
    rec = acct(gs)[str(jid)]
    assert rec["cpu_user"] == pytest.approx(first["cpu_user"] + second["cpu_user"], abs=1e-5)
    assert rec["cpu_sys"] == pytest.approx(first["cpu_sys"] + second["cpu_sys"], abs=1e-5)
    assert rec["total_cpu"] >= 1.6  # two busy seconds
    assert rec["max_rss"] == max(first["max_rss"], second["max_rss"]) >= 60 * MiB
    assert first["max_rss"] < 60 * MiB  # the 60 MiB were in the second segment only


def test_an_older_job_table_gets_the_usage_columns(tmp_path):
    import sqlite3

    from gridsched.protocol import state
    from gridsched.protocol.state import COLUMNS, StateDB

    path = tmp_path / "state.db"
    con = sqlite3.connect(path)
    con.executescript(state.SCHEMA)  # the jobs table as an older version made it
    row = {c: 0 for c in COLUMNS}
    row.update(state="COMPLETED", user="u", name="n", cores="0", segments="[]", run="{}", spec="{}")
    con.execute(
        f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", [row[c] for c in COLUMNS]
    )
    con.commit()
    con.close()
    ro = StateDB(path)
    assert [ro.jobs()[0][c] for c in ("max_rss", "cpu_user", "cpu_sys")] == [None, None, None]  # not measured
    ro.close()
    db = StateDB(path, write=True)
    db.begin()
    db.update(0, **state.usage([{"usage": {"max_rss": 5 << 20, "cpu_user": 1.5, "cpu_sys": 0.25}}, {}]))
    assert db.commit()
    assert [db.jobs()[0][c] for c in ("max_rss", "cpu_user", "cpu_sys")] == [5 << 20, 1.5, 0.25]
    db.close()
    assert state.usage([{"start": 1.0, "end": 2.0}]) == {"max_rss": None, "cpu_user": None, "cpu_sys": None}
