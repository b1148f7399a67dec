"""User-written text on the way to a terminal, and JSON on the way out.

Job names, user names, reasons, reservation names, paths: anything a user
wrote can hold control characters (an escape sequence that rewrites the
screen or the window title, a carriage return that hides what precedes it, a
bidirectional override).  :func:`shown` makes such a string safe to print: every
character Python does not count as printable is replaced by the escape its
``repr`` would use (``\\x1b``, ``\\n``, ``\\u202e``), without the quotes;
everything else is left alone.  Every table and detail view of the commands
prints user-written text through it.

:func:`dumps` is ``json.dumps`` for the ``--json`` outputs: strings stay exact
(JSON escapes control characters itself), and a non-finite number, which
standard JSON cannot carry, becomes ``null``.

Standard library only, and cheap for the common case: this is on gstat's path.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["shown", "dumps", "finite"]

_cache: dict[str, str] = {}


def _escape(c: str) -> str:
    e = _cache.get(c)
    if e is None:
        e = _cache[c] = repr(c)[1:-1]
    return e


def shown(value: Any) -> str:
    """``value`` as text for a terminal: non-printable characters escaped as ``repr`` escapes them.

    ``None`` is the empty string; any other value is ``str(value)`` first.
    A backslash is printable and stays as it is.
    """
    if value is None:
        return ""
    s = value if type(value) is str else str(value)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _escape(c) for c in s)


def finite(obj: Any) -> Any:
    """``obj`` with every float that is infinite or NaN replaced by None, in lists, tuples and dicts too."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """Standard JSON for ``obj`` (as ``json.dumps`` with ``kwargs``): non-finite numbers are ``null``."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:  # Infinity or NaN somewhere (rare: a row written by hand or by an old version)
        return json.dumps(finite(obj), allow_nan=False, **kwargs)
