"""The executor's tests, the same functions against both backends: the local daemon (always) and a
real Slurm (the single-node one on loopback, where it answers; skipped with the reason elsewhere)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gridsched.api.client import GridschedError
from gridsched.api.executor import GridschedExecutor, JobFailed, RemoteTraceback
from tests.daemon.calls import die, env_of, fail, span, square

ROOT = Path(__file__).resolve().parents[2]
HOST = len(os.sched_getaffinity(0))


def job_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(params=["local", "slurm"])
def where(request, shared_make_gs, tmp_path, monkeypatch) -> dict[str, Any]:
    """The keyword arguments that make an executor of this backend, and how it holds a job back (the local
    daemon is the module's: each executor's calls are jobs of its own)."""
    monkeypatch.chdir(tmp_path)
    if request.param == "local":
        gs = shared_make_gs(f"[machine]\ncores = {max(2, HOST)}\n[daemon]\nautostart = false\n")
        return {"spool": str(gs.spool), "config": str(gs.cfgfile), "env": job_env(), "_hold": {"hold": True}}
    request.getfixturevalue("slurm_cluster")
    return {"backend": "slurm", "env": job_env(), "_hold": {"sbatch_args": ["--hold"]}}


def make(where: dict[str, Any], **kw: Any) -> GridschedExecutor:
    args = {k: v for k, v in where.items() if not k.startswith("_")}
    return GridschedExecutor(**{**args, **kw})


def test_map_over_20_inputs(where):
    with make(where, walltime="5m") as ex:
        assert list(ex.map(square, range(20), timeout=300)) == [i * i for i in range(20)]
    assert not ex.dir.exists()


def test_map_array_is_one_throttled_array(where):
    """map_array (and map) submit one job array, at most max_jobs of its tasks at once; one future per
    element, in order; map's timeout is that of concurrent.futures."""
    from concurrent.futures import TimeoutError as FuturesTimeout

    with make(where, walltime="5m", max_jobs=2) as ex:
        futs = ex.map_array(span, [0.5] * 4)
        assert len(futs) == 4 and len({f.array_id for f in futs}) == 1 and futs[0].array_id is not None
        spans = [f.result(timeout=120) for f in futs]
        assert max(sum(1 for b in spans if b[0] <= a[0] < b[1]) for a in spans) <= 2, spans
        assert [f.index for f in futs] == [0, 1, 2, 3]
        assert ex.map_array(square, []) == []
        assert list(ex.map(pow, [2, 3], [3, 2], timeout=120)) == [8, 9]  # several iterables, zipped
        with pytest.raises(FuturesTimeout):
            list(ex.map(span, [3], timeout=0.5))


def test_exceptions_tracebacks_and_logs(where):
    with make(where, walltime="5m") as ex:
        bad = ex.submit(fail, "no good")
        dead = ex.submit(die, "the last words")
        with pytest.raises(ValueError, match="^no good$") as err:
            bad.result(timeout=120)
        cause = err.value.__cause__
        assert isinstance(cause, RemoteTraceback) and "in fail\n    raise ValueError(msg)" in cause.tb
        with pytest.raises(JobFailed, match=r"ended FAILED \(exit code 3\) without a result") as err2:
            dead.result(timeout=120)
        assert str(err2.value).endswith("\nthe last words")
        # what cannot be pickled is named: the part of the call and the object's type
        lock = threading.Lock()
        with pytest.raises(
            pickle.PicklingError,
            match=r"<lambda>' cannot be sent to a job: the function: its variable 'lock' \(lock\): "
            r"cannot pickle '_thread.lock'",
        ):
            ex.submit(lambda: lock.locked())
        with pytest.raises(
            pickle.PicklingError, match=r"'square' cannot be sent to a job: argument 1 \(lock\): cannot pickle"
        ):
            ex.submit(square, threading.Lock())
        with pytest.raises(pickle.PicklingError, match=r"keyword argument 'x' \(generator\): cannot pickle"):
            ex.submit(square, x=(i for i in range(3)))


def test_lambdas_closures_and_nested_functions(where):
    """What the standard pickle cannot send goes by value (cloudpickle), both ways."""
    k = 7

    def add_k(x):  # a closure over a local variable
        return x + k

    def outer(n):  # a nested function that defines and calls another
        def inner(m):
            return m * n

        return sum(inner(i) for i in range(n))

    with make(where, walltime="5m") as ex:
        lam = ex.submit(lambda x: x * x + 1, 6)
        closure = ex.submit(add_k, 35)
        nested = ex.submit(outer, 4)
        # a lambda that calls a function of a module, which goes by name
        mixed = ex.submit(lambda x: square(x) + k, 3)
        who = ex.submit(lambda: os.environ.get("GS_JOBID") or os.environ.get("SLURM_JOB_ID"))
        made = ex.submit(lambda n: lambda x: x * n, 5)  # a lambda as the result
        bad = ex.submit(lambda d: d["missing"], {})
        locked = ex.submit(lambda: threading.Lock())  # a result that cannot be pickled
        assert lam.result(timeout=120) == 37
        assert closure.result(timeout=120) == 42
        assert nested.result(timeout=120) == 24
        assert mixed.result(timeout=120) == 16
        assert who.result(timeout=120) == str(who.job_id)  # it ran as its own job
        times5 = made.result(timeout=120)
        assert times5.__name__ == "<lambda>" and times5(3) == 15
        with pytest.raises(KeyError, match="missing") as err:
            bad.result(timeout=120)
        cause = err.value.__cause__
        assert isinstance(cause, RemoteTraceback)
        assert 'test_executor_backends.py", line' in cause.tb and "in <lambda>" in cause.tb
        assert 'bad = ex.submit(lambda d: d["missing"], {})' in cause.tb  # the source line, read in the job
        with pytest.raises(RuntimeError, match=r"^the result cannot be sent back from the job: cannot pickle '_thread"):
            locked.result(timeout=120)


def test_a_call_killed_at_its_walltime(where):
    # Slurm's time limits are whole minutes
    limit = "1m" if where.get("backend") == "slurm" else "2s"
    with make(where, walltime=limit) as ex:
        t0 = time.monotonic()
        fut = ex.submit(span, 600)
        with pytest.raises(JobFailed, match=r"ended TIMEOUT .* without a result"):
            fut.result(timeout=300)
        assert time.monotonic() - t0 < 240


def test_a_cancelled_future_cancels_its_job(where):
    from tests.conftest import wait_for

    with make(where, **where["_hold"]) as ex:
        fut = ex.submit(square, 3)
        assert fut.cancel() and fut.cancelled()
        # the held job is cancelled in the queue, not left there (shutdown does not wait for it)
        wait_for(
            lambda: (
                ex.backend.status([fut.job_id]).get(fut.job_id, None) is not None
                and ex.backend.status([fut.job_id])[fut.job_id].state == "CANCELLED"
            ),
            timeout=60,
        )


MAIN_SCRIPT = """\
import json
import sys

from gridsched.api.executor import GridschedExecutor


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


def triple(x):
    return 3 * x


def boom():
    raise KeyError("inside")


def pair(a, b):
    return Pair(a, b)


if __name__ == "__main__":

    def sixth(x):  # not defined when the job runs the script: sent by value
        return triple(x) / 6

    with GridschedExecutor(**json.loads(sys.argv[1])) as ex:
        print(ex.submit(triple, 14).result(timeout=120))
        try:
            ex.submit(boom).result(timeout=120)
        except KeyError as e:
            print("KeyError", e, "in boom" in e.__cause__.tb)
        p = ex.submit(pair, 1, 2).result(timeout=120)
        print(type(p) is Pair and isinstance(p, Pair), p.a + p.b)
        print(ex.submit(sixth, 4).result(timeout=120))
        q = ex.submit(lambda n: Pair(n, triple(n)), 2).result(timeout=120)
        print(type(q) is Pair, q.b)
"""

INTERACTIVE = """\
import json
import sys

from gridsched.api.executor import GridschedExecutor


class Box:
    def __init__(self, v):
        self.v = v


def cube(x):
    return Box(x**3)


ex = GridschedExecutor(**json.loads(sys.argv[1]))
b = ex.submit(cube, 3).result(timeout=120)
print(type(b) is Box, b.v)
ex.shutdown()
"""


def run_python(where: dict[str, Any], argv: list[str], stdin: str | None = None) -> list[str]:
    import json

    args = {k: v for k, v in where.items() if not k.startswith("_") and k != "env"}
    r = subprocess.run(
        [sys.executable, *argv, json.dumps({**args, "walltime": "5m"})],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=job_env(),
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_functions_of_the_main_script(where, tmp_path):
    """The script's functions and classes go by value, at its top level or under its guard; an instance of
    a script class comes back as an instance of the very class (isinstance holds)."""
    script = tmp_path / "main_fns.py"
    script.write_text(MAIN_SCRIPT)
    assert run_python(where, [str(script)]) == ["42", "KeyError 'inside' True", "True 3", "2.0", "True 6"]


def test_a_script_without_the_main_guard(where, tmp_path):
    """A script that makes its executor at its top level, as submitit's examples do, run as ``python
    script.py``: the job never runs the script again (the executor is made once, test_client.py counts
    the jobs) and the script's class comes back as itself."""
    script = tmp_path / "unguarded.py"
    script.write_text(INTERACTIVE + "print(isinstance(b, Box))\n")
    assert run_python(where, [str(script)]) == ["True 27", "True"]


def test_functions_defined_interactively(where, tmp_path):
    """Code read from standard input, as in an interactive session, and a module run with ``python -m``:
    no script to run in the job, their functions and classes go by value, and the top-level code needs
    no guard."""
    assert run_python(where, ["-"], stdin=INTERACTIVE) == ["True 27"]
    (tmp_path / "run_as_module.py").write_text(INTERACTIVE)  # the current directory: where's own
    assert run_python(where, ["-m", "run_as_module"]) == ["True 27"]


# -- Slurm only ----------------------------------------------------------------------


def test_slurm_resources_auto_and_refusals(slurm_cluster, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with GridschedExecutor(ncpus=2, walltime=60, backend="auto", env=job_env(), mem="100M") as ex:
        assert ex.backend.name == "slurm" and ex.dir.parent == tmp_path
        assert ex.submit(env_of, "SLURM_CPUS_PER_TASK").result(timeout=120) == "2"
    with pytest.raises(TypeError, match="the slurm backend takes no option checkpoint"):
        GridschedExecutor(backend="slurm", checkpoint="signal")
    with GridschedExecutor(backend="slurm", env=job_env(), partition="nosuchpartition") as ex:
        with pytest.raises(GridschedError, match="^sbatch: .*[Pp]artition"):
            ex.submit(square, 1)


def test_slurm_backend_where_no_slurm_answers(tmp_path, monkeypatch):
    (tmp_path / "nobin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    with pytest.raises(GridschedError, match=r"^backend slurm: no Slurm answers here \(sbatch, squeue, scontrol"):
        GridschedExecutor(backend="slurm")
