"""The environment of a job by the dialect of its script: a Slurm script sees Slurm's names as sbatch sets
them (seen with Slurm 22.05), a PBS script PBS's, a Grid Engine script Grid Engine's, and every job its
``GS_*`` variables."""

from __future__ import annotations

import json
from dataclasses import replace

from gridsched.core.topology import Device
from gridsched.daemon.jobtmp import layout
from gridsched.job.env import Job, Start, device_env, environment, job_environment, of_dialect, system_of
from gridsched.protocol import config
from gridsched.protocol.jobs import Hint
from gridsched.protocol.jobspec import JobSpec

JOB = Job(17, "render", "ann", 1000, 4, "/w", {"PATH": "/usr/bin", "OMP_NUM_THREADS": "3"}, host="node1", gid=100)


def env_of(job: Job) -> dict[str, str]:
    return job_environment(
        dict(job.submit_env), {"GS_JOBID": str(job.id)}, job, layout("/t/gridsched.17.x"), True, False
    )


def test_slurm_script_gets_slurms_names_only():
    """No -n, no -c: no SLURM_NTASKS, SLURM_NPROCS, SLURM_CPUS_PER_TASK; no OMP_NUM_THREADS of gridsched's
    (the submitting one passes through, as sbatch passes it); no PBS or Grid Engine names."""
    env = env_of(replace(JOB, dialect="slurm"))
    for k in ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_CPUS_PER_TASK", "SLURM_NTASKS_PER_NODE", "SLURM_RESTART_COUNT"):
        assert k not in env, k
    assert (env["SLURM_TASKS_PER_NODE"], env["SLURM_CPUS_ON_NODE"], env["SLURM_JOB_GID"]) == ("1", "4", "100")
    assert env["OMP_NUM_THREADS"] == "3"  # the submitting environment's, untouched
    assert not [k for k in env if system_of(k) in ("pbs", "sge")]
    assert env["GS_JOBID"] == "17" and env["GS_NTASKS"] == "1" and env["TMPDIR"] == "/t/gridsched.17.x/tmp"


def test_slurm_script_task_counts_as_asked():
    env = env_of(replace(JOB, dialect="slurm", ntasks=2, cpus_per_task=2, restarts=1))
    assert [env[k] for k in ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_CPUS_PER_TASK", "SLURM_TASKS_PER_NODE")] == [
        "2",
        "2",
        "2",
        "2",
    ]
    assert env["SLURM_RESTART_COUNT"] == "1"
    only_c = env_of(replace(JOB, dialect="slurm", cpus_per_task=4))
    assert "SLURM_NTASKS" not in only_c and only_c["SLURM_CPUS_PER_TASK"] == "4"


def test_pbs_and_sge_scripts():
    pbs = env_of(replace(JOB, dialect="pbs"))
    assert pbs["PBS_JOBID"] == "17.node1" and pbs["NCPUS"] == "4" and pbs["OMP_NUM_THREADS"] == "4"
    assert not [k for k in pbs if system_of(k) in ("slurm", "sge")]
    sge = env_of(replace(JOB, dialect="sge", submit_env={"PATH": "/usr/bin"}))
    assert sge["NSLOTS"] == "4" and sge["SGE_TASK_ID"] == "undefined" and "OMP_NUM_THREADS" not in sge
    assert not [k for k in sge if system_of(k) in ("slurm", "pbs")]


def test_pbs_names_as_pbs_pro_s_and_torque_s_sources_set_them():
    """qsub sends PBS_O_HOME always ("/" where HOME was not set) and PBS_O_TZ where TZ was (OpenPBS
    src/cmds/qsub.c job_env_basic, Torque src/cmds/qsub_functions.c), PBS Pro's PBS_O_SYSTEM is uname's system
    name, and Torque's mom gives PBS_WALLTIME, the walltime in seconds (src/resmom/start_exec.c InitUserEnv)."""
    import os

    pbs = env_of(replace(JOB, dialect="pbs", walltime=5400))
    assert pbs["PBS_O_HOME"] == "/" and "PBS_O_TZ" not in pbs  # the submission had neither HOME nor TZ
    assert pbs["PBS_O_SYSTEM"] == os.uname().sysname and pbs["PBS_WALLTIME"] == "5400"
    pbs = env_of(replace(JOB, dialect="pbs", submit_env={"HOME": "/home/ann", "TZ": "Europe/Oslo"}))
    assert (pbs["PBS_O_HOME"], pbs["PBS_O_TZ"]) == ("/home/ann", "Europe/Oslo") and "PBS_WALLTIME" not in pbs
    sge = env_of(replace(JOB, dialect="sge", submit_env={"TZ": "UTC"}, walltime=60))
    assert not [k for k in sge if k.startswith("PBS_")] and "SGE_O_TZ" not in sge


def test_memory_per_gpu_as_sbatch_sets_it():
    """--mem-per-gpu: SLURM_MEM_PER_GPU in MiB and no SLURM_MEM_PER_NODE (sbatch(1): set only with
    --mem-per-gpu), as --mem-per-cpu gives SLURM_MEM_PER_CPU."""
    env = env_of(replace(JOB, dialect="slurm", mem=4 << 30, mem_per_gpu=2 << 30))
    assert env["SLURM_MEM_PER_GPU"] == "2048" and "SLURM_MEM_PER_NODE" not in env and "SLURM_MEM_PER_CPU" not in env
    assert "SLURM_MEM_PER_GPU" not in env_of(replace(JOB, dialect="slurm", mem=4 << 30))


def test_own_jobs_keep_every_systems_names():
    """A script without another system's directives (gsub's own) sees them all, and OMP_NUM_THREADS."""
    env = env_of(JOB)
    assert {system_of(k) for k in env} == {None, "slurm", "pbs", "sge"}
    assert env["SLURM_NTASKS"] == "1" and env["SLURM_CPUS_PER_TASK"] == "4" and env["OMP_NUM_THREADS"] == "4"


def test_devices_by_index_unless_asked():
    devs = (Device("gpu", 0, 0, uuid="GPU-a"), Device("gpu", 1, 0, uuid="GPU-b"))
    env = device_env([("gpu", 0), ("gpu", 1)], devs)
    assert env["CUDA_VISIBLE_DEVICES"] == env["SLURM_JOB_GPUS"] == env["GPU_DEVICE_ORDINAL"] == "0,1"
    assert device_env([("gpu", 1)], devs, uuids=True)["CUDA_VISIBLE_DEVICES"] == "GPU-b"
    assert "SLURM_JOB_GPUS" not in of_dialect(env, "pbs") and "CUDA_VISIBLE_DEVICES" in of_dialect(env, "pbs")


def test_visible_config_key(tmp_path):
    assert config.parse({}).device_visible == "index"
    assert config.parse({"devices": {"visible": "uuid"}}).device_visible == "uuid"
    try:
        config.parse({"devices": {"visible": "serial"}})
    except config.ConfigError as e:
        assert "devices.visible" in str(e)
    else:
        raise AssertionError("visible = 'serial' was taken")


def test_memory_per_core_and_gpus_per_task_as_asked():
    """--mem-per-cpu=100M: SLURM_MEM_PER_CPU=100 and no SLURM_MEM_PER_NODE; --gpus-per-task=1: its count."""
    per = env_of(replace(JOB, dialect="slurm", mem=400 << 20, mem_per_cpu=100 << 20, ntasks=1, gpus_per_task=1))
    assert (per["SLURM_MEM_PER_CPU"], per["SLURM_GPUS_PER_TASK"]) == ("100", "1") and "SLURM_MEM_PER_NODE" not in per
    whole = env_of(replace(JOB, dialect="slurm", mem=200 << 20))
    assert whole["SLURM_MEM_PER_NODE"] == "200" and "SLURM_MEM_PER_CPU" not in whole
    assert "SLURM_GPUS_PER_TASK" not in whole


def test_bash_env_is_the_jobs_own():
    """A job submitted from inside a job does not keep its parent's BASH_ENV (it names the parent's bin/);
    a BASH_ENV of the user's own is kept, and gridsched sets none over it."""
    parent = {**JOB.submit_env, "BASH_ENV": "/t/gridsched.3.abc/bash_env"}
    env = env_of(replace(JOB, submit_env=parent))
    assert env["BASH_ENV"] == "/t/gridsched.17.x/bash_env"
    mine = env_of(replace(JOB, submit_env={**JOB.submit_env, "BASH_ENV": "/home/ann/.bashenv"}))
    assert mine["BASH_ENV"] == "/home/ann/.bashenv"


def test_slurm_job_account_only_when_one_was_named():
    """Slurm 22.05 without an accounting database sets SLURM_JOB_ACCOUNT only for a job that named one (-A),
    lowercased (the oracle, tests/compat/test_slurm_oracle.py, compares it)."""
    assert "SLURM_JOB_ACCOUNT" not in env_of(replace(JOB, dialect="slurm"))
    assert env_of(replace(JOB, dialect="slurm", account="proj_x"))["SLURM_JOB_ACCOUNT"] == "proj_x"
    assert "SLURM_JOB_ACCOUNT" not in env_of(replace(JOB, dialect="pbs", account="proj_x"))


def _spec_of(tmp_path, monkeypatch, script: str):
    """The spec gsub writes for ``script`` (no daemon)."""
    from click.testing import CliRunner

    from gridsched.cli import gsub
    from gridsched.protocol.jobspec import JobSpec
    from gridsched.protocol.spool import Spool
    from tests.cli.conftest import submitted

    tmp_path.mkdir()
    (tmp_path / "gridsched.toml").write_text("[daemon]\nautostart = false\n[machine]\ncores = 4\n")
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(tmp_path / "gridsched.toml"))
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(tmp_path / "spool"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.sh").write_text(script)
    r = CliRunner().invoke(gsub.cli, ["a.sh"], prog_name="gsub")
    assert r.exit_code == 0, r.stderr
    [spec] = submitted(Spool(tmp_path / "spool"))
    return JobSpec.from_spec(spec)


def test_torque_subjobs_are_named_name_dash_index(tmp_path, monkeypatch):
    """Torque's server names each subjob of ``-t`` NAME-INDEX, as it suffixes its -o and -e paths (Torque
    src/server/job_func.c, job_clone); PBS Pro's ``-J`` subjobs keep the array's name."""
    from gridsched.job.env import Start, job_of

    start = Start(ncpus=1, walltime=60, cores="0", host_cpus="0", restarts=0, job_dir="/j", spool="/s")
    torque = _spec_of(tmp_path / "t", monkeypatch, "#!/bin/sh\n#PBS -N sweep\n#PBS -t 2-4\ntrue\n")
    assert torque.name == "sweep" and torque.name_per_task
    task = torque._replace(array_id=torque.id, array_index=3)
    assert job_of(task, start).name == "sweep-3"
    assert env_of(replace(JOB, name=job_of(task, start).name, dialect="pbs"))["PBS_JOBNAME"] == "sweep-3"
    pbspro = _spec_of(tmp_path / "p", monkeypatch, "#!/bin/sh\n#PBS -N sweep\n#PBS -J 2-4\ntrue\n")
    assert not pbspro.name_per_task
    assert job_of(pbspro._replace(array_id=pbspro.id, array_index=3), start).name == "sweep"


def test_slurm_get_user_env_and_open_mode_as_sbatch_sets_them():
    """Seen with Slurm 22.05: --get-user-env gives SLURM_GET_USER_ENV=1, --open-mode=append SLURM_OPEN_MODE=a;
    neither without the option."""
    plain = env_of(replace(JOB, dialect="slurm"))
    assert "SLURM_GET_USER_ENV" not in plain and "SLURM_OPEN_MODE" not in plain
    env = env_of(replace(JOB, dialect="slurm", get_user_env=True, open_mode="append"))
    assert (env["SLURM_GET_USER_ENV"], env["SLURM_OPEN_MODE"]) == ("1", "a")


def test_grid_engine_names_as_its_shepherd_sets_them():
    """Seen with Grid Engine 8.1.9: REQNAME, the job's directory and files, standard input /dev/null,
    SGE_O_LOGNAME only from a submitting LOGNAME, and no ENVIRONMENT."""
    job = replace(JOB, dialect="sge", workdir="/w", stdout="/w/a.o17", stderr="/w/a.e17")
    env = env_of(job)
    assert (env["REQNAME"], env["SGE_CWD_PATH"], env["SGE_STDOUT_PATH"]) == ("render", "/w", "/w/a.o17")
    assert (env["SGE_STDERR_PATH"], env["SGE_STDIN_PATH"]) == ("/w/a.e17", "/dev/null")
    assert "ENVIRONMENT" not in env and "SGE_O_LOGNAME" not in env
    assert env_of(replace(job, submit_env={"LOGNAME": "ann"}))["SGE_O_LOGNAME"] == "ann"


def _start() -> Start:
    return Start(ncpus=4, walltime=60, cores="0-3", host_cpus="0-3", restarts=0, job_dir="/j", spool="/s")


def _env_of_spec(spec: JobSpec) -> dict[str, str]:
    return environment(spec, _start(), layout("/t/gridsched.5.x"), True)


def test_ntasks_per_node_as_sbatch_sets_it(tmp_path, monkeypatch):
    """Seen with Slurm 22.05: --ntasks-per-node=N gives SLURM_NTASKS_PER_NODE=N (and N tasks on the one
    node); a job that did not give it sees none."""
    spec = _spec_of(tmp_path / "a", monkeypatch, "#!/bin/sh\n#SBATCH --ntasks-per-node=2 -c 2\ntrue\n")
    assert (spec.ntasks_per_node, spec.ntasks, spec.cpus_per_task, spec.ncpus) == (2, 2, 2, 4)
    assert JobSpec.from_spec(spec.to_spec()).ntasks_per_node == 2
    env = _env_of_spec(spec)
    got = [env[k] for k in ("SLURM_NTASKS_PER_NODE", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK")]
    assert got == ["2", "2", "2", "2"]
    plain = _spec_of(tmp_path / "b", monkeypatch, "#!/bin/sh\n#SBATCH -n 2\ntrue\n")
    assert plain.ntasks_per_node is None and "SLURM_NTASKS_PER_NODE" not in _env_of_spec(plain)
    # -n counts the tasks; the count per node is kept as given, as Slurm gives it
    both = _spec_of(tmp_path / "c", monkeypatch, "#!/bin/sh\n#SBATCH -n 3 --ntasks-per-node=4\ntrue\n")
    assert (both.ntasks, _env_of_spec(both)["SLURM_NTASKS_PER_NODE"]) == (3, "4")


def test_hint_as_sbatch_sets_it(tmp_path, monkeypatch):
    """Seen with Slurm 22.05: every --hint gives SLURM_HINT; nomultithread, compute_bound and memory_bound
    also SLURM_THREADS_PER_CORE=1 (and the job takes one thread of each physical core), multithread
    SLURM_NTASKS_PER_CORE=65535 (any thread)."""
    for hint in ("nomultithread", "compute_bound", "memory_bound"):
        spec = _spec_of(tmp_path / hint, monkeypatch, f"#!/bin/sh\n#SBATCH -c 2 --hint={hint}\ntrue\n")
        assert (spec.hint, spec.threads_per_core) == (Hint(hint), 1)
        env = _env_of_spec(JobSpec.from_spec(spec.to_spec()))
        assert (env["SLURM_HINT"], env["SLURM_THREADS_PER_CORE"]) == (hint, "1")
        assert "SLURM_NTASKS_PER_CORE" not in env
    multi = _spec_of(tmp_path / "m", monkeypatch, "#!/bin/sh\n#SBATCH --hint=multithread\ntrue\n")
    assert (multi.hint, multi.threads_per_core) == (Hint.MULTITHREAD, 0)
    env = _env_of_spec(multi)
    assert (env["SLURM_HINT"], env["SLURM_NTASKS_PER_CORE"]) == ("multithread", "65535")
    assert "SLURM_THREADS_PER_CORE" not in env
    none = _env_of_spec(_spec_of(tmp_path / "n", monkeypatch, "#!/bin/sh\n#SBATCH -c 2\ntrue\n"))
    assert not {"SLURM_HINT", "SLURM_THREADS_PER_CORE", "SLURM_NTASKS_PER_CORE"} & set(none)
    tpc = _env_of_spec(_spec_of(tmp_path / "t", monkeypatch, "#!/bin/sh\n#SBATCH --threads-per-core=1\ntrue\n"))
    assert tpc["SLURM_THREADS_PER_CORE"] == "1" and "SLURM_HINT" not in tpc


def test_a_hint_slurm_does_not_know_is_one_line(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from gridsched.cli import gsub

    (tmp_path / "gridsched.toml").write_text("[daemon]\nautostart = false\n[machine]\ncores = 4\n")
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(tmp_path / "gridsched.toml"))
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(tmp_path / "spool"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.sh").write_text("#!/bin/sh\n#SBATCH --hint=fast\ntrue\n")
    r = CliRunner().invoke(gsub.cli, ["a.sh"], prog_name="gsub")
    assert r.exit_code != 0
    assert r.stderr.strip().splitlines() == [
        "gsub: error: a.sh:2: #SBATCH --hint=fast: must be one of nomultithread, multithread, compute_bound, "
        "memory_bound"
    ]


def _gpu_spec(options: list[str], model: str = "") -> JobSpec:
    from gridsched.core.devices import DeviceAsk
    from gridsched.protocol.device_asks import asks_to_spec

    data = {"id": 5, "ncpus": 4, "walltime": 60, "dialect": "slurm", "user": "ann", "uid": 1000}
    data["devices"] = asks_to_spec([DeviceAsk("gpu", 2, model, "closest")])
    if options:
        data["gpu_options"] = options
    return JobSpec.from_spec(JobSpec.from_spec(data).to_spec())


def test_slurm_gpus_and_gpus_per_node_as_sbatch_sets_them():
    """Seen with Slurm 22.05 and GRES GPUs: --gpus=[MODEL:]N gives SLURM_GPUS, --gpus-per-node=[MODEL:]N
    SLURM_GPUS_PER_NODE, each as written; --gres=gpu:N neither."""
    assert _env_of_spec(_gpu_spec(["gpus"]))["SLURM_GPUS"] == "2"
    assert _env_of_spec(_gpu_spec(["gpus"], "a100"))["SLURM_GPUS"] == "a100:2"
    per_node = _env_of_spec(_gpu_spec(["gpus_per_node"]))
    assert per_node["SLURM_GPUS_PER_NODE"] == "2" and "SLURM_GPUS" not in per_node
    both = _env_of_spec(_gpu_spec(["gpus", "gpus_per_node"], "a100"))
    assert (both["SLURM_GPUS"], both["SLURM_GPUS_PER_NODE"]) == ("a100:2", "a100:2")
    assert not {"SLURM_GPUS", "SLURM_GPUS_PER_NODE"} & set(_env_of_spec(_gpu_spec([])))


def test_gpu_directives_say_which_option_gave_them():
    """--gpus and --gpus-per-node are kept as such; --gpus-per-task with a model or without tasks becomes a
    GPU count of --gres form (Slurm then sets no SLURM_GPUS either)."""
    from gridsched.submission import compat

    def params(lines: str) -> dict[str, str]:
        return compat.translate(f"#!/bin/sh\n{lines}\ntrue\n", "j.sh").params()

    assert params("#SBATCH --gpus-per-node=a100:1")["--gpus-per-node"] == "a100:1"
    assert params("#SBATCH -G 2")["--gpus"] == "2"
    got = params("#SBATCH --gpus-per-task=a100:1 -n 2")
    assert got["--gres"] == "gpu:a100:2" and "--gpus" not in got


def test_grid_engine_parallel_environment_as_grid_engine_sets_it(tmp_path, monkeypatch):
    """Seen with Grid Engine 8.1.9: a ``-pe NAME N`` job gets PE=NAME and PE_HOSTFILE; a job without -pe
    neither (NSLOTS, NHOSTS, NQUEUES both).  A job of gridsched's own sees every system's names, as before."""
    spec = _spec_of(tmp_path / "pe", monkeypatch, "#!/bin/sh\n#$ -pe smp 2\n#$ -cwd\ntrue\n")
    assert (spec.pe, spec.ncpus, spec.dialect) == ("smp", 2, "sge")
    env = _env_of_spec(JobSpec.from_spec(spec.to_spec()))
    assert (env["PE"], env["PE_HOSTFILE"], env["NSLOTS"], env["NHOSTS"]) == (
        "smp",
        "/t/gridsched.5.x/pe_hostfile",
        "4",
        "1",
    )
    plain = _env_of_spec(_spec_of(tmp_path / "no", monkeypatch, "#!/bin/sh\n#$ -N x\n#$ -cwd\ntrue\n"))
    assert "PE" not in plain and "PE_HOSTFILE" not in plain and plain["NQUEUES"] == "1"
    own = env_of(JOB)
    assert "PE" not in own and own["PE_HOSTFILE"]
    assert env_of(replace(JOB, pe="mpi"))["PE"] == "mpi"
    assert "PE" not in env_of(replace(JOB, pe="mpi", dialect="slurm"))


def test_a_spec_of_the_previous_release_reads_without_the_new_fields(tmp_path):
    """Every job the previous release left (tests/data) reads back as before: no count per node, hint, GPU
    options or parallel environment, none of their names in its environment, and the same spec written."""
    import sqlite3
    import tarfile
    from pathlib import Path

    with tarfile.open(Path(__file__).resolve().parents[1] / "data" / "spool-0.1.0.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    [db] = (tmp_path / "spool").glob("*.db")
    rows = sqlite3.connect(db).execute("SELECT spec FROM jobs").fetchall()
    assert rows
    new = {"SLURM_HINT", "SLURM_THREADS_PER_CORE", "SLURM_NTASKS_PER_CORE", "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "PE"}
    for (text,) in rows:
        data = json.loads(text)
        spec = JobSpec.from_spec(data)
        assert (spec.ntasks_per_node, spec.hint, spec.gpu_options, spec.pe) == (None, None, (), None)
        assert not {"ntasks_per_node", "hint", "gpu_options", "pe"} & set(spec.to_spec())
        env = _env_of_spec(spec)
        assert not new & set(env)
        assert env["SLURM_NTASKS_PER_NODE"] == "1"  # a job without a dialect: every system's names, as before


def test_emit_writes_the_new_requests_back(tmp_path, monkeypatch):
    """gsub --emit slurm writes --ntasks-per-node, --hint and --gpus-per-node back as #SBATCH lines, which
    read back as the same options; --emit pbs says in a comment what PBS has no words for."""
    from click.testing import CliRunner

    from gridsched.cli import gsub
    from gridsched.submission import compat

    (tmp_path / "gridsched.toml").write_text("[daemon]\nautostart = false\n[machine]\ncores = 4\n")
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(tmp_path / "gridsched.toml"))
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(tmp_path / "spool"))
    args = ["--ntasks-per-node", "2", "--hint", "compute_bound", "--gpus-per-node", "a100:1", "--pe", "smp"]
    r = CliRunner().invoke(gsub.cli, ["--emit", "slurm", *args, "--wrap", "true"], prog_name="gsub")
    assert r.exit_code == 0, r.stderr
    for line in ("#SBATCH --ntasks-per-node=2", "#SBATCH --hint=compute_bound", "#SBATCH --gpus-per-node=a100:1"):
        assert f"{line}\n" in r.stdout
    assert "# gridsched: dropped --pe smp" in r.stdout
    back = compat.translate(r.stdout, "e.sh").params()
    assert (back["--ntasks-per-node"], back["--hint"], back["--gpus-per-node"]) == ("2", "compute_bound", "a100:1")
    r = CliRunner().invoke(gsub.cli, ["--emit", "pbs", *args, "--wrap", "true"], prog_name="gsub")
    assert r.exit_code == 0, r.stderr
    assert "#PBS -l select=1:ncpus=1:ngpus=1\n" in r.stdout
    for dropped in ("--hint compute_bound", "--pe smp", "--ntasks-per-node 2"):
        assert f"# gridsched: dropped {dropped} (not translated to PBS)\n" in r.stdout
