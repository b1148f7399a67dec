"""The Python API's alter and requeue against the daemon, in process (stub executor, driven clock): the
client writes its requests into the daemon's spool and reads the state back, with galter's and grequeue's
checks and words.

Submitting, waiting, cancelling and the executor with real jobs are tested in test_client.py."""

from __future__ import annotations

import json

import pytest

from gridsched.api.client import Client, GridschedError
from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven, Work


@pytest.fixture
def dr(stub_daemon, tmp_path, monkeypatch) -> Driven:
    monkeypatch.chdir(tmp_path)  # jobs' default output files go into the submit directory
    return Driven(stub_daemon(DEFAULT_CONFIG))


def client(dr: Driven) -> Client:
    return Client(spool=dr.d.spool.root, config=dr.d.config_path)


def submit(dr: Driven, c: Client, work: float | None = 0.0, **kw) -> int:
    """Submit with the client; the job does ``work`` seconds of work; the daemon takes it in."""
    jid = c.submit(**kw).id
    dr.work[jid] = Work(work, "none")
    dr.turn()
    return jid


def launches(dr: Driven, jid: int) -> list:
    return [s for s in dr.d.ex.started if s.job_id == jid]


def test_refusals_have_the_commands_words(dr):
    c = client(dr)
    with pytest.raises(GridschedError, match="^job can never run: it asks for 9 cores, the machine has 8$"):
        c.submit(command="true", ncpus=9)
    with pytest.raises(GridschedError, match="^job 77: no such job$"):
        c.status(77)
    with pytest.raises(GridschedError, match="'-5': must be positive"):
        c.submit(command="true", walltime="-5")


def test_alter_changes_a_pending_job_as_galter(dr):
    c = client(dr)
    blocker = submit(dr, c, None, command="sleep 60", ncpus=8, walltime="2m")
    assert dr.running(blocker)
    j = submit(dr, c, command='echo "$GS_NCPUS $GS_WALLTIME $GS_JOBNAME"', walltime=60)
    later = submit(dr, c, command="true")
    c.alter(j, ncpus=2, walltime="5m", name="new", nice=10)
    dr.turn()
    now = c.status(j)
    assert (now.name, now.ncpus, now.walltime, now.state) == ("new", 2, 300, "PENDING")
    # the spool's owner is its admin: it may raise a job above the others
    c.alter(later, priority=100)
    dr.turn()
    recs = json.loads(dr.command("gstat", "--priority", "--json", turn=False).stdout)["jobs"]
    assert [x["admin_priority"] for x in recs if x["id"] == later] == [100]
    c.cancel(blocker)
    dr.run_until(lambda: c.status(j).done and c.status(later).done, 10)
    assert c.status(j).state == "COMPLETED" and c.status(later).state == "COMPLETED"
    (spec,) = launches(dr, j)
    assert (spec.env["GS_NCPUS"], spec.env["GS_WALLTIME"], spec.env["GS_JOBNAME"]) == ("2", "300", "new")
    assert [s.job_id for s in dr.d.ex.started].index(later) < [s.job_id for s in dr.d.ex.started].index(j)


def test_alter_refuses_with_galters_words(dr):
    c = client(dr)
    running = submit(dr, c, None, command="sleep 60", ncpus=1, walltime="2m")
    assert dr.running(running)
    for job_id, changes, message in (
        (running, {"ncpus": 2}, f"^job {running}: is RUNNING: only its walltime can change$"),
        (running, {"walltime": "-5"}, "'-5': must be positive"),
        (running, {"colour": "red"}, "^alter: cannot change colour "),
        (running, {}, "^alter: nothing to change$"),
        (77, {"walltime": 60}, "^job 77: no such job$"),
        (running, {"nice": 10**6}, "field 'nice' must lie between -10000 and 10000"),
    ):
        with pytest.raises(GridschedError, match=message):
            c.alter(job_id, **changes)
    assert not list(dr.d.spool.incoming.glob("alter-*"))
    # a running job's walltime is its owner's to shorten (and the admin's to lengthen)
    c.alter(running, walltime=30)
    dr.turn()
    assert c.status(running).walltime == 30
    dr.run_until(lambda: c.status(running).state == "TIMEOUT", 40)


def test_requeue_runs_a_finished_job_again_and_refuses_a_pending_one(dr):
    c = client(dr)
    j = submit(dr, c, command="echo run >> runs.txt", walltime="1m")
    assert c.status(j).state == "COMPLETED"
    c.requeue(j)
    dr.run_until(lambda: (x := c.status(j)).restarts == 1 and x.done, 10)
    assert c.status(j).state == "COMPLETED" and len(launches(dr, j)) == 2  # it ran twice
    blocker = submit(dr, c, None, command="sleep 60", ncpus=8, walltime="2m")
    assert dr.running(blocker)
    waiting = submit(dr, c, command="true")
    with pytest.raises(GridschedError, match=f"^job {waiting}: is PENDING: only running or finished jobs"):
        c.requeue(waiting)
    with pytest.raises(GridschedError, match="^job 99: no such job$"):
        c.requeue(99)
    c.requeue(blocker)  # a running job: stopped and queued again
    dr.run_until(lambda: c.status(blocker).restarts == 1 and dr.running(blocker), 10)
    assert len(launches(dr, blocker)) == 2
    c.cancel(blocker)
    c.cancel(waiting)
    dr.run_until(lambda: c.status(waiting).done, 10)
