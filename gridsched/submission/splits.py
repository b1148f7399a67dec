"""A splittable job's sub-tasks as gsub takes them: ``--split N --task-time T`` (:func:`check_split`) or a
split file, one sub-task per line (:func:`read_split_file`, :func:`check_split_file`), each giving the
``split`` spec key and the walltime the job needs.  Importable from :mod:`gridsched.submission.submit` too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gridsched.core.units import format_duration
from gridsched.protocol import requests as rq
from gridsched.submission.errors import USAGE, SubmitError

if TYPE_CHECKING:
    from gridsched.protocol.config import Settings


def check_split(
    n: int,
    task_time: int | None,
    ncpus: int,
    walltime: int | None,
    cores: int,
    cfg: Settings,
    device_wave: int | None = None,
) -> tuple[dict[str, Any], int]:
    """The ``split`` spec key of a splittable job and its walltime; :class:`SubmitError` if refused.

    The job's walltime (``-t``) covers all its sub-tasks run in waves of
    ``cores // ncpus`` on the whole machine (at most ``device_wave``, the
    sub-tasks its devices hold at once, when each asks for devices); without
    ``-t`` it is just that.
    """
    if n < 1:
        raise SubmitError(f"split {n}: the number of sub-tasks must be positive", USAGE)
    if n > cfg.max_array_size:
        raise SubmitError(f"split {n}: more sub-tasks than jobs.max_array_size ({cfg.max_array_size})", USAGE)
    if task_time is None:
        raise SubmitError("--split needs --task-time, the walltime of one sub-task", USAGE)
    per_wave = max(1, cores // ncpus)
    if device_wave is not None:
        per_wave = max(1, min(per_wave, device_wave))
    waves = -(-n // per_wave)
    need = waves * task_time
    if walltime is None:
        walltime = min(need, cfg.max_walltime)
    if task_time > walltime:
        raise SubmitError(
            f"task time {format_duration(task_time)} is longer than the walltime {format_duration(walltime)}", USAGE
        )
    if walltime < need:
        raise SubmitError(
            f"walltime {format_duration(walltime)} is too short for {n} sub-tasks of "
            f"{format_duration(task_time)}: {waves} waves of {per_wave} on {cores} cores take "
            f"{format_duration(need)}"
        )
    return {"n": n, "ncpus": ncpus, "task_time": task_time}, walltime


MAX_SPLIT_FILE = 16 << 20  # bytes of a split file
MAX_SPLIT_LINE = 4096  # bytes of one of its lines


def read_split_file(arg: str, cores: int, cfg: Settings) -> list[tuple[int, int, tuple[str, ...]]]:
    """The sub-tasks of a split file: ``(ncpus, seconds, args)`` for each line ``NCPUS WALLTIME [ARGS...]``.

    Words are split as the shell does (quotes, backslashes); ``#`` starts a
    comment; blank lines are skipped.  A bad line is refused with
    :class:`SubmitError` naming ``FILE:LINE``.
    """
    import shlex

    from gridsched.core.units import UnitError, parse_duration

    try:
        with open(arg, "rb") as f:
            data = f.read(MAX_SPLIT_FILE + 1)
    except FileNotFoundError:
        raise SubmitError(f"split file {arg}: no such file", USAGE) from None
    except IsADirectoryError:
        raise SubmitError(f"split file {arg}: is a directory", USAGE) from None
    except OSError as e:
        raise SubmitError(f"split file {arg}: {e.strerror or e}", USAGE) from None
    if len(data) > MAX_SPLIT_FILE:
        raise SubmitError(f"split file {arg}: larger than {MAX_SPLIT_FILE >> 20} MiB", USAGE)
    if b"\0" in data:
        raise SubmitError(f"split file {arg}: binary file (NUL bytes), not a list of sub-tasks", USAGE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SubmitError(f"split file {arg}: not UTF-8 text", USAGE) from None
    out: list[tuple[int, int, tuple[str, ...]]] = []
    for lineno, line in enumerate(text.split("\n"), 1):

        def bad(why: str, where: str = f"{arg}:{lineno}") -> SubmitError:
            return SubmitError(f"{where}: {why}", USAGE)

        if len(line.encode("utf-8")) > MAX_SPLIT_LINE:
            raise bad(f"line longer than {MAX_SPLIT_LINE} bytes")
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise bad(str(e).lower()) from None
        if not words:
            continue
        if len(words) < 2:
            raise bad("expected NCPUS WALLTIME [ARGS...]")
        c = words[0]
        if not (c.isascii() and c.isdigit()) or int(c) < 1:
            raise bad(f"cores {c!r}: not a whole number from 1")
        ncpus = int(c)
        if ncpus > cores:
            raise bad(f"{ncpus} cores, more than the machine has ({cores})")
        try:
            secs = parse_duration(words[1])
        except UnitError as e:
            raise bad(f"walltime {e}") from None
        if secs > cfg.max_walltime:
            raise bad(
                f"walltime {format_duration(secs)} is longer than the maximum {format_duration(cfg.max_walltime)}"
            )
        if len(words) - 2 > rq.MAX_TASK_ARGS:
            raise bad(f"more than {rq.MAX_TASK_ARGS} arguments")
        if any(ord(ch) < 32 and ch != "\t" for w in words for ch in w):
            raise bad("control characters")
        out.append((ncpus, secs, tuple(words[2:])))
        if len(out) > cfg.max_array_size:
            raise SubmitError(
                f"split file {arg}: more than jobs.max_array_size ({cfg.max_array_size}) sub-tasks", USAGE
            )
    if not out:
        raise SubmitError(f"split file {arg}: no sub-tasks (empty, or nothing but comments)", USAGE)
    return out


def waves_time(sizes: list[tuple[int, int]], ncpus: int) -> int:
    """How long sub-tasks of ``(ncpus, seconds)`` take on ``ncpus`` cores, started in order as cores free up
    (:func:`gridsched.core.split.in_order`, as the forecast plans them; no sub-task asks for more than
    ``ncpus``: :func:`read_split_file` refuses it)."""
    from gridsched.core.split import in_order

    return int(in_order(sizes, ncpus))


def check_split_file(
    tasks: list[tuple[int, int, tuple[str, ...]]], walltime: int | None, cores: int, cfg: Settings
) -> tuple[dict[str, Any], int, int]:
    """The ``split`` spec key of a job of a split file's sub-tasks, its walltime and its cores.

    The job as a whole runs on as many cores as its sub-tasks need at once,
    at most the machine's, starting them in order as cores free up; its
    walltime (``-t``) defaults to what that takes.
    """
    ncpus = min(cores, sum(c for c, _, _ in tasks))
    need = waves_time([(c, t) for c, t, _ in tasks], ncpus)
    if walltime is None:
        walltime = min(need, cfg.max_walltime)
    longest = max(t for _, t, _ in tasks)
    if longest > walltime:
        raise SubmitError(
            f"a sub-task's time {format_duration(longest)} is longer than the walltime {format_duration(walltime)}",
            USAGE,
        )
    if walltime < need:
        raise SubmitError(
            f"walltime {format_duration(walltime)} is too short for the {len(tasks)} sub-tasks: run in order "
            f"on {ncpus} cores they take {format_duration(need)}"
        )
    split = {
        "n": len(tasks),
        "ncpus": max(c for c, _, _ in tasks),
        "task_time": longest,
        "tasks": [[c, t, list(a)] for c, t, a in tasks],
    }
    return split, walltime, ncpus
