"""Which jobs a command names: ids, array ranges and filters (shared by gdel, ghold, grls and gstat).

A job is named by ``ID`` (a job, or every task of array ``ID``), ``ID_N`` (one
array task) or ``ID_[LIST]`` (array tasks, ``LIST`` as gsub --array: ``2-5``,
``1,3-4``); filters ``-u USER``, ``-n NAME`` and ``-s STATE`` (as gstat shows
it, or Slurm's short form: ``PD``, ``R``, ...) keep only the jobs that match
every one of them.  Choosing the jobs is reading state; the daemon still checks
that the user may act on each one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from gridsched.cli.plain import ExitCode, fail
from gridsched.protocol.jobs import JobState
from gridsched.protocol.text import shown

# Slurm's short state codes (squeue %t) and the state each stands for
SHORT_STATES = {
    "PD": JobState.PENDING,
    "R": JobState.RUNNING,
    "CG": JobState.STOPPING,
    "S": JobState.SUSPENDED,
    "CD": JobState.COMPLETED,
    "F": JobState.FAILED,
    "TO": JobState.TIMEOUT,
    "CA": JobState.CANCELLED,
    "OOM": JobState.OUT_OF_MEMORY,
}
# the states in the order the usage error lists them
STATES = (
    JobState.PENDING,
    JobState.HELD,
    JobState.RUNNING,
    JobState.STOPPING,
    JobState.SUSPENDED,
    JobState.COMPLETED,
    JobState.FAILED,
    JobState.TIMEOUT,
    JobState.CANCELLED,
    JobState.OUT_OF_MEMORY,
)
# a state by its name or its short code, in upper case
STATE_OF = {s.value: s for s in STATES} | SHORT_STATES
SHORT_OF = {v: k for k, v in SHORT_STATES.items()} | {JobState.HELD: "PD"}

_RANGE = re.compile(r"^\s*(\d+)_\[([0-9,\-:%]+)\]\s*$")


class Ref(NamedTuple):
    """One job named by the user: ``text`` as written, ``jid``, and the array indices it names (None: all).

    Named tuples here, not dataclasses: gstat imports this module on every run, and a dataclass is compiled
    when its module is imported."""

    text: str
    jid: int
    indices: frozenset[int] | None

    @property
    def canonical(self) -> str:
        """``ID`` or ``ID_N`` for a ref to one job or task; the text as written otherwise."""
        if self.indices is None:
            return str(self.jid)
        return f"{self.jid}_{min(self.indices)}" if len(self.indices) == 1 else self.text


class Selection(NamedTuple):
    refs: tuple[Ref, ...]
    users: frozenset[str]
    names: frozenset[str]
    states: frozenset[JobState]

    @property
    def filtered(self) -> bool:
        return bool(self.users or self.names or self.states)

    def describe(self) -> str:
        """The filters as the user gave them (for the no-match error)."""
        parts = [*(f"-u {u}" for u in sorted(self.users)), *(f"-n {n}" for n in sorted(self.names))]
        parts += [f"-s {s}" for s in sorted(self.states)]
        parts += [r.text for r in self.refs]
        return " ".join(parts)

    def matches(self, job: Mapping[str, Any]) -> bool:
        """Whether ``job`` (a row of :func:`gridsched.protocol.view.load_jobs`) passes the filters (ids aside)."""
        if self.users and str(job.get("user")) not in self.users:
            return False
        if self.names and str(job.get("name")) not in self.names:
            return False
        return not self.states or job.get("state") in self.states

    def named(self, job: Mapping[str, Any]) -> str | None:
        """How the ids name ``job`` (a ref's text), or None when none does; every job when there are no ids."""
        if not self.refs:
            return str(job["id"])
        spec = job["spec"]  # a SpecView
        aid, index = spec.array_id, spec.array_index
        for r in self.refs:
            if r.indices is None and (job["id"] == r.jid or aid == r.jid):
                return r.text if job["id"] == r.jid and aid is None else label(job)
            if r.indices is not None and aid == r.jid and index in r.indices:
                return label(job)
            if r.indices is not None and aid == r.jid and job.get("unmade") and _overlap(r.indices, job["unmade"]):
                return r.text
        return None


def _overlap(indices: frozenset[int], text: str) -> bool:
    from gridsched.protocol.arrays import Indices

    got = Indices.from_text(text)
    return any(i in got for i in indices)


def label(job: Mapping[str, Any]) -> str:
    raw = job["spec"].raw  # a SpecView's JSON object (a table calls this for each row)
    aid, index = raw.get("array_id"), raw.get("array_index")
    if aid is not None and index is not None:
        return f"{aid}_{index}"
    return str(job["id"])


def parse_ref(prog: str, raw: str) -> Ref:
    """``ID``, ``ID_N`` or ``ID_[LIST]``; anything else is a usage error."""
    from gridsched.protocol.arrays import ArrayError, parse, parse_ref

    m = _RANGE.match(raw)
    try:
        if m:
            jid = int(m.group(1))
            if jid <= 0:
                raise ArrayError(raw)
            spec = parse(m.group(2))
            return Ref(f"{jid}_[{m.group(2)}]", jid, frozenset(spec.indices))
        jid, index = parse_ref(raw)
    except ArrayError:
        fail(
            prog,
            f"'{shown(raw)}': not a job id (a positive whole number, or ARRAYID_INDEX for an array task)",
            ExitCode.USAGE,
        )
    return Ref(str(jid) if index is None else f"{jid}_{index}", jid, None if index is None else frozenset({index}))


def parse_state(prog: str, raw: str) -> set[JobState]:
    """``-s``: states as gstat shows them or Slurm's short forms, comma-separated, any case."""
    out: set[JobState] = set()
    for part in raw.split(","):
        s = STATE_OF.get(part.strip().upper())
        if s is None:
            fail(
                prog,
                f"state '{shown(part)}': not a state (one of {', '.join(STATES)}, or {', '.join(SHORT_STATES)})",
                ExitCode.USAGE,
            )
        out.add(s)
    return out


def parse(
    prog: str, ids: tuple[str, ...], users: tuple[str, ...], names: tuple[str, ...], states: tuple[str, ...]
) -> Selection:
    refs: list[Ref] = []
    for raw in ids:
        for part in _split_ids(raw):
            r = parse_ref(prog, part)
            if r not in refs:
                refs.append(r)
    st: set[JobState] = set()
    for s in states:
        st |= parse_state(prog, s)
    return Selection(
        tuple(refs),
        frozenset(u for x in users for u in x.split(",") if u),
        frozenset(n for x in names for n in x.split(",") if n),
        frozenset(st),
    )


def _split_ids(raw: str) -> list[str]:
    """Ids separated by commas outside brackets (``1,2,17_[1,3]``, as squeue -j)."""
    out, depth, cur = [], 0, ""
    for c in raw:
        depth += c == "["
        depth -= c == "]"
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    out.append(cur)
    return [p for p in out if p.strip()]


if TYPE_CHECKING:
    from typing import TypeVar

    J = TypeVar("J", bound=Mapping[str, Any])  # a job row


def pick(sel: Selection, jobs: list[J]) -> list[tuple[J, str]]:
    """The jobs the selection names, each with how to call it, in job id order."""
    out = []
    for j in jobs:
        name = sel.named(j)
        if name is not None and sel.matches(j):
            out.append((j, name))
    return out
