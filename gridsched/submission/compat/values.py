"""Directive values as each system reads them: times, begin times, sizes, output paths, dependencies,
and the environment a job gets (``--export``, ``-v``)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from gridsched.core.units import UnitError, parse_duration, parse_size
from gridsched.submission.compat.rules import CompatError

# A PBS size as PBS Pro and Torque read it (OpenPBS src/lib/Libattr/attr_fn_size.c, to_size): a number,
# then k, m, g, t or p (any case), then b (bytes) or w (words, 8 bytes); each part may be left out.
_PBS_SIZE = re.compile(r"^(\d+)([kmgtp]?)([bw]?)$")
_PBS_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}
_PBS_WORD = 8


def whole_count(where: str, shown: str, value: str) -> int:
    v = value.strip()
    if not (v.isascii() and v.isdigit()) or int(v) < 1:
        raise CompatError(f"{where}: {shown}: '{value}' is not a whole number of at least 1")
    return int(v)


# -- environment export ----------------------------------------------------------------------

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class Export:
    """What of the submitting environment a job gets (sbatch --export): all of it or only ``names``, and
    ``values`` set over it."""

    all: bool
    names: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        """The --export value that gives this (values holding a comma or a quote are quoted)."""
        items = ["ALL"] if self.all else []
        items += list(self.names)
        for k, v in self.values:
            items.append(f"{k}={_quote_item(v)}")
        return ",".join(items) if items else "NONE"

    def merged(self, other: Export) -> Export:
        """This with ``other``'s names and values added (a later value of a name wins)."""
        values = dict(self.values)
        values.update(other.values)
        names = tuple(dict.fromkeys(n for n in (*self.names, *other.names) if n not in values))
        return Export(self.all or other.all, names, tuple(values.items()))


def _quote_item(v: str) -> str:
    if not any(c in v for c in ",'\""):
        return v
    return "'" + v + "'" if "'" not in v else '"' + v + '"'


def _items(text: str) -> list[str]:
    """``text`` split at commas outside quotes; a quoted part loses its quotes (``A='x,y'`` is ``A=x,y``)."""
    out: list[str] = []
    cur: list[str] = []
    quote = ""
    for c in text:
        if quote:
            if c == quote:
                quote = ""
            else:
                cur.append(c)
        elif c in "'\"":
            quote = c
        elif c == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if quote:
        raise ValueError("a quote is not closed")
    out.append("".join(cur))
    return out


def parse_export(text: str, listed: bool = False) -> Export:
    """An sbatch ``--export`` value: ``ALL`` (the default), ``NONE``, or ``[ALL,]VAR[=VALUE],...``; with
    ``listed`` a PBS or Grid Engine ``-v`` list, over the whole environment.  :class:`ValueError` with the
    reason if it is none of these (a name must be a shell identifier)."""
    v = text.strip()
    if not v:
        raise ValueError("empty: give ALL, NONE or VAR[=VALUE],...")
    if not listed and v.upper() == "NONE":
        return Export(False)
    everything = listed
    names: dict[str, None] = {}
    values: dict[str, str] = {}
    for item in _items(v):
        name, eq, value = item.partition("=")
        name = name.strip()
        if not listed and not eq and name.upper() == "ALL":
            everything = True
            continue
        if not listed and not eq and name.upper() == "NONE":
            raise ValueError("NONE cannot be combined with variables (give the variables alone)")
        if not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not a variable name (letters, digits and _, not starting with a digit)")
        if eq:
            values[name] = value
            names.pop(name, None)
        elif name not in values:
            names[name] = None
    return Export(everything, tuple(names), tuple(values.items()))


# -- values as each system reads them ------------------------------------------------------


def sbatch_time(text: str) -> int:
    """Seconds of a time as sbatch and ``gsub -t`` read it: a bare number is minutes.

    Also MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, and gsub's units
    (90s, 30m, 2h, 1d).  :class:`UnitError` if it is none of these.
    """
    v = text.strip()
    if v.isascii() and v.isdigit():
        return parse_duration(f"{v}m") if int(v) > 0 else parse_duration(v)
    m = _SBATCH_TIME.match(v) if v.isascii() else None
    if m:  # Slurm checks no field against its unit: 2-25:00:00 is 3-01:00:00, 90:61 is 91:01
        d, dh, dm, ds, mm, ss, hs = (int(x) if x else 0 for x in m.groups())
        if m.group(1) is not None:  # D-HH[:MM[:SS]]
            secs = ((d * 24 + dh) * 60 + dm) * 60 + ds
        elif m.group(7) is not None:  # HH:MM:SS
            secs = (mm * 60 + ss) * 60 + hs
        else:  # MM:SS
            secs = mm * 60 + ss
        return secs if secs > 0 else parse_duration("0")  # no time at all: refused as -t 0 is
    return parse_duration(v)


# sbatch's time forms with fields of any size (Slurm src/common/parse_time.c, time_str2secs):
# D-HH[:MM[:SS]] (groups 1-4), MM:SS and HH:MM:SS (groups 5-7)
_SBATCH_TIME = re.compile(r"(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+):(\d+)(?::(\d+))?)\Z")


def int_in(where: str, shown: str, v: str, lo: int, hi: int) -> str:
    """``v`` as a whole number from ``lo`` to ``hi`` (its text), else a :class:`CompatError` naming the line."""
    t = v.strip()
    try:
        n = int(t)
    except ValueError:
        raise CompatError(f"{where}: {shown}: not a whole number") from None
    if not lo <= n <= hi:
        raise CompatError(f"{where}: {shown}: must lie between {lo} and {hi}")
    return str(n)


def pbs_time(text: str) -> int:
    """Seconds of a PBS time as PBS Pro and Torque read it (OpenPBS src/lib/Libattr/attr_fn_time.c,
    ``decode_time``): [[HH:]MM:]SS, each field digits of any size (1:75:00 is 2:15:00), a colon only after
    a digit, and a fraction of a second after a dot, rounded to the nearest second (10.5 is 11).  Also
    gsub's own units (30m, 2h), which PBS lacks.  :class:`UnitError` otherwise."""
    v = text.strip()
    m = _PBS_TIME.match(v) if v.isascii() else None
    if not m:
        return parse_duration(v)
    secs = 0
    for field in m.group(1).split(":"):
        secs = secs * 60 + int(field)
    if m.group(2) and int((m.group(2) + "00")[:3]) >= 500:
        secs += 1
    return secs if secs > 0 else parse_duration("0")  # no time at all is refused, as ever


_PBS_TIME = re.compile(r"(\d+(?::\d+){0,2})(?:\.(\d*))?\Z")


def sge_time(text: str) -> int:
    """Seconds of a Grid Engine time as its qsub reads ``h_rt`` (seen with Grid Engine 8.1.9): a number of
    seconds (a fraction dropped: 10.5 is 10), or HOURS:MINUTES:SECONDS, three fields of any size, an empty
    one being 0 (::30 is 30 s, 1:75:00 is 2:15:00); MM:SS and days are refused, as qsub refuses them.
    Also gsub's own units (30m, 2h).  :class:`UnitError` otherwise."""
    v = text.strip()
    m = _SGE_TIME.match(v) if v.isascii() else None
    if not m:
        if re.fullmatch(r"\d+:\d+|\d+-.*", v):
            raise UnitError(f"'{v}': not a Grid Engine time (seconds, or HOURS:MINUTES:SECONDS)")
        return parse_duration(v)
    if m.group(1) is not None:
        secs = int(m.group(1))
    else:
        h, mi, s = (int(x or 0) for x in m.group(3, 4, 5))
        secs = (h * 60 + mi) * 60 + s
    return secs if secs > 0 else parse_duration("0")


_SGE_TIME = re.compile(r"(?:(\d+)(\.\d*)?|(\d*):(\d*):(\d*))\Z")


_UNIT_SECONDS = {
    "": 1,
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_BEGIN_REL = re.compile(r"^now\s*\+\s*(\d+)\s*([a-z]*)$")
_BEGIN_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_BEGIN_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:T(\d{1,2}):(\d{2})(?::(\d{2}))?)?$")
_BEGIN_WORDS = {"midnight": (0, 0), "noon": (12, 0), "fika": (15, 0), "teatime": (16, 0)}


def parse_begin(text: str, now: float) -> float:
    """The time (seconds since the epoch) of an sbatch ``--begin`` value, read at ``now``.

    ``now``, ``now+N[seconds|minutes|hours|days|weeks]``, ``HH:MM[:SS]`` (the
    next such time: today, or tomorrow if it has passed), ``YYYY-MM-DD[THH:MM[:SS]]``
    (local time), ``midnight``, ``noon``, ``teatime``, ``today``, ``tomorrow``.
    :class:`ValueError` with the reason for anything else.
    """
    v = text.strip().lower()
    if v == "now":
        return now
    m = _BEGIN_REL.match(v)
    if m:
        unit = m.group(2)
        if unit not in _UNIT_SECONDS:
            raise ValueError(f"'{text}': unknown unit {unit!r} (use seconds, minutes, hours, days or weeks)")
        return now + int(m.group(1)) * _UNIT_SECONDS[unit]
    lt = time.localtime(now)
    if v in ("today", "tomorrow"):
        day = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
        return day if v == "today" else time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, 0, 0, 0, 0, 0, -1))
    clock = _BEGIN_WORDS.get(v)
    m = _BEGIN_CLOCK.match(v)
    if clock is not None or m:
        h, mi, s = (clock[0], clock[1], 0) if clock else (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))  # type: ignore[union-attr]
        if h > 23 or mi > 59 or s > 59:
            raise ValueError(f"'{text}': not a time of day ({_BEGIN_FORMS})")
        t = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, h, mi, s, 0, 0, -1))
        if t <= now:
            t = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, h, mi, s, 0, 0, -1))
        return t
    m = _BEGIN_DATE.match(v.upper().replace("t", "T") if "t" in v else v)
    if m:
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
        h, mi, s = int(m.group(4) or 0), int(m.group(5) or 0), int(m.group(6) or 0)
        if not (1 <= mo <= 12 and 1 <= d <= _days_in(y, mo) and h <= 23 and mi <= 59 and s <= 59):
            raise ValueError(f"'{text}': not a date and time ({_BEGIN_FORMS})")
        return time.mktime((y, mo, d, h, mi, s, 0, 0, -1))
    raise ValueError(f"'{text}': not a begin time ({_BEGIN_FORMS})")


_BEGIN_FORMS = (
    "use now+N[seconds|minutes|hours|days|weeks], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], "
    "midnight, noon, teatime, today or tomorrow"
)
_PBS_A = re.compile(r"^(\d{4,12})(?:\.(\d{2}))?$")


def _days_in(year: int, month: int) -> int:
    import calendar

    return calendar.monthrange(year, month)[1]


def parse_pbs_begin(text: str, now: float) -> float:
    """The time (seconds since the epoch) of a ``qsub -a`` value, ``[[[[CC]YY]MM]DD]hhmm[.SS]``, read at ``now``.

    As qsub reads it: the fields left out are the next ones that give a time
    still ahead (``1600`` is today at 16:00 or, once that has passed, tomorrow;
    ``011600`` is the next 1st of a month at 16:00; ``YYMMDDhhmm`` is in this
    century).  :class:`ValueError` with the reason for anything else.
    """
    v = text.strip()
    m = _PBS_A.match(v)
    forms = "use [[[[CC]YY]MM]DD]hhmm[.SS], such as 1600, 251600 or 202612010800.30"
    if not m or len(m.group(1)) % 2 or len(m.group(1)) < 4:
        raise ValueError(f"'{text}': not a qsub -a time ({forms})")
    digits, sec = m.group(1), int(m.group(2) or 0)
    h, mi = int(digits[-4:-2]), int(digits[-2:])
    lt = time.localtime(now)
    year, month, day = lt.tm_year, lt.tm_mon, lt.tm_mday
    rest = digits[:-4]
    given = len(rest) // 2  # 0: hhmm, 1: DD, 2: MM, 3: YY, 4: CCYY
    if given >= 1:
        day = int(rest[-2:])
    if given >= 2:
        month = int(rest[-4:-2])
    if given == 3:
        year = lt.tm_year // 100 * 100 + int(rest[:2])
    elif given == 4:
        year = int(rest[:4])
    if h > 23 or mi > 59 or sec > 59 or not 1 <= month <= 12:
        raise ValueError(f"'{text}': not a date and time ({forms})")
    for _ in range(49):  # the next day, month or year whose date exists and is ahead
        if day <= _days_in(year, month):
            t = time.mktime((year, month, day, h, mi, sec, 0, 0, -1))
            if t > now or given >= 3:
                return t
        if given >= 3:
            break
        if given == 0:
            t = time.mktime((year, month, day + 1, h, mi, sec, 0, 0, -1))
            return t
        if given == 1:
            month, year = (1, year + 1) if month == 12 else (month + 1, year)
        else:
            year += 1
    raise ValueError(f"'{text}': not a date and time ({forms})")


def size_text(where: str, shown: str, value: str) -> str:
    """A Slurm or SGE memory size, checked; as gsub reads it."""
    v = value.strip()
    if v == "0":
        return v
    try:
        parse_size(v)
    except UnitError as e:
        raise CompatError(f"{where}: {shown}: {e}") from None
    return v


def pbs_size(where: str, shown: str, value: str) -> str:
    m = _PBS_SIZE.match(value.strip().lower())
    if not m:
        raise CompatError(f"{where}: {shown}: '{value}' is not a PBS size (such as 4gb, 512mb)")
    n = (int(m.group(1)) << _PBS_SHIFT[m.group(2)]) * (_PBS_WORD if m.group(3) == "w" else 1)
    if n == 0:
        return "0"
    return f"{n >> 20}M" if n % (1 << 20) == 0 else f"{math.ceil(n / 1024)}K"


def pbs_path(value: str) -> str:
    """A PBS output path without its host: prefix, as a gsub path: a % is itself, and PBS Pro's
    ^array_index^ is the subjob's index."""
    host, colon, path = value.partition(":")
    path = path if colon and "/" not in host else value
    return path.replace("%", "%%").replace("^array_index^", "%a")


_SGE_VARS = {"$JOB_ID": "%j", "$TASK_ID": "%a", "$JOB_NAME": "%x", "$USER": "%u", "$HOSTNAME": "%N"}


def sge_path(value: str) -> str:
    """An SGE output path: its pseudo variables as gsub patterns (and % doubled)."""
    host, colon, path = value.partition(":")
    out = (path if colon and "/" not in host else value).replace("%", "%%")
    for var, pat in _SGE_VARS.items():
        out = out.replace("${" + var[1:] + "}", pat).replace(var, pat)
    return out


def pbs_depend(value: str) -> str:
    """PBS ids such as 123.server lose their server suffix."""
    parts = []
    for cond in value.split(","):
        kind, *ids = cond.split(":")
        parts.append(":".join([kind, *(i.split(".", 1)[0] for i in ids)]))
    return ",".join(parts)
