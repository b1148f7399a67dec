"""System mode: job mail is sent as the job's owner, and --get-user-env reads the owner's login shell."""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import wait_for
from tests.daemon.test_mail import fake_sendmail, mails, wait_mails

from .conftest import User


def test_mail_is_sent_as_the_jobs_owner(env, fresh):
    where = Path(tempfile.mkdtemp(prefix="mail-", dir=env.base))
    os.chmod(where, 0o755)
    prog, box = fake_sendmail(where)
    s = fresh({"mail": {"sendmail": str(prog)}})
    jid = s.gsub(s.a, "--mail-type=BEGIN,END", "-N", "mine", "--wrap", "true")
    s.wait_state(jid, "COMPLETED")
    got = wait_mails(box, 2)
    assert [m["uid"] for m in got] == [s.a.uid, s.a.uid]  # never root
    assert all(m["args"] == ["-oi", "--", s.a.name] for m in got)
    other = s.gsub(s.b, "--mail-type=END", "--mail-user=ann@example.org", "--wrap", "true")
    s.wait_state(other, "COMPLETED")
    got = wait_mails(box, 3)
    assert sorted(m["uid"] for m in got) == sorted([s.a.uid, s.a.uid, s.b.uid])
    assert [m["args"] for m in got if m["uid"] == s.b.uid] == [["-oi", "--", "ann@example.org"]]
    assert len(mails(box)) == 3


@contextmanager
def home_of(u: User, home: Path) -> Iterator[None]:
    """``u``'s home directory in the password database is ``home`` for the block."""
    old = pwd.getpwnam(u.name).pw_dir
    subprocess.run(["usermod", "-d", str(home), u.name], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["usermod", "-d", old, u.name], check=True, capture_output=True)


def test_get_user_env_starts_the_job_from_the_login_environment(env, fresh):
    s = fresh()
    home = s.home(s.a)
    profile = home / ".profile"
    profile.write_text(
        'if [ -e "$HOME/slow" ]; then sleep 30; fi\nexport FROM_PROFILE=yes\nexport LANG=from-profile\n'
        'export PATH="$HOME/mybin:$PATH"\n'
    )
    os.chmod(profile, 0o644)
    out = home / "env.out"
    with home_of(s.a, home):
        jid = s.gsub(
            s.a,
            "--get-user-env",
            "-o",
            str(out),
            "--wrap",
            'echo "FP=$FROM_PROFILE LANG=$LANG ID=$GS_JOBID"',
        )
        s.wait_state(jid, "COMPLETED")
        # the login's variable is there; the submitting LANG and the job's own variables win
        assert out.read_text() == f"FP=yes LANG=C.UTF-8 ID={jid}\n"
        # --export=NONE: the plain PATH it would get yields to the login's (the job's bin directory still first)
        none = s.gsub(s.a, "--export=NONE", "--get-user-env", "-o", str(out), "--wrap", 'echo "$PATH"; command -v srun')
        s.wait_state(none, "COMPLETED")
        path, srun = out.read_text().splitlines()
        assert f":{home}/mybin:/usr/local/bin:/usr/bin:/bin" in path
        assert path.startswith(os.path.dirname(srun) + ":")
        plain = s.gsub(s.a, "-o", str(out), "--wrap", 'echo "FP=$FROM_PROFILE"')
        s.wait_state(plain, "COMPLETED")
        assert out.read_text() == "FP=\n"
        (home / "slow").write_text("")
        slow = s.gsub(s.a, "--get-user-env=1", "-o", str(out), "--join", "oe", "--wrap", 'echo "FP=$FROM_PROFILE"')
        s.wait_state(slow, "COMPLETED", timeout=30)
        lines = out.read_text().splitlines()
        assert lines == [
            f"gridsched: job {slow}: --get-user-env: the login shell /bin/sh took longer than 1 s: "
            "the job runs with the submitting environment",
            "FP=",
        ]
    wait_for(lambda: not any(p for p in _procs_of(s.a.uid) if "sleep" in p), 10, "the slow profile's sleep killed")


def test_a_job_cancelled_while_its_login_shell_runs_takes_the_shell_with_it(env, fresh):
    """The login shell runs in a session of its own (its leftovers are killed with it), out of reach of the job's
    process group; a job cancelled while that shell hangs in the profile does not leave it behind until the
    timeout: the daemon signals every process below the job's shepherd (a subreaper)."""
    s = fresh()
    home = s.home(s.a)
    (home / ".profile").write_text("sleep 1009\n")
    os.chmod(home / ".profile", 0o644)
    with home_of(s.a, home):
        jid = s.gsub(s.a, "--get-user-env=300", "--wrap", "true")
        wait_for(lambda: any("sleep\x001009" in p for p in _procs_of(s.a.uid)), 30, "the profile's sleep")
        assert s.cmd(s.a, "gdel", str(jid)).rc == 0
        assert s.wait_state(jid, "CANCELLED", "FAILED", "COMPLETED", timeout=30)["state"] == "CANCELLED"
    wait_for(lambda: not any("sleep\x001009" in p for p in _procs_of(s.a.uid)), 10, "the profile's sleep killed")


def _procs_of(uid: int) -> list[str]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    out.append(Path(f"/proc/{d}/cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                pass
    return out
