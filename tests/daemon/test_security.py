"""System mode with two real users: what user B tries against user A must fail.

Runs only as root with ``useradd``: two throwaway users are created and removed
at teardown.  A system-mode daemon (root) serves a temporary spool.  User B's
attempts run in a process forked from the test that has switched to B's uid
and groups before doing anything.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest

from gridsched import config as configmod
from gridsched import queue
from gridsched.spool import Spool
from gridsched.state import StateDB
from gridsched.submit import Options, Script, build_spec
from tests.conftest import wait_for

BIN = Path(sys.executable).parent
SECRET = Path("/etc/gridsched-test-secret")


def _need_root() -> None:
    if os.geteuid() != 0:
        print("security tests skipped: they need root to create users")
        pytest.skip("needs root (creates two users)")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        print("security tests skipped: no useradd/userdel on this host")
        pytest.skip("no useradd/userdel")


@pytest.fixture(scope="module")
def users():
    _need_root()
    made = []
    try:
        for tag in ("a", "b"):
            name = f"gst{tag}{os.getpid() % 100000}"
            subprocess.run(["useradd", "-M", "-U", "-s", "/bin/sh", name], check=True, capture_output=True)
            made.append(name)
        yield [pwd.getpwnam(n) for n in made]
    finally:
        for n in made:
            for p in psutil.process_iter():
                try:
                    if p.username() == n:
                        p.kill()
                except psutil.Error:
                    pass
            subprocess.run(["userdel", n], capture_output=True)


def as_user(pw: pwd.struct_passwd, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` in a child process with ``pw``'s uid and groups; its result, or the error it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            out = {"ok": fn(*args, **kwargs)}
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out, default=str).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


class System:
    """A system-mode daemon on a temporary spool that users can reach."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="gs-sec-"))
        os.chmod(self.base, 0o755)
        self.spool_dir = self.base / "spool"
        self.cfg = self.base / "gridsched.toml"
        self.cfg.write_text('[scheduler]\npolicy = "fcfs"\n[jobs]\nkill_grace = "1s"\n[machine]\ncores = 4\n'
                            '[daemon]\nautostart = false\nsystem = true\n')
        self.env = {**os.environ, "GRIDSCHED_SPOOL": str(self.spool_dir), "GRIDSCHED_CONFIG": str(self.cfg)}
        self.proc = subprocess.Popen([str(BIN / "gschedd"), "run"], env=self.env, start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: (self.spool_dir / "gschedd.sock").exists() or self.proc.poll() is not None, 20,
                 "the system daemon to start")
        assert self.proc.poll() is None, self.log()
        self.spool = Spool(self.spool_dir)
        self.config = configmod.load(str(self.cfg))

    def home(self, pw: pwd.struct_passwd) -> Path:
        d = self.base / pw.pw_name
        d.mkdir(exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        return d

    def log(self) -> str:
        try:
            return (self.spool_dir / "gschedd.log").read_text()
        except OSError:
            return ""

    def job(self, jid: int) -> dict[str, Any] | None:
        db = StateDB(self.spool.db)
        try:
            return db.job(jid)
        finally:
            db.close()

    def wait_state(self, jid: int, *states: str, timeout: float = 30) -> dict[str, Any]:
        def ok():
            j = self.job(jid)
            return j if j and j["state"] in states else None

        try:
            return wait_for(ok, timeout, f"job {jid} to be {states}")
        except AssertionError:
            raise AssertionError(f"job {jid}: {self.job(jid)}\n{self.log()}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for p in psutil.process_iter():
            try:
                if p.environ().get("GS_SPOOL") == str(self.spool_dir):
                    p.kill()
            except (psutil.Error, OSError):
                pass
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def system(users):
    s = System()
    SECRET.write_text("root only\n")
    os.chmod(SECRET, 0o600)
    yield s
    s.stop()
    SECRET.unlink(missing_ok=True)


def submit(system: System, workdir: str, text: str, **spec_changes: Any) -> int:
    """Submit as the calling user through the spool API gsub uses; the job id."""
    spec = build_spec(system.spool, system.config, Script(text, "t", "t"), Options(hold="hold" in spec_changes),
                      env={"PATH": "/usr/bin:/bin"}, cwd=Path(workdir))
    spec_changes.pop("hold", None)
    spec.update(spec_changes)
    system.spool.submit(spec)
    return spec["id"]


def test_the_spool_is_shared_safely(system):
    st = {p: os.stat(system.spool_dir / p).st_mode & 0o7777 for p in ("incoming", "quarantine", "jobs", "seq",
                                                                      "seq.lock", "state.db")}
    assert st == {"incoming": 0o1777, "quarantine": 0o711, "jobs": 0o711, "seq": 0o666, "seq.lock": 0o666,
                  "state.db": 0o644}


def test_user_b_cannot_touch_user_a(system, users):
    a, b = users
    home_a, home_b = system.home(a), system.home(b)
    ja = as_user(a, submit, system, str(home_a), "#!/bin/sh\nid -u > uid.$GS_JOBID; id -G > groups.$GS_JOBID\n"
                 "sleep 60\n")["ok"]
    ra = system.wait_state(ja, "RUNNING")
    assert ra["uid"] == a.pw_uid and ra["user"] == a.pw_name
    wait_for(lambda: (home_a / f"groups.{ja}").exists(), 10, "A's job to write its ids")
    assert (home_a / f"uid.{ja}").read_text().split() == [str(a.pw_uid)]  # it runs as A...
    assert "0" not in (home_a / f"groups.{ja}").read_text().split()  # ...without root's group

    # B can read the queue (state.db is readable by all)
    seen = as_user(b, lambda: [j["state"] for j in queue.load_jobs(system.spool, [ja])])
    assert seen == {"ok": ["RUNNING"]}

    # 1. cancel or hold A's job: gdel refuses; a raw request is refused by the daemon
    refused = as_user(b, lambda: queue.control(system.spool, "cancel", [ja], os.getuid()))["ok"]
    assert refused[0] == [] and "owned by" in refused[1][0][1]
    for kind in ("cancel", "hold"):
        as_user(b, lambda k=kind: str(system.spool.request(k, jobs=[ja])))
    wait_for(lambda: system.log().count(f"of job {ja} by uid {b.pw_uid} refused") >= 2, 15, "the daemon to refuse")
    assert system.job(ja)["state"] == "RUNNING"

    # 2. a request claiming A's uid (and one claiming root's group) is quarantined
    claim_uid = as_user(b, submit, system, str(home_b), "#!/bin/sh\ntouch pwned\n",
                        uid=a.pw_uid, gid=b.pw_gid, user=a.pw_name)["ok"]
    claim_gid = as_user(b, submit, system, str(home_b), "#!/bin/sh\ntouch pwned\n", gid=0)["ok"]
    q = system.spool_dir / "quarantine"
    wait_for(lambda: (q / f"submit-{claim_uid:010d}.json.why").exists(), 15, "the uid claim to be quarantined")
    wait_for(lambda: (q / f"submit-{claim_gid:010d}.json.why").exists(), 15, "the gid claim to be quarantined")
    assert "claims uid" in (q / f"submit-{claim_uid:010d}.json.why").read_text()
    assert "claims gid 0" in (q / f"submit-{claim_gid:010d}.json.why").read_text()
    assert system.job(claim_uid) is None and system.job(claim_gid) is None
    assert not (home_a / "pwned").exists() and not (home_b / "pwned").exists()

    # 3. output to a root-only file: the file is opened as B, so the job fails and the file is untouched
    jo = as_user(b, submit, system, str(home_b), "#!/bin/sh\necho overwritten\n", stdout=str(SECRET))["ok"]
    jr = system.wait_state(jo, "FAILED")
    assert "cannot open output file" in jr["reason"]
    assert SECRET.read_text() == "root only\n"

    # 4. links planted in the spool: not followed, never written through
    planted = as_user(b, lambda: os.symlink(SECRET, system.spool_dir / "incoming" / "submit-0000099999.json"))
    assert "ok" in planted
    wait_for(lambda: (q / "submit-0000099999.json.why").exists(), 15, "the symlink to be quarantined")
    for target in ("seq", "state.db", "jobs/evil"):
        r = as_user(b, lambda t=target: os.symlink(SECRET, system.spool_dir / t))
        assert "error" in r, target
    jh = as_user(b, submit, system, str(home_b), "#!/bin/sh\necho fine\n", hold=True)["ok"]
    jdir = system.spool_dir / "jobs" / str(jh)
    wait_for(jdir.exists, 15, "B's held job to be taken in")

    def plant(d: Path) -> int:
        n = 0
        for name in ["seg-1.pid", "seg-1.exit"] + [f".seg-1.{x}.{p}.tmp" for x in ("pid", "exit")
                                                   for p in range(1, 4 << 10)]:
            os.symlink(SECRET, d / name)
            n += 1
        return n

    assert as_user(b, plant, jdir)["ok"] > 1000
    as_user(b, lambda: str(system.spool.request("release", jobs=[jh])))
    assert system.wait_state(jh, "COMPLETED")["exit_code"] == 0
    assert SECRET.read_text() == "root only\n"
    assert not any(p.is_symlink() for p in jdir.iterdir())

    # 5. A's job script, pending request and checkpoint directory are A's alone
    for path in (system.spool_dir / "jobs" / str(ja) / "script",):
        assert "PermissionError" in as_user(b, lambda p=path: Path(p).read_text())["error"]
    jp = as_user(a, submit, system, str(home_a), "#!/bin/sh\necho secret-token\n", hold=True)["ok"]
    req = system.spool_dir / "incoming" / f"submit-{jp:010d}.json"
    if req.exists():  # not yet taken in: the request itself is private
        r = as_user(b, lambda: req.read_text())
        assert "error" in r or "secret-token" not in r.get("ok", "")
    system.wait_state(jp, "HELD")
    assert "PermissionError" in as_user(b, lambda: (system.spool_dir / "jobs" / str(jp) / "script").read_text())["error"]
    assert "PermissionError" in as_user(b, lambda: os.listdir(system.spool_dir / "jobs"))["error"]

    # 6. A's environment, arguments and output paths: not in the job table all may read, only in A's own file
    je = as_user(a, submit, system, str(home_a), "#!/bin/sh\ntrue\n", hold=True,
                 env={"PATH": "/usr/bin:/bin", "A_TOKEN": "secret-token"})["ok"]
    system.wait_state(je, "HELD")
    row = queue.load_jobs(system.spool, [je])[0]
    assert "env" not in row["spec"] and "stdout" not in row["spec"]
    as_b = as_user(b, lambda: queue.private(system.spool, queue.load_jobs(system.spool, [je])[0])["spec"])["ok"]
    assert "env" not in as_b and "stdout" not in as_b
    as_a = as_user(a, lambda: queue.private(system.spool, queue.load_jobs(system.spool, [je])[0])["spec"])["ok"]
    assert as_a["env"]["A_TOKEN"] == "secret-token" and as_a["stdout"].startswith(str(home_a))

    # A can still cancel A's own job
    assert as_user(a, lambda: queue.control(system.spool, "cancel", [ja, jp, je], os.getuid()))["ok"][0] == [ja, jp, je]
    system.wait_state(ja, "CANCELLED")
    system.wait_state(jp, "CANCELLED")


def test_concurrent_users_never_share_a_job_id(system, users):
    a, b = users
    homes = {pw.pw_name: str(system.home(pw)) for pw in users}

    def many(home: str) -> list[int]:
        return [submit(system, home, "#!/bin/sh\ntrue\n", hold=True) for _ in range(40)]

    results = {}
    pids = {}
    for pw in users:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            out = as_user(pw, many, homes[pw.pw_name])
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        pids[pw.pw_name] = (pid, r)
    for name, (pid, r) in pids.items():
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        results[name] = json.loads(data)["ok"]
    ids = results[a.pw_name] + results[b.pw_name]
    assert len(set(ids)) == len(ids) == 80
    for jid in ids:
        system.wait_state(jid, "HELD")
    owners = {jid: system.job(jid)["uid"] for jid in ids}
    assert all(owners[j] == a.pw_uid for j in results[a.pw_name])
    assert all(owners[j] == b.pw_uid for j in results[b.pw_name])
