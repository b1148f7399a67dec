"""What a job sees when it runs, in the real daemon: the Slurm, PBS and Grid Engine environment of its
request, its private TMPDIR and host files, and srun, mpirun and mpiexec on its PATH."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
from pathlib import Path

from gridsched.core import cpuset
from tests.conftest import wait_for

HOST = sorted(os.sched_getaffinity(0))
NAME = socket.gethostname().split(".")[0]


def config(tmpdir: Path, cores: int = 8, compat: bool = True) -> str:
    return f"""
[scheduler]
policy = "fcfs"
[jobs]
kill_grace = "1s"
tmpdir = "{tmpdir}"
[machine]
cores = {cores}
[daemon]
autostart = false
[compat]
env = {"true" if compat else "false"}
"""


def env_of(path: Path) -> dict[str, str]:
    """The environment a job wrote with ``env -0``."""
    out = {}
    for item in path.read_bytes().split(b"\0"):
        if b"=" in item:
            k, v = item.decode().split("=", 1)
            out[k] = v
    return out


def make(make_gs, tmp_path: Path, **kw):
    base = tmp_path / "jobtmp"
    base.mkdir(exist_ok=True)
    return make_gs(config(base, **kw)), base


def make_shared(shared_make_gs, **kw):
    """The module's daemon of this configuration (its jobs' private directories in one directory of the
    module's), for tests independent of each other's jobs."""
    base = shared_make_gs.root / "jobtmp"
    base.mkdir(exist_ok=True)
    return shared_make_gs(config(base, **kw))


def test_slurm_script_sees_its_tasks_and_cores(shared_make_gs, tmp_path):
    """#SBATCH -n 4 -c 2: the values Slurm gives a one-node job of that request; the common
    ``export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK`` keeps the right value."""
    gs = make_shared(shared_make_gs)
    script = gs.work / "s.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -n 4\n#SBATCH -c 2\n#SBATCH --mem=1G\n#SBATCH -J sim\n"
        "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\n"
        "env -0 > env.$SLURM_JOB_ID\n"
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    e = env_of(gs.work / f"env.{jid}")
    want = {
        "SLURM_JOB_ID": str(jid),
        "SLURM_JOBID": str(jid),
        "SLURM_JOB_NAME": "sim",
        "SLURM_JOB_USER": pwd.getpwuid(os.getuid()).pw_name,
        "SLURM_SUBMIT_DIR": str(gs.work),
        "SLURM_SUBMIT_HOST": NAME,
        "SLURM_JOB_PARTITION": "batch",
        "SLURM_CPUS_PER_TASK": "2",
        "SLURM_NTASKS": "4",
        "SLURM_NPROCS": "4",
        "SLURM_NTASKS_PER_NODE": None,  # only --ntasks-per-node sets it
        "SLURM_TASKS_PER_NODE": "4",
        "SLURM_NNODES": "1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_JOB_NODELIST": NAME,
        "SLURM_NODELIST": NAME,
        "SLURMD_NODENAME": NAME,
        "SLURM_CPUS_ON_NODE": "8",
        "SLURM_JOB_CPUS_PER_NODE": "8",
        "SLURM_MEM_PER_NODE": "1024",
        "SLURM_RESTART_COUNT": None,  # Slurm sets it once the job was requeued
        "OMP_NUM_THREADS": "2",  # the script's own export (gridsched sets none for a Slurm script)
        "GS_NTASKS": "4",
        "GS_CPUS_PER_TASK": "2",
        # a Slurm script sees Slurm's names only
        "PBS_JOBID": None,
        "PBS_NP": None,
        "NCPUS": None,
        "NSLOTS": None,
        "SGE_TASK_ID": None,
    }
    assert {k: e.get(k) for k in want} == want
    assert "SLURM_ARRAY_TASK_ID" not in e and "SLURM_MEM_PER_CPU" not in e


def test_pbs_script_sees_pbs_names_and_its_nodefile(make_gs, tmp_path):
    """#PBS -l nodes=1:ppn=3: PBS_NODEFILE lists the host once per core and is gone after the job, as is
    TMPDIR, which is the job's own (mode 0700) while it runs; it sees PBS's names, not Slurm's or Grid
    Engine's."""
    gs, base = make(make_gs, tmp_path)
    script = gs.work / "p.sh"
    script.write_text(
        "#!/bin/sh\n#PBS -N pj\n#PBS -l nodes=1:ppn=3\ncd $PBS_O_WORKDIR\n"
        "env -0 > env.out\ncp $PBS_NODEFILE nodes.out\n"
        'stat -c "%a %u %F" "$TMPDIR" > tmpdir.out\necho data > "$TMPDIR/scratch"\n'
        "ls $TMPDIR >> tmpdir.out\n"
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    e = env_of(gs.work / "env.out")
    want = {
        "PBS_JOBID": f"{jid}.{NAME}",
        "PBS_JOBNAME": "pj",
        "PBS_O_WORKDIR": str(gs.work),
        "PBS_O_HOST": NAME,
        "PBS_O_HOME": os.environ["HOME"],
        "PBS_O_PATH": os.environ["PATH"],
        "PBS_QUEUE": "batch",
        "PBS_NUM_NODES": "1",
        "PBS_NUM_PPN": "3",
        "PBS_NP": "3",
        "NCPUS": "3",
        "OMP_NUM_THREADS": "3",
        "JOB_ID": None,  # a PBS script sees no Grid Engine names
        "JOB_NAME": None,
        "NSLOTS": None,
        "PE_HOSTFILE": None,
        "SLURM_JOB_ID": None,
    }
    assert {k: e.get(k) for k in want} == want
    assert (gs.work / "nodes.out").read_text() == f"{NAME}\n" * 3
    mode, uid, kind = (gs.work / "tmpdir.out").read_text().splitlines()[0].split(" ", 2)
    assert (mode, int(uid), kind) == ("700", os.getuid(), "directory")
    assert (gs.work / "tmpdir.out").read_text().splitlines()[1:] == ["scratch"]
    private = Path(e["PBS_NODEFILE"]).parent
    assert private.parent == base and Path(e["TMPDIR"]).parent == private
    wait_for(lambda: not private.exists(), 10, "the job's private directory to be removed")
    assert list(base.iterdir()) == []


def test_array_tasks_see_slurm_pbs_and_sge_indices(make_gs, tmp_path):
    gs, base = make(make_gs, tmp_path)
    jid = gs.gsub(
        "--array",
        "1-5:2",
        "--wrap",
        "echo $SLURM_JOB_ID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT "
        "$SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX $SLURM_ARRAY_TASK_STEP "
        "$PBS_ARRAYID $PBS_ARRAY_INDEX $PBS_ARRAY_ID $PBS_JOBID $SGE_TASK_ID > a.$SLURM_ARRAY_TASK_ID",
    )
    seen = {}
    for i in (1, 3, 5):
        wait_for(lambda i=i: (gs.work / f"a.{i}").is_file() and (gs.work / f"a.{i}").read_text(), 30, f"task {i}")
        seen[i] = (gs.work / f"a.{i}").read_text().split()
    ids = sorted(int(v[0]) for v in seen.values())
    assert ids[0] == jid and len(set(ids)) == 3
    for i, v in seen.items():
        assert v[1:] == [
            str(jid),
            str(i),
            "3",
            "1",
            "5",
            "2",
            str(i),
            str(i),
            f"{jid}[].{NAME}",
            f"{jid}[{i}].{NAME}",
            str(i),
        ]
    for t in ids:
        gs.wait_state(t, "COMPLETED")
    wait_for(lambda: list(base.iterdir()) == [], 10, "the tasks' private directories to be removed")


def test_srun_starts_the_jobs_tasks(shared_make_gs, tmp_path):
    """srun hostname runs once per task (#SBATCH -n 3), with SLURM_PROCID 0 to 2; srun -n more than the
    job's tasks is refused with one line; srun outside a job says to use gsub."""
    gs = make_shared(shared_make_gs)
    script = gs.work / "r.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH --ntasks=3\n"
        "srun hostname > host.out\n"
        "srun -l sh -c 'echo $SLURM_PROCID $SLURM_STEP_ID $SLURM_NODEID' > ids.out\n"
        "srun -n 4 true 2> big.err; echo $? > big.rc\n"
        "env -u GS_JOBID srun hostname 2> out.err; echo $? > out.rc\n"
        "srun sh -c 'exit $SLURM_PROCID'; echo $? > worst.rc\n"
    )
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED")
    assert (gs.work / "host.out").read_text().split() == [socket.gethostname()] * 3
    ids = sorted((gs.work / "ids.out").read_text().splitlines())
    assert ids == ["0: 0 1 0", "1: 1 1 0", "2: 2 1 0"]  # the second step of the job
    err = (gs.work / "big.err").read_text()
    assert err.count("\n") == 1 and err.startswith("srun: error: -n 4: more than the job's 3 tasks")
    assert (gs.work / "big.rc").read_text().strip() != "0"
    err = (gs.work / "out.err").read_text()
    assert err.count("\n") == 1 and "not inside a job" in err and "gsub" in err
    assert (gs.work / "out.rc").read_text().strip() == "1"
    assert (gs.work / "worst.rc").read_text().strip() == "2"  # the highest of the tasks' exit statuses


def test_srun_pins_each_copy_to_its_own_share(make_gs, tmp_path):
    """srun -n 2 in a two-task job: each copy runs on cores of its own, together the job's."""
    gs, _ = make(make_gs, tmp_path, cores=len(HOST))
    n = 2 if len(HOST) >= 2 else 1
    jid = gs.gsub(
        "--ntasks",
        str(n),
        "--wrap",
        # each copy writes a file of its own: two copies printing to one shared file may interleave
        f'srun -n {n} python3 -c \'import os; r = os.environ["SLURM_PROCID"]; '
        'open("aff." + r, "w").write(" ".join(map(str, sorted(os.sched_getaffinity(0)))))\'; '
        "grep Cpus_allowed_list /proc/self/status | cut -f2 > job.aff",
    )
    gs.wait_state(jid, "COMPLETED")
    shares = {int(f.name.split(".")[1]): {int(c) for c in f.read_text().split()} for f in gs.work.glob("aff.*")}
    job_cpus = cpuset.parse((gs.work / "job.aff").read_text())
    assert sorted(shares) == list(range(n))
    assert all(len(s) == len(job_cpus) // n for s in shares.values())
    assert set().union(*shares.values()) == job_cpus
    if n == 2:
        assert not (shares[0] & shares[1])


def test_mpirun_without_an_mpi_runs_ranks(shared_make_gs, tmp_path):
    """No MPI installed: mpirun starts the job's ranks with OMPI_COMM_WORLD_* and PMI_* set."""
    gs = make_shared(shared_make_gs)
    path = ":".join(p for p in os.environ["PATH"].split(":") if not shutil.which("mpirun", path=p))
    gs.env["PATH"] = path
    jid = gs.gsub(
        "--ntasks",
        "3",
        "--wrap",
        "mpirun sh -c 'echo $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE $PMI_RANK $PMI_SIZE' > mpi.out; "
        "mpiexec -n 2 sh -c 'echo $PMI_RANK' > mpiexec.out",
    )
    gs.wait_state(jid, "COMPLETED")
    assert sorted((gs.work / "mpi.out").read_text().splitlines()) == ["0 3 0 3", "1 3 1 3", "2 3 2 3"]
    assert sorted((gs.work / "mpiexec.out").read_text().split()) == ["0", "1"]


def test_an_installed_mpirun_is_not_shadowed_and_gets_the_jobs_host_file(shared_make_gs, tmp_path):
    gs = make_shared(shared_make_gs)
    mpibin = tmp_path / "mpi" / "bin"
    mpibin.mkdir(parents=True)
    fake = mpibin / "mpirun"
    fake.write_text('#!/bin/sh\necho installed\ncat "$OMPI_MCA_orte_default_hostfile"\ncat "$HYDRA_HOST_FILE"\n')
    fake.chmod(0o755)
    gs.env["PATH"] = f"{mpibin}:{gs.env['PATH']}"
    jid = gs.gsub(
        "--ntasks", "2", "--cpus-per-task", "2", "--wrap", "mpirun ./a.out > mpi.out; command -v srun > srun.out"
    )
    gs.wait_state(jid, "COMPLETED")
    assert (gs.work / "mpi.out").read_text().splitlines() == ["installed", NAME, NAME, NAME, NAME]
    assert (gs.work / "srun.out").read_text().strip().endswith("/bin/srun")


def test_compat_off_sets_no_foreign_names_but_tmpdir_and_srun(make_gs, tmp_path):
    gs, _ = make(make_gs, tmp_path, compat=False)
    gs.env["SLURM_CPUS_PER_TASK"] = "9"  # as if gsub ran inside another system's job
    jid = gs.gsub("-n", "2", "--wrap", "env -0 > env.out; srun true && echo ok > srun.out")
    gs.wait_state(jid, "COMPLETED")
    e = env_of(gs.work / "env.out")
    # the submitter's own settings pass (SLURM_CONF where a Slurm client is set up), not a system's job's names
    own = {k for k in os.environ if k.startswith("SLURM") and k != "SLURM_CPUS_PER_TASK"}
    foreign = [k for k in e if k.startswith(("SLURM", "PBS_", "SGE_")) or k in ("NSLOTS", "JOB_ID", "NCPUS")]
    assert not set(foreign) - own, foreign
    assert e["TMPDIR"].endswith("/tmp") and e["GS_NTASKS"] == "1" and e["OMP_NUM_THREADS"] == "2"
    assert (gs.work / "srun.out").read_text() == "ok\n"


def test_restart_count_and_a_fresh_tmpdir_after_a_requeue(make_gs, tmp_path):
    """A running job sent back to the queue (grequeue) starts again with SLURM_RESTART_COUNT 1 and a TMPDIR of
    its own; the first one is gone.  (A job preempted in requeue mode for a head's reservation is requeued the
    same way: that scheduling is tested in process in test_backfill_driven.py.)"""
    base = tmp_path / "jobtmp"
    base.mkdir()
    gs = make_gs(config(base, cores=4))
    e = gs.gsub(
        "-n",
        "2",
        "-t",
        "20s",
        "--wrap",
        'echo "$SLURM_RESTART_COUNT $GS_RESTART_COUNT $TMPDIR" >> runs.out; '
        '[ "$SLURM_RESTART_COUNT" = 0 ] && sleep 100; true',
    )
    out = gs.work / "runs.out"
    wait_for(lambda: out.exists() and out.read_text().endswith("\n"), 20, "the first run to start")
    gs.run("grequeue", str(e), check=True)
    je = gs.wait_state(e, "COMPLETED", timeout=60)
    assert je["restarts"] == 1
    runs = [line.split() for line in out.read_text().splitlines()]
    assert [r[:2] for r in runs] == [["0", "0"], ["1", "1"]] and runs[0][2] != runs[1][2]
    wait_for(lambda: list(base.iterdir()) == [], 10, "both private directories to be removed")


def test_private_directory_is_removed_after_a_crash(make_gs, tmp_path):
    """The daemon and the job's shepherd are killed while the job runs: a restarted daemon finds the job
    gone and removes its TMPDIR with everything in it."""
    gs, base = make(make_gs, tmp_path)
    jid = gs.gsub("--wrap", 'mkdir "$TMPDIR/d"; echo x > "$TMPDIR/d/f"; touch started; sleep 300')
    wait_for(lambda: (gs.work / "started").exists(), 30, "the job to start")
    assert len(list(base.iterdir())) == 1
    gs.kill9()
    for p in gs.processes():
        p.kill()
    gs.start()
    j = gs.wait_state(jid, "FAILED", "COMPLETED", "CANCELLED")
    assert j["state"] == "FAILED"
    wait_for(lambda: list(base.iterdir()) == [], 10, "the private directory to be removed")


def test_bad_tasks_are_refused_at_submission(shared_make_gs, tmp_path):
    gs = make_shared(shared_make_gs)
    r = gs.run("gsub", "-n", "5", "--ntasks", "2", "--wrap", "true")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "--ntasks 2" in r.stderr
    jid = gs.gsub("--ntasks", "2", "--cpus-per-task", "3", "--wrap", "echo $GS_NCPUS $SLURM_NTASKS > n.out")
    gs.wait_state(jid, "COMPLETED")
    assert (gs.work / "n.out").read_text().split() == ["6", "2"]


def test_a_job_submitted_from_a_job_sees_its_own_environment(shared_make_gs, tmp_path):
    """gsub inside a job: the child gets its own TMPDIR, srun and mpirun, and none of its parent's Slurm
    values (its parent asked for -c 2; the child for -n 3 alone, so no SLURM_CPUS_PER_TASK)."""
    gs = make_shared(shared_make_gs)
    base = shared_make_gs.root / "jobtmp"
    gs.env["PATH"] = ":".join(p for p in os.environ["PATH"].split(":") if not shutil.which("mpirun", path=p))
    jid = gs.gsub(
        "--ntasks",
        "1",
        "--cpus-per-task",
        "2",
        "--no-parent",
        "--wrap",
        "gsub --no-parent --ntasks 3 --wrap 'env -0 > child.env; command -v mpirun > child.mpi' > child.id",
    )
    gs.wait_state(jid, "COMPLETED")
    child = int((gs.work / "child.id").read_text().split()[-1])
    gs.wait_state(child, "COMPLETED")
    e = env_of(gs.work / "child.env")
    bins = [p for p in e["PATH"].split(":") if p.startswith(str(base))]
    assert bins == [str(Path(e["TMPDIR"]).parent / "bin")]  # its own, not its parent's
    assert (gs.work / "child.mpi").read_text().strip() == bins[0] + "/mpirun"
    assert e["SLURM_JOB_ID"] == str(child) and e["SLURM_NTASKS"] == "3" and "SLURM_CPUS_PER_TASK" not in e


def test_srun_forwards_sigterm_to_its_copies(shared_make_gs, tmp_path):
    """SIGTERM sent to srun alone reaches every copy; srun exits with their worst status."""
    gs = make_shared(shared_make_gs)
    copy = gs.work / "copy.sh"
    copy.write_text(
        "#!/bin/sh\ntrap 'echo term $SLURM_PROCID >> got; exit 3' TERM\ntouch ready.$SLURM_PROCID\n"
        "i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n"
    )
    copy.chmod(0o755)
    jid = gs.gsub(
        "--ntasks",
        "2",
        "--wrap",
        f"srun {copy} & pid=$!; "
        "i=0; while [ ! -e ready.0 ] || [ ! -e ready.1 ]; do sleep 0.1; i=$((i+1)); [ $i -gt 300 ] && break; done; "
        "kill -TERM $pid; wait $pid; echo $? > srun.rc",
    )
    gs.wait_state(jid, "COMPLETED", timeout=60)
    assert sorted((gs.work / "got").read_text().splitlines()) == ["term 0", "term 1"]
    assert (gs.work / "srun.rc").read_text().strip() == "3"


def test_a_job_whose_private_directory_cannot_be_made_fails_with_why(make_gs, tmp_path):
    gs = make_gs(config(tmp_path / "missing"))
    jid = gs.gsub("--wrap", "touch ran")
    j = gs.wait_state(jid, "FAILED")
    assert "cannot make its private directory in" in j["reason"] and str(tmp_path / "missing") in j["reason"]
    assert not (gs.work / "ran").exists()
    assert gs.alive()
