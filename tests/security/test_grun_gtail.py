"""grun and gtail in system mode: root's gtail must not be made to show another file or hang; grun runs as its user."""

from __future__ import annotations

from tests.conftest import wait_for


def test_roots_gtail_does_not_follow_what_the_job_planted(system, targets):
    b = system.b
    home = system.home(b)
    shadow = targets.shadow.read_text()
    secret = shadow.strip().splitlines()[0]
    plants = {
        "link": (f"ln -s {targets.shadow} $OUT", "a symbolic link"),
        "fifo": ("mkfifo $OUT", "not a regular file"),
        "dir": ("mkdir $OUT", "not a regular file"),
    }
    for kind, (plant, why) in plants.items():
        ready = home / f"planted-{kind}"
        script = f"OUT=out-{kind}; rm -f $OUT; {plant}; touch {ready}; sleep 60"
        jid = system.gsub(b, "-t", "90s", "-o", f"out-{kind}", "--wrap", script, cwd=home)
        wait_for(ready.exists, 30, f"job {jid} to plant its {kind}")
        r = system.cmd(None, "gtail", str(jid), timeout=20)
        assert r.rc == 1, f"{kind}: {r}"
        assert secret not in r.stdout
        assert r.one_line_error("gtail") is None and why in r.stderr, f"{kind}: {r}"
        system.cmd(b, "gdel", str(jid))
        system.wait_state(jid, "CANCELLED")
    targets.check()


def test_gtail_of_another_users_job_is_refused(system):
    a, b = system.a, system.b
    jid = system.gsub(a, "-t", "60s", "--wrap", "echo private-output-of-a; sleep 30", cwd=system.home(a))
    r = system.cmd(b, "gtail", str(jid), timeout=20)
    assert r.rc == 1
    assert "private-output-of-a" not in r.stdout
    assert r.stderr.strip() == f"gtail: error: job {jid}: owned by {a.name}", r
    system.cmd(a, "gdel", str(jid))


def test_grun_runs_as_its_user_on_the_users_own_streams(system):
    b = system.b
    r = system.cmd(b, "grun", "-t", "60s", "sh", "-c", "id -u; cat; exit 6", input=b"from-b\n", cwd=system.home(b))
    assert r.rc == 6, r
    assert r.stdout.splitlines() == [str(b.uid), "from-b"], r
