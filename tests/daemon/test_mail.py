"""Mail about jobs' events: a real daemon with a fake sendmail that records how it was run.

The time-limit mails (sent as a job passes parts of its walltime, not again after a restart) are tested in
process, on a driven clock, in test_mail_driven.py."""

from __future__ import annotations

import getpass
import os
from pathlib import Path

import pytest

from gridsched.protocol import requests as rq
from tests.conftest import DEFAULT_CONFIG, wait_for

FAKE = """#!/bin/sh
f={box}/mail.$$
{{ printf 'uid=%s\\n' "$(id -u)"; for a in "$@"; do printf 'arg=%s\\n' "$a"; done; echo ---; cat; }} > $f.tmp
mv $f.tmp $f
exit {code}
"""


def fake_sendmail(where: Path, code: int = 0) -> tuple[Path, Path]:
    """A sendmail that writes its uid, arguments and standard input into a file of ``box``."""
    box = where / "box"
    box.mkdir(mode=0o1777)
    os.chmod(box, 0o1777)
    prog = where / "sendmail"
    prog.write_text(FAKE.format(box=box, code=code))
    prog.chmod(0o755)
    return prog, box


def mails(box: Path) -> list[dict]:
    out = []
    for p in sorted(box.glob("mail.*")):
        if p.name.endswith(".tmp"):
            continue
        head, _, msg = p.read_text().partition("---\n")
        lines = head.splitlines()
        headers, _, body = msg.partition("\n\n")
        out.append(
            {
                "uid": int(lines[0].split("=", 1)[1]),
                "args": [ln.split("=", 1)[1] for ln in lines[1:]],
                "headers": headers.splitlines(),
                "subject": next((h for h in headers.splitlines() if h.startswith("Subject: ")), ""),
                "body": body,
            }
        )
    return out


def wait_mails(box: Path, n: int, timeout: float = 20) -> list[dict]:
    return wait_for(lambda: len(mails(box)) >= n and mails(box), timeout, f"{n} mails")


@pytest.fixture
def mailgs(make_gs, tmp_path):
    prog, box = fake_sendmail(tmp_path)
    gs = make_gs(DEFAULT_CONFIG + f'[mail]\nsendmail = "{prog}"\n')
    return gs, box


def test_begin_and_end_mail_to_the_owner(mailgs):
    gs, box = mailgs
    jid = gs.gsub("--mail-type=BEGIN,END", "-N", "hello", "--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
    got = wait_mails(box, 2)
    assert len(got) == 2
    me = getpass.getuser()
    for m in got:
        assert m["args"] == ["-oi", "--", me]
        assert m["uid"] == os.getuid()
        assert f"To: {me}" in m["headers"]
    subjects = sorted(m["subject"] for m in got)
    assert subjects[0].startswith(f"Subject: gridsched Job_id={jid} Name=hello Began")
    assert (
        subjects[1]
        == f"Subject: gridsched Job_id={jid} Name=hello Ended, Run time " + subjects[1].split("Run time ", 1)[1]
    )
    assert subjects[1].endswith("COMPLETED, ExitCode 0")
    assert "mail to" in gs.log()


def test_fail_mail_replaces_end_and_lists_recipients(mailgs):
    gs, box = mailgs
    jid = gs.gsub("--mail-type=END,FAIL", "--mail-user=ann@example.org,bob", "--wrap", "exit 3")
    gs.wait_state(jid, "FAILED")
    (m,) = wait_mails(box, 1)
    assert m["args"] == ["-oi", "--", "ann@example.org", "bob"]
    assert m["subject"].endswith("FAILED, ExitCode 3")
    assert " Failed, " in m["subject"]
    assert "To: ann@example.org, bob" in m["headers"]
    wait_for(lambda: "not sent" not in gs.log(), 1)  # nothing refused
    assert len(mails(box)) == 1


def test_sbatch_directives_and_no_mail_without_events(mailgs):
    gs, box = mailgs
    script = gs.work / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --mail-type=END\n#SBATCH --mail-user=carol\ntrue\n")
    jid = gs.gsub(str(script))
    quiet = gs.gsub("--mail-user=dave", "--wrap", "true")  # a recipient without events: no mail (as Slurm)
    gs.wait_state(jid, "COMPLETED")
    gs.wait_state(quiet, "COMPLETED")
    (m,) = wait_mails(box, 1)
    assert m["args"] == ["-oi", "--", "carol"]
    assert f"Job_id={jid} " in m["subject"]


def test_array_gets_one_mail_unless_array_tasks(mailgs):
    gs, box = mailgs
    arr = gs.gsub("--array=1-3", "--mail-type=BEGIN,END", "-N", "arr", "--wrap", "true")
    for jid in range(arr, arr + 3):
        gs.wait_state(jid, "COMPLETED")
    got = wait_mails(box, 2)
    # the array's END is sent as its last task ends, after every task's own start: no later mail comes
    assert sorted(m["subject"].split(" Name=")[0] for m in got) == [f"Subject: gridsched Array_job_id={arr}"] * 2
    assert any(m["subject"].endswith("Ended, 3 COMPLETED") for m in got)
    assert sorted(" Began" in m["subject"] for m in got) == [False, True]
    for f in box.glob("mail.*"):
        f.unlink()
    one = gs.gsub("--array=1-3%1", "--mail-type=BEGIN,END,FAIL", "--wrap", '[ "$GS_ARRAY_TASK_ID" != 2 ]')
    for jid in range(one, one + 3):  # one task at a time: each starts after the one before ended
        gs.wait_state(jid, "COMPLETED", "FAILED")
    got = wait_mails(box, 2)
    assert sorted(m["subject"].split(", ", 1)[0].rsplit(" ", 1)[1] for m in got) == ["Began", "Failed"]
    assert any(m["subject"].endswith("Failed, 2 COMPLETED, 1 FAILED") for m in got)
    for f in box.glob("mail.*"):
        f.unlink()
    arr2 = gs.gsub("--array=1-3", "--mail-type=END,ARRAY_TASKS", "--wrap", "true")
    for jid in range(arr2, arr2 + 3):
        gs.wait_state(jid, "COMPLETED")
    got = wait_mails(box, 3)
    assert sorted(m["subject"].split(" Name=")[0] for m in got) == [
        f"Subject: gridsched Job_id={j}" for j in range(arr2, arr2 + 3)
    ]


def test_hostile_job_name_makes_no_header(mailgs):
    gs, box = mailgs
    r = gs.run("gsub", "--mail-type=END", "-N", "x\nBcc: evil@example.org", "--wrap", "true")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "control characters" in r.stderr
    # characters that are no control characters to the boundary but break lines elsewhere
    jid = gs.gsub("--mail-type=END", "-N", "x\u2028Bcc: evil@example.org\u0085Cc: x", "--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
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
def test_bad_address_refused_in_one_line(mailgs, bad):
    gs, box = mailgs
    r = gs.run("gsub", "--mail-type=END", f"--mail-user={bad}", "--wrap", "true")
    assert r.returncode != 0
    assert r.stderr.startswith("gsub: error:") and r.stderr.count("\n") == 1, r.stderr
    if bad not in ("-oQ/tmp/x", "|cmd", "x@"):
        return  # directive lines are split as a shell splits words: quotes and backslashes go
    script = gs.work / "bad.sh"
    script.write_text(f"#!/bin/sh\n#PBS -M {bad}\n#PBS -m e\ntrue\n")
    r = gs.run("gsub", str(script))  # a script's placeholder (<EMAIL>) is warned of and left out, as a line
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("gsub: warning: ") and "is not a mail address" in r.stderr
    gs.wait_state(int(r.stdout.strip()), "COMPLETED")
    (m,) = wait_mails(box, 1)
    assert m["args"] == ["-oi", "--", getpass.getuser()]  # to the owner, as without -M


def test_daemon_refuses_a_bad_address_written_by_hand():
    spec = {
        "id": 5,
        "name": "j",
        "user": "u",
        "uid": os.getuid(),
        "gid": -1,
        "ncpus": 1,
        "walltime": 60,
        "checkpoint": "none",
        "hold": False,
        "script": "true",
        "args": [],
        "workdir": "/",
        "stdout": "/dev/null",
        "stderr": "/dev/null",
        "env": {},
        "submit_time": 1.0,
        "mail_type": "END",
    }
    sender = rq.Sender(os.getuid(), getpass.getuser(), frozenset(), False)
    ok = rq.parse({"type": "submit", "job": {**spec, "mail_user": ["ann@example.org"]}}, rq.id_name(5), sender)
    assert ok.job.mail_user == ("ann@example.org",) and ok.job.mail_type == ("END",)
    for bad in (["-t"], ["a\nb"], "ann", [], ["x"] * 17):
        with pytest.raises(rq.Refused) as e:
            rq.parse({"type": "submit", "job": {**spec, "mail_user": bad}}, rq.id_name(5), sender)
        assert "\n" not in str(e.value)
    with pytest.raises(rq.Refused):
        rq.parse({"type": "submit", "job": {**spec, "mail_type": "BEGIN,SOMETIMES"}}, rq.id_name(5), sender)


def test_slow_or_failing_sendmail_never_blocks_the_daemon(make_gs, tmp_path):
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    gs = make_gs(DEFAULT_CONFIG + f'[mail]\nsendmail = "{slow}"\ntimeout = "2s"\n')
    jid = gs.gsub("--mail-type=BEGIN,END", "--wrap", "true")
    gs.wait_state(jid, "COMPLETED", timeout=10)  # not held up by the mail of its start
    wait_for(lambda: "sendmail killed after its timeout" in gs.log(), 15, "the late sendmail killed")
    assert gs.alive()


def test_failing_sendmail_logged_in_one_line(make_gs, tmp_path):
    prog, box = fake_sendmail(tmp_path, code=75)
    gs = make_gs(DEFAULT_CONFIG + f'[mail]\nsendmail = "{prog}"\n')
    jid = gs.gsub("--mail-type=END", "--wrap", "true")
    gs.wait_state(jid, "COMPLETED")
    wait_for(lambda: f"job {jid}: ended mail: sendmail exited 75" in gs.log(), 15, "the failure logged")
    assert gs.alive()


def test_not_configured_warns_once(gs):
    r = gs.run("gsub", "--mail-type=ALL", "--wrap", "true", check=True)
    warnings = [ln for ln in r.stderr.splitlines() if "mail" in ln]
    assert warnings == [
        "gsub: warning: --mail-type: mail is not configured on this machine ([mail] sendmail): no mail is sent"
    ]


def test_requeue_mail(mailgs):
    gs, box = mailgs
    jid = gs.gsub("--mail-type=REQUEUE", "-N", "again", "--wrap", "sleep 30")
    gs.wait_state(jid, "RUNNING")
    gs.run("grequeue", str(jid), check=True)
    (m,) = wait_mails(box, 1)
    assert m["subject"] == f"Subject: gridsched Job_id={jid} Name=again Requeued"
    gs.run("gdel", str(jid), check=True)
    gs.wait_state(jid, "CANCELLED")


@pytest.mark.parametrize(
    "table, error",
    [
        ({"sendmail": "sendmail"}, "mail.sendmail = 'sendmail': must be an absolute path"),
        ({"from": "a@b, c@d"}, "mail.from = 'a@b, c@d': must be one plain mail address"),
        ({"from": "-f@x"}, "must be one plain mail address"),
        ({"timeout": "soon"}, "mail.timeout = 'soon'"),
    ],
)
def test_mail_configuration_is_checked(table, error):
    from gridsched.protocol.config import ConfigError, parse

    with pytest.raises(ConfigError) as e:
        parse({"mail": table})
    assert error in str(e.value)
    assert parse({"mail": {"sendmail": "/usr/sbin/sendmail", "from": "batch@example.org"}}).mail_timeout == 30
