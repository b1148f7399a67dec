"""Job arrays: the ``--array`` range syntax and the ``ID_INDEX`` names of array tasks.

An array is one submission that becomes one job per index.  Its spec carries
``array`` (the normalized range text, e.g. ``0-99:2%4``); the daemon takes it
in as one job per index: the first task keeps the submission's job id, which
is also the id of the array (as Slurm's array job id), the others get new ids
from the same sequence.  Every task's spec has ``array_id``, ``array_index``
and, with a throttle, ``array_max`` (see :data:`gridsched.protocol.jobs.SPEC_OPTIONAL_KEYS`).
People name a task ``ARRAYID_INDEX`` (``12_7``) and the whole array by its id.

Standard library only: gsub, gdel and gstat import it.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

DEFAULT_MAX_SIZE = 4_000_001  # [jobs] max_array_size: indices 0 to 4,000,000 (Slurm's largest MaxArraySize)
_ITEM = re.compile(r"(\d+)(?:-(\d+)(?::(-?\d+))?)?\Z")
_REF = re.compile(r"(\d+)(?:_(\d+))?\Z")
_EXPAND = 1 << 22  # at most this many indices are ever listed one by one (overlapping stepped ranges)
MAKE_AT_ONCE = 1000  # tasks not started yet that one request may change on their own (galter ID_[LIST])
_LISTED = 100_000  # up to this many indices, the text is written from the list (the shortest form)


class ArrayError(ValueError):
    """An array range that cannot be used; the message is one line."""


class Indices(Sequence[int]):
    """Array indices, ascending and each once, kept as runs (``range`` objects): the indices of a million-task
    array are a few numbers, and taking the first ones, removing some or asking whether one is in costs what
    the runs cost, not what the indices do."""

    __slots__ = ("_len", "runs")

    def __init__(self, runs: Iterable[range] = ()) -> None:
        out: list[range] = []
        for r in runs:
            if not r:
                continue
            if (
                out
                and (p := out[-1])[-1] + 1 == r.start
                and (len(p) == 1 or p.step == 1)
                and (len(r) == 1 or r.step == 1)
            ):
                out[-1] = range(p.start, r[-1] + 1)  # contiguous stretches join
            else:
                out.append(r)
        self.runs: tuple[range, ...] = tuple(out)
        self._len = sum(len(r) for r in out)

    @classmethod
    def of(cls, values: Iterable[int]) -> Indices:
        """The indices ``values`` (any order, repeats allowed), folded into runs."""
        v = sorted(set(values))
        runs: list[range] = []
        i, n = 0, len(v)
        while i < n:
            if i + 1 == n:
                runs.append(range(v[i], v[i] + 1))
                break
            step = v[i + 1] - v[i]
            j = i + 1
            while j + 1 < n and v[j + 1] - v[j] == step:
                j += 1
            runs.append(range(v[i], v[j] + 1, step))
            i = j + 1
        return cls(runs)

    @classmethod
    def from_text(cls, text: str) -> Indices:
        """The indices of a range text without ``%MAX`` (as :attr:`text` writes it; ``""``: none)."""
        return parse(text, 1 << 62).indices if text else cls()

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[int]:
        for r in self.runs:
            yield from r

    def __contains__(self, i: object) -> bool:
        if not isinstance(i, int):
            return False
        k = bisect.bisect_right(self.runs, i, key=lambda r: r.start) - 1
        return k >= 0 and i in self.runs[k]

    @overload
    def __getitem__(self, k: int) -> int: ...

    @overload
    def __getitem__(self, k: slice) -> list[int]: ...

    def __getitem__(self, k: int | slice) -> int | list[int]:
        if isinstance(k, slice):
            return list(self)[k]
        if k < 0:
            k += self._len
        if not 0 <= k < self._len:
            raise IndexError(k)
        for r in self.runs:
            if k < len(r):
                return r[k]
            k -= len(r)
        raise IndexError(k)  # pragma: no cover - counted above

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Indices, tuple)):  # the same indices, however they are cut into runs
            if len(self) != len(other):
                return False
            if isinstance(other, Indices) and self.runs == other.runs:
                return True
            return all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:  # equal indices hash alike, whatever their runs
        return hash((self._len, self[0], self[-1]) if self._len else 0)

    def __repr__(self) -> str:
        return f"Indices({self.text!r})"

    @property
    def text(self) -> str:
        """The short range form (``0-3,5,7-15:2``; ``""`` when there are none)."""
        if self._len <= _LISTED:
            return format_indices(list(self))
        out = []
        for r in self.runs:
            if len(r) == 1:
                out.append(str(r.start))
            elif len(r) == 2 and r.step != 1:
                out.append(f"{r.start},{r[-1]}")
            else:
                out.append(f"{r.start}-{r[-1]}" if r.step == 1 else f"{r.start}-{r[-1]}:{r.step}")
        return ",".join(out)

    def head(self, n: int) -> list[int]:
        """The first ``n`` indices."""
        return list(itertools.islice(iter(self), max(0, n)))

    def after(self, n: int) -> Indices:
        """These indices but the first ``n``."""
        runs = list(self.runs)
        k = 0
        while k < len(runs) and n >= len(runs[k]):
            n -= len(runs[k])
            k += 1
        if k < len(runs) and n:
            runs[k] = runs[k][n:]
        return Indices(runs[k:])

    def without(self, other: Iterable[int]) -> Indices:
        """These indices but those in ``other``."""
        drop = other if isinstance(other, Indices) else Indices.of(other)
        if not drop or not self:
            return self
        out: list[range] = []
        for r in self.runs:
            out.extend(_minus(r, drop))
        return Indices(out)

    def only(self, other: Indices) -> Indices:
        """These indices that are also in ``other``."""
        return self.without(self.without(other))

    def union(self, other: Indices) -> Indices:
        """These indices and those of ``other``."""
        if not other:
            return self
        if not self:
            return other
        runs = sorted(self.runs + other.runs, key=lambda r: r.start)
        if all(a[-1] < b.start for a, b in zip(runs, runs[1:])):
            return Indices(runs)
        if all(len(r) == 1 or r.step == 1 for r in runs):  # stretches: joined where they overlap
            out: list[range] = []
            for r in runs:
                if out and r.start <= out[-1][-1] + 1:
                    out[-1] = range(out[-1].start, max(out[-1][-1], r[-1]) + 1)
                else:
                    out.append(range(r.start, r[-1] + 1))
            return Indices(out)
        return Indices.of(itertools.chain(self, other.without(self)))


def _minus(r: range, drop: Indices) -> list[range]:
    """The run ``r`` without the indices of ``drop``."""
    lo, hi = r.start, r[-1]
    over = [d for d in drop.runs if d.start <= hi and d[-1] >= lo]
    if not over:
        return [r]
    if r.step != 1:
        return list(Indices.of(i for i in r if i not in drop).runs)
    # a stretch: cut out the spans dropped (a stepped run of ``drop`` is its indices, each a span of one)
    spans = sorted(
        (a, b) for d in over for a, b in ([(d.start, d[-1])] if d.step == 1 else ((i, i) for i in d if lo <= i <= hi))
    )
    out, at = [], lo
    for a, b in spans:
        if a > at:
            out.append(range(at, a))
        at = max(at, b + 1)
    if at <= hi:
        out.append(range(at, hi + 1))
    return out


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """The indices of an array, ascending and each once, and how many tasks may run at once."""

    indices: Indices
    max_running: int | None = None

    @property
    def text(self) -> str:
        """The canonical range text (``0-9,12-20:4%2``)."""
        out = self.indices.text
        return out if self.max_running is None else f"{out}%{self.max_running}"


def parse(text: str, max_size: int = DEFAULT_MAX_SIZE, expand: int = _EXPAND) -> ArraySpec:
    """An :class:`ArraySpec` from ``START-END[:STEP]`` items and single indices, comma separated, ``%MAX`` at the end.

    As in Slurm (``MaxArraySize``), indices run from 0 to ``max_size - 1``,
    so an array has at most ``max_size`` tasks; ranges that overlap are listed one index at a time, at most
    ``expand`` of them.  Raises :class:`ArrayError`.
    """
    raw = text.strip()
    if not raw:
        raise ArrayError("'': empty, give indices such as 0-99")
    body, pct, limit = raw.partition("%")
    max_running = None
    if pct:
        if not limit.strip().isdigit() or int(limit) <= 0:
            raise ArrayError(
                f"'{raw}': %{limit.strip()}: the number of tasks running at once must be a positive whole number"
            )
        max_running = int(limit)
    if not body.strip():
        raise ArrayError(f"'{raw}': no indices before %")
    runs: list[range] = []
    for item in body.split(","):
        item = item.strip()
        at = f"'{raw}'" if item == body.strip() else f"'{raw}': '{item}'"
        m = _ITEM.match(item)
        if not m:
            raise ArrayError(f"{at}: not an index or a range START-END[:STEP]")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if step <= 0:
            raise ArrayError(f"{at}: the step must be positive")
        if hi < lo:
            raise ArrayError(f"{at}: the range ends before it starts")
        if hi >= max_size:
            raise ArrayError(f"'{raw}': index {hi} is too large (indices go up to {max_size - 1}, jobs.max_array_size)")
        runs.append(range(lo, hi + 1, step))
    return ArraySpec(_fold(runs, raw, expand), max_running)


def _fold(runs: list[range], raw: str, expand: int) -> Indices:
    """The indices of the runs of one range text: as they are when they do not overlap, else listed and folded
    again (a range text whose runs overlap in more than :data:`_EXPAND` indices is refused)."""
    runs.sort(key=lambda r: r.start)
    if all(a[-1] < b.start for a, b in zip(runs, runs[1:])):
        return Indices.of(i for r in runs for i in r) if _fragmented(runs) else Indices(runs)
    if sum(len(r) for r in runs) > expand:
        raise ArrayError(f"'{raw}': its ranges overlap: give each index once")
    return Indices.of(i for r in runs for i in r)


def _fragmented(runs: list[range]) -> bool:
    """Whether runs of one or two indices might join into longer runs (``1,2,3``): then they are folded anew."""
    return len(runs) > 1 and any(len(r) <= 2 for r in runs) and sum(len(r) for r in runs) <= _EXPAND


def format_indices(indices: tuple[int, ...] | list[int] | Indices) -> str:
    """Ascending indices in the short range form: ``0-3,5,7-15:2``."""
    out: list[str] = []
    i, n = 0, len(indices)
    while i < n:
        lo = indices[i]
        if i + 1 < n:
            step = indices[i + 1] - lo
            j = i + 1
            while j + 1 < n and indices[j + 1] - indices[j] == step:
                j += 1
            if step > 1 and j + 1 < n and indices[j + 1] == indices[j] + 1:
                j -= 1  # the last one starts a run of consecutive indices: leave it to that run
            count = j - i + 1
            if count >= 3 or (count == 2 and step == 1):
                hi = indices[j]
                out.append(f"{lo}-{hi}" if step == 1 else f"{lo}-{hi}:{step}")
                i = j + 1
                continue
        out.append(str(lo))
        i += 1
    return ",".join(out)


def parse_ref(text: str) -> tuple[int, int | None]:
    """``(id, index)`` of ``ID`` (index None) or ``ARRAYID_INDEX``; :class:`ArrayError` otherwise."""
    m = _REF.match(text.strip())
    if not m or int(m.group(1)) <= 0:
        raise ArrayError(f"'{text}': not a job id (a positive whole number, or ARRAYID_INDEX for an array task)")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) is not None else None)


def task_name(array_id: int, index: int) -> str:
    return f"{array_id}_{index}"


_TASK_SUBST = re.compile(r"%(\d*)([ja%])")


def task_path(template: str, job_id: int, index: int) -> str:
    """An array task's output path: gsub left ``%j``, ``%a`` and ``%%`` for the daemon to fill in."""
    subst = {"j": str(job_id), "a": str(index), "%": "%"}

    def sub(m: re.Match[str]) -> str:
        v = subst[m.group(2)]
        return v.zfill(min(int(m.group(1)), 64)) if m.group(1) and v.isdigit() else v

    return _TASK_SUBST.sub(sub, template)
