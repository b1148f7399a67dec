"""The starts sent to the starter and not answered yet (gridsched.daemon.starts), with an executor that answers when
told to."""

from __future__ import annotations

from types import SimpleNamespace

from gridsched.daemon.starts import Starts


class Later:
    """An executor whose starter answers only when the test says."""

    def __init__(self) -> None:
        self.sent: list = []
        self.ready: list = []

    def begin(self, spec):
        self.sent.append(spec)
        return None

    def replies(self, block=False):
        got = self.ready if not block else self.ready or [(s, (100 + s.job_id, 5)) for s in self.sent]
        self.ready, self.sent = [], [s for s in self.sent if all(s is not g for g, _ in got)]
        return got


def _rec(jid: int) -> SimpleNamespace:
    return SimpleNamespace(id=jid, segment=1, start=None, segments=[])


def _spec(jid: int) -> SimpleNamespace:
    return SimpleNamespace(job_id=jid, segment=1)


def test_an_end_told_before_the_answer_is_acted_on_after_it_and_a_failure_fails_its_start():
    events: list[tuple] = []
    ex = Later()
    starts = Starts(
        ex,
        lambda rec, pid, ticks: events.append(("launched", rec.id, pid)),
        lambda rec, spec, e: events.append(("failed", rec.id, str(e))),
        lambda jid: events.append(("ended", jid)),
    )
    recs = {j: _rec(j) for j in (1, 2, 3)}
    specs = {j: _spec(j) for j in (1, 2, 3)}
    starts.send([(recs[j], specs[j]) for j in (1, 2, 3)])
    assert events == [] and all(starts.waits_for(r) for r in recs.values())
    assert starts.tell_end(recs[2])  # its shepherd told its end before the starter's answer was read
    assert not starts.tell_end(_rec(9))  # not one of the starts waiting: the loop acts on it itself
    ex.ready = [(specs[1], (101, 5)), (specs[2], (102, 5))]
    starts.take()
    assert events == [("launched", 1, 101), ("launched", 2, 102), ("ended", 2)]
    assert starts.waits_for(recs[3]) and not starts.waits_for(recs[1])
    ex.ready = [(specs[3], OSError("cannot fork"))]
    starts.take(block=True)
    assert events[-1] == ("failed", 3, "cannot fork")
    assert not any(starts.waits_for(r) for r in recs.values())
