"""A plain replay under easy (:mod:`gridsched.sim.lean`) gives what the general loop gives, job by job,
with the same passes made and skipped, and the same series; what it does not take, the general loop does."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simtraces import outcome, small_traces

from gridsched.core.types import BackfillOrder, Params, Policy
from gridsched.sim import engine, lean
from gridsched.sim.engine import Mode, Result, simulate
from gridsched.sim.swf import Trace, read

EASY = Params(policy=Policy.EASY)
TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


def traces() -> st.SearchStrategy[Trace]:
    return small_traces([1, 10, 100, 1000, 2500, 5000], ["u"])


def both(tr: Trace, mode: Mode = Mode.CHECKPOINT, params: Params = EASY) -> tuple[Result, Result]:
    """The replay of ``tr`` as ``simulate`` makes it, and through the general loop; their progress reports
    (every 4096 arrivals) are the same."""
    ticks: tuple[list[int], list[int]] = ([], [])
    fast = simulate(tr, params, mode=mode, series=True, progress=ticks[0].append)
    general = simulate(tr, params, mode=mode, series=True, progress=ticks[1].append, lean=False)
    assert ticks[0] == ticks[1]
    return fast, general


SJF = Params(policy=Policy.EASY, backfill_order=BackfillOrder.SHORTEST)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tr=traces(), mode=st.sampled_from([Mode.CHECKPOINT, Mode.NONE]), params=st.sampled_from([EASY, SJF]))
def test_the_lean_replay_equals_the_general_one(tr: Trace, mode: Mode, params: Params) -> None:
    fast, general = both(tr, mode, params)
    assert outcome(fast) == outcome(general)


def three_jobs() -> Trace:
    """Three jobs on 4 cores: the whole machine, then two that start together when it ends."""
    return Trace(
        "<t>",
        4,
        4,
        None,
        [1, 2, 3],
        [0.0, 0.0, 5.0],
        [4, 2, 1],
        [100.0, 50.0, 20.0],
        [90.0, 50.0, 20.0],
        ["a", "b", "c"],
    )


def test_the_lean_replay_makes_every_pass_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain easy replay, in queue order or shortest first, never builds a snapshot (the comparison above
    is not of the general loop with itself); under conservative it does."""
    tr = three_jobs()

    def refuse(*args: object) -> None:
        raise AssertionError("a snapshot was built")

    monkeypatch.setattr(engine, "_snapshot", refuse)
    for params in (EASY, SJF):
        res = simulate(tr, params)
        assert (res.start, res.end) == ([0.0, 90.0, 90.0], [90.0, 140.0, 110.0])
    with pytest.raises(AssertionError, match="snapshot"):
        simulate(tr, Params(policy=Policy.CONSERVATIVE))


@pytest.mark.parametrize(
    "change",
    [
        lambda tr: (tr.walltime.__setitem__(1, 0.0), tr.run.__setitem__(1, 0.0)),  # a job that ends as it starts
        lambda tr: tr.run.__setitem__(1, 60.0),  # a run past its walltime
        lambda tr: tr.size.__setitem__(2, 5),  # a job larger than the machine
    ],
)
def test_jobs_the_lean_replay_does_not_take_go_to_the_general_loop(change, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    tr = three_jobs()
    assert lean.takes(tr)
    change(tr)
    assert not lean.takes(tr)
    called: list[object] = []
    monkeypatch.setattr(lean, "replay", lambda *a: called.append(a))
    try:
        simulate(tr, EASY)
    except engine.SimulationError:
        pass  # (the job larger than the machine is left waiting)
    assert not called


def test_a_pass_the_lean_one_leaves_to_the_general_one_replays_the_trace_there() -> None:
    """At 1e17 s a second is below the clock's resolution: a job started then counts as ending as it starts,
    and the head would fit at once but for it, a pass the plain easy pass leaves to the general one."""
    big = 1e17
    tr = Trace(
        "<t>", 2, 2, None, [1, 2, 3], [big, big, big + 64], [2, 2, 1], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], ["a", "b", "c"]
    )
    assert lean.takes(tr)
    with pytest.raises(lean.Fallback):
        lean.replay(tr, True, False, None)
    fast, general = both(tr)
    assert outcome(fast) == outcome(general)


@pytest.mark.parametrize("params", [EASY, SJF], ids=["queue", "shortest"])
@pytest.mark.parametrize("name", ["KTH-SP2-1996-2.1-cln.swf", "SDSC-SP2-1998-4.2-cln.swf"])
def test_the_lean_replay_equals_the_general_one_on_trace_slices(name: str, params: Params) -> None:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"no trace at {path}")
    tr = read(str(path), limit=4500)  # (past one progress report)
    fast, general = both(tr, params=params)
    assert outcome(fast) == outcome(general)
