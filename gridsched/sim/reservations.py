"""Reading the reservation list that ``gsim run --reservations FILE`` replays beside a trace.

Times are seconds on the trace's clock (the SWF submit-time field); durations
take the forms of gsub -t (``7200``, ``2:00:00``, ``2h``).  Two formats:

CSV, with a header naming the columns ``create``, ``ncpus``, ``duration`` and
optionally ``floating`` (``matlab=1 comsol=2``, blank-separated), ``start``
(empty: flexible) and the mapping requirement of ``gresv create`` (used with
``gsim --topology``): ``place`` (pack, spread, board), ``threads_per_core``
(0, 1 or 2) and ``exclusive_board`` (true/false, yes/no, 1/0)::

    create,ncpus,duration,floating,start
    3600,32,2h,,
    7200,16,1h,matlab=1,86400

TOML, with the machine's floating resources too::

    [floating]
    matlab = 2

    [[reservation]]
    create = 3600
    ncpus = 32
    duration = "2h"
    floating = { matlab = 1 }
    start = 86400        # leave out for a flexible reservation
    place = "board"      # optional: place, threads_per_core, exclusive_board

A CSV file gives no floating totals: use ``gsim run --floating NAME=COUNT``.
"""

from __future__ import annotations

import csv
import math
import tomllib
from dataclasses import dataclass
from typing import Any

from gridsched.core.placement import Request
from gridsched.core.units import UnitError, parse_duration
from gridsched.sim.records import SimResv


class ResvFileError(Exception):
    """The reservation list cannot be read; the message names the file and the line."""


@dataclass(frozen=True, slots=True)
class ResvList:
    reservations: list[SimResv]
    floating: dict[str, int]


def _seconds(v: Any, what: str, where: str) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        x = float(v)
    else:
        try:
            x = float(parse_duration(str(v).strip()))
        except (UnitError, ValueError):
            try:
                x = float(str(v).strip())
            except ValueError:
                raise ResvFileError(f"{where}: {what} {v!r}: not a number of seconds or a duration") from None
    if not math.isfinite(x) or x < 0:
        raise ResvFileError(f"{where}: {what} {v!r}: must be zero or more seconds")
    return x


PLACES = ("pack", "spread", "board")
PLACE_KEYS = ("place", "threads_per_core", "exclusive_board")
TRUE, FALSE = ("true", "yes", "1"), ("false", "no", "0", "")


def _placement(raw: dict[str, Any], ncpus: int, where: str) -> Request | None:
    """The mapping requirement of ``place``, ``threads_per_core`` and ``exclusive_board`` (None: none given)."""
    place = raw.get("place") or None
    if place is not None and place not in PLACES:
        raise ResvFileError(f"{where}: place {place!r}: must be one of {', '.join(PLACES)}")
    tpc: Any = raw.get("threads_per_core", 0)
    if isinstance(tpc, str):
        tpc = int(tpc) if tpc.strip().isdigit() else tpc.strip() or 0
    if not isinstance(tpc, int) or isinstance(tpc, bool) or not 0 <= tpc <= 2:
        raise ResvFileError(f"{where}: threads_per_core {tpc!r}: must be 0, 1 or 2")
    ex: Any = raw.get("exclusive_board", False)
    if isinstance(ex, str) and ex.strip().lower() in TRUE + FALSE:
        ex = ex.strip().lower() in TRUE
    if not isinstance(ex, bool):
        raise ResvFileError(f"{where}: exclusive_board {ex!r}: must be true or false")
    if place is None and not tpc and not ex:
        return None
    return Request(ncpus, place or "pack", tpc, ex)


def _item(
    create: Any,
    ncpus: Any,
    duration: Any,
    floating: dict[str, int],
    start: Any,
    where: str,
    placement: dict[str, Any] | None = None,
) -> SimResv:
    try:
        n = int(ncpus)
    except (TypeError, ValueError):
        raise ResvFileError(f"{where}: ncpus {ncpus!r}: not a whole number") from None
    if n < 1:
        raise ResvFileError(f"{where}: ncpus {n}: at least 1")
    dur = _seconds(duration, "duration", where)
    if dur <= 0:
        raise ResvFileError(f"{where}: duration must be positive")
    t0 = _seconds(create, "create", where)
    st = None if start in (None, "") else _seconds(start, "start", where)
    if st is not None and st < t0:
        raise ResvFileError(f"{where}: start {st:g} is before its creation at {t0:g}")
    for k, v in floating.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ResvFileError(f"{where}: floating {k}={v!r}: must be a whole number of at least 1")
    return SimResv(t0, n, dur, tuple(sorted(floating.items())), st, _placement(placement or {}, n, where))


def _floating_text(text: str, where: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in text.replace(",", " ").split():
        name, eq, count = part.partition("=")
        if not eq or not name or not count.strip().isdigit():
            raise ResvFileError(f"{where}: floating {part!r}: expected NAME=COUNT")
        out[name] = out.get(name, 0) + int(count)
    return out


def read(path: str) -> ResvList:
    """The reservations (and floating totals of a TOML file) in ``path``."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ResvFileError(f"{path}: {e.strerror or e}") from None
    if path.endswith(".toml"):
        return _read_toml(raw, path)
    return _read_csv(raw, path)


def _read_toml(raw: bytes, path: str) -> ResvList:
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ResvFileError(f"{path}: {e}") from None
    unknown = set(data) - {"floating", "reservation"}
    if unknown:
        raise ResvFileError(f"{path}: unknown table {sorted(unknown)[0]!r} (expected [floating], [[reservation]])")
    floating = data.get("floating", {})
    if not isinstance(floating, dict) or not all(isinstance(v, int) and v >= 1 for v in floating.values()):
        raise ResvFileError(f"{path}: [floating]: NAME = COUNT, counts of at least 1")
    out = []
    for k, r in enumerate(data.get("reservation", []), start=1):
        where = f"{path}: reservation {k}"
        if not isinstance(r, dict):
            raise ResvFileError(f"{where}: not a table")
        extra = set(r) - {"create", "ncpus", "duration", "floating", "start", *PLACE_KEYS}
        if extra:
            raise ResvFileError(f"{where}: unknown key {sorted(extra)[0]!r}")
        for need in ("create", "ncpus", "duration"):
            if need not in r:
                raise ResvFileError(f"{where}: missing {need!r}")
        fl = r.get("floating", {})
        if not isinstance(fl, dict):
            raise ResvFileError(f"{where}: floating must be a table such as {{ matlab = 1 }}")
        out.append(_item(r["create"], r["ncpus"], r["duration"], fl, r.get("start"), where, r))
    return ResvList(out, dict(floating))


def _read_csv(raw: bytes, path: str) -> ResvList:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ResvFileError(f"{path}: not UTF-8 text") from None
    rows = csv.DictReader(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    if rows.fieldnames is None:
        raise ResvFileError(f"{path}: empty (expected a header: create,ncpus,duration[,floating][,start])")
    cols = [c.strip() for c in rows.fieldnames]
    missing = [c for c in ("create", "ncpus", "duration") if c not in cols]
    if missing:
        raise ResvFileError(f"{path}: the header lacks {', '.join(missing)} (create,ncpus,duration[,floating][,start])")
    out = []
    for k, row in enumerate(rows, start=2):
        r = {(key or "").strip(): (v or "").strip() for key, v in row.items()}
        where = f"{path}:{k}"
        out.append(
            _item(
                r["create"],
                r["ncpus"],
                r["duration"],
                _floating_text(r.get("floating", ""), where),
                r.get("start", ""),
                where,
                r,
            )
        )
    return ResvList(out, {})
