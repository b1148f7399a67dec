"""Text that B controls and the daemon or the commands print: identity fields, names, file names.

A request's fields and its file's name are B's to choose.  Nothing of it may
end up in a file outside the spool, give a job to someone else, start a line
of its own in the daemon's log (a forged log record), or reach a terminal as
control characters through ``gstat``.
"""

from __future__ import annotations

import time

from tests.security.conftest import ESC_C1, check_intact, control_bytes

MARK = "INJECTED"
CRON = "* * * * * root /bin/sh -c 'touch /tmp/gs-pwned'"


def forged_lines(log: str) -> list[str]:
    """The lines of ``log`` that start with B's text, each after the record it broke out of."""
    lines = log.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.startswith(MARK) or line.startswith("* * * * *"):
            j = i - 1
            while j > 0 and (lines[j].startswith(MARK) or lines[j].startswith("* * * * *")):
                j -= 1
            out.append(f"{line[:100]!r}   <- from the record {lines[j][:160]!r}")
    return out


def test_identity_fields_holding_newlines_and_other_types(system, targets):
    """uid, gid, user and name that are strings with newlines (a crontab line, a forged log record), lists,
    objects, floats, booleans, huge numbers: refused or ignored, never written anywhere as a line."""
    a, b = system.a, system.b
    line = f"\n{MARK} {CRON}\n{MARK} 2026-01-01 00:00:00,000 INFO job 1 COMPLETED\n"
    claims = [
        {"uid": f"{b.uid}{line}"},
        {"uid": f"{a.uid}{line}"},
        {"uid": f"0{line}"},
        {"uid": [a.uid]},
        {"uid": {"x": a.uid}},
        {"uid": float(a.uid)},
        {"uid": True},
        {"uid": 2**80},
        {"uid": -1},
        {"uid": None},
        {"user": f"root{line}"},
        {"user": f"{a.name}{line}"},
        {"user": [a.name]},
        {"gid": f"0{line}"},
        {"gid": f"{b.gid}{line}"},
        {"gid": [0]},
        {"gid": 2**80},
        {"name": f"job{line}"},
        {"name": f"{CRON}\n"},
        {"depend": f"afterok:1{line}"},
        {"array": f"0-3{line}"},
        {"resources": {f"lic{line}": 1}},
        {"checkpoint": f"none{line}"},
        {"workdir": f"/tmp{line}"},
        {"stdout": f"{targets.crontab}{line}"},
        {"env": {f"X{line}": "1", "Y": line}},
        {"args": [line]},
    ]
    ids = []
    for c in claims:
        ids.append(system.submit_as(b, record=False, **c))
    # the same in the name of the request file, and in control requests
    stamp = time.time_ns()
    fline = f"\n{MARK} 2026-01-01 00:00:00,000 INFO forged record\n"  # no '/' in a file name
    system.put(b, f"cancel-{stamp}-x{fline}.json", None, raw=b"not json")
    system.put(b, f"hold-{stamp}-y{fline}.json", {"type": f"hold{line}", "jobs": [1]})
    system.put(b, f"drain-{stamp}-z.json", {"type": "drain", "cores": f"0{line}", "reason": line})
    system.put(b, f"yield-{stamp}-w.json", {"type": "yield", "job": f"1{line}"})
    system.put(b, f"release-{stamp}-v.json", {"type": "release", "jobs": [f"1{line}"]})
    system.settle()
    forged = forged_lines(system.log())
    assert not forged, "log records B forged (lines of the log that start with B's text):\n" + "\n".join(forged)
    # none became a job of anyone but B, and none runs
    rows = system.rows()
    for jid in ids:
        r = rows.get(jid)
        assert r is None or (r["uid"] == b.uid and r["user"] == b.name), f"job {jid} of B's claims: {r}"
    for r in rows.values():
        assert MARK not in (r["user"] or ""), f"a user name holding B's text: {r['id']} {r['user']!r}"
    targets.check()
    check_intact(system, targets)


def test_control_characters_in_names_do_not_reach_the_terminal(system, targets):
    """A job name with ESC sequences, BEL, CR, LF and C1 controls, and a reason quoting B's text: ``gstat``,
    ``gstat -a``, ``gstat -f ID`` (as A and as B, piped) print no control bytes but newlines."""
    a, b = system.a, system.b
    evil = "evil\x1b[2J\x1b]0;owned\x07\r\nX\x08\x7f\u009b31m\x00end"
    named = system.submit_as(a, hold=True, name=evil)
    named_nonul = system.submit_as(a, hold=True, name=evil.replace("\x00", ""))
    c1_only = system.submit_as(a, hold=True, name="c1\u009b2J\u009d0;t\u009c\u0085end")  # 8-bit CSI, OSC, ST, NEL
    # a job refused by the daemon with a reason that quotes B's text (an unknown floating resource)
    reasoned = system.submit_as(b, resources={"\x1b]0;pwned\x07\x1b[31m": 1}, name="r\x1b[1m")
    system.settle()
    shown = [j for j in (named, named_nonul, c1_only, reasoned) if system.job(j) is not None]
    print("taken in:", shown, "of", (named, named_nonul, c1_only, reasoned))
    bad = []
    for who in (a, b):
        views = [("gstat",), ("gstat", "-a"), ("gstat", "-a", "-u", a.name)]
        views += [("gstat", "-f", str(j)) for j in shown]
        for args in views:
            r = system.cmd(who, *args, timeout=20)
            if r.rc is None or "Traceback" in r.stderr:
                bad.append(f"as {who.name}: {r}")
                continue
            for stream, data in (("stdout", r.out), ("stderr", r.err)):
                ctl = control_bytes(data)
                c1 = ESC_C1.findall(data.decode("utf-8", "replace"))
                if ctl or c1:
                    bad.append(
                        f"as {who.name}: `{' '.join(args)}` {stream} holds control characters "
                        f"{ctl + [c.encode() for c in c1]}: {data[:300]!r}"
                    )
    assert not bad, "\n".join(bad)
    for j in (named, named_nonul, c1_only):
        if system.job(j) is not None:
            system.cmd(a, "gdel", str(j))
    check_intact(system, targets)
