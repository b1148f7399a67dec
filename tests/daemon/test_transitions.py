"""Every change of a job's state in the daemon goes through gridsched.daemon.transitions, which refuses a change
from a state it does not leave."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gridsched.daemon import transitions
from gridsched.daemon.table import Rec
from gridsched.protocol.jobs import TERMINAL, Checkpoint, JobState, Stop
from tests.daemon.driven import Driven
from tests.daemon.test_alter import ONE_CORE

DAEMON = Path(__file__).resolve().parents[2] / "gridsched" / "daemon"


def rec(state: JobState) -> Rec:
    return Rec(1, "me", 1000, 1, 60, 0.0, Checkpoint.SIGNAL, state)


MOVES = {
    transitions.start: ({JobState.PENDING, JobState.SUSPENDED}, JobState.RUNNING),
    transitions.suspend: ({JobState.RUNNING}, JobState.SUSPENDED),
    transitions.requeued: ({JobState.STOPPING, JobState.RUNNING}, JobState.PENDING),
}


@pytest.mark.parametrize("move", list(MOVES), ids=lambda f: f.__name__)
@pytest.mark.parametrize("state", list(JobState))
def test_a_transition_leaves_only_its_states(move, state):
    sources, to = MOVES[move]
    r = rec(state)
    if state in sources:
        move(r)
        assert r.state is to
    else:
        with pytest.raises(transitions.Transition):
            move(r)
        assert r.state is state


@pytest.mark.parametrize("state", list(JobState))
def test_stopping_and_ending(state):
    r = rec(state)
    if state is JobState.RUNNING:
        transitions.stopping(r, Stop.PREEMPT)
        assert r.state is JobState.STOPPING and r.stop is Stop.PREEMPT
    else:
        with pytest.raises(transitions.Transition):
            transitions.stopping(r, Stop.PREEMPT)
    r = rec(state)
    if state in TERMINAL:
        with pytest.raises(transitions.Transition):
            transitions.end(r, JobState.COMPLETED)
    else:
        transitions.end(r, JobState.CANCELLED)
        assert r.state is JobState.CANCELLED
    with pytest.raises(transitions.Transition):
        transitions.end(rec(JobState.RUNNING), JobState.PENDING)


def test_no_other_module_of_the_daemon_sets_a_jobs_state():
    for path in DAEMON.rglob("*.py"):
        if path.name == "transitions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                    bad = isinstance(el, ast.Attribute) and el.attr == "state" and isinstance(el.value, ast.Name)
                    # records of jobs (rec, child, ...); reservations (r) and array intakes (it) have states too
                    assert not (bad and el.value.id not in ("r", "it", "self")), f"{path.name}:{node.lineno}"


def _written_state(node: ast.AST) -> ast.expr | None:
    """The value of a ``state=`` keyword given to an ``update(...)`` call (a write of a row's state)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
        return next((k.value for k in node.keywords if k.arg == "state"), None)
    return None


def test_no_other_module_of_the_daemon_writes_a_state_to_a_row():
    """A row's state is written from its record's (``rec.state.value``), never as a state of its own."""
    for path in DAEMON.rglob("*.py"):
        if path.name == "transitions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            v = _written_state(node)
            ok = v is None or (
                isinstance(v, ast.Attribute)
                and v.attr == "value"
                and isinstance(v.value, ast.Attribute)
                and v.value.attr == "state"
            )
            assert ok, f"{path.name}:{node.lineno}"


def test_run_again_leaves_only_an_end():
    for state in JobState:
        r = rec(state)
        if state in TERMINAL:
            transitions.run_again(r)
            assert r.state is JobState.PENDING
        else:
            with pytest.raises(transitions.Transition):
                transitions.run_again(r)


def test_a_row_no_record_can_be_made_of_ends_failed_at_a_start(stub_daemon):
    """A live job whose row the restarted daemon cannot read ends FAILED with the reason; the others go on."""
    dr = Driven(stub_daemon(ONE_CORE))
    bad, good = dr.submit(work=None, hold=True), dr.submit(work=None, hold=True)
    dr.d.table.commit()
    dr.d.db.begin()
    dr.d.db.update(bad, spec={"id": bad})  # no cores, no walltime: no record can be made of it
    assert dr.d.db.commit()
    dr.restart(stub_daemon)
    row = dr.job(bad)
    assert row["state"] == "FAILED" and row["reason"].startswith("its record cannot be read (KeyError")
    assert row["end_time"] == pytest.approx(dr.now, abs=5)
    assert dr.state(good) == "HELD"
