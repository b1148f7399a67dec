"""Parsing and printing of durations and memory sizes (pure)."""

from __future__ import annotations

import re


class UnitError(ValueError):
    """A value that is not a valid duration or size; the message says why."""


_SUFFIX = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SUFFIX_RE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$", re.ASCII)
MAX_DURATION = 365 * 86400  # one year: anything longer is a typo


def parse_duration(text: str) -> int:
    """Seconds in ``text``.

    Accepted: ``SS``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS`` (as Slurm's ``--time``) and ``90s``, ``30m``, ``2h``,
    ``1.5d``.  In the colon forms every field after the first is below 60
    (hours below 24 after a day count).  The result is a positive whole number
    of seconds, at most a year.
    """
    raw = text
    text = text.strip().lower()
    if not text:
        raise UnitError(f"'{raw}': empty duration")
    if text.startswith("-"):
        raise UnitError(f"'{raw}': must be positive")
    m = _SUFFIX_RE.match(text)
    if m:
        secs = float(m.group(1)) * _SUFFIX[m.group(2)]
        if secs > MAX_DURATION:  # also catches a number too long to be finite
            raise UnitError(f"'{raw}': longer than a year")
        return _check(raw, int(round(secs)))
    days = 0
    if "-" in text:
        d, _, text = text.partition("-")
        if not _digits(d):
            raise UnitError(f"'{raw}': bad day count {d!r}")
        days = _int(d)
        parts = text.split(":")
        if not 1 <= len(parts) <= 3 or not all(_digits(p) for p in parts):
            raise UnitError(f"'{raw}': expected D-HH, D-HH:MM or D-HH:MM:SS")
        nums = [_int(p) for p in parts] + [0] * (3 - len(parts))
        h, mi, s = nums
        if h >= 24 or mi >= 60 or s >= 60:
            raise UnitError(f"'{raw}': hours must be below 24, minutes and seconds below 60")
        return _check(raw, days * 86400 + h * 3600 + mi * 60 + s)
    parts = text.split(":")
    if len(parts) > 3:
        raise UnitError(f"'{raw}': too many fields (at most HH:MM:SS or D-HH:MM:SS)")
    if not all(_digits(p) for p in parts):
        raise UnitError(f"'{raw}': not a duration (use SS, MM:SS, HH:MM:SS, D-HH:MM:SS or 30m, 2h, 1d)")
    nums = [_int(p) for p in parts]
    if any(n >= 60 for n in nums[1:]):
        raise UnitError(f"'{raw}': minutes and seconds must be below 60")
    secs = 0
    for n in nums:
        secs = secs * 60 + n
    return _check(raw, secs)


def _digits(s: str) -> bool:
    return s.isascii() and s.isdigit()


def _int(s: str) -> int:
    """The value of a string of ASCII digits; one too long to matter counts as 10**18."""
    s = s.lstrip("0") or "0"
    return int(s) if len(s) <= 18 else 10**18


def _check(raw: str, secs: int) -> int:
    if secs <= 0:
        raise UnitError(f"'{raw}': must be positive")
    if secs > MAX_DURATION:
        raise UnitError(f"'{raw}': longer than a year")
    return secs


def format_duration(secs: float) -> str:
    """``[D-]HH:MM:SS`` for people (negative values print as 00:00:00)."""
    s = max(0, int(round(secs)))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)$", re.ASCII)
MAX_SIZE = 1 << 60  # bytes: anything larger is a typo
_SIZE_MULT = {"": 1 << 20, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes in a memory size such as ``512M``, ``4G``, ``2GiB`` (a bare number is MiB, as Slurm)."""
    raw = text
    m = _SIZE_RE.match(text.strip().lower())
    if not m:
        raise UnitError(f"'{raw}': not a memory size (use e.g. 512M, 4G)")
    v = float(m.group(1)) * _SIZE_MULT[m.group(2)]
    if v > MAX_SIZE:  # also catches a number too long to be finite
        raise UnitError(f"'{raw}': too large")
    n = int(v)
    if n <= 0:
        raise UnitError(f"'{raw}': must be positive")
    return n


def format_size(n: int) -> str:
    for unit, mult in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B" if n < 1024 else f"{n / (1 << 20):.1f}M"
