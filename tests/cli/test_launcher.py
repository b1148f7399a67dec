"""srun, mpirun and mpiexec of a job: what they read of their command line and how they share the cores."""

from __future__ import annotations

import pytest

from gridsched.job import launcher as L


def test_srun_options():
    st = L.parse_srun(["-n", "2", "-c2", "--cpu-bind=verbose,cores", "-l", "--mpi=pmi2", "-K", "prog", "-n", "9"])
    assert (st.ntasks, st.cpus_per_task, st.bind, st.verbose, st.label) == (2, 2, True, True, True)
    assert st.command == ["prog", "-n", "9"]  # the command's own options are its own
    assert L.parse_srun(["--ntasks=3", "--cpu-bind=none", "--", "-x"]).command == ["-x"]
    assert L.parse_srun(["--cpu-bind=none", "true"]).bind is False


@pytest.mark.parametrize(
    "args, why",
    [
        (["hostname", "-n"], None),
        (["-n", "0", "true"], "-n 0: must be at least 1"),
        (["-n", "x", "true"], "not a whole number"),
        (["-N", "2", "true"], "one node"),
        (["--frobnicate", "true"], "not an option srun knows"),
        (["-n", "2"], "no command"),
        (["-c"], "needs a value"),
    ],
)
def test_srun_refusals(args, why):
    if why is None:
        assert L.parse_srun(args).command == args
        return
    with pytest.raises(L.Refused, match=why):
        L.parse_srun(args)


def test_mpirun_options():
    st = L.parse_mpirun(["-np", "4", "--mca", "btl", "self", "-x", "A", "--bind-to", "core", "./a.out", "-np", "1"])
    assert (st.ntasks, st.command) == (4, ["./a.out", "-np", "1"])
    assert L.parse_mpirun(["--np=2", "--oversubscribe", "prog"]).ntasks == 2
    with pytest.raises(L.Refused, match="no MPI is installed"):
        L.parse_mpirun(["--frobnicate", "prog"])


def test_shares_are_disjoint_runs_of_the_jobs_cores():
    assert L.shares([4, 5, 6, 7], 2, None) == [[4, 5], [6, 7]]
    assert L.shares([4, 5, 6, 7], 4, 1) == [[4], [5], [6], [7]]
    assert L.shares([0, 1], 3, None) == [[0], [1], [0]]  # more copies than cores: they share


def test_plan_refuses_more_than_the_job_has():
    env = {"GS_NTASKS": "2"}
    assert L.plan("srun", L.Step(command=["x"]), env, [0, 1, 2, 3])[0] == 2
    with pytest.raises(L.Refused, match="-n 3: more than the job's 2 tasks"):
        L.plan("srun", L.Step(ntasks=3, command=["x"]), env, [0, 1, 2, 3])
    with pytest.raises(L.Refused, match="2 tasks of 3 cores: more than the job's 4 cores"):
        L.plan("srun", L.Step(ntasks=2, cpus_per_task=3, command=["x"]), env, [0, 1, 2, 3])


def test_outside_a_job_says_what_to_use(monkeypatch, capfd):
    monkeypatch.delenv("GS_JOBID", raising=False)
    with pytest.raises(SystemExit) as e:
        L.main(["srun", "hostname"])
    assert e.value.code == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("srun: error: not inside a job") and "gsub" in err
