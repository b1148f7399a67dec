"""State survives kill -9 of the daemon: nothing lost, nothing run twice."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from tests.conftest import wait_for


def test_kill9_during_a_run_loses_nothing_and_runs_nothing_twice(gs):
    gs.run("gsub", "--help", check=True)
    ledger = gs.work / "ledger"
    # a: runs across the crash and ends after the restart (it waits for this file, bounded)
    go_a = gs.work / "go-a"
    a = gs.gsub(
        "-n",
        "4",
        "--wrap",
        f"echo start-$GS_JOBID >> {ledger}; i=0; while [ ! -e {go_a} ] && "
        f"[ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo end-$GS_JOBID >> {ledger}",
    )
    # b: ends while the daemon is down
    go = gs.work / "go"  # b ends once the daemon is down: it waits for this file, bounded
    b = gs.gsub(
        "-n",
        "4",
        "--wrap",
        f"echo start-$GS_JOBID >> {ledger}; i=0; while [ ! -e {go} ] && "
        f"[ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo end-$GS_JOBID >> {ledger}; exit 7",
    )
    # c: pending behind a and b, must run exactly once after the restart
    c = gs.gsub("-n", "8", "--wrap", f"echo start-$GS_JOBID >> {ledger}; echo end-$GS_JOBID >> {ledger}")
    gs.wait_state(a, "RUNNING")
    gs.wait_state(b, "RUNNING")
    # the jobs themselves are under way (RUNNING is shown from the start's decision on)
    started = {f"start-{a}", f"start-{b}"}
    wait_for(lambda: ledger.exists() and started <= set(ledger.read_text().split()), 15, "a and b to start")
    assert gs.job(c)["state"] == "PENDING"
    gs.kill9()
    go.touch()
    wait_for(lambda: f"end-{b}" in ledger.read_text(), 15, "job b to end while the daemon is down")
    assert gs.job(a)["state"] == "RUNNING"  # gstat works while the daemon is down
    gs.start()
    go_a.touch()
    assert gs.wait_state(b, "FAILED")["exit_code"] == 7
    assert gs.wait_state(a, "COMPLETED")["exit_code"] == 0
    assert gs.wait_state(c, "COMPLETED")["exit_code"] == 0
    lines = ledger.read_text().split()
    for jid in (a, b, c):
        assert lines.count(f"start-{jid}") == 1, lines
        assert lines.count(f"end-{jid}") == 1, lines


def test_kill9_with_queued_jobs_and_a_second_daemon_is_refused(gs):
    ids = [gs.gsub("--hold", "--wrap", "true") for _ in range(3)]
    gs.wait_state(ids[0], "HELD")
    r = gs.run("gschedd", "run")
    assert r.returncode != 0
    assert str(gs.proc.pid) in r.stderr + r.stdout
    gs.kill9()
    gs.start()
    for jid in ids:
        assert gs.job(jid)["state"] == "HELD"


def test_garbage_in_the_spool_is_quarantined(gs):
    inc = gs.spool / "incoming"
    (inc / "submit-0000000999.json").write_bytes(b"\x00\x01garbage")
    (inc / "cancel-1-1.json").write_text('{"type": "cancel", "jobs": [')
    (inc / "weird.json").write_text('{"type": "explode"}')
    (inc / "submit-0000000998.json").write_text('{"type": "submit", "job": {"id": "x"}}')
    os.symlink("/etc/passwd", inc / "submit-0000000997.json")
    jid = gs.gsub("--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
    q = gs.spool / "quarantine"
    wait_for(lambda: len(list(q.glob("*.why"))) == 5, 10, "five quarantined requests")
    assert not any(inc.iterdir())
    assert gs.alive()
    assert "quarantined" in gs.log()


def test_exit_75_of_a_signal_mode_job_is_a_checkpoint_even_unrecorded(gs):
    # as after a crash that lost the record of the checkpoint request: the job says "saved, restart me"
    jid = gs.gsub(
        "--checkpoint",
        "signal",
        "--wrap",
        'echo run-$GS_RESTART_COUNT >> runs; [ "$GS_RESTART_COUNT" = 0 ] && exit 75; exit 0',
    )
    j = gs.wait_state(jid, "COMPLETED")
    assert j["restarts"] == 1 and j["checkpoints"] == 1
    assert (gs.work / "runs").read_text().split() == ["run-0", "run-1"]


def test_kill9_mid_drain_leaves_no_private_directory_cgroup_or_process(gs):
    """A daemon killed while short jobs start and end one after another (their shepherds tell it each end, then
    remove the job's private directory): once a restarted daemon has recovered them and run the rest, no job's
    private directory, cgroup or process is left."""
    from gridsched.api.client import Client
    from gridsched.daemon import cgroup, confine

    client = Client(gs.spool, str(gs.cfgfile))
    ids = [
        client.submit(
            command="true", ncpus=1, walltime=60, output="/dev/null", error="/dev/null", chdir=str(gs.work)
        ).id
        for _ in range(60)
    ]

    def states() -> list[str]:
        return [j["state"] for j in gs.gstat_json()["jobs"] if j["id"] in ids]

    wait_for(lambda: states().count("COMPLETED") >= 10, 30, "ten jobs to end")
    gs.kill9()
    gs.start()
    wait_for(lambda: set(states()) <= {"COMPLETED", "FAILED"}, 60, "every job to end")
    assert states() == ["COMPLETED"] * len(ids), gs.log()
    names = {cgroup.job_name(str(gs.spool / "jobs" / str(jid)), seg) for jid in ids for seg in (1, 2)}
    s = confine.setup()
    places = [p.base for p in (s.track, s.pids, s.cpuset) if p is not None]
    daemon = gs.proc.pid if gs.proc is not None else -1

    def left() -> list[str]:
        found = [str(p) for p in gs.tmp.iterdir()]
        found += [str(b / n) for b in places for n in names if (b / n).exists()]
        for p in gs.processes():  # the daemon and its shepherds' starter are all that may run
            try:
                if p.pid != daemon and not (p.ppid() == daemon and "gridsched.daemon.starter" in " ".join(p.cmdline())):
                    found.append(f"process {p.pid}: {p.cmdline()}")
            except psutil.Error:
                continue
        return found

    try:
        wait_for(lambda: not left(), 15, "the jobs' private directories, cgroups and processes to be gone")
    except AssertionError:
        raise AssertionError(f"left behind: {left()}") from None


def test_a_job_s_end_is_recorded_while_its_shepherd_still_removes_its_private_directory(gs):
    """The shepherd tells the daemon of the job's end (its exit file written) before it removes the job's private
    directory: the end is recorded, and the next job may start, while the removal goes on; then it is gone."""
    import sqlite3

    where = gs.work / "private"
    # thirty thousand files in TMPDIR: their removal takes a while after the job's end
    jid = gs.gsub("--wrap", f'cd "$TMPDIR" && seq 1 30000 | xargs touch && dirname "$TMPDIR" > {where}')
    db = sqlite3.connect(f"file:{gs.spool / 'state.db'}?mode=ro", uri=True)

    def state() -> str | None:
        try:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (jid,)).fetchone()
        except sqlite3.Error:
            return None
        return row[0] if row else None

    wait_for(lambda: state() in ("COMPLETED", "FAILED"), 60, "the job to end")
    private = Path(where.read_text().strip())
    assert state() == "COMPLETED"
    assert private.exists(), "the private directory was removed before the end was recorded"
    wait_for(lambda: not private.exists(), 60, "the private directory to be removed")
    db.close()
