"""Job dependencies: parsing and evaluation (pure).

A dependency spec is a comma-separated list of conditions, all of which must
hold (as Slurm's ``--dependency``)::

    after:ID[:ID...]       each job has started (or ended without starting)
    afterany:ID[:ID...]    each job has ended, in any state
    afterok:ID[:ID...]     each job has completed successfully
    afternotok:ID[:ID...]  each job has ended unsuccessfully (failed, timed out, cancelled, out of memory)
    singleton              no earlier job of the same user and name is still queued or running

:func:`status` tells whether a job whose conditions are ``deps`` may start
now (``ready``), must wait (``wait``), or can never start (``never``, as
Slurm's DependencyNeverSatisfied), with the reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal, NamedTuple

from gridsched.core.model import Dep as Dep

KINDS = ("after", "afterany", "afterok", "afternotok", "singleton")
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY"})
NOT_STARTED = frozenset({"PENDING", "HELD"})
MAX_JOB_ID = (1 << 53) - 1  # the largest job id (gridsched.protocol.requests.MAX_ID)

Verdict = Literal["ready", "wait", "never"]


class DependError(ValueError):
    """A dependency spec that cannot be parsed; the message says why."""


class Status(NamedTuple):
    verdict: Verdict
    reason: str


def parse(spec: str) -> tuple[Dep, ...]:
    """The conditions of ``spec`` in order; ``""`` gives none."""
    raw = spec
    spec = spec.strip()
    if not spec:
        return ()
    out: list[Dep] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            raise DependError(f"'{raw}': empty condition")
        kind, *ids_s = part.split(":")
        kind = kind.strip().lower()
        if kind not in KINDS:
            raise DependError(f"'{raw}': unknown condition {kind!r} (use {', '.join(KINDS)})")
        if kind == "singleton":
            if ids_s:
                raise DependError(f"'{raw}': singleton takes no job ids")
            out.append(Dep(kind))
            continue
        if not ids_s:
            raise DependError(f"'{raw}': {kind} needs at least one job id ({kind}:ID)")
        ids: list[int] = []
        for s in ids_s:
            s = s.strip()
            if not s.isascii() or not s.isdigit() or len(s) > 16 or not 0 < int(s) <= MAX_JOB_ID:
                raise DependError(f"'{raw}': {s!r} is not a job id")
            if int(s) not in ids:
                ids.append(int(s))
        out.append(Dep(kind, tuple(ids)))
    return tuple(out)


def normalize(deps: tuple[Dep, ...]) -> str:
    """The canonical text of ``deps`` (``parse(normalize(d)) == d``)."""
    return ",".join(str(d) for d in deps)


def job_ids(deps: tuple[Dep, ...]) -> list[int]:
    """Every job id the conditions name, each once, in order."""
    seen: list[int] = []
    for d in deps:
        seen.extend(i for i in d.ids if i not in seen)
    return seen


def _one(kind: str, jid: int, state: str | None) -> Status:
    if state is None:
        return Status("never", f"{kind}:{jid}: job {jid} is unknown")
    if kind == "after":
        ok = state not in NOT_STARTED
        return Status("ready" if ok else "wait", f"{kind}:{jid}: job {jid} is {state}")
    if state not in TERMINAL:
        return Status("wait", f"{kind}:{jid}: job {jid} is {state}")
    if kind == "afterany":
        return Status("ready", "")
    good = (state == "COMPLETED") == (kind == "afterok")
    return Status("ready" if good else "never", f"{kind}:{jid}: job {jid} ended {state}")


def status(
    deps: tuple[Dep, ...],
    states: Mapping[int, str],
    running_names: Collection[str] = (),
    name: str = "",
) -> Status:
    """Whether a job with the conditions ``deps`` may start.

    ``states`` maps job ids to their state names (an id missing from it is
    an unknown job, which can never satisfy a condition); ``running_names``
    are the names of the same user's other jobs that are queued or running
    and were submitted before this one, ``name`` this job's name (for
    singleton).  ``never`` wins over ``wait``, which wins over ``ready``; the
    reason names the first condition that decided.
    """
    waiting: Status | None = None
    for d in deps:
        if d.kind == "singleton":
            if name in running_names:
                waiting = waiting or Status("wait", f"singleton: another job named {name!r} is queued or running")
            continue
        for jid in d.ids:
            st = _one(d.kind, jid, states.get(jid))
            if st.verdict == "never":
                return Status("never", f"dependency never satisfied: {st.reason}")
            if st.verdict == "wait" and waiting is None:
                waiting = Status("wait", f"waiting for dependency {st.reason}")
    return waiting or Status("ready", "")


def cycle(job: int, deps: tuple[Dep, ...], others: Mapping[int, tuple[Dep, ...]]) -> list[int] | None:
    """The chain of jobs through which ``job``, given ``deps``, would depend on itself (``others``: the
    dependencies of the other jobs), or None when it would not."""
    seen: set[int] = set()
    stack: list[tuple[int, list[int]]] = [(j, [j]) for j in job_ids(deps)]
    while stack:
        jid, path = stack.pop()
        if jid == job:
            return path
        if jid in seen:
            continue
        seen.add(jid)
        stack.extend((n, [*path, n]) for n in job_ids(others.get(jid, ())))
    return None
