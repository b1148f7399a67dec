"""The one text form of a set of cores: the Linux cpulist (``0-3,8``).

Parsed leniently (spaces, unsorted, overlapping, ``a-b:stride``), printed
canonically: sorted, every run of two or more consecutive cores as ``a-b``.
"""

from __future__ import annotations

from collections.abc import Iterable


class CpuListError(ValueError):
    pass


def parse(text: str) -> frozenset[int]:
    """Parse a cpulist such as ``0-3,8`` or ``0-7:2`` into a set of core numbers."""
    cores: set[int] = set()
    text = text.strip()
    if not text:
        return frozenset()
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise CpuListError(f"empty element in cpu list {text!r}")
        stride = 1
        if ":" in part:
            part, _, stride_s = part.partition(":")
            stride = _int(stride_s, text)
            if stride <= 0:
                raise CpuListError(f"stride must be positive in {text!r}")
        if "-" in part:
            lo_s, _, hi_s = part.partition("-")
            lo, hi = _int(lo_s, text), _int(hi_s, text)
            if hi < lo:
                raise CpuListError(f"reversed range {part!r} in {text!r}")
            if hi - lo > 1_000_000:
                raise CpuListError(f"range {part!r} too large")
            cores.update(range(lo, hi + 1, stride))
        else:
            cores.add(_int(part, text))
    return frozenset(cores)


def _int(s: str, text: str) -> int:
    s = s.strip()
    if not (s.isascii() and s.isdigit()):
        raise CpuListError(f"bad cpu number {s!r} in {text!r}")
    if len(s.lstrip("0")) > 9:
        raise CpuListError(f"cpu number {s!r} too large in {text!r}")
    return int(s)


def format(cores: Iterable[int]) -> str:  # noqa: A001 - mirrors parse()
    """The canonical cpulist of ``cores``: sorted, consecutive runs as ``a-b``."""
    items = sorted(set(cores))
    out: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)
