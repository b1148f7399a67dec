"""Splittable jobs of sub-tasks of their own sizes in a replay (``gsim run --split-file FILE``).

The file lists sub-tasks, one per line: ``JOB NCPUS WALLTIME [RUNTIME]``.  ``JOB`` is a job of the
trace (its SWF id, field 1); its lines, in order, are its sub-tasks 0, 1, ...  ``NCPUS`` is a
sub-task's cores, ``WALLTIME`` its own time (any form ``gsub -t`` takes), ``RUNTIME`` how long it
really runs (the same forms; default: its walltime; cut at its walltime, as the trace's run times
are).  ``#`` starts a comment; blank lines are skipped.

A job listed is replayed as ``gsub --split-file`` makes it (:func:`apply`): as a whole it asks for
the cores its sub-tasks need at once, at most the machine's, for the time they take started in order
as its cores free up (:func:`gridsched.core.split.in_order`), which replaces its processors, walltime
and run time in the trace; the backfill step may take its sub-tasks out into pieces, chains of one
core count each, exactly as in the daemon.
"""

from __future__ import annotations

from dataclasses import dataclass

from gridsched.core.split import in_order
from gridsched.core.units import UnitError, parse_duration
from gridsched.sim.records import SimulationError
from gridsched.sim.swf import Trace

MAX_LINE = 4096


@dataclass(frozen=True, slots=True)
class SubTasks:
    """A job's sub-tasks: each one's ``(ncpus, walltime)`` and run time, by index."""

    sizes: tuple[tuple[int, float], ...]
    runs: tuple[float, ...]


def read(path: str, trace: Trace) -> dict[int, SubTasks]:
    """The sub-tasks of ``path``, by job index in ``trace``; :class:`SimulationError` (one line naming
    ``FILE:LINE``) for a line that cannot be used."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise SimulationError(f"split file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SimulationError(f"split file {path}: {getattr(e, 'strerror', None) or e}") from None
    index = {jid: i for i, jid in enumerate(trace.ids)}
    sizes: dict[int, list[tuple[int, float]]] = {}
    runs: dict[int, list[float]] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        where = f"{path}:{lineno}"
        if len(line) > MAX_LINE:
            raise SimulationError(f"{where}: line longer than {MAX_LINE} characters")
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if not 3 <= len(words) <= 4:
            raise SimulationError(f"{where}: expected JOB NCPUS WALLTIME [RUNTIME]")
        job, c = words[0], words[1]
        if not (job.isascii() and job.isdigit()) or int(job) not in index:
            raise SimulationError(f"{where}: job {job!r} is not a job of the trace")
        if not (c.isascii() and c.isdigit()) or not 1 <= int(c) <= trace.ncores:
            raise SimulationError(f"{where}: cores {c!r}: not a whole number from 1 to {trace.ncores}")
        try:
            wall = float(parse_duration(words[2]))
            run = float(parse_duration(words[3])) if len(words) == 4 else wall
        except UnitError as e:
            raise SimulationError(f"{where}: {e}") from None
        i = index[int(job)]
        sizes.setdefault(i, []).append((int(c), wall))
        runs.setdefault(i, []).append(min(run, wall))
    if not sizes:
        raise SimulationError(f"split file {path}: no sub-tasks (empty, or nothing but comments)")
    return {i: SubTasks(tuple(s), tuple(runs[i])) for i, s in sizes.items()}


def wave(sizes: tuple[tuple[int, float], ...], left: tuple[int, ...], ncores: int) -> int:
    """The cores a job's sub-tasks ``left`` need all at once, at most ``ncores``."""
    return min(ncores, sum(sizes[k][0] for k in left))


def apply(trace: Trace, tasks: dict[int, SubTasks]) -> None:
    """Make each job of ``tasks`` in ``trace`` the whole of its sub-tasks: its cores one wave, its walltime
    and run time what its sub-tasks take in order on them."""
    for i, st in tasks.items():
        n = wave(st.sizes, tuple(range(len(st.sizes))), trace.ncores)
        trace.size[i] = n
        trace.walltime[i] = in_order(st.sizes, n)
        trace.run[i] = in_order(((c, r) for (c, _), r in zip(st.sizes, st.runs)), n)
