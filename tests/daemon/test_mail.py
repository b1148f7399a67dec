"""Mail about jobs' events: a real daemon with a fake sendmail that records how it was run, for the begin and
end mails of a real job; the checks of addresses and of the configuration.

The other mails (fail, requeue, arrays, a script's directives, hostile names and bad addresses, a slow or
failing sendmail, the time limits) are tested in the daemon in process, on a driven clock, in
test_mail_driven.py."""

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
