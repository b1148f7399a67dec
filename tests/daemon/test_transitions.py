"""Every change of a job's state in the daemon goes through gridsched.daemon.transitions, which refuses a change
from a state it does not leave."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gridsched.daemon import transitions
from gridsched.daemon.table import Rec
from gridsched.protocol.jobs import TERMINAL, Checkpoint, JobState, Stop

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
