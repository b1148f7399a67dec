"""Time-limit mails in the daemon, in process (stub executor, driven clock), with the fake sendmail of
test_mail.py: the 50% and time-limit mails of a job that runs into its walltime, and what was mailed kept
across a daemon killed and started again.

The other mails (begin, end, fail, requeue, arrays, bad addresses, a slow or failing sendmail) go through a
real daemon in test_mail.py.
"""

from __future__ import annotations

import pytest

from tests.conftest import DEFAULT_CONFIG, wait_for
from tests.daemon.driven import Driven
from tests.daemon.test_mail import fake_sendmail, mails, wait_mails


def sent(dr: Driven) -> None:
    """Wait until every sendmail the daemon ran has ended (its mail is in the box)."""
    wait_for(lambda: all(c.proc.poll() is not None for c in dr.d.mail.children), 20, "the sendmails to end")


@pytest.fixture
def mailbox(stub_daemon, tmp_path):
    prog, box = fake_sendmail(tmp_path)
    return Driven(stub_daemon(DEFAULT_CONFIG + f'[mail]\nsendmail = "{prog}"\n')), box


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
