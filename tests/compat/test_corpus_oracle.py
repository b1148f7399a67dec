"""The corpus read by the real systems: each Slurm script of ``scripts/`` is submitted held to a real
Slurm 22.05 (``sbatch -H``) and read back (``scontrol show job``), and what Slurm read is compared with
what gsub reads of the same script: accepted or refused, cores, walltime, memory, GPUs, output and error
paths, array indices.

Where the two differ on purpose (docs/compat.md says why), :data:`DELIBERATE` names the script and the
field, and the test asserts that the difference is still there, so an entry cannot outlive its cause.
The local Slurm (``../shared/tools/slurm-localhost``) is one node of 16 CPUs and 16000 MB, with the GPUs
it was started with, and one partition: a script is submitted with ``-p`` naming that partition (the
scripts' own partitions do not exist there); a script asking for more memory, more GPUs or higher array
indices than that node and its MaxArraySize allow is skipped with the reason printed.  Where no Slurm
answers (as in CI), every test is skipped with the reason.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gridsched.job.env import host
from gridsched.protocol import arrays
from tests.compat.test_corpus import DEFAULT_WALLTIME, SCRIPTS, WANT, Refused, Want, gpus_of, submit

NO_VAL = "4294967294"  # Slurm's %a of a job that is not (yet) an array task
SLURM_SCRIPTS = sorted(n for n in WANT if n.startswith("slurm-"))
FIELDS = ("cores", "walltime", "mem", "gpus", "stdout", "stderr", "array")

# (script, field) -> why gridsched reads it otherwise than Slurm does (docs/compat.md, "Read otherwise
# than Slurm reads it"); "verdict": one accepts what the other refuses.
DELIBERATE: dict[tuple[str, str], str] = {
    ("slurm-mpi-two-nodes.sh", "verdict"): "a request for 2 nodes runs on this one machine with the cores of both",
    # sbatch reads #PBS lines too, after its #SBATCH ones (so theirs win: 8 cores, 2 hours), unless
    # --ignore-pbs; gsub reads one system's directives, the first kind in the script, with a warning
    ("slurm-then-pbs-lines.sh", "cores"): "the #SBATCH lines are read, not the #PBS lines after them",
    ("slurm-then-pbs-lines.sh", "walltime"): "the #SBATCH lines are read, not the #PBS lines after them",
}


def _env(conf: str | None) -> dict[str, str]:
    """The environment of the Slurm commands: this one, with ``conf`` as SLURM_CONF where given."""
    return {**os.environ, **({"SLURM_CONF": conf} if conf else {})}


def _local(name: str, conf: str | None = None) -> str:
    r = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, env=_env(conf))
    for line in r.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == name:
            return value.strip()
    return ""


@functools.cache
def _node(conf: str | None = None) -> dict[str, Any]:
    """The local Slurm's partition, node memory, GPUs and MaxArraySize, through ``conf`` (SLURM_CONF) where
    given: a Slurm that a fixture started answers only there."""
    env = _env(conf)
    part = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30, env=env).stdout
    node = subprocess.run(["scontrol", "show", "node"], capture_output=True, text=True, timeout=30, env=env).stdout
    mem = re.search(r"RealMemory=(\d+)", node)
    gpus = re.search(r"Gres=gpu(?::[a-z0-9]+)?:(\d+)", node)
    return {
        "partition": part.split()[0].rstrip("*") if part.split() else "debug",
        "mem": int(mem.group(1)) << 20 if mem else 0,
        "gpus": int(gpus.group(1)) if gpus else 0,
        "max_array": int(_local("MaxArraySize", conf) or 1001),
    }


_NO_SLURM: list[str] = []  # why no Slurm answered, once known: the module's other tests skip at once


@pytest.fixture
def local(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The local Slurm's partition, node memory (bytes), GPUs and MaxArraySize; skipped, with the reason
    printed, where no Slurm answers (``slurm_cluster``, asked once per module)."""
    if _NO_SLURM:
        print(_NO_SLURM[0])
        pytest.skip(_NO_SLURM[0])
    try:
        request.getfixturevalue("slurm_cluster")
    except pytest.skip.Exception as e:
        _NO_SLURM.append(str(e.msg))
        raise
    return _node(os.environ.get("SLURM_CONF"))


def _seconds(limit: str) -> int:
    """Seconds of a TimeLimit ``[D-]HH:MM:SS``; UNLIMITED (the local partition has no DefaultTime) is the
    corpus site's default walltime."""
    if limit in ("UNLIMITED", "INFINITE"):
        return DEFAULT_WALLTIME
    days, _, hms = limit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return (int(days or 0) * 24 + h) * 3600 + m * 60 + s


def _bytes(size: str) -> int:
    units = {"K": 10, "M": 20, "G": 30, "T": 40}
    return int(float(size[:-1]) * (1 << units[size[-1]])) if size[-1] in units else int(size) << 20


def _field(show: str, key: str) -> str | None:
    m = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", show)
    return m.group(1) if m else None


def slurm_reads(work: Path, name: str, partition: str, gs_id: int) -> dict[str, Any] | str:
    """What Slurm read of ``name`` (submitted held from ``work``, then cancelled), or why it refused it or
    why the job could never run there (``sbatch --test-only``: this Slurm, without EnforcePartLimits, takes
    in a job larger than its node and leaves it pending for ever, where a site enforcing its limits
    refuses it; gsub refuses it).  Paths are written with ``gs_id`` for Slurm's job id."""
    test = subprocess.run(
        ["sbatch", "--test-only", "-p", partition, name], cwd=work, capture_output=True, text=True, timeout=60
    )
    if test.returncode != 0:
        return test.stderr.strip() or "refused"
    r = subprocess.run(
        ["sbatch", "--parsable", "-H", "-p", partition, name], cwd=work, capture_output=True, text=True, timeout=60
    )
    if r.returncode != 0:
        return r.stderr.strip() or "refused"
    jid = r.stdout.strip().split(";")[0]
    try:
        show = subprocess.run(
            ["scontrol", "show", "job", "-o", jid], capture_output=True, text=True, timeout=30
        ).stdout.splitlines()[0]
    finally:
        subprocess.run(["scancel", jid], capture_output=True, timeout=30)
    cores = int(_field(show, "NumCPUs") or 0)
    mem: int | None = None
    if (node := _field(show, "MinMemoryNode")) not in (None, "0"):
        mem = _bytes(str(node))
    elif (per := _field(show, "MinMemoryCPU")) is not None:
        mem = _bytes(per) * cores
    tres = _field(show, "TresPerNode") or _field(show, "TresPerJob") or ""
    per_task = _field(show, "TresPerTask") or ""  # --gpus-per-task: gres:gpu:N of each of NumTasks
    gpu = re.search(r"gres:gpu(?::[A-Za-z0-9_]+)?:(\d+)", tres)
    task_gpu = re.search(r"gres:gpu(?::[A-Za-z0-9_]+)?:(\d+)", per_task)
    gpus = int(gpu.group(1)) if gpu else 0
    if task_gpu:
        gpus += int(task_gpu.group(1)) * int(_field(show, "NumTasks") or 1)
    task = _field(show, "ArrayTaskId")

    def path(key: str) -> str:
        # %N (the first node's name) is filled in when the job starts: the node is this host here
        p = os.path.normpath(str(_field(show, key)).replace("%N", host()))
        if task:  # an array's record, which may keep %a (or %3a) as written: each task's index is filled in
            p = arrays.task_path(p, int(jid), int(NO_VAL))
        return re.sub(rf"(?<!\d){jid}(?!\d)", str(gs_id), p.replace(str(work), "DIR"))

    return {
        "cores": cores,
        "walltime": _seconds(str(_field(show, "TimeLimit"))),  # no time: the site's default, 1 hour
        "mem": mem,
        "gpus": gpus,
        "stdout": path("StdOut"),
        "stderr": path("StdErr"),
        "array": tuple(arrays.parse(task, 1 << 31).indices) if task else None,
    }


def gsub_reads(name: str, root: Path) -> tuple[dict[str, Any] | str, int]:
    """What gsub read of ``name`` (submitted with no daemon), in the terms of :func:`slurm_reads`, and the
    job's id."""
    out = submit(name, root)
    spec = out.spec
    if spec is None:
        return out.stderr.strip() or "refused", 1

    def path(p: str) -> str:
        p = arrays.task_path(p, spec["id"], int(NO_VAL)) if spec.get("array") else p
        return os.path.normpath(p).replace(str(out.submit_dir), "DIR")

    return {
        "cores": spec["ncpus"],
        "walltime": spec["walltime"],
        "mem": spec["mem"],
        "gpus": gpus_of(spec),
        "stdout": path(spec["stdout"]),
        "stderr": path(spec["stderr"]),
        "array": tuple(arrays.parse(spec["array"]).indices) if spec.get("array") else None,
    }, spec["id"]


def _skip_reason(name: str, local: dict[str, Any]) -> str | None:
    want = WANT[name]
    if not isinstance(want, Want):
        return None
    if want.mem is not None and want.mem > local["mem"]:
        return f"{name} asks for {want.mem >> 20} MB; the local Slurm's node has {local['mem'] >> 20} MB"
    if want.gpus > local["gpus"]:
        return f"{name} asks for {want.gpus} GPUs; the local Slurm has {local['gpus']} (GS_SLURM_GPUS)"
    if want.array is not None and max(want.array) >= local["max_array"]:
        return f"{name}: index {max(want.array)} is beyond the local Slurm's MaxArraySize {local['max_array']}"
    return None


@pytest.mark.parametrize("name", SLURM_SCRIPTS)
def test_slurm_reads_the_script_as_gsub_does(local, tmp_path, name):
    why = _skip_reason(name, local)
    if why:
        print(why)
        pytest.skip(why)
    want = WANT[name]
    work = tmp_path / "slurm"
    work.mkdir()
    for d in want.mkdirs:
        (work / d).mkdir()
    shutil.copyfile(SCRIPTS / name, work / name)
    ours, gs_id = gsub_reads(name, tmp_path / "gs")
    theirs = slurm_reads(work, name, local["partition"], gs_id)
    verdicts = (isinstance(theirs, dict), isinstance(ours, dict))
    deliberate = DELIBERATE.get((name, "verdict"))
    if deliberate and "refused by both" not in deliberate:
        assert verdicts[0] != verdicts[1], f"no longer differs ({deliberate}): Slurm {theirs!r}, gsub {ours!r}"
        return
    assert verdicts[0] == verdicts[1], f"Slurm: {theirs!r}\ngsub: {ours!r}"
    assert isinstance(want, Refused) == (not verdicts[1])
    if not isinstance(theirs, dict) or not isinstance(ours, dict):
        return
    differ = {f: (theirs[f], ours[f]) for f in FIELDS if theirs[f] != ours[f]}
    listed = {f for f in FIELDS if (name, f) in DELIBERATE}
    assert set(differ) == listed, {"Slurm, gsub": differ, "listed as deliberate": sorted(listed)}
