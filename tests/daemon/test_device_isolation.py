"""Jobs cannot open the device nodes of devices they do not hold (cgroup v1 devices rules, cgroup v2 program).

The machine declares two GPUs whose ``path`` are char nodes made here with
``mknod`` (major 195, minors 0 and 1, as ``/dev/nvidia0`` and
``/dev/nvidia1``).  No driver stands behind them: opening one gives ENXIO
when the job may, EPERM when its cgroup refuses it.  Where the host cannot
make nodes or write a devices controller, the tests say why and skip.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from gridsched.daemon import cgroup, devcgroup, launch
from gridsched.host.device_nodes import Node
from tests.conftest import wait_for

HOST = sorted(os.sched_getaffinity(0))

OPENER = """#!{python}
import errno, os
out = []
for p in {paths!r}:
    try:
        os.close(os.open(p, os.O_RDWR))
        out.append("0")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
with open("open." + os.environ["GS_JOBID"], "w") as f:
    f.write(os.environ.get("GS_GPUS", "") + " " + ",".join(out))
"""


def make_nodes(where: Path, count: int = 2) -> list[str]:
    """Char nodes 195:0 .. 195:count-1 in ``where``; skip (saying why) if they cannot be made or opened."""
    paths = []
    for i in range(count):
        p = where / f"nvidia{i}"
        try:
            os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(195, i))
        except OSError as e:
            pytest.skip(f"cannot make a device node here (mknod: {e.strerror}): device isolation cannot be tested")
        os.chmod(p, 0o666)
        paths.append(str(p))
    try:
        os.close(os.open(paths[0], os.O_RDWR))
    except OSError as e:
        if e.errno != errno.ENXIO:
            pytest.skip(f"a device node made here cannot be opened ({e.strerror}), so a refusal cannot be told apart")
    return paths


def need_controller() -> devcgroup.Controller:
    c, why = devcgroup.controller(refresh=True)
    if c is None:
        pytest.skip(f"no device isolation on this host: {why}")
    return c


def config(root: Path, paths: list[str], enforce: str = "auto") -> str:
    topo = root / "topology.toml"
    text = f'[[board]]\ncores = "0-1"\nhost_cpus = "{HOST[0]}"\n'
    for i, p in enumerate(paths):
        text += f'[[device]]\ntype = "gpu"\nindex = {i}\nboard = 0\npath = "{p}"\n'
    topo.write_text(text)
    return f"""
[machine]
topology = "{topo}"
[daemon]
autostart = false
[devices]
enforce = "{enforce}"
"""


def opened(gs, jid: int) -> tuple[set[int], list[str]]:
    path = gs.work / f"open.{jid}"
    text = wait_for(lambda: path.exists() and path.read_text().strip() or None, 20, f"job {jid}'s report")
    gpus, _, errs = text.rpartition(" ")
    return {int(g) for g in gpus.split(",") if g}, errs.split(",")


def job_cgroups(c: devcgroup.Controller) -> list[str]:
    return sorted(p.name for p in c.base.glob("gridsched-*"))


def test_a_job_opens_the_node_of_its_own_gpu_and_is_refused_the_others(make_gs, tmp_path):
    c = need_controller()
    before = job_cgroups(c)
    nodes_dir = tmp_path / "dev"
    nodes_dir.mkdir(mode=0o755)
    paths = make_nodes(nodes_dir)
    gs = make_gs(start=False)
    gs.cfgfile.write_text(config(gs.root, paths))
    gs.start()
    script = gs.work / "open.py"
    script.write_text(OPENER.format(python=sys.executable, paths=paths))
    script.chmod(0o755)
    one = gs.gsub("--gpus", "1", str(script))
    both = gs.gsub("--gpus", "2", str(script))
    none = gs.gsub(str(script))
    for jid in (one, both, none):
        gs.wait_state(jid, "COMPLETED")
    (mine,), errs = opened(gs, one)
    assert errs[mine] == "ENXIO"  # its own GPU: the driver (absent here) answers, not the cgroup
    assert errs[1 - mine] == "EPERM"
    assert opened(gs, both) == ({0, 1}, ["ENXIO", "ENXIO"])
    assert opened(gs, none) == (set(), ["EPERM", "EPERM"])
    log = wait_for(lambda: "device access:" in gs.log() and gs.log(), 10, "the daemon's device line")
    assert f"device access: isolated by {c.describe()}" in log
    # the job cgroups are gone with the jobs
    wait_for(lambda: job_cgroups(c) == before, 10, "the jobs' cgroups to be removed")


def test_with_enforce_off_the_other_gpu_is_not_refused(make_gs, tmp_path):
    need_controller()
    nodes_dir = tmp_path / "dev"
    nodes_dir.mkdir(mode=0o755)
    paths = make_nodes(nodes_dir)
    gs = make_gs(start=False)
    gs.cfgfile.write_text(config(gs.root, paths, enforce="off"))
    gs.start()
    script = gs.work / "open.py"
    script.write_text(OPENER.format(python=sys.executable, paths=paths))
    script.chmod(0o755)
    jid = gs.gsub("--gpus", "1", str(script))
    gs.wait_state(jid, "COMPLETED")
    assert opened(gs, jid)[1] == ["ENXIO", "ENXIO"]
    info = gs.run("gctl", "info", check=True).stdout
    assert 'device access:  not enforced: [devices] enforce = "off"' in info


def test_gctl_info_says_how_devices_are_isolated_and_which_have_no_node(make_gs, tmp_path):
    c = need_controller()
    nodes_dir = tmp_path / "dev"
    nodes_dir.mkdir(mode=0o755)
    paths = make_nodes(nodes_dir)
    gs = make_gs(start=False)
    gs.cfgfile.write_text(config(gs.root, [paths[0], str(gs.cfgfile)]))
    r = gs.run("gctl", "info", check=True)
    assert f"device access:  isolated by {c.describe()}" in r.stdout
    assert f"gpu 1 not isolated: {gs.cfgfile}: not a device node" in r.stdout
    data = json.loads(gs.run("gctl", "info", "--json", check=True).stdout)["device_isolation"]
    assert data["enforced"] is True and data["nodes"] == {"gpu:0": ["c 195:0"]}
    assert list(data["no_node"]) == ["gpu:1"]


# -- the mechanisms, each on its own ---------------------------------------------------------


def _in_cgroup_open(path: Path, nodes: list[str]) -> list[str]:
    """Fork a child that enters the cgroup at ``path`` and opens ``nodes``: the errno names it met."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        out = []
        try:
            cgroup.join(path)
            for p in nodes:
                try:
                    os.close(os.open(p, os.O_RDWR))
                    out.append("0")
                except OSError as e:
                    out.append(errno.errorcode[e.errno])
        except OSError as e:
            out = [f"join: {e}"]
        os.write(wr, ",".join(out).encode())
        os._exit(0)
    os.close(wr)
    data = b""
    while chunk := os.read(rd, 4096):
        data += chunk
    os.close(rd)
    os.waitpid(pid, 0)
    return data.decode().split(",")


@pytest.mark.parametrize("version", [1, 2])
def test_each_mechanism_refuses_exactly_the_listed_nodes(tmp_path, version):
    find = devcgroup._v1 if version == 1 else devcgroup._v2
    try:
        c = find()
        devcgroup._probe(c)
    except OSError as e:
        pytest.skip(f"cgroup v{version} device control cannot be used here: {e.strerror or e}")
    nodes_dir = tmp_path / "dev"
    nodes_dir.mkdir(mode=0o755)
    paths = make_nodes(nodes_dir, 3)
    path = devcgroup.create(c, f"gridsched-test-{os.getpid()}-{version}", [Node("c", 195, 1)])
    try:
        assert _in_cgroup_open(path, paths) == ["ENXIO", "EPERM", "ENXIO"]
        assert _in_cgroup_open(path, ["/dev/null"]) == ["0"]
    finally:
        assert cgroup.remove(path, timeout=5)
    # outside it, nothing is refused
    assert _in_cgroup_open(c.base, paths[1:2]) == ["ENXIO"]


def test_the_program_is_four_instructions_five_per_node_and_two():
    assert len(devcgroup.program([])) == 6 * 8
    prog = devcgroup.program([Node("c", 195, 1), Node("b", 8, 0), Node("c", 195, 1)])
    assert len(prog) == (4 + 5 * 2 + 2) * 8  # the same node twice is one check


# -- the shepherd, when isolation cannot be set up ---------------------------------------------


def _spec(tmp_path: Path, enforce: str) -> launch.Launch:
    jdir = tmp_path / f"job-{enforce}"
    jdir.mkdir()
    script = tmp_path / "ok.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    return launch.Launch(
        job_id=7,
        segment=1,
        job_dir=str(jdir),
        script=str(script),
        args=(),
        workdir=str(tmp_path),
        stdout=str(jdir / "out"),
        stderr=str(jdir / "err"),
        append=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        cpus=frozenset(HOST[:1]),
        uid=os.getuid(),
        gid=os.getgid(),
        user="me",
        deny_devices=(Node("c", 195, 1),),
        device_enforce=enforce,
    )


def _run(spec: launch.Launch) -> dict:
    pid = launch.spawn(spec)
    ex = launch.exit_file(spec.job_dir, spec.segment)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the shepherd did not end")
    return json.loads(ex.read_text())


def test_under_required_a_job_that_cannot_be_isolated_fails_saying_why(tmp_path, monkeypatch):
    # a devices hierarchy the shepherd cannot make the job's cgroup in
    monkeypatch.setattr(devcgroup, "_found", (devcgroup.Controller(1, tmp_path / "no-such-cgroup"), ""))
    result = _run(_spec(tmp_path, "required"))
    assert "cannot refuse it the devices it does not hold" in result["error"]
    assert result["exit_code"] == 127
    assert not (tmp_path / "job-required" / "out").exists()  # the script never ran


def test_under_auto_it_runs_and_its_stderr_says_it_is_not_isolated(tmp_path, monkeypatch):
    monkeypatch.setattr(devcgroup, "_found", (devcgroup.Controller(1, tmp_path / "no-such-cgroup"), ""))
    spec = _spec(tmp_path, "auto")
    result = _run(spec)
    assert result.get("exit_code") == 0 and "error" not in result
    assert Path(spec.stdout).read_text() == "ran\n"
    assert "job 7: not isolated from the devices it does not hold" in Path(spec.stderr).read_text()


def test_where_the_host_cannot_a_job_runs_without_a_word(tmp_path, monkeypatch):
    monkeypatch.setattr(devcgroup, "_found", (None, "the daemon is not root (uid 1000)"))
    spec = _spec(tmp_path, "auto")
    result = _run(spec)
    assert result.get("exit_code") == 0
    assert Path(spec.stderr).read_text() == ""


def test_a_job_cgroup_its_killed_shepherd_left_is_removed_when_the_daemon_restarts(make_gs, tmp_path):
    need_controller()
    nodes_dir = tmp_path / "dev"
    nodes_dir.mkdir(mode=0o755)
    paths = make_nodes(nodes_dir)
    gs = make_gs(start=False)
    gs.cfgfile.write_text(config(gs.root, paths))
    gs.start()
    jid = gs.gsub("--gpus", "1", "--wrap", "sleep 300")
    gs.wait_state(jid, "RUNNING")
    pid_file = gs.spool / "jobs" / str(jid) / "seg-1.pid"
    info = wait_for(lambda: _naming_the_job(pid_file), 10, "the shepherd's pid file naming the job")
    path = Path(info["devcgroup"])
    assert path.is_dir()
    wait_for(lambda: info["job"] in cgroup.members(path), 10, "the job's process in its device cgroup")
    gs.kill9()
    os.kill(info["pid"], 9)
    os.killpg(info["pgid"], 9)
    wait_for(lambda: not cgroup.members(path), 10, "the job's processes to be gone")
    assert path.is_dir()  # nobody removed it
    gs.start()
    row = gs.wait_state(jid, "FAILED")
    assert "shepherd was killed" in row.get("reason", "")
    wait_for(lambda: not path.exists(), 10, "the restarted daemon to remove the job's cgroup")


def _naming_the_job(pid_file: Path) -> dict | None:
    """The pid file's content once it names the job's process (the shepherd writes it again after the spawn)."""
    try:
        info = json.loads(pid_file.read_text())
    except (OSError, ValueError):
        return None
    return info if "job" in info else None


@pytest.mark.parametrize("version", [1, 2])
def test_the_shepherd_runs_its_job_refused_the_listed_nodes_and_removes_its_cgroup(tmp_path, monkeypatch, version):
    find = devcgroup._v1 if version == 1 else devcgroup._v2
    try:
        c = find()
        devcgroup._probe(c)
    except OSError as e:
        pytest.skip(f"cgroup v{version} device control cannot be used here: {e.strerror or e}")
    monkeypatch.setattr(devcgroup, "_found", (c, ""))
    exec_job = launch._exec_job

    def forked(*args, **kwargs):
        (tmp_path / "forked").touch()
        exec_job(*args, **kwargs)

    monkeypatch.setattr(launch, "_exec_job", forked)
    nodes_dir = tmp_path / "dev"
    nodes_dir.mkdir(mode=0o755)
    paths = make_nodes(nodes_dir)
    spec = _spec(tmp_path, "required")
    Path(spec.script).write_text(
        f"#!{sys.executable}\n"
        "import errno, os\n"
        f"for p in {paths!r}:\n"
        "    try:\n"
        "        os.close(os.open(p, os.O_RDONLY))\n"
        "        print(0)\n"
        "    except OSError as e:\n"
        "        print(errno.errorcode[e.errno])\n"
        "print(open('/proc/self/cgroup').read())\n"
    )
    result = _run(spec)
    assert result.get("exit_code") == 0, result
    out = Path(spec.stdout).read_text().splitlines()
    assert out[:2] == ["ENXIO", "EPERM"]
    name = cgroup.job_name(spec.job_dir, spec.segment)
    assert any(line.endswith("/" + name) for line in out[2:]), out  # it ran in its own cgroup
    assert not (c.base / name).exists()  # removed with the job
    # spawned from the shepherd inside its device cgroup, as a job without one is, not forked and prepared
    assert not (tmp_path / "forked").exists()
