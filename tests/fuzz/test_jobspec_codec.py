"""The one encoder and decoder of a job (``JobSpec.to_spec`` and ``JobSpec.from_spec``): what the spool and
the state db hold reads back as the job the boundary checked, and specs written by the previous release read."""

from __future__ import annotations

import json
import os

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import Checkpoint
from tests.fuzz.test_requests import valid_job

SENDER = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), False)


def checked(**over: object) -> rq.JobSpec:
    job = {**valid_job(7), **over}
    req = rq.parse({"type": "submit", "job": job}, rq.id_name(7), SENDER)
    assert isinstance(req, rq.Submit)
    return req.job


OPTIONAL = {
    "checkpoint": st.sampled_from(["none", "signal", "suspend", "requeue"]),
    "mem": st.integers(1, 1 << 40),
    "args": st.lists(st.text(alphabet="abc -", max_size=5), max_size=3),
    "env": st.dictionaries(st.sampled_from(["A", "B", "HOME"]), st.text(alphabet="xyz/", max_size=4)),
    "resources": st.dictionaries(st.sampled_from(["lic", "matlab"]), st.integers(1, 4), min_size=1),
    "begin": st.floats(0, 1e9, allow_nan=False),
    "nice": st.integers(0, 100),
    "signal": st.sampled_from(["USR1@30", "B:TERM@10"]),
    "estimate": st.integers(1, 60),
    "mail_type": st.sampled_from(["END", "BEGIN,FAIL"]),
    "mail_user": st.just(["someone@example.org"]),
    "get_user_env": st.sampled_from(["8L", "20S"]),
    "place": st.sampled_from(["pack", "spread", "board"]),
    "threads_per_core": st.sampled_from([1, 2]),
    "exclusive_board": st.booleans(),
    "ntasks": st.just(1),
    "env_set": st.just({"MY_VAR": "1"}),
    "open_mode": st.just("append"),
    "array": st.sampled_from(["0-9", "1-7:2%2"]),
    "split": st.just({"n": 4, "ncpus": 1, "task_time": 10, "retries": 1}),
    "devices": st.just([{"type": "gpu", "count": 1, "model": "", "bind": "closest", "exclusive": False}]),
    "ntasks_per_node": st.integers(1, 8),
    "hint": st.sampled_from(["nomultithread", "multithread", "compute_bound", "memory_bound"]),
    "gpu_options": st.sampled_from([["gpus"], ["gpus_per_node"], ["gpus", "gpus_per_node"]]),
    "pe": st.sampled_from(["smp", "mpi*"]),
}


@settings(max_examples=150, deadline=None)
@given(st.fixed_dictionaries({}, optional=OPTIONAL))
def test_a_checked_job_reads_back_from_its_spec(over):
    try:
        job = checked(**over)
    except rq.Refused:  # a combination the boundary refuses (an array split, tasks of a split job, ...)
        assume(False)
        return
    spec = job.to_spec()
    back = rq.JobSpec.from_spec(json.loads(json.dumps(spec)))
    if job.placed:  # a requirement without --place reads back as the pack it means
        job = job._replace(place=job.place or "pack")
    assert back == job
    assert back.to_spec() == spec


def test_a_daemons_copy_keeps_what_the_daemon_added():
    job = checked(split={"n": 3, "ncpus": 1, "task_time": 10, "tasks": [[1, 5, ["a"]], [1, 10, []], [1, 2, ["b"]]]})
    assert job.split is not None
    kept = job._replace(split=job.split._replace(left=(0, 2)), split_args=(("a",), (), ("b",)))
    spec = kept.to_spec()
    assert spec["split"]["tasks"] == [[1, 5], [1, 10], [1, 2]]  # sizes in the table, arguments private
    assert spec["split"]["left"] == [0, 2]
    assert spec["split_args"] == [["a"], [], ["b"]]
    back = rq.JobSpec.from_spec(json.loads(json.dumps(spec)))
    assert back.split is not None and back.split.left == (0, 2) and back.split_args == (("a",), (), ("b",))
    assert back.piece_args is None
    assert back.to_spec() == spec
    piece = kept._replace(split=None, split_of=7, split_chains=((0,), (2,)), split_widths=(1, 1), split_args=None)
    piece = piece._replace(split_task={"n": 3, "ncpus": 1, "task_time": 10}, checkpoint=Checkpoint.NONE)
    assert rq.JobSpec.from_spec(json.loads(json.dumps(piece.to_spec()))) == piece
    # a piece's arguments: index -> list in its spec (as the previous release wrote them), typed pairs here
    piece = piece._replace(piece_args=((0, ("a",)), (2, ("b",))))
    spec = piece.to_spec()
    assert spec["split_args"] == {"0": ["a"], "2": ["b"]}
    back = rq.JobSpec.from_spec(json.loads(json.dumps(spec)))
    assert back == piece and back.split_args is None and back.to_spec() == spec
    empty = piece._replace(piece_args=())  # a piece whose sub-tasks have no arguments of their own
    assert empty.to_spec()["split_args"] == {} and rq.JobSpec.from_spec(empty.to_spec()) == empty


def test_a_spec_written_by_the_previous_release_reads():
    # an array task as the previous release took it in: its array variables baked into its environment, no
    # umask, a reservation cleared to null, the public part alone (the private part lives in its own file)
    old = {
        "id": 12,
        "name": "sweep",
        "user": "me",
        "uid": 1000,
        "gid": 1000,
        "ncpus": 2,
        "walltime": 60,
        "mem": None,
        "checkpoint": "requeue",
        "hold": False,
        "depend": "afterok:3",
        "submit_time": 5.0,
        "array": "0-3%2",
        "array_id": 10,
        "array_index": 2,
        "array_max": 2,
        "reservation": None,
        "env": {"GS_ARRAY_JOB_ID": "10", "GS_ARRAY_TASK_ID": "2", "HOME": "/home/me"},
    }
    job = rq.JobSpec.from_spec(old)
    assert job.checkpoint is Checkpoint.REQUEUE
    assert (job.array_id, job.array_index, job.array_max) == (10, 2, 2)
    assert job.reservation is None and job.umask == 0o022 and job.args == () and job.workdir == ""
    assert dict(job.env)["GS_ARRAY_TASK_ID"] == "2"


def test_the_slurm_and_grid_engine_requests_are_checked_at_the_boundary():
    """A hint Slurm does not know, GPU options of a job without GPUs or naming no option, a parallel
    environment's name with a space: refused, each in one line that names the field."""
    gpu = [{"type": "gpu", "count": 1, "model": "", "bind": "closest", "exclusive": False}]
    for over, field in (
        ({"hint": "fast"}, "hint"),
        ({"gpu_options": ["gpus"]}, "gpu_options"),
        ({"gpu_options": ["gres"], "devices": gpu}, "gpu_options"),
        ({"gpu_options": ["gpus", "gpus"], "devices": gpu}, "gpu_options"),
        ({"pe": "a b"}, "pe"),
        ({"pe": ""}, "pe"),
        ({"ntasks_per_node": 0}, "ntasks_per_node"),
    ):
        try:
            checked(**over)
        except rq.Refused as e:
            assert f"field {field!r}" in str(e) and "\n" not in str(e), (over, str(e))
        else:
            raise AssertionError(f"{over} was taken")
    job = checked(hint="nomultithread", gpu_options=["gpus_per_node"], devices=gpu, pe="smp", ntasks_per_node=2)
    assert (job.hint, job.gpu_options, job.pe, job.ntasks_per_node) == ("nomultithread", ("gpus_per_node",), "smp", 2)
