"""The starts the daemon has sent and not yet heard back about: a turn's launches, and the starter's answers.

A start is committed to the job table before its launch is sent (docs/ARCHITECTURE.md, "Crash safety").
Where the shepherds' starter forks the shepherds (:class:`gridsched.daemon.spawn.Processes`), the daemon
does not wait for its answer: it goes back to its loop, where the other jobs' ends are recorded and the
served requests settled meanwhile, and takes each answer (the shepherd's pid and start time, or why it
was not started) when the starter's socket is readable.  Until then the job has no shepherd the daemon
knows of, so whatever needs one waits for the answer first: each turn of the loop (its requests, its
walltimes and its scheduling pass), a cancel or a signal of that job.  An end told on the pipe of ends
before the answer is kept and acted on with it.  A daemon killed meanwhile leaves the start committed
and no shepherd recorded, the case the recovery has always handled: the job is adopted by its pid file,
or, where its shepherd was not armed, pending again.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gridsched.daemon import launch

if TYPE_CHECKING:
    from gridsched.daemon.table import Rec

Answer = tuple[int, int | None] | OSError  # the shepherd's pid and start time, or why it was not started


class Starts:
    """The launches sent to the starter and not answered yet, by (job id, segment)."""

    def __init__(
        self,
        ex: Any,
        launched: Callable[[Rec, int, int | None], None],
        failed: Callable[[Rec, launch.Launch, OSError], None],
        ended: Callable[[int], None],
    ) -> None:
        self.ex = ex  # the executor: begin(spec) and replies(block) (gridsched.daemon.spawn)
        self.launched, self.failed, self.ended = launched, failed, ended
        self.waiting: dict[tuple[int, int], Rec] = {}
        self.answers: deque[tuple[launch.Launch, Answer]] = deque()  # read, not yet acted on
        self.told: set[tuple[int, int]] = set()  # ends told on the pipe of ends before the answer

    def send(self, launches: list[tuple[Rec, launch.Launch]]) -> None:
        """Have the shepherds of the jobs whose start was just committed started."""
        now = time.time()
        for rec, spec in launches:
            if rec.start is not None and now - rec.start > 1.0:  # held back while the spool had no room
                rec.start = now
                rec.deadline = now + rec.remaining()
                if rec.segments:
                    rec.segments[-1]["start"] = now
            try:
                launch.mark("d_spawn_send", rec.id)
                got = self.ex.begin(spec)
            except OSError as e:
                self.failed(rec, spec, e)
                continue
            if got is None:
                self.waiting[(rec.id, spec.segment)] = rec
            else:
                self.launched(rec, *got)

    def waits_for(self, rec: Rec) -> bool:
        return (rec.id, rec.segment) in self.waiting

    def take(self, block: bool = False) -> None:
        """Act on the starter's answers: those there now (its socket woke the loop: an answer, or its end, which
        the executor collects), or with ``block`` all that are owed."""
        if self.waiting or not block:
            self.answers.extend(self.ex.replies(block))
        while self.answers:  # popped one at a time: what an answer leads to may take the others (a cancel)
            spec, got = self.answers.popleft()
            key = (spec.job_id, spec.segment)
            rec = self.waiting.pop(key, None)
            if rec is None:
                continue
            launch.mark("d_spawn_reply", rec.id)
            if isinstance(got, OSError):
                self.failed(rec, spec, got)
            else:
                self.launched(rec, *got)
                if key in self.told:
                    self.told.discard(key)
                    self.ended(rec.id)

    def tell_end(self, rec: Rec) -> bool:
        """An end told for ``rec``: True if its answer is still owed (the end is acted on with it)."""
        if (rec.id, rec.segment) not in self.waiting:
            return False
        self.told.add((rec.id, rec.segment))
        return True
