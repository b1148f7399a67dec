"""Slurm, PBS and Torque scripts submitted with gsub and run by the real daemon as those systems run them:
the interpreter, the output files.  The walltime, memory and begin time read from the directives are tested in
process, on a driven clock, in test_compat_driven.py."""

from __future__ import annotations

import json
import os
import pwd

import pytest

from gridsched.protocol import requests as rq
from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB
from tests.conftest import wait_for
from tests.fuzz.test_requests import valid_job


@pytest.fixture
def gs(shared_gs):
    """These tests are independent of each other's jobs: the module's daemon serves them all."""
    return shared_gs


DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
LOGIN = pwd.getpwuid(os.getuid()).pw_shell


def jobs(gs) -> list[dict]:
    return json.loads(gs.run("gstat", "-a", "--json", check=True).stdout)["jobs"]


def spec(gs, jid: int) -> dict:
    db = StateDB(Spool(gs.spool).db)
    try:
        row = db.job(jid)
    finally:
        db.close()
    assert row is not None
    return row["spec"]


def raw_submit(gs, **fields) -> int:
    """Publish a submission as a command would, without the command's checks; its id."""
    spool = Spool(gs.spool)
    nid = spool.next_id()
    job = {**valid_job(nid), "workdir": str(gs.work), "stdout": str(gs.work / "o"), "stderr": str(gs.work / "e")}
    spool.publish_new(rq.id_name(nid), rq.encode({"type": "submit", "job": {**job, **fields}}))
    return nid


def wait_array(gs, aid: int, n: int) -> list[dict]:
    def finished():
        tasks = [j for j in jobs(gs) if j["array_id"] == aid]
        return len(tasks) == n and all(j["state"] in DONE for j in tasks) and tasks

    return sorted(wait_for(finished, 60, f"the {n} tasks of array {aid}"), key=lambda j: j["array_index"])


# A PBS array script whose #! is on line 2 (line 1 is blank): PBS runs it under the login shell.
LINE2_PBS = """
#!/bin/bash
#PBS -N par
#PBS -J 1-4
#PBS -l walltime=60
if (( GS_ARRAY_TASK_ID % 2 )); then echo "odd $GS_ARRAY_TASK_ID"; else echo "even $GS_ARRAY_TASK_ID"; fi
"""


@pytest.mark.skipif(os.path.basename(LOGIN or "") != "bash", reason=f"the login shell is {LOGIN}, not bash")
def test_a_pbs_array_script_with_its_shebang_on_line_2_runs_under_the_login_shell(gs):
    script = gs.work / "par.sh"
    script.write_text(LINE2_PBS)
    r = gs.run("gsub", str(script), check=True)
    aid = int(r.stdout.split()[-1])
    assert "warning" not in r.stderr  # the login shell is the bash the #! line names
    tasks = wait_array(gs, aid, 4)
    assert [t["state"] for t in tasks] == ["COMPLETED"] * 4, gs.log()
    for t in tasks:
        i = t["array_index"]
        out = (gs.work / f"par.o{aid}.{i}").read_text()  # PBS Pro: a subjob's file is JOBNAME.oSEQ.INDEX
        assert out == f"{'odd' if i % 2 else 'even'} {i}\n"
        assert (gs.work / f"par.e{aid}.{i}").read_text() == ""  # no "((: not found" from dash
    assert tasks[0]["walltime"] == 60  # a bare PBS walltime is seconds


def test_pbs_S_runs_a_script_without_shebang_under_that_shell(gs):
    script = gs.work / "s.sh"
    script.write_text('#PBS -N sh\n#PBS -S /bin/bash\n[[ -n "$BASH_VERSION" ]] && echo "bash $((6 * 7))"\n')
    jid = gs.gsub(str(script))
    assert gs.wait_state(jid, *DONE)["state"] == "COMPLETED", gs.log()
    assert (gs.work / f"sh.o{jid}").read_text() == "bash 42\n"
    assert spec(gs, jid)["shell"] == "/bin/bash"


def test_a_slurm_script_without_o_writes_slurm_jobid_out_with_stderr_joined(gs):
    script = gs.work / "s.sh"
    script.write_text("#!/bin/sh\n#SBATCH -J sl\n#SBATCH -t 5\necho to-out\necho to-err >&2\n")
    jid = gs.gsub(str(script))
    assert gs.wait_state(jid, *DONE)["state"] == "COMPLETED", gs.log()
    assert (gs.work / f"slurm-{jid}.out").read_text() == "to-out\nto-err\n"
    assert not (gs.work / f"sl.o{jid}").exists() and not (gs.work / f"sl.e{jid}").exists()
    assert gs.job(jid)["walltime"] == 300  # #SBATCH -t 5: five minutes


def test_pbs_j_oe_joins_the_error_into_the_output(gs):
    script = gs.work / "p.sh"
    script.write_text("#!/bin/sh\n#PBS -N pj\n#PBS -j oe\necho to-out\necho to-err >&2\n")
    jid = gs.gsub(str(script))
    assert gs.wait_state(jid, *DONE)["state"] == "COMPLETED", gs.log()
    assert (gs.work / f"pj.o{jid}").read_text() == "to-out\nto-err\n"
    assert not (gs.work / f"pj.e{jid}").exists()


def test_a_torque_t_array_runs_its_tasks(gs):
    script = gs.work / "t.sh"
    script.write_text('#!/bin/sh\n#PBS -N tq\n#PBS -t 1-3\necho "task $PBS_ARRAYID"\n')
    r = gs.run("gsub", str(script), check=True)
    assert r.stderr.count("warning") == 0
    aid = int(r.stdout.split()[-1])
    tasks = wait_array(gs, aid, 3)
    assert [(t["array_index"], t["state"]) for t in tasks] == [(1, "COMPLETED"), (2, "COMPLETED"), (3, "COMPLETED")]
    for t in tasks:
        assert (gs.work / f"tq.o{aid}-{t['array_index']}").exists()  # Torque: JOBNAME.oJOBID-INDEX


def test_a_shell_that_cannot_run_fails_the_job_with_why(gs):
    """gsub (the user) refuses a shell that cannot run, in one line; a request written without gsub's check is
    taken in (the daemon checks only the form of a path) and its job fails at its start, with why, as its
    owner found out; a script with #! never uses the shell it names."""
    script = gs.work / "plain.sh"
    script.write_text("echo no shebang\n")
    r = gs.run("gsub", "--shell", "/no/such/shell", str(script))
    assert r.returncode != 0 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("gsub: error: shell '/no/such/shell': "), r.stderr
    missing = raw_submit(gs, shell="/no/such/shell", script="echo no shebang\n")
    notexec = raw_submit(gs, shell="/etc/passwd", script="echo no shebang\n")
    unused = raw_submit(gs, shell="/no/such/shell")  # valid_job's script has a #! line
    assert gs.wait_state(missing, "FAILED")["reason"] == "could not start: shell /no/such/shell not found"
    assert gs.wait_state(notexec, "FAILED")["reason"] == (
        "could not start: shell /etc/passwd: permission denied (not an executable file the job's owner may run)"
    )
    assert gs.wait_state(unused, "COMPLETED")
    assert gs.alive()


def test_open_mode_append_keeps_what_the_output_file_held(gs):
    (gs.work / "kept.out").write_text("before\n")
    script = gs.work / "a.sh"
    script.write_text("#!/bin/sh\n#SBATCH -o kept.out --open-mode=append\necho after\n")
    jid = gs.gsub(str(script))
    assert gs.wait_state(jid, *DONE)["state"] == "COMPLETED", gs.log()
    assert (gs.work / "kept.out").read_text() == "before\nafter\n"
