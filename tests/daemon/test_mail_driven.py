"""Mail about jobs' events in the daemon, in process (stub executor, driven clock), with the fake sendmail of
test_mail.py (a real program the daemon runs): the end and fail mails and their recipients, the directives
of a script, arrays' mails, hostile names and bad addresses, requeues, a slow or failing sendmail, the
time-limit mails of a job that runs into its walltime, and what was mailed kept across a daemon killed and
started again.

The begin and end mails of a real job go through a real daemon in test_mail.py.
"""

from __future__ import annotations

import getpass
import time

import pytest

from tests.conftest import DEFAULT_CONFIG, wait_for
from tests.daemon.driven import Driven
from tests.daemon.test_mail import fake_sendmail, mails, wait_mails


def sent(dr: Driven) -> None:
    """Wait until every sendmail the daemon ran has ended (its mail is in the box)."""
    wait_for(lambda: all(c.proc.poll() is not None for c in dr.d.mail.children), 20, "the sendmails to end")


def state_of(dr: Driven, jid: int) -> str | None:
    """The job's state (None while it is not in the table: an array's task not made yet)."""
    rec = dr.d.table.jobs.get(jid)
    if rec is not None:
        return rec.state.value
    dr.d.table.commit()
    row = dr.d.db.job(jid)
    return None if row is None else row["state"]


def run_until_ended(dr: Driven, *jids: int, limit: float = 20) -> None:
    done = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
    dr.run_until(lambda: all(state_of(dr, j) in done for j in jids), limit)


@pytest.fixture
def mailbox(stub_daemon, tmp_path):
    prog, box = fake_sendmail(tmp_path)
    return Driven(stub_daemon(DEFAULT_CONFIG + f'[mail]\nsendmail = "{prog}"\n')), box


def test_fail_mail_replaces_end_and_lists_recipients(mailbox, caplog):
    caplog.set_level("INFO", logger="gschedd")
    dr, box = mailbox
    jid = dr.gsub("--mail-type=END,FAIL", "--mail-user=ann@example.org,bob", "--wrap", "exit 3", work=None)
    dr.finish(jid, exit_code=3)
    assert dr.state(jid) == "FAILED"
    (m,) = wait_mails(box, 1)
    assert m["args"] == ["-oi", "--", "ann@example.org", "bob"]
    assert m["subject"].endswith("FAILED, ExitCode 3")
    assert " Failed, " in m["subject"]
    assert "To: ann@example.org, bob" in m["headers"]
    sent(dr)
    dr.turn()
    assert "not sent" not in caplog.text  # nothing refused
    assert len(mails(box)) == 1


def test_sbatch_directives_and_no_mail_without_events(mailbox, tmp_path):
    dr, box = mailbox
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --mail-type=END\n#SBATCH --mail-user=carol\ntrue\n")
    jid = dr.gsub(str(script))
    quiet = dr.gsub("--mail-user=dave", "--wrap", "true")  # a recipient without events: no mail (as Slurm)
    run_until_ended(dr, jid, quiet)
    assert dr.state(jid) == dr.state(quiet) == "COMPLETED"
    (m,) = wait_mails(box, 1)
    sent(dr)
    assert len(mails(box)) == 1
    assert m["args"] == ["-oi", "--", "carol"]
    assert f"Job_id={jid} " in m["subject"]


def test_array_gets_one_mail_unless_array_tasks(mailbox):
    dr, box = mailbox
    arr = dr.gsub("--array=1-3", "--mail-type=BEGIN,END", "-N", "arr", "--wrap", "true")
    run_until_ended(dr, *range(arr, arr + 3))
    assert {state_of(dr, j) for j in range(arr, arr + 3)} == {"COMPLETED"}
    got = wait_mails(box, 2)
    sent(dr)
    assert len(mails(box)) == 2  # the array's END is sent as its last task ends: no later mail comes
    assert sorted(m["subject"].split(" Name=")[0] for m in got) == [f"Subject: gridsched Array_job_id={arr}"] * 2
    assert any(m["subject"].endswith("Ended, 3 COMPLETED") for m in got)
    assert sorted(" Began" in m["subject"] for m in got) == [False, True]
    for f in box.glob("mail.*"):
        f.unlink()
    dr.default_work = None  # the tasks below run until the test ends them
    one = dr.gsub("--array=1-3%1", "--mail-type=BEGIN,END,FAIL", "--wrap", '[ "$GS_ARRAY_TASK_ID" != 2 ]', work=None)
    for k, jid in enumerate(range(one, one + 3)):  # one task at a time: each starts after the one before ended
        dr.run_until(lambda j=jid: state_of(dr, j) == "RUNNING", 10)
        assert [state_of(dr, j) for j in range(one, one + 3)].count("RUNNING") == 1
        dr.finish(jid, exit_code=1 if k == 1 else 0)
    run_until_ended(dr, *range(one, one + 3))
    assert [state_of(dr, j) for j in range(one, one + 3)] == ["COMPLETED", "FAILED", "COMPLETED"]
    got = wait_mails(box, 2)
    sent(dr)
    assert len(mails(box)) == 2
    assert sorted(m["subject"].split(", ", 1)[0].rsplit(" ", 1)[1] for m in got) == ["Began", "Failed"]
    assert any(m["subject"].endswith("Failed, 2 COMPLETED, 1 FAILED") for m in got)
    for f in box.glob("mail.*"):
        f.unlink()
    dr.default_work = 0.0
    arr2 = dr.gsub("--array=1-3", "--mail-type=END,ARRAY_TASKS", "--wrap", "true")
    run_until_ended(dr, *range(arr2, arr2 + 3))
    got = wait_mails(box, 3)
    assert sorted(m["subject"].split(" Name=")[0] for m in got) == [
        f"Subject: gridsched Job_id={j}" for j in range(arr2, arr2 + 3)
    ]


def test_hostile_job_name_makes_no_header(mailbox):
    dr, box = mailbox
    r = dr.command("gsub", "--mail-type=END", "-N", "x\nBcc: evil@example.org", "--wrap", "true", check=False)
    assert r.exit_code != 0 and r.stderr.count("\n") == 1 and "control characters" in r.stderr
    # characters that are no control characters to the boundary but break lines elsewhere
    jid = dr.gsub("--mail-type=END", "-N", "x\u2028Bcc: evil@example.org\u0085Cc: x", "--wrap", "true")
    run_until_ended(dr, jid)
    assert dr.state(jid) == "COMPLETED"
    (m,) = wait_mails(box, 1)
    assert [h.split(":", 1)[0] for h in m["headers"]] == [
        "To",
        "From",
        "Subject",
        "Auto-Submitted",
        "Content-Type",
    ]
    assert "\u2028" not in m["subject"] and "\u0085" not in m["subject"]
    assert m["args"] == ["-oi", "--", getpass.getuser()]


@pytest.mark.parametrize("bad", ["-oQ/tmp/x", "a b", 'a"b', "a\\b", "|cmd", "x@", ",".join(["u"] * 17)])
def test_bad_address_refused_in_one_line(mailbox, tmp_path, bad):
    dr, box = mailbox
    r = dr.command("gsub", "--mail-type=END", f"--mail-user={bad}", "--wrap", "true", check=False)
    assert r.exit_code != 0
    assert r.stderr.startswith("gsub: error:") and r.stderr.count("\n") == 1, r.stderr
    if bad not in ("-oQ/tmp/x", "|cmd", "x@"):
        return  # directive lines are split as a shell splits words: quotes and backslashes go
    script = tmp_path / "bad.sh"
    script.write_text(f"#!/bin/sh\n#PBS -M {bad}\n#PBS -m e\ntrue\n")
    r = dr.command("gsub", str(script), turn=False)  # a script's placeholder (<EMAIL>) is warned of and left out
    assert r.stderr.startswith("gsub: warning: ") and "is not a mail address" in r.stderr
    jid = int(r.stdout.strip())
    run_until_ended(dr, jid)
    assert dr.state(jid) == "COMPLETED"
    (m,) = wait_mails(box, 1)
    assert m["args"] == ["-oi", "--", getpass.getuser()]  # to the owner, as without -M


def test_slow_or_failing_sendmail_never_blocks_the_daemon(stub_daemon, tmp_path, caplog):
    caplog.set_level("INFO", logger="gschedd")
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    dr = Driven(stub_daemon(DEFAULT_CONFIG + f'[mail]\nsendmail = "{slow}"\ntimeout = "2s"\n'))
    began = time.monotonic()
    jid = dr.gsub("--mail-type=BEGIN,END", "--wrap", "true")
    run_until_ended(dr, jid)
    assert dr.state(jid) == "COMPLETED"
    assert time.monotonic() - began < 10  # not held up by the mail of its start (its sendmail sleeps 60 s)
    (child, *_) = dr.d.mail.children
    assert child.proc.poll() is None
    dr.run_until(lambda: "sendmail killed after its timeout" in caplog.text, 30)
    wait_for(lambda: child.proc.poll() is not None, 10, "the late sendmail gone")


def test_failing_sendmail_logged_in_one_line(stub_daemon, tmp_path, caplog):
    caplog.set_level("INFO", logger="gschedd")
    prog, box = fake_sendmail(tmp_path, code=75)
    dr = Driven(stub_daemon(DEFAULT_CONFIG + f'[mail]\nsendmail = "{prog}"\n'))
    jid = dr.gsub("--mail-type=END", "--wrap", "true")
    run_until_ended(dr, jid)
    assert dr.state(jid) == "COMPLETED"
    sent(dr)
    dr.turn()  # the loop reaps its sendmails
    assert f"job {jid}: ended mail: sendmail exited 75" in caplog.text
    assert not dr.d.mail.children


def test_not_configured_warns_once(stub_daemon):
    dr = Driven(stub_daemon(DEFAULT_CONFIG))
    r = dr.command("gsub", "--mail-type=ALL", "--wrap", "true")
    warnings = [ln for ln in r.stderr.splitlines() if "mail" in ln]
    assert warnings == [
        "gsub: warning: --mail-type: mail is not configured on this machine ([mail] sendmail): no mail is sent"
    ]


def test_requeue_mail(mailbox):
    dr, box = mailbox
    jid = dr.gsub("--mail-type=REQUEUE", "-N", "again", "--wrap", "sleep 30", work=None)
    assert dr.running(jid)
    dr.command("grequeue", str(jid))
    (m,) = wait_mails(box, 1)
    assert m["subject"] == f"Subject: gridsched Job_id={jid} Name=again Requeued"
    dr.command("gdel", str(jid))
    dr.run_until(lambda: dr.state(jid) == "CANCELLED", 10)


def test_time_limit_mails(mailbox):
    dr, box = mailbox
    jid = dr.gsub("-t", "4s", "--mail-type=TIME_LIMIT_50,TIME_LIMIT", "--wrap", "sleep 30", work=30)
    assert dr.running(jid)
    dr.run_to(1.5)  # before half its walltime: nothing is sent
    sent(dr)
    assert mails(box) == []
    dr.run_to(2.5)
    got = wait_mails(box, 1)
    assert len(got) == 1 and got[0]["subject"].endswith("Reached 50% of time limit")
    dr.run_until(lambda: dr.state(jid) == "TIMEOUT", 20)
    got = wait_mails(box, 2)
    sent(dr)
    assert len(mails(box)) == 2
    assert sorted(m["subject"].rsplit(" ", 3)[-3:] == ["Reached", "time", "limit"] for m in got) == [False, True]


def test_time_limit_mail_is_not_sent_again_after_a_daemon_restart(mailbox, stub_daemon):
    """What was mailed this segment is kept with the job's run: a daemon killed and started again after the 50%
    mail sends the 80% one, and not the 50% one again."""
    dr, box = mailbox
    jid = dr.gsub("-t", "10s", "--mail-type=TIME_LIMIT_50,TIME_LIMIT_80", "--wrap", "wait for go", work=None)
    dr.run_to(5.5)
    assert wait_mails(box, 1)[0]["subject"].endswith("Reached 50% of time limit")
    dr.restart(stub_daemon, crash=True)
    assert dr.running(jid)  # found again
    dr.run_to(8.5)
    got = wait_mails(box, 2)
    dr.finish(jid)
    assert dr.state(jid) == "COMPLETED"
    sent(dr)
    subjects = [m["subject"].split(" Reached ")[-1] for m in mails(box)]
    assert subjects == ["50% of time limit", "80% of time limit"], got
