"""A system daemon keeps a user's job from the device nodes of the GPUs it does not hold.

Two GPUs are declared with nodes made here (char 195:0 and 195:1, no driver
behind them: ENXIO when a job may open one, EPERM when its cgroup refuses
it).  User A's job holding one GPU, running as A, tries both.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from gridsched.daemon import devcgroup
from tests.conftest import wait_for
from tests.security.conftest import TERMINAL

OPENER = """#!{python}
import errno, os
out = []
for p in {paths!r}:
    try:
        os.close(os.open(p, os.O_RDONLY))
        out.append("0")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
with open("open." + os.environ["GS_JOBID"], "w") as f:
    f.write(os.environ.get("GS_GPUS", "") + " " + ",".join(out) + " " + str(os.getuid()))
"""


@pytest.fixture
def nodes(env):
    c, why = devcgroup.controller(refresh=True)
    if c is None:
        pytest.skip(f"no device isolation on this host: {why}")
    d = Path(tempfile.mkdtemp(prefix="devnodes-", dir=env.base))
    os.chmod(d, 0o755)
    paths = []
    for i in range(2):
        p = d / f"nvidia{i}"
        try:
            os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(195, i))
        except OSError as e:
            shutil.rmtree(d, ignore_errors=True)
            pytest.skip(f"cannot make a device node here (mknod: {e.strerror})")
        os.chmod(p, 0o666)
        paths.append(str(p))
    yield paths
    shutil.rmtree(d, ignore_errors=True)


def _system(fresh, env, paths: list[str], enforce: str):
    topo = Path(tempfile.mkdtemp(prefix="topo-", dir=env.base)) / "topology.toml"
    os.chmod(topo.parent, 0o755)
    cpu = sorted(os.sched_getaffinity(0))[0]
    text = f'[[board]]\ncores = "0-3"\nhost_cpus = "{cpu}"\n'
    for i, p in enumerate(paths):
        text += f'[[device]]\ntype = "gpu"\nindex = {i}\nboard = 0\npath = "{p}"\n'
    topo.write_text(text)
    topo.chmod(0o644)
    return fresh({"machine": {"topology": str(topo)}, "devices": {"enforce": enforce}})


def test_a_users_job_is_refused_the_gpu_it_does_not_hold(fresh, env, nodes):
    system = _system(fresh, env, nodes, "required")
    a = system.a
    script = a.home / "open.py"
    script.write_text(OPENER.format(python=env.python, paths=nodes))
    os.chown(script, a.uid, a.gid)
    script.chmod(0o755)
    jid = system.gsub(a, "--gpus", "1", str(script))
    row = system.wait_state(jid, *TERMINAL, timeout=30)
    assert row["state"] == "COMPLETED", row
    out = a.home / f"open.{jid}"
    text = wait_for(lambda: out.exists() and out.read_text(), 10, "the job's report")
    gpu, errs, uid = text.split()
    assert int(uid) == a.uid  # the job ran as A, not as root
    mine = int(gpu)
    got = errs.split(",")
    assert got[mine] == "ENXIO" and got[1 - mine] == "EPERM"
    assert "device access: isolated by" in system.log()
