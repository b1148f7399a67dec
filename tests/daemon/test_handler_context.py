"""A request handler needs only its narrow context: these serve requests with a made-up one, no daemon, and
check what each hands back for the loop to plan from."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from gridsched.daemon import handlers
from gridsched.daemon.handlers import Changed, Context, RefusedInPart
from gridsched.daemon.handlers.hold import BY_OWNER
from gridsched.daemon.table import Rec
from gridsched.protocol import requests as rq
from gridsched.protocol.jobs import Checkpoint, JobState

ME = rq.Sender(1000, "me", frozenset({1000}), False)
ADMIN = rq.Sender(0, "root", frozenset({0}), True)


class Acts:
    """The daemon's actions, recorded; those a test does not expect fail it."""

    def __init__(self, tunes: bool = True) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.tunes = tunes
        self.sweeps: list[Any] = []

    def set_drained(self, cores: frozenset[int], reason: str, what: str) -> None:
        self.calls.append(("set_drained", (cores, reason)))

    def tune(self) -> bool:
        self.calls.append(("tune", ()))
        return self.tunes

    def reload(self) -> None:
        self.calls.append(("reload", ()))

    def sweep(self, name: str, what: str, recs: list[Rec], act: Any) -> None:
        self.sweeps.append((recs, act))

    def yield_cores(self, rcv: rq.Received, jid: int, until: tuple[int, ...] | None) -> bool:
        return jid == 7

    def resume(self, rcv: rq.Received, jid: int) -> bool:
        return False


class Table:
    def __init__(self, *recs: Rec) -> None:
        self.jobs = {r.id: r for r in recs}
        self.saved: list[int] = []

    def save(self, rec: Rec, **fields: Any) -> None:
        self.saved.append(rec.id)

    def dequeue(self, rec: Rec) -> None:
        pass


class DB:
    def job(self, jid: int) -> None:
        return None


def context(acts: Acts, table: Table | None = None, drained: frozenset[int] = frozenset()) -> Context:
    return Context(
        table=cast(Any, table or Table()),
        cfg=cast(Any, SimpleNamespace()),
        machine=cast(Any, SimpleNamespace(ncores=8)),
        db=cast(Any, DB()),
        now=100.0,
        rests={},
        drained=drained,
        drain_reason="",
        id_high=0,
        act=cast(Any, acts),
    )


def serve(ctx: Context, req: rq.Request, sender: rq.Sender = ADMIN) -> Changed:
    return handlers.handle(ctx, rq.Received("req.json", sender, req))


def test_drain_and_undrain_change_what_the_core_sees():
    acts = Acts()
    assert serve(context(acts), rq.Drain(frozenset({1, 2, 99}), "")) is Changed.QUEUE
    assert serve(context(acts, drained=frozenset({1, 2})), rq.Undrain(frozenset({2}))) is Changed.QUEUE
    assert acts.calls == [("set_drained", (frozenset({1, 2}), "drained")), ("set_drained", (frozenset({1}), ""))]


def test_tune_is_refused_where_nothing_is_auto():
    assert serve(context(Acts(tunes=True)), rq.Tune()) is Changed.NOTHING
    with pytest.raises(rq.Refused, match="auto"):
        serve(context(Acts(tunes=False)), rq.Tune())


def test_reload_is_asked_for_and_changes_nothing_yet():
    acts = Acts()
    assert serve(context(acts), rq.Reload()) is Changed.NOTHING
    assert acts.calls == [("reload", ())]


def test_yield_and_resume_say_whether_they_changed_anything():
    assert serve(context(Acts()), rq.Yield(7, None), ME) is Changed.QUEUE
    assert serve(context(Acts()), rq.Yield(8, None), ME) is Changed.NOTHING
    assert serve(context(Acts()), rq.Resume(7), ME) is Changed.NOTHING


def test_hold_changes_the_queue_when_its_slice_holds_a_job():
    pending = Rec(5, "me", 1000, 1, 60, 0.0, Checkpoint.SIGNAL, JobState.PENDING)
    other = Rec(6, "you", 1001, 1, 60, 0.0, Checkpoint.SIGNAL, JobState.PENDING)
    acts, table = Acts(), Table(pending, other)
    assert serve(context(acts, table), rq.Hold((5, 6)), ME) is Changed.NOTHING
    [(recs, act)] = acts.sweeps
    assert recs == [pending]  # another user's job is not the sender's to hold
    assert act(pending) is Changed.QUEUE
    assert pending.state is JobState.HELD and pending.reason == BY_OWNER
    assert act(pending) is Changed.NOTHING  # held already


def test_requeue_refused_for_every_job_says_nothing_changed():
    with pytest.raises(RefusedInPart, match="no such job") as e:
        serve(context(Acts()), rq.Requeue((3,)), ME)
    assert e.value.changed is Changed.NOTHING
