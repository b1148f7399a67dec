"""The corpus's Grid Engine scripts read by a real Grid Engine 8.1.9 and by gsub, compared.

Each ``sge-*.sh`` script of ``scripts/`` is checked with ``qsub -w p`` (could it be dispatched here, on
the local cell's one host of 16 slots?), submitted held (``qsub -h``), read back with ``qstat -j`` and
deleted; gsub must take what Grid Engine can run and refuse what it refuses or can never run, and read
the same job name, slots, h_rt, memory (h_vmem, else mem_free, per slot), GPUs (the site complex
``gpu``), array tasks, working directory and standard output and error files.  The files are named
from what Grid Engine read by qsub(1)'s rule: ``-o``/``-e`` relative to the working directory, a
directory there holding ``JOBNAME.oJOBID`` (``.TASKID`` for an array task), none given: that name in the
working directory; ``-j y``: standard error joins standard output.

The local Grid Engine is ``../shared/tools/gridengine-localhost`` (its ``start.sh``), finished for the
corpus by ``tests/compat/sge_localhost.sh`` (the parallel environments, queues and site resources the
scripts name).  Where no qmaster answers (as in CI), every test is skipped with the reason.
:data:`DELIBERATE` lists, with the reason (docs/compat.md), where gridsched reads a script otherwise on
purpose; the test fails when such a difference goes away.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gridsched.protocol import arrays
from tests.compat import test_corpus
from tests.compat.test_corpus import DEFAULT_WALLTIME, SCRIPTS, WANT, Want, gpus_of, submit

SETTINGS = Path("/var/lib/gridengine/default/common/settings.sh")
NETNS = "sgeanchor"
SGE_SCRIPTS = sorted(n for n in WANT if n.startswith("sge-"))
FIELDS = ("name", "cores", "walltime", "mem", "gpus", "array", "workdir", "stdout", "stderr")
UNITS = {"K": 10, "M": 20, "G": 30, "T": 40}

DELIBERATE: dict[tuple[str, str], str] = {
    # -l arch=linux-x64 names another site's architecture (this host is lx-amd64): Grid Engine can never
    # dispatch it here; gsub takes the job on the one machine there is and warns of the resource
    ("sge-ompi-mem-free.sh", "verdict"): "-l arch= is another site's name for its hosts",
}


def _env() -> dict[str, str] | str:
    """The environment of Grid Engine's commands (settings.sh), or why there is none."""
    if shutil.which("qsub") is None or shutil.which("ip") is None:
        return "qsub or ip is not on PATH"
    if not SETTINGS.exists():
        return f"{SETTINGS} is missing (run ../shared/tools/gridengine-localhost/start.sh)"
    r = subprocess.run(
        ["bash", "-c", f". {SETTINGS} && env -0"], capture_output=True, text=True, timeout=30, check=False
    )
    env = dict(x.split("=", 1) for x in r.stdout.split("\0") if "=" in x)
    try:
        q = subprocess.run(_ns("qconf", "-sp", "smp"), env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"qconf failed: {e}"
    if q.returncode != 0:
        why = (q.stderr.strip() or q.stdout.strip() or "no answer").splitlines()[0][:200]
        return f"no Grid Engine set up for the corpus answers (start.sh, then tests/compat/sge_localhost.sh): {why}"
    return env


def _ns(*cmd: str) -> list[str]:
    return ["ip", "netns", "exec", NETNS, *cmd]


@pytest.fixture(scope="module")
def sge_env() -> dict[str, str]:
    env = _env() if os.geteuid() == 0 else "Grid Engine's namespace needs root"
    if isinstance(env, str):
        print(f"no local Grid Engine: {env}")
        pytest.skip(f"no local Grid Engine: {env}")
    return env


def _size(v: str) -> int:
    v = v.strip()
    return int(float(v[:-1]) * (1 << UNITS[v[-1].upper()])) if v[-1].upper() in UNITS else int(v)


def _seconds(v: str) -> int:
    parts = [int(x or 0) for x in v.split(":")]
    secs = 0
    for p in parts:
        secs = secs * 60 + p
    return secs


def sge_reads(env: dict[str, str], work: Path, name: str, gs_id: int) -> dict[str, Any] | str:
    """What Grid Engine read of ``name`` (submitted held from ``work``, then deleted), or why it refused it
    or could never run it; file names are written with ``gs_id`` for its job id."""

    def run(*cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(_ns(*cmd), cwd=work, env=env, capture_output=True, text=True, timeout=60)

    poke = run("qsub", "-w", "p", name)
    said = (poke.stdout + poke.stderr).strip()
    if "found suitable queue" not in said:
        return said or "refused"
    sub = run("qsub", "-h", "-terse", name)
    if sub.returncode != 0:
        return sub.stderr.strip() or "refused"
    jid = sub.stdout.strip().splitlines()[-1].split(".")[0]  # after any warning qsub printed
    try:
        shown = run("qstat", "-j", jid).stdout
    finally:
        run("qdel", jid)
    f = dict((k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in shown.splitlines()) if k and v.strip())
    res = dict(kv.split("=", 1) for kv in f.get("hard resource_list", "").split(",") if "=" in kv)
    pe = re.search(r"range:\s*(\d+)", shown)
    slots = int(pe.group(1)) if pe else 1
    per_slot = res.get("h_vmem") or res.get("mem_free")
    tasks = f.get("job-array tasks")
    cwd = f.get("cwd") or os.path.expanduser("~")
    jobname = f["job_name"]

    def path(key: str, letter: str) -> str:
        given = f.get(key, "").rpartition(":")[2]
        base = given if given.startswith("/") else os.path.join(cwd, given) if given else cwd
        if not given or os.path.isdir(base):
            base = os.path.join(base, f"{jobname}.{letter}{gs_id}" + (f".{first}" if tasks else ""))
        return os.path.normpath(base).replace(str(work), "DIR")

    first = arrays.parse(tasks.split("%")[0], 1 << 31).indices[0] if tasks else None
    out = path("stdout_path_list", "o")
    return {
        "name": jobname,
        "cores": slots,
        "walltime": _seconds(res["h_rt"]) if "h_rt" in res else DEFAULT_WALLTIME,
        "mem": _size(per_slot) * slots if per_slot else None,
        "gpus": int(res["gpu"]) if res.get("gpu", "").isdigit() else (1 if res.get("gpu") in ("true", "TRUE") else 0),
        "array": tuple(arrays.parse(tasks, 1 << 31).indices) if tasks else None,
        "workdir": cwd.replace(str(work), "DIR"),
        "stdout": out,
        "stderr": out if f.get("merge") == "y" else path("stderr_path_list", "e"),
    }


def gsub_reads(name: str, root: Path) -> tuple[dict[str, Any] | str, int]:
    out = submit(name, root)
    spec = out.spec
    if spec is None:
        return out.stderr.strip() or "refused", 1
    indices = arrays.parse(spec["array"]).indices if spec.get("array") else None

    def path(p: str) -> str:
        p = arrays.task_path(p, spec["id"], indices[0]) if indices else p
        return os.path.normpath(p).replace(str(out.submit_dir), "DIR")

    return {
        "name": spec["name"],
        "cores": spec["ncpus"],
        "walltime": spec["walltime"],
        "mem": spec["mem"],
        "gpus": gpus_of(spec),
        "array": tuple(indices) if indices else None,
        "workdir": path(spec["workdir"]),
        "stdout": path(spec["stdout"]),
        "stderr": path(spec["stderr"]),
    }, spec["id"]


@pytest.mark.parametrize("name", SGE_SCRIPTS)
def test_grid_engine_reads_the_script_as_gsub_does(sge_env, tmp_path, name):
    want = WANT[name]
    ours, gs_id = gsub_reads(name, tmp_path / "gs")
    # the same submit directory for both, so that relative and default paths compare
    work = tmp_path / "gs" / "submit"
    for d in want.mkdirs:
        (work / d).mkdir(exist_ok=True)
    shutil.copyfile(SCRIPTS / name, work / name)
    theirs = sge_reads(sge_env, work, name, gs_id)
    verdicts = (isinstance(theirs, dict), isinstance(ours, dict))
    deliberate = DELIBERATE.get((name, "verdict"))
    if deliberate:
        assert verdicts[0] != verdicts[1], f"no longer differs ({deliberate}): Grid Engine {theirs!r}, gsub {ours!r}"
        return
    assert verdicts[0] == verdicts[1], f"Grid Engine: {theirs!r}\ngsub: {ours!r}"
    assert isinstance(want, Want) == verdicts[1]
    if not isinstance(theirs, dict) or not isinstance(ours, dict):
        return
    differ = {f: (theirs[f], ours[f]) for f in FIELDS if theirs[f] != ours[f]}
    listed = {f for f in FIELDS if (name, f) in DELIBERATE}
    assert set(differ) == listed, {"Grid Engine, gsub": differ, "listed as deliberate": sorted(listed)}


# -- the same scripts run by both --------------------------------------------------------------------

# Grid Engine's names a job script reads (qsub(1), ENVIRONMENTAL VARIABLES), compared name for name
SGE_SHOWN = re.compile(
    r"^(JOB_ID|JOB_NAME|NSLOTS|NHOSTS|NQUEUES|QUEUE|PE|PE_HOSTFILE|PE_HOSTFILE_LINE|REQNAME|REQUEST|RESTARTED|ENVIRONMENT"
    r"|SGE_O_[A-Z]+|SGE_TASK_[A-Z]+|SGE_STDOUT_PATH|SGE_STDERR_PATH|SGE_STDIN_PATH|SGE_CWD_PATH)="
)
# the variables, then the parallel environment's host file (Grid Engine's format: host slots queue processors)
ENV_DUMP = 'env | sort\n[ -n "$PE_HOSTFILE" ] && sed "s/^/PE_HOSTFILE_LINE=/" "$PE_HOSTFILE"\n'


def _view(text: str, work: Path, jid: int | None, host: str) -> dict[str, str]:
    """Grid Engine's names in the dump ``text``: the directory written DIR, the host HOST and (``jid``
    given: Grid Engine's ids, in the hundreds here) the job id ID."""
    got = {}
    for line in text.splitlines():
        if not SGE_SHOWN.match(line):
            continue
        k, v = line.split("=", 1)
        if k == "PE_HOSTFILE":
            v = "FILE" if v else ""
        elif k == "SGE_O_PATH":
            v = "PATH"  # the submitting PATH, which differs between the two submissions' tools
        v = v.replace(str(work), "DIR")
        if jid is not None:
            v = re.sub(rf"(?<!\d){jid}(?!\d)", "ID", v)
        v = re.sub(rf"(?<![\w.-])({re.escape(host)}|localhost)(?![\w-])", "HOST", v)
        got[k] = v
    return got


@pytest.mark.daemon
@pytest.mark.parametrize("name", [n for n in SGE_SCRIPTS if isinstance(WANT[n], Want) and n != "sge-no-cwd-home.sh"])
def test_grid_engine_runs_the_header_as_gridsched_does(sge_env, daemon, tmp_path, name):
    """Each Grid Engine script that the local cell can run, its directives kept and its body an environment
    dump: Grid Engine's variables and their values, the files the job leaves and its exit code, under both.
    An array runs its first task alone (``-t FIRST`` on both command lines)."""
    from tests.compat.test_slurm_oracle import header
    from tests.conftest import BIN

    want = WANT[name]
    why = DELIBERATE.get((name, "verdict"))
    why = f"Grid Engine never runs it here: {why}" if why else None
    if re.search(r"^#\$ .*-wd /", (SCRIPTS / name).read_text(), re.M):
        why = "its -wd names a directory outside the test's own, where both would write"
    if why:
        print(f"{name}: {why}")
        pytest.skip(f"{name}: {why}")
    text = header((SCRIPTS / name).read_text()) + ENV_DUMP + "exit 0\n"
    args = ["-t", str(want.array[0])] if want.array else []
    views = {}
    gs = daemon
    if True:
        for system in ("sge", "gridsched"):
            work = tmp_path / system
            work.mkdir()
            for d in want.mkdirs:
                (work / d).mkdir()
            (work / name).write_text(text)
            if system == "sge":
                r = subprocess.run(
                    _ns("qsub", "-sync", "y", *args, name),
                    cwd=work,
                    env=sge_env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                m = re.search(r"Job (\d+)(?:\.\d+)? exited with exit code (\d+)", r.stdout)
                assert m, r.stdout + r.stderr
                jid, code = int(m.group(1)), int(m.group(2))
            else:
                mine = ["--array", str(want.array[0])] if want.array else []  # gsub's -t is the walltime
                p = subprocess.run(
                    [str(BIN / "gsub"), *mine, name], cwd=work, env=gs.env, capture_output=True, text=True, timeout=60
                )
                assert p.returncode == 0, p.stderr
                jid = int(p.stdout.split()[-1])
                j = gs.wait_state(jid, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", timeout=90)
                code = j["exit_code"]
            # Grid Engine's ids (hundreds) are told apart from the other numbers of a name; gridsched's module
            # spool starts at 1, so its names and values are compared with Grid Engine's written with its id
            ge = system == "sge"
            files = sorted(
                re.sub(rf"(?<!\d){jid}(?!\d)", "ID", str(p.relative_to(work))) if ge else str(p.relative_to(work))
                for p in work.rglob("*")
                if p.is_file() and p.suffix != ".sh"
            )
            dumped = [p for p in work.rglob("*") if p.is_file() and "JOB_ID=" in p.read_text(errors="replace")]
            assert dumped, (system, files)
            views[system] = {
                "files": files,
                "code": code,
                "env": _view(dumped[0].read_text(), work, jid if ge else None, _host()),
                "id": jid,
            }
    s, g = views["sge"], views["gridsched"]
    gid = str(g["id"])
    # on purpose (docs/compat.md): no parallel environment start and stop procedures, so none of the
    # JOBNAME.poID and JOBNAME.peID files Grid Engine leaves for a -pe job without -o/-e files
    pe_files = [f for f in s["files"] if re.search(r"\.p[oe]ID$", f)]
    # (with -o naming a file, Grid Engine writes the procedures' output there: none to leave out)
    assert not pe_files or re.search(r"^#\$ .*-pe ", (SCRIPTS / name).read_text(), re.M), s["files"]
    s["files"] = [f for f in s["files"] if f not in pe_files]
    assert (g["files"], g["code"]) == ([f.replace("ID", gid) for f in s["files"]], s["code"])
    theirs = {k: v.replace("ID", gid) for k, v in s["env"].items()}
    # on purpose (docs/compat.md): QUEUE is the one queue's name, not the one -q named (in the host file too)
    if re.search(r"^#\$ .*-q ", (SCRIPTS / name).read_text(), re.M):
        assert theirs["QUEUE"] != "all.q" and g["env"]["QUEUE"] == "all.q"
        if "PE_HOSTFILE_LINE" in theirs:
            theirs["PE_HOSTFILE_LINE"] = theirs["PE_HOSTFILE_LINE"].replace(f"{theirs['QUEUE']}@", "all.q@")
        theirs["QUEUE"] = "all.q"
    s = {**s, "env": theirs}
    assert g["env"] == s["env"], {
        "only Grid Engine": {k: v for k, v in s["env"].items() if k not in g["env"]},
        "only gridsched": {k: v for k, v in g["env"].items() if k not in s["env"]},
        "differ": {
            k: (s["env"][k], g["env"][k]) for k in s["env"].keys() & g["env"].keys() if s["env"][k] != g["env"][k]
        },
    }


def _host() -> str:
    from gridsched.job.env import host

    return host()


daemon = test_corpus.daemon  # one real daemon for the module's runs, on the corpus machine (16 cores, 4 GPUs)
