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

import re
from dataclasses import dataclass

DEFAULT_MAX_SIZE = 100_000  # [jobs] max_array_size
_ITEM = re.compile(r"(\d+)(?:-(\d+)(?::(-?\d+))?)?\Z")
_REF = re.compile(r"(\d+)(?:_(\d+))?\Z")


class ArrayError(ValueError):
    """An array range that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """The indices of an array, ascending and each once, and how many tasks may run at once."""

    indices: tuple[int, ...]
    max_running: int | None = None

    @property
    def text(self) -> str:
        """The canonical range text (``0-9,12-20:4%2``)."""
        out = format_indices(self.indices)
        return out if self.max_running is None else f"{out}%{self.max_running}"


def parse(text: str, max_size: int = DEFAULT_MAX_SIZE) -> ArraySpec:
    """An :class:`ArraySpec` from ``START-END[:STEP]`` items and single indices, comma separated, ``%MAX`` at the end.

    As in Slurm (``MaxArraySize``), indices run from 0 to ``max_size - 1``,
    so an array has at most ``max_size`` tasks.  Raises :class:`ArrayError`.
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
    seen: set[int] = set()
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
        seen.update(range(lo, hi + 1, step))
    return ArraySpec(tuple(sorted(seen)), max_running)


def format_indices(indices: tuple[int, ...] | list[int]) -> str:
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
