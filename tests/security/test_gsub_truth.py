"""What A's commands say is true: a submission is either refused by the command (non-zero exit, exactly one
line ``PROG: error: ...``, no traceback) or it becomes a job of A's; a control command on a full spool
either refuses in one line or does what it said."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, Result, System, as_user, check_intact, run_cmd


def refused_or_a_job(system: System, r: Result, prog: str = "gsub", timeout: float = 20) -> str:
    """ "refused" or "job ID"; fails the test when neither holds."""
    a = system.a
    if r.rc != 0:
        why = r.one_line_error(prog)
        assert why is None, why
        return "refused"
    assert "Traceback" not in r.stderr, str(r)
    jid = int(r.stdout.split()[-1])
    system.ids[a.name].add(jid)
    q = system.spool_dir / "quarantine"
    try:
        wait_for(lambda: system.job(jid) is not None or not system.alive(), timeout, f"job {jid} to be taken in")
    except AssertionError:
        pass
    row = system.job(jid)
    quarantined = sorted(p.name for p in q.iterdir() if str(jid) in p.name) if q.exists() else []
    assert row is not None, (
        f"{prog} accepted the submission and printed {jid}, but no such job exists "
        f"(quarantined: {quarantined}); daemon {system.why_dead()}\n{system.log_tail(5)}"
    )
    assert row["uid"] == a.uid, row
    return f"job {jid} {row['state']}"


def test_a_request_over_8_mib(system, targets):
    """A 1 MiB script and an environment whose JSON form is over 9 MiB (control characters are written as
    ``\\u00XX``): over the daemon's limit for one request, though the kernel let gsub start with it."""
    a = system.a
    script = a.home / "big.sh"
    script.write_text("#!/bin/sh\n" + ("# " + "x" * 97 + "\n") * 10_000 + "true\n")  # just under 1 MiB
    os.chown(script, a.uid, a.gid)
    env = {f"BIG{i}": "\x01" * 100_000 for i in range(16)}
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    want = 64 << 20 if hard == resource.RLIM_INFINITY else min(hard, 64 << 20)
    resource.setrlimit(resource.RLIMIT_STACK, (want, hard))  # room for the environment at exec
    try:
        r = system.cmd(a, "gsub", "-t", "1m", str(script), extra_env=env, timeout=60)
    finally:
        resource.setrlimit(resource.RLIMIT_STACK, (soft, hard))
    if r.rc is not None and r.rc != 0 and "Argument list too long" in r.stderr:
        pytest.skip("the kernel refuses an environment this large here")
    print(refused_or_a_job(system, r))
    check_intact(system, targets)


def test_a_job_name_that_is_not_utf8(system, targets):
    a = system.a
    argv = [str(system.env_.bindir / "gsub"), b"-N\xff\xfe", "-t", "1m", "--wrap", "true"]
    r = run_cmd(argv, a, system.user_env(a), a.home, 30)
    print(refused_or_a_job(system, r))
    r = run_cmd(
        [str(system.env_.bindir / "gsub"), "-t", "1m", "-o", b"out-\xff.%j", "--wrap", "true"],
        a,
        system.user_env(a),
        a.home,
        30,
    )
    print(refused_or_a_job(system, r))
    check_intact(system, targets)


def test_a_nul_through_the_python_api(system, targets):
    """argv and the environment of a process cannot hold a NUL, but the Python API's arguments can."""
    a = system.a
    try:
        import gridsched.api.client  # noqa: F401
    except ImportError as e:
        print(f"skipped: no gridsched.api.client ({e})")
        pytest.skip("no gridsched.api.client")
    spool, cfg = str(system.spool_dir), str(system.cfg)

    def submit(**kw):
        from gridsched.api.client import Client, GridschedError

        os.chdir(a.home)
        try:
            return {"id": Client(spool, cfg).submit(command="true", walltime="1m", **kw).id}
        except GridschedError as e:
            return {"refused": str(e)}

    for kw in (
        {"env": {"PATH": "/usr/bin:/bin", "X": "a\x00b"}},
        {"args": ["a\x00b"]},
        {"name": "a\x00b"},
        {"env": {"PATH": "/usr/bin:/bin", "X\x00Y": "1"}},
        {"output": "out\x00.txt"},
    ):
        res = as_user(a, submit, **kw)
        assert "ok" in res, f"the API raised something other than GridschedError for {kw}: {res}"
        out = res["ok"]
        print(kw, "->", out)
        if "refused" in out:
            assert "\n" not in out["refused"].strip(), out
            continue
        jid = out["id"]
        system.ids[a.name].add(jid)
        wait_for(lambda j=jid: system.job(j) is not None, 20, f"job {jid}, which the API said it submitted, to exist")
        assert system.job(jid)["uid"] == a.uid
    check_intact(system, targets)


def test_an_output_path_with_a_component_over_255_bytes(system, targets):
    a = system.a
    r = system.cmd(a, "gsub", "-t", "1m", "-o", "x" * 300 + ".%j", "--wrap", "true")
    print(refused_or_a_job(system, r))
    r = system.cmd(a, "gsub", "-t", "1m", "-o", "d" * 5000 + "/out", "--wrap", "true")
    print(refused_or_a_job(system, r))
    check_intact(system, targets)


def test_a_dependency_on_an_id_of_23_digits(system, targets):
    a = system.a
    for spec in ("afterok:" + "1" * 23, "afterany:12345678901234567890123", "afterok:1:" + "9" * 40):
        r = system.cmd(a, "gsub", "-t", "1m", "-d", spec, "--wrap", "true")
        print(spec[:30], "->", refused_or_a_job(system, r))
    check_intact(system, targets)


def _mount(where: Path, size: str) -> str | None:
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)], capture_output=True, text=True
    )
    return None if r.returncode == 0 else f"mount -t tmpfs failed: {r.stderr.strip()}"


def test_commands_on_a_full_spool(env):
    """The spool's file system is full: A's gdel, grls, ghold and gsub either refuse in one line or do what
    they said once there is room again."""
    where = Path(tempfile.mkdtemp(prefix="full-", dir=env.base))
    os.chmod(where, 0o755)
    why = _mount(where, "24m")
    if why:
        where.rmdir()
        print(f"skipped: {why}")
        pytest.skip(why)
    system = None
    try:
        system = System(env, tag="full", parent=where)
        system.start()
        a = system.a
        held = system.gsub(a, "--hold", "-t", "1m", "--wrap", "true")
        held2 = system.gsub(a, "--hold", "-t", "1m", "--wrap", "true")
        pending = system.gsub(a, "-n", "4", "-t", "1m", "--wrap", "sleep 30")
        waiting = system.gsub(a, "-n", "4", "-t", "1m", "--wrap", "true")
        system.wait_state(held, "HELD")
        system.wait_state(held2, "HELD")
        system.wait_state(pending, "RUNNING")
        system.wait_state(waiting, "PENDING")
        with open(system.base / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError:
                pass
        said = {}
        for name, args in (
            ("gdel", (str(held),)),
            ("grls", (str(held2),)),
            ("ghold", (str(waiting),)),
            ("gsub", ("-t", "1m", "--wrap", "true")),
        ):
            r = system.cmd(a, name, *args, timeout=30)
            said[name] = r
            if r.rc != 0:
                why = r.one_line_error(name)
                assert why is None, why
            else:
                assert "Traceback" not in r.stderr, str(r)
        print({k: (v.rc, v.stdout.strip()[:80], v.stderr.strip()[:120]) for k, v in said.items()})
        (system.base / "filler").unlink()
        system.wake()
        # what a command said it did, it does once there is room
        if said["gdel"].rc == 0:
            system.wait_state(held, "CANCELLED", timeout=20)
        if said["grls"].rc == 0:
            system.wait_state(held2, *TERMINAL, timeout=20)
        if said["ghold"].rc == 0:
            system.wait_state(waiting, "HELD", timeout=20)
        if said["gsub"].rc == 0:
            jid = int(said["gsub"].stdout.split()[-1])
            system.ids[a.name].add(jid)
            system.wait_state(jid, *TERMINAL, timeout=20)
        system.cmd(a, "gdel", str(pending), str(waiting), str(held), str(held2))
        check_intact(system)
    finally:
        if system is not None:
            system.cleanup()
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        shutil.rmtree(where, ignore_errors=True)
