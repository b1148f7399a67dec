"""grun runs a command as a job in the foreground, on a terminal or on grun's own streams.

What may be changed of a grun job that waits is tested in the daemon in process in test_grun_driven.py."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import termios
import time
from typing import Any

import psutil
import pytest

from gridsched.core import cpuset
from tests.conftest import BIN, wait_for

FULL = """
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
[machine]
cores = 2
[daemon]
autostart = false
"""


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs (each finds its own by its id, or as the one that
    came after the jobs there were): the module's daemon serves them all."""
    return shared_gs


def on_pty(gs, argv: list[str], script: list[tuple[Any, bytes]], timeout: float = 60) -> tuple[int, bytes]:
    """Run ``argv`` on a new pseudo-terminal; for each ``(wait, send)`` wait for ``wait`` in the output
    (or for ``wait(output)`` to be true), then type ``send``.  Returns the exit status and everything the
    terminal showed, and checks that the terminal's modes are as they were before."""
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=gs.env, cwd=gs.work, start_new_session=True
    )
    out = b""
    steps = list(script)
    seen = 0  # a step's wait text is looked for in what came after the step before
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if steps and (steps[0][0](out[seen:]) if callable(steps[0][0]) else steps[0][0] in out[seen:]):
                os.write(master, steps.pop(0)[1])
                seen = len(out)
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                out += os.read(master, 1 << 16)
            elif proc.poll() is not None:
                break  # grun has ended and the terminal holds nothing more
        proc.wait(max(1.0, deadline - time.monotonic()))
        assert termios.tcgetattr(slave) == before, "grun left the terminal's modes changed"
        return proc.returncode, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(slave)
        os.close(master)


def sleeping(gs) -> bool:
    """Whether the job's ``sleep 1007`` runs (bash has given it the terminal before it is exec'd)."""
    for p in psutil.process_iter():
        try:
            if p.cmdline() == ["sleep", "1007"] and p.environ().get("GS_SPOOL") == str(gs.spool):
                return True
        except psutil.Error:
            continue
    return False


def grun(gs, *args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return gs.run("grun", *args, input=input, timeout=timeout)


def grun_bg(gs, *args: str, stdout: int = subprocess.PIPE, stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """grun started in the background, its output as text."""
    return subprocess.Popen(
        [str(BIN / "grun"), *args], env=gs.env, cwd=gs.work, stdout=stdout, stderr=stderr, text=True
    )


def grun_sh(gs, script: str, **out: int) -> subprocess.Popen[str]:
    """``grun -t 60s sh -c SCRIPT`` in the background."""
    return grun_bg(gs, "-t", "60s", "sh", "-c", script, **out)


def test_pty_shell_runs_commands_on_the_job_cores_and_exits_with_the_shell_status(gs):
    env_shell = [str(BIN / "grun"), "-n", "2", "-t", "60s", "--pty", "env", "PS1=PROMPT> ", "bash"]
    rc, out = on_pty(
        gs,
        [*env_shell, "--norc", "--noprofile"],
        [
            (b"PROMPT> ", b"echo JOB=$GS_JOBID; taskset -cp $$; tty\r"),
            (b"/dev/pts/", b"exit 3\r"),
        ],
    )
    text = out.decode(errors="replace")
    assert rc == 3, text
    jid = int(re.search(r"JOB=(\d+)", text).group(1))
    job = gs.job(jid)
    assert job["state"] == "FAILED" and job["exit_code"] == 3
    shown = re.search(r"current affinity list: (\S+)", text)
    assert shown and cpuset.parse(shown.group(1)) == cpuset.parse(job["cores"]), (job, text)
    assert re.search(r"/dev/pts/\d+", text)
    acct = gs.run("gacct", "-j", str(jid), check=True).stdout
    assert str(jid) in acct and "FAILED" in acct


def test_ctrl_c_on_the_pty_reaches_the_foreground_command_not_grun(gs):
    rc, out = on_pty(
        gs,
        [str(BIN / "grun"), "-t", "60s", "--pty", "env", "PS1=PROMPT> ", "bash", "--norc", "--noprofile"],
        [
            (b"PROMPT> ", b"echo STA''RTED; sleep 1007\r"),
            (lambda out: b"STARTED" in out and sleeping(gs), b"\x03"),
            (b"PROMPT> ", b"echo SL''EEP=$?\r"),
            (b"SLEEP=", b"exit 4\r"),
        ],
    )
    text = out.decode(errors="replace")
    assert rc == 4, text
    assert "SLEEP=130" in text  # the shell's sleep got SIGINT through the terminal; bash and grun went on


def test_streams_are_grun_s_own_and_the_status_is_the_command_s(gs):
    cmd = (
        'cat; echo "dir=$(pwd) slurm=$SLURM_JOB_ID"; echo "tmp=$TMPDIR srun=$(command -v srun)"; echo oops >&2; exit 5'
    )
    r = grun(gs, "-n", "1", "sh", "-c", cmd, input="in\n")
    assert r.returncode == 5, r.stderr
    env = re.search(r"tmp=(\S+) srun=(\S+)", r.stdout)
    assert env and env.group(1).startswith(str(gs.tmp) + "/gridsched.")  # the job's private directory
    assert env.group(2) == os.path.join(os.path.dirname(env.group(1)), "bin", "srun")  # the job's own srun
    assert r.stdout.startswith("in\n")
    m = re.search(r"dir=(\S+) slurm=(\d+)", r.stdout)
    assert m and m.group(1) == str(gs.work)
    assert "oops" in r.stderr
    jid = int(m.group(2))
    gs.wait_state(jid, "FAILED")  # grun exits with the command; the daemon records the job's end just after


def test_a_command_killed_by_a_signal_gives_128_plus_n(gs):
    r = grun(gs, "sh", "-c", "kill -USR1 $$")
    assert r.returncode == 128 + signal.SIGUSR1, r.stderr


def test_an_unknown_command_is_127_with_one_line(gs):
    r = grun(gs, "no-such-command-here")
    assert r.returncode == 127
    assert "no-such-command-here: command not found" in r.stderr


def test_pty_without_a_terminal_is_refused(make_gs):
    gs = make_gs(start=False)  # refused before anything is submitted: no daemon needed
    r = grun(gs, "--pty", "true", input="")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["grun: error: --pty needs a terminal on standard input"]


def test_signals_to_grun_reach_the_command(gs):
    ready = gs.work / "ready"
    cmd = f"trap 'echo got-term; exit 9' TERM; touch {ready}; while :; do sleep 0.1; done"
    proc = grun_sh(gs, cmd)
    try:
        wait_for(ready.exists, 30, "the command to start")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 9, err
    assert "got-term" in out


def test_ctrl_c_while_waiting_cancels_the_job(make_gs):
    gs = make_gs(FULL)
    blocker = gs.gsub("-n", "2", "-t", "60s", "--wrap", "sleep 60")
    gs.wait_state(blocker, "RUNNING")
    proc = grun_bg(gs, "-n", "1", "-t", "60s", "true")
    try:
        mine = wait_for(lambda: [j for j in _jobs(gs) if j["id"] != blocker], 30, "grun's job to be queued")[0]
        assert mine["state"] == "PENDING"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 130, err
    assert f"job {mine['id']} cancelled while waiting" in err
    assert gs.wait_state(mine["id"], "CANCELLED")["state"] == "CANCELLED"
    gs.run("gdel", str(blocker))


def _jobs(gs) -> list[dict]:
    import json

    return json.loads(gs.run("gstat", "-a", "--json", check=True).stdout)["jobs"]


def test_walltime_kills_the_job_and_grun_says_so(gs):
    r = grun(gs, "-t", "2s", "sleep", "60")
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    m = re.search(r"grun: error: job (\d+) ended: TIMEOUT \(walltime reached\)", r.stderr)
    assert m, r.stderr
    assert gs.job(int(m.group(1)))["state"] == "TIMEOUT"


def newest(gs) -> int:
    """The highest job id there is (0 if none): the jobs of a test come after it."""
    return max((j["id"] for j in _jobs(gs)), default=0)


def test_the_job_ends_when_grun_dies(gs):
    ready = gs.work / "ready"
    before = newest(gs)
    proc = grun_sh(gs, f"touch {ready}; exec sleep 1001", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(ready.exists, 30, "the command to start")
        jid = next(j["id"] for j in _jobs(gs) if j["state"] == "RUNNING" and j["id"] > before)
        proc.kill()
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    job = gs.wait_state(jid, "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", timeout=30)
    assert job["state"] == "FAILED"  # the command was ended by the hang-up: 128+SIGTERM


def test_bad_options_and_no_command_are_one_line(make_gs):
    gs = make_gs(start=False)  # refused before anything is submitted: no daemon needed
    r = grun(gs)
    assert (r.returncode, r.stderr.strip()) == (2, "grun: error: give a command to run (or --pty for a shell)")
    r = grun(gs, "--gpu-bind", "closest", "true")
    assert r.returncode != 0 and r.stderr.strip().splitlines() == ["grun: error: --gpu-bind needs --gpus or --gres"]
    r = grun(gs, "-n", "0", "true")
    assert r.returncode == 2 and r.stderr.startswith("grun: error: ") and len(r.stderr.splitlines()) == 1


def test_walltime_of_a_pty_session_ends_it_and_grun_says_so(gs):
    rc, out = on_pty(gs, [str(BIN / "grun"), "-t", "2s", "--pty", "sleep", "60"], [])
    text = out.decode(errors="replace")
    assert rc == 128 + signal.SIGTERM, text  # the job's status, as gsub --wait gives it
    assert re.search(r"grun: error: job \d+ ended: TIMEOUT \(walltime reached\)", text), text


def test_a_grun_job_is_never_rerun(gs):
    """A rerun could not reconnect to grun: a rerunning checkpoint mode is refused, and grequeue refuses a grun
    job, running or finished, with one line (as Slurm requeues only batch jobs); the running one goes on."""
    r = grun(gs, "--checkpoint", "requeue", "true")
    assert (r.returncode, r.stderr.strip()) == (
        2,
        "grun: error: --checkpoint requeue: a grun job cannot be rerun (the rerun could not reconnect to grun); "
        "use none or suspend",
    )
    ready, go = gs.work / "ready", gs.work / "go"
    before = newest(gs)
    proc = grun_sh(gs, f"touch {ready}; while [ ! -e {go} ]; do sleep 0.1; done", stdout=subprocess.DEVNULL)
    try:
        wait_for(ready.exists, 30, "the command to start")
        jid = next(j["id"] for j in _jobs(gs) if j["state"] == "RUNNING" and j["id"] > before)
        refused = f"grequeue: error: job {jid}: a grun job cannot be requeued: its rerun could not reconnect to grun\n"
        r = gs.run("grequeue", str(jid))
        assert (r.returncode, r.stderr) == (1, refused)
        assert next(j for j in _jobs(gs) if j["id"] == jid)["state"] == "RUNNING"
        go.touch()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    job = gs.wait_state(jid, "COMPLETED", "FAILED", "CANCELLED", timeout=30)
    assert (job["state"], job["restarts"]) == ("COMPLETED", 0)
    r = gs.run("grequeue", str(jid))  # nor once it has ended
    assert (r.returncode, r.stderr) == (1, refused)
    assert gs.wait_state(jid, "COMPLETED", timeout=5)["restarts"] == 0


def test_a_configured_rerunning_default_is_none_for_grun(make_gs):
    gs = make_gs(FULL.replace('kill_grace = "1s"', 'kill_grace = "1s"\ncheckpoint = "requeue"'))
    r = grun(gs, "true")
    assert r.returncode == 0, r.stderr
    jid = _jobs(gs)[0]["id"]
    other = gs.gsub("--wrap", "true")
    for job, mode in ((jid, "none"), (other, "requeue")):  # the default still holds for other jobs
        shown = gs.run("gstat", "-f", str(job), check=True).stdout
        assert re.search(rf"^\s*checkpoint\s*[:=]?\s*{mode}\s*$", shown, re.M), shown
