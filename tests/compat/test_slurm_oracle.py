"""The same small ``#SBATCH`` scripts run by a real Slurm 22.05 (../shared/tools/slurm-localhost, with two
GRES GPUs) and by gridsched, side by side: what a user sees must be the same, its job ids and host names
set apart — the ``SLURM_*``, ``OMP_*``, ``CUDA_*`` and device variables and their values, the output
files' names, the jobs' end states and exit codes, and what the in-job commands print.

Slurm's own bookkeeping names (:data:`SLURM_ONLY`) are left out of the comparison: docs/compat.md says
why gridsched does not set them.  Where no Slurm answers and none can be started here (as in CI), each
test is skipped with the reason printed.  A Slurm these tests started is stopped after them.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.slurm_local import Slurm
from tests.conftest import BIN, Gridsched, wait_for

ROOT = Path(__file__).resolve().parents[2]
# Slurm's bookkeeping, which no script reads for its work: not set by gridsched (docs/compat.md)
SLURM_ONLY = frozenset(
    "SLURM_CONF SLURM_GTIDS SLURM_TASK_PID SLURM_PRIO_PROCESS SLURM_TOPOLOGY_ADDR SLURM_TOPOLOGY_ADDR_PATTERN "
    "SLURM_NODE_ALIASES SLURM_WORKING_CLUSTER SLURM_JOB_QOS SLURM_EXPORT_ENV".split()
)
SHOWN = re.compile(r"^(SLURM|SLURMD|OMP|CUDA|GPU_DEVICE|ROCR|HIP)_?[A-Z_]*=")
TOPOLOGY = '[[board]]\nid = 0\ncores = "0-15"\nhost_cpus = "0-1"\n' + "".join(
    f'\n[[device]]\ntype = "gpu"\nindex = {i}\nboard = 0\n' for i in range(2)
)
CONFIG = """
[scheduler]
policy = "fcfs"
[machine]
cores = 16
topology = "topology.toml"
[jobs]
kill_grace = "1s"
default_walltime = "1h"
[daemon]
autostart = false
"""
ENV_DUMP = "env | grep -E '^(SLURM|OMP|CUDA|GPU_DEVICE|ROCR|HIP)' | sort\n"


@pytest.fixture(scope="module")
def gs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gridsched]:
    g = Gridsched(tmp_path_factory.mktemp("oracle") / "gs", CONFIG)
    (g.root / "topology.toml").write_text(TOPOLOGY)
    g.env = {k: v for k, v in g.env.items() if not k.startswith(("SLURM_", "OMP_"))}
    try:
        g.start()
        yield g
    finally:
        g.cleanup()


def gsub(gs: Gridsched, work: Path, *args: str) -> int:
    r = subprocess.run([str(BIN / "gsub"), *args], cwd=work, env=gs.env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


def both(slurm: Slurm, gs: Gridsched, tmp_path: Path, name: str, text: str, *args: str) -> dict[str, tuple]:
    """Run the script ``text`` under each system from a directory of its own; per system: (job id, its
    directory, end state, exit code)."""
    out: dict[str, tuple] = {}
    for system in ("slurm", "gridsched"):
        work = tmp_path / system
        work.mkdir(exist_ok=True)
        (work / name).write_text(text)
        if system == "slurm":
            jid = slurm.sbatch(work, name, *args)
            state, code = wait_for(lambda jid=jid: slurm.state(jid), 90, f"Slurm job {jid} to end")
        else:
            jid = gsub(gs, work, *args, name)
            j = gs.wait_state(jid, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", timeout=90)
            state, code = j["state"], j["exit_code"] if j["exit_code"] is not None else -1
        out[system] = (jid, work, state, code)
    return out


def seen(jid: int, work: Path, text: str, array: bool = False) -> dict[str, str]:
    """The variables a job printed, its id, host names and directory set apart (of an array task: ``jid``
    is the array's id, and the task's own id is only checked to be a number)."""
    hosts = {socket.gethostname().split(".")[0], socket.gethostname(), "localhost"}
    got = {}
    for line in text.splitlines():
        if not SHOWN.match(line):
            continue
        k, v = line.split("=", 1)
        if k in SLURM_ONLY:
            continue
        if k == "SLURM_CLUSTER_NAME":
            v = "CLUSTER"
        elif k == "SLURM_JOB_PARTITION":
            v = "PARTITION"
        v = v.replace(str(work), "DIR")
        if k in ("SLURM_JOB_ID", "SLURM_JOBID"):
            v = "ID" if array and v.isdigit() else v.replace(str(jid), "ID")
        elif k == "SLURM_ARRAY_JOB_ID":
            v = v.replace(str(jid), "AID")
        for h in hosts:
            v = re.sub(rf"(?<![\w.-]){re.escape(h)}(?![\w.-])", "HOST", v)
        got[k] = v
    return got


def compare(ran: dict[str, tuple], output: str = "slurm-{id}.out") -> dict[str, dict[str, str]]:
    """The two runs' views (files, end state, variables), asserted equal."""
    views = {}
    for system, (jid, work, state, code) in ran.items():
        files = sorted(p.name.replace(str(jid), "ID") for p in work.iterdir() if p.suffix != ".sh")
        assert output.format(id="ID") in files, (system, files)
        text = (work / output.format(id=jid)).read_text()
        views[system] = {"files": files, "state": (state, code), "env": seen(jid, work, text)}
    s, g = views["slurm"], views["gridsched"]
    assert g["state"] == s["state"]
    assert g["files"] == s["files"]
    assert g["env"] == s["env"], {
        "only Slurm": {k: v for k, v in s["env"].items() if k not in g["env"]},
        "only gridsched": {k: v for k, v in g["env"].items() if k not in s["env"]},
        "differ": {
            k: (s["env"][k], g["env"][k]) for k in s["env"].keys() & g["env"].keys() if s["env"][k] != g["env"][k]
        },
    }
    return views


@pytest.mark.daemon
@pytest.mark.parametrize(
    "header",
    [
        "#SBATCH -J plain",
        "#SBATCH -n 2 -c 3 --mem-per-cpu=100M",
        "#SBATCH -c 2 --mem=200M",
        "#SBATCH -n 4",
        "#SBATCH -n 2 --ntasks-per-node=2 --mem=100M",
        "#SBATCH --ntasks-per-node=3",
        "#SBATCH --ntasks-per-node=2 -c 2",
        "#SBATCH -A Proj_X --account=other-Acct",
        "#SBATCH --hint=nomultithread -c 2",
        "#SBATCH --hint=multithread -n 2",
        "#SBATCH --hint=compute_bound",
        "#SBATCH --hint=memory_bound",
        "#SBATCH --threads-per-core=1",
    ],
)
def test_the_environment_is_slurms(slurm, gs, tmp_path, header):
    view = compare(both(slurm, gs, tmp_path, "job.sh", f"#!/bin/bash\n{header}\n{ENV_DUMP}"))
    assert "OMP_NUM_THREADS" not in view["gridsched"]["env"]
    if "-per-node" in header:
        assert view["gridsched"]["env"]["SLURM_NTASKS_PER_NODE"] == header.split("-per-node=")[1].split()[0]
    if "--hint" in header:
        assert view["gridsched"]["env"]["SLURM_HINT"] == header.split("=")[1].split()[0]


@pytest.mark.daemon
@pytest.mark.parametrize(
    "header",
    ["#SBATCH --gpus=2", "#SBATCH -G 1 -n 2", "#SBATCH --gpus-per-node=1 -n 2", "#SBATCH --gpus=2 --gpus-per-node=2"],
)
def test_gpus_and_gpus_per_node(slurm, gs, tmp_path, header):
    """--gpus gives SLURM_GPUS, --gpus-per-node SLURM_GPUS_PER_NODE, as written (--gres neither)."""
    if slurm.gpus < 2:
        pytest.skip(f"the local Slurm has {slurm.gpus} GRES GPUs, not 2 (start it with GS_SLURM_GPUS=2)")
    view = compare(both(slurm, gs, tmp_path, "g.sh", f"#!/bin/bash\n{header}\n{ENV_DUMP}"))
    env = view["gridsched"]["env"]
    assert ("SLURM_GPUS" in env) == ("-G" in header or "--gpus=" in header)
    assert ("SLURM_GPUS_PER_NODE" in env) == ("--gpus-per-node" in header)


@pytest.mark.daemon
def test_gpus_are_indices(slurm, gs, tmp_path):
    if slurm.gpus < 2:
        pytest.skip(f"the local Slurm has {slurm.gpus} GRES GPUs, not 2 (start it with GS_SLURM_GPUS=2)")
    view = compare(both(slurm, gs, tmp_path, "g.sh", f"#!/bin/bash\n#SBATCH --gres=gpu:2\n{ENV_DUMP}"))
    assert view["gridsched"]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"


@pytest.mark.daemon
def test_gpus_per_task(slurm, gs, tmp_path):
    if slurm.gpus < 2:
        pytest.skip(f"the local Slurm has {slurm.gpus} GRES GPUs, not 2 (start it with GS_SLURM_GPUS=2)")
    view = compare(both(slurm, gs, tmp_path, "t.sh", f"#!/bin/bash\n#SBATCH -n 2 --gpus-per-task=1\n{ENV_DUMP}"))
    assert view["gridsched"]["env"]["SLURM_GPUS_PER_TASK"] == "1"


@pytest.mark.daemon
def test_two_one_gpu_jobs_get_zero_and_one(slurm, gs, tmp_path):
    """Two jobs of one GPU each, at once (each waits, bounded, until the other has started)."""
    if slurm.gpus < 2:
        pytest.skip(f"the local Slurm has {slurm.gpus} GRES GPUs, not 2 (start it with GS_SLURM_GPUS=2)")
    text = (
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH -o o.%j\n"
        'touch "started.$SLURM_JOB_ID"\n'
        'for i in $(seq 300); do [ "$(ls started.* | wc -l)" -ge 2 ] && break; sleep 0.1; done\n'
        'echo "gpus=$CUDA_VISIBLE_DEVICES"\n'
    )
    got = {}
    for system in ("slurm", "gridsched"):
        work = tmp_path / system
        work.mkdir()
        (work / "one.sh").write_text(text)
        if system == "slurm":
            ids = [slurm.sbatch(work, "one.sh") for _ in range(2)]
            for jid in ids:
                wait_for(lambda jid=jid: slurm.state(jid), 90, f"Slurm job {jid} to end")
        else:
            ids = [gsub(gs, work, "one.sh") for _ in range(2)]
            for jid in ids:
                gs.wait_state(jid, "COMPLETED", "FAILED", timeout=90)
        got[system] = sorted((work / f"o.{jid}").read_text().strip() for jid in ids)
    assert got["gridsched"] == got["slurm"] == ["gpus=0", "gpus=1"]


@pytest.mark.daemon
def test_commands_files_and_exit_states(slurm, gs, tmp_path):
    """scontrol show hostnames (the line of distributed-training scripts), an output file name with %x and
    %j, and a script that fails: FAILED with its exit code under both."""
    text = (
        "#!/bin/bash\n#SBATCH -J named\n#SBATCH -o out-%x-%j.log\n#SBATCH -t 10\n"
        'echo "SLURM_MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)"\n'
        'echo "SLURM_TEST_SQUEUE=$(squeue -h -j $SLURM_JOB_ID -o %t)"\n'
        "scontrol show job $SLURM_JOB_ID > showjob.txt\n"
        "exit 3\n"
    )
    ran = both(slurm, gs, tmp_path, "c.sh", text)
    view = compare(ran, output="out-named-{id}.log")
    shown = {}
    for system, (_, work, _, _) in ran.items():
        shown[system] = dict(w.split("=", 1) for w in (work / "showjob.txt").read_text().split() if "=" in w)
    assert set(shown["gridsched"]) <= set(shown["slurm"]), set(shown["gridsched"]) - set(shown["slurm"])
    same = ("JobName", "JobState", "Restarts", "BatchFlag", "ExitCode", "NumNodes", "NumCPUs", "TimeLimit")
    assert {k: shown["gridsched"][k] for k in same} == {k: shown["slurm"][k] for k in same}
    assert view["gridsched"]["state"] == ("FAILED", 3)
    assert view["gridsched"]["env"]["SLURM_MASTER_ADDR"] == "HOST"
    assert view["gridsched"]["env"]["SLURM_TEST_SQUEUE"] == "R"


@pytest.mark.daemon
def test_login_shell_srun_and_sbatch_inside(slurm, gs, tmp_path):
    """``#!/bin/bash -l`` (this host's /etc/profile sets PATH anew): srun still runs the tasks, and sbatch,
    squeue and scancel work on a job submitted from inside, under both."""
    text = (
        "#!/bin/bash -l\n#SBATCH -n 2\n"
        "echo \"SLURM_TEST_SRUN=$(srun hostname | sort | tr '\\n' ,)\"\n"
        "said=$(sbatch --hold -J child --wrap true)\n"
        'echo "SLURM_TEST_SBATCH=${said% *} N"\n'
        "child=${said##* }\n"
        "echo \"SLURM_TEST_CHILD=$(squeue -h -j $child -o '%j %t %r')\"\n"
        'scancel $child && echo "SLURM_TEST_SCANCEL=$?"\n'
    )
    view = compare(both(slurm, gs, tmp_path, "l.sh", text))
    env = view["gridsched"]["env"]
    assert env["SLURM_TEST_SRUN"] == "HOST,HOST," and env["SLURM_TEST_SBATCH"] == "Submitted batch job N"
    assert env["SLURM_TEST_CHILD"] == "child PD JobHeldUser" and env["SLURM_TEST_SCANCEL"] == "0"


@pytest.mark.daemon
def test_array_tasks(slurm, gs, tmp_path):
    """--array=1-5:2: each task's variables and its output file slurm-ARRAYID_INDEX.out."""
    text = f"#!/bin/bash\n#SBATCH --array=1-5:2\n{ENV_DUMP}"
    views = {}
    for system in ("slurm", "gridsched"):
        work = tmp_path / system
        work.mkdir()
        (work / "a.sh").write_text(text)
        if system == "slurm":
            aid = slurm.sbatch(work, "a.sh")
        else:
            aid = gsub(gs, work, "a.sh")

        def done(work: Path = work, aid: int = aid) -> bool:
            files = [work / f"slurm-{aid}_{i}.out" for i in (1, 3, 5)]
            return all(f.exists() and "SLURM_ARRAY_TASK_ID" in f.read_text() for f in files)

        wait_for(done, 90, f"the {system} array's three tasks to write their output")
        files = sorted(p.name.replace(str(aid), "AID") for p in work.iterdir() if p.suffix != ".sh")
        envs = {i: seen(aid, work, (work / f"slurm-{aid}_{i}.out").read_text(), array=True) for i in (1, 3, 5)}
        views[system] = (files, envs)
    assert views["gridsched"] == views["slurm"]
    assert views["gridsched"][1][3]["SLURM_ARRAY_TASK_STEP"] == "2"


def header(text: str) -> str:
    """The directive block of a script: its lines up to the first that is neither blank nor a comment."""
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        out.append(line)
    return "\n".join(out) + "\n"


def _corpus_runs() -> list[str]:
    from tests.compat.test_corpus import WANT, Want

    return sorted(n for n, w in WANT.items() if n.startswith("slurm-") and isinstance(w, Want))


def _files(work: Path, jid: int) -> list[str]:
    """The files a job left under ``work`` (its script aside), with its id written ID."""
    return sorted(
        re.sub(rf"(?<!\d){jid}(?!\d)", "ID", str(p.relative_to(work)))
        for p in work.rglob("*")
        if p.is_file() and p.suffix != ".sh"
    )


@pytest.mark.daemon
@pytest.mark.parametrize("name", _corpus_runs())
def test_corpus_headers_run_as_under_slurm(slurm, gs, tmp_path, name):
    """Each Slurm script of the corpus that the local Slurm can run, its directives kept and its body made
    the environment dump: the same variables and values, the same files, the same end state under both.
    An array runs its first task alone (``--array=FIRST`` on the command line of both); a script asking
    for more memory or GPUs than the local node has is skipped with the reason."""
    from tests.compat.test_corpus import SCRIPTS, WANT
    from tests.compat.test_corpus_oracle import DELIBERATE, _node

    want = WANT[name]
    node = _node(slurm.env.get("SLURM_CONF"))
    why = next((w for (n, _), w in DELIBERATE.items() if n == name), None)
    if why:
        why = f"{name}: read otherwise than Slurm reads it, on purpose (test_corpus_oracle.py): {why}"
    elif want.array and want.array[0] >= node["max_array"]:
        why = f"{name}: index {want.array[0]} is beyond the local Slurm's MaxArraySize {node['max_array']}"
    elif want.mem is not None and want.mem > node["mem"]:
        why = f"{name} asks for {want.mem >> 20} MB; the local Slurm's node has {node['mem'] >> 20} MB"
    elif want.gpus > slurm.gpus:
        why = f"{name} asks for {want.gpus} GPUs; the local Slurm has {slurm.gpus}"
    elif want.cores > 16:
        why = f"{name} asks for {want.cores} cores; the local Slurm's node has 16"
    if why:
        print(why)
        pytest.skip(why)
    head = header((SCRIPTS / name).read_text())
    text = head + ENV_DUMP + "exit 0\n"
    args = (f"--array={want.array[0]}",) if want.array else ()
    views = {}
    for system in ("slurm", "gridsched"):
        work = tmp_path / system
        work.mkdir()
        for d in want.mkdirs:
            (work / d).mkdir()
        (work / name).write_text(text)
        if system == "slurm":
            jid = slurm.sbatch(work, name, "-p", node["partition"], *args)
            state, code = wait_for(lambda jid=jid: slurm.state(jid), 90, f"Slurm job {jid} to end")
        else:
            jid = gsub(gs, work, *args, name)  # an array's id is its first task's
            j = gs.wait_state(jid, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", timeout=90)
            state, code = j["state"], j["exit_code"] if j["exit_code"] is not None else -1
        files = (
            _files(work, jid)
            if system == "slurm"
            else sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file() and p.suffix != ".sh")
        )
        dumped = [p for p in work.rglob("*") if p.is_file() and "SLURM_JOB_ID=" in p.read_text(errors="replace")]
        assert dumped, (system, files)
        views[system] = {
            "id": jid,
            "files": files,
            "state": (state, code),
            "env": seen(jid, work, dumped[0].read_text(), array=bool(want.array)),
        }
    s, g = views["slurm"], views["gridsched"]
    # Slurm's ids (hundreds) are told apart from the other numbers of a name; gridsched's module spool
    # starts at 1, so its names are compared with Slurm's written with gridsched's id
    assert g["state"] == s["state"]
    assert g["files"] == sorted(f.replace("ID", str(views["gridsched"]["id"])) for f in s["files"])
    assert g["env"] == s["env"], {
        "only Slurm": {k: v for k, v in s["env"].items() if k not in g["env"]},
        "only gridsched": {k: v for k, v in g["env"].items() if k not in s["env"]},
        "differ": {
            k: (s["env"][k], g["env"][k]) for k in s["env"].keys() & g["env"].keys() if s["env"][k] != g["env"][k]
        },
    }


# -- a dependency on an array's id, with one failing task: which of the jobs waiting on it run (Slurm's
# DependencyNeverSatisfied for the others)
DEP_ARRAY = '#!/bin/bash\n#SBATCH -J arr\nsleep 1\n[ "$SLURM_ARRAY_TASK_ID" = 2 ] && exit 1\nexit 0\n'
DEP_AFTER = "#!/bin/bash\n#SBATCH -J dep\necho ran\n"
DEP_KINDS = ("afterok", "afternotok", "afterany", "after")


def slurm_waits(s: Slurm, jid: int) -> str | None:
    """The reason Slurm's job ``jid`` waits, or None once it is not pending."""
    r = subprocess.run(["squeue", "-h", "-j", str(jid), "-o", "%T %r"], env=s.env, capture_output=True, text=True)
    got = r.stdout.split()
    return got[1] if got and got[0] == "PENDING" else None


@pytest.mark.daemon
def test_dependencies_on_an_array_with_a_failed_task(slurm, gs, tmp_path):
    seen: dict[str, dict[str, str]] = {}
    for system in ("slurm", "gridsched"):
        work = tmp_path / system
        work.mkdir()
        (work / "a.sh").write_text(DEP_ARRAY)
        (work / "b.sh").write_text(DEP_AFTER)
        if system == "slurm":
            aid = slurm.sbatch(work, "a.sh", "--array=0-3", "-t", "1")
            deps = {k: slurm.sbatch(work, "b.sh", "-t", "1", f"--dependency={k}:{aid}") for k in DEP_KINDS}
        else:
            aid = gsub(gs, work, "--array=0-3", "-t", "1", "a.sh")
            deps = {k: gsub(gs, work, "-t", "1", f"--dependency={k}:{aid}", "b.sh") for k in DEP_KINDS}

        def ran(work: Path = work, deps: dict[str, int] = deps) -> bool:
            return all((work / f"slurm-{deps[k]}.out").exists() for k in ("afternotok", "afterany", "after"))

        wait_for(ran, 90, f"the {system} jobs that may run to run")
        states: dict[str, str] = {}
        for k, jid in deps.items():
            out = work / f"slurm-{jid}.out"
            if out.exists() and out.read_text().strip() == "ran":
                states[k] = "ran"
            elif system == "slurm":
                states[k] = slurm_waits(slurm, jid) or "gone"
                subprocess.run(["scancel", str(jid)], env=slurm.env)
            else:
                j = gs.job(jid)
                never = j["state"] == "PENDING" and re.search(r"never", j.get("reason") or "")
                states[k] = "DependencyNeverSatisfied" if never else f"{j['state']}: {j.get('reason')}"
                gs.run("gdel", str(jid))
        seen[system] = states
    assert seen["gridsched"] == seen["slurm"]
    assert seen["slurm"]["afterok"] == "DependencyNeverSatisfied"
