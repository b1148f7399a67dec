"""gacct --format: sacct's field names, its value forms, and its parsable output.

A field is named as sacct names it, in any case, optionally with a width
(``JobName%30``: the value cut to 30 characters, a ``+`` marking the cut, as
sacct).  Values read as sacct prints them: durations ``[D-]HH:MM:SS``, CPU
times ``[D-[HH:]]MM:SS.mmm``, memory in K/M/G/T (``61484K``; bigger units
only when they are exact).  A value that was not measured is empty.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gridsched.core.units import format_duration
from gridsched.protocol.text import shown

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow as Row


def cpu_time(secs: float | None) -> str:
    """A CPU time as sacct prints TotalCPU: ``MM:SS.mmm`` under an hour, ``HH:MM:SS``, ``D-HH:MM:SS``."""
    if secs is None:
        return ""
    ms_total = max(0, int(round(secs * 1000)))
    whole, ms = divmod(ms_total, 1000)
    d, rest = divmod(whole, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{s:02d}"
    if h:
        return f"{h:02d}:{m:02d}:{s:02d}"
    return f"{m:02d}:{s:02d}.{ms:03d}"


def memory(nbytes: int | None) -> str:
    """Bytes as sacct prints MaxRSS: kilobytes with a K, M/G/T only when the value is exact; ``0`` for none."""
    if nbytes is None:
        return ""
    if nbytes <= 0:
        return "0"
    k = -(-int(nbytes) // 1024)  # whole kilobytes, rounded up
    unit = "K"
    for bigger in ("M", "G", "T"):
        if k % 1024 or k == 0:
            break
        k //= 1024
        unit = bigger
    return f"{k}{unit}"


def when(t: float | None, missing: str = "Unknown") -> str:
    return missing if t is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def total_cpu(j: Row) -> float | None:
    u, s = j.get("cpu_user"), j.get("cpu_sys")
    if u is None and s is None:
        return None
    return float(u or 0.0) + float(s or 0.0)


def _counts(text: str) -> dict[str, int]:
    """Devices per type in a job's or a segment's ``devices`` (``gpu:0,1;fpga:2``)."""
    from gridsched.protocol.device_asks import parse_keys

    out: dict[str, int] = {}
    for t, _ in parse_keys(text):
        out[t] = out.get(t, 0) + 1
    return out


def device_seconds(j: Row, dtype: str = "gpu") -> float:
    """Devices of ``dtype`` held times the time held, summed over the job's run segments.

    A segment names the devices it was started on; one that continued a suspended job names none
    and held what the segment before it held (the job's devices when no segment names any).
    """
    last = _counts(str(j.get("devices") or "")).get(dtype, 0)
    segs = [s for s in j.get("segments") or [] if isinstance(s, dict) and s.get("start") is not None]
    if not segs:
        return last * float(j.get("elapsed") or 0.0) if j.get("start_time") is not None else 0.0
    named = [s for s in segs if s.get("devices")]
    held = _counts(str(named[0]["devices"])).get(dtype, 0) if named else last
    total = 0.0
    for s in segs:
        if s.get("devices"):
            held = _counts(str(s["devices"])).get(dtype, 0)
        end = s.get("end", j.get("end_time"))
        if end is not None and held:
            total += held * max(0.0, float(end) - float(s["start"]))
    return total


def held_devices(j: Row) -> dict[str, int]:
    """Devices per type the job holds or last held (none for a job that never started)."""
    if j.get("start_time") is None:
        return {}
    return _counts(str(j.get("devices") or ""))


def tres_memory(nbytes: int) -> str:
    """Memory as sacct prints it in a TRES list: megabytes, G or T when exact (``mem=4000M``, ``mem=16G``)."""
    m = -(-int(nbytes) // (1 << 20))
    for unit in ("M", "G", "T"):
        if m % 1024 or unit == "T":
            return f"{m}{unit}"
        m //= 1024
    return f"{m}T"


def tres(ncpus: int, mem: object, devices: dict[str, int]) -> str:
    """A TRES list as sacct prints AllocTRES and ReqTRES: ``cpu=4,gres/gpu=2,mem=16G,node=1`` (by name)."""
    items = [f"cpu={ncpus}"]
    items += [f"gres/{t}={n}" for t, n in sorted(devices.items()) if n]
    if mem:
        items.append(f"mem={tres_memory(int(mem))}")  # type: ignore[call-overload]
    items.append("node=1")
    return ",".join(items)


def alloc_tres(j: Row) -> str:
    """AllocTRES: what the job was given (empty for a job that never started)."""
    if j.get("start_time") is None:
        return ""
    return tres(int(j["ncpus"]), j["spec"].mem, held_devices(j))


def req_tres(j: Row) -> str:
    """ReqTRES: what the job asked for."""
    return tres(int(j["ncpus"]), j["spec"].mem, j["spec"].device_counts())


@dataclass(frozen=True)
class Field:
    name: str  # as sacct spells it (the header)
    value: Callable[[Row], str]
    left: bool = False  # left-aligned in the table (sacct aligns JobID and names to the left)


def _exit(j: Row) -> str:
    return f"{j.get('exit_code') or 0}:{j.get('exit_signal') or 0}"


def _req_mem(j: Row) -> str:
    mem = j["spec"].mem
    return memory(int(mem)) if mem else "0"


def _blank(v: object) -> str:
    """A spec field as a column shows it ("" where the job has none)."""
    return "" if v is None else shown(v)


def fields(
    label: Callable[[Row], str], run: Callable[[Row], float], wait: Callable[[Row], float | None]
) -> list[Field]:
    """Every field --format knows, in the order ``gacct --helpformat`` lists them."""

    def elapsed(j: Row) -> float:
        return run(j) if j.get("start_time") is not None else 0.0

    def planned(j: Row) -> str:
        w = wait(j)
        return "" if w is None else format_duration(w)

    return [
        Field("JobID", label, left=True),
        Field("JobIDRaw", lambda j: str(j["id"]), left=True),
        Field("ArrayJobID", lambda j: _blank(j["spec"].array_id)),
        Field("ArrayTaskID", lambda j: _blank(j["spec"].array_index)),
        Field("JobName", lambda j: shown(j["name"]), left=True),
        Field("User", lambda j: shown(j["user"]), left=True),
        Field("UID", lambda j: str(j["uid"])),
        Field("State", lambda j: shown(j["state"]), left=True),
        Field("Reason", lambda j: shown(j.get("reason") or "None"), left=True),
        Field("ExitCode", _exit),
        Field("Submit", lambda j: when(j["submit_time"])),
        Field("Start", lambda j: when(j.get("start_time"))),
        Field("End", lambda j: when(j.get("end_time"))),
        Field("Elapsed", lambda j: format_duration(elapsed(j))),
        Field("ElapsedRaw", lambda j: str(int(round(elapsed(j))))),
        Field("Planned", planned),
        Field("Reserved", planned),
        Field("Timelimit", lambda j: format_duration(j["walltime"])),
        Field("TimelimitRaw", lambda j: str(int(j["walltime"]) // 60)),
        Field("AllocCPUS", lambda j: str(j["ncpus"] if j.get("start_time") is not None else 0)),
        Field("NCPUS", lambda j: str(j["ncpus"])),
        Field("ReqCPUS", lambda j: str(j["ncpus"])),
        Field("CPUTime", lambda j: format_duration(elapsed(j) * j["ncpus"])),
        Field("CPUTimeRAW", lambda j: str(int(round(elapsed(j) * j["ncpus"])))),
        Field("TotalCPU", lambda j: cpu_time(total_cpu(j))),
        Field("UserCPU", lambda j: cpu_time(j.get("cpu_user"))),
        Field("SystemCPU", lambda j: cpu_time(j.get("cpu_sys"))),
        Field("AllocTRES", alloc_tres, left=True),
        Field("ReqTRES", req_tres, left=True),
        Field("AllocGPUS", lambda j: str(held_devices(j).get("gpu", 0))),
        Field("GPUTime", lambda j: format_duration(device_seconds(j))),
        Field("GPUTimeRAW", lambda j: str(int(round(device_seconds(j))))),
        Field("MaxRSS", lambda j: memory(j.get("max_rss"))),
        Field("ReqMem", _req_mem),
        Field("WorkDir", lambda j: _blank(j["spec"].workdir), left=True),
        Field("NodeList", lambda j: shown(j.get("cores") or ""), left=True),
    ]


_SPEC = re.compile(r"^([A-Za-z]+)(?:%(\d+))?$")


class FormatError(ValueError):
    pass


def parse(text: str, known: list[Field]) -> list[tuple[Field, int | None]]:
    """``FIELD[%WIDTH],...`` into fields and widths; :class:`FormatError` names a field not known."""
    by_name = {f.name.lower(): f for f in known}
    out: list[tuple[Field, int | None]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = _SPEC.match(part)
        f = by_name.get(m.group(1).lower()) if m else None
        if m is None or f is None:
            raise FormatError(f"--format: unknown field '{shown(part)}' (fields: {', '.join(k.name for k in known)})")
        width = int(m.group(2)) if m.group(2) else None
        if width == 0:
            raise FormatError(f"--format: '{shown(part)}': a width must be at least 1")
        out.append((f, width))
    if not out:
        raise FormatError("--format: no field given")
    return out


def render(jobs: list[Row], cols: list[tuple[Field, int | None]], parsable: str | None, header: bool) -> list[str]:
    """The lines: ``parsable`` ``"p"`` (``|`` after each field), ``"P"`` (``|`` between), or None (aligned)."""
    rows = [[f.value(j) for f, _ in cols] for j in jobs]
    if parsable is not None:
        lines = [[f.name for f, _ in cols]] if header else []
        lines += rows
        end = "|" if parsable == "p" else ""
        return ["|".join(r) + end for r in lines]
    cut: list[list[str]] = []
    for r in rows:
        cells = []
        for (_, w), v in zip(cols, r):
            cells.append(v[: w - 1] + "+" if w is not None and len(v) > w else v)
        cut.append(cells)
    widths = []
    for i, (f, w) in enumerate(cols):
        widths.append(w if w is not None else max([len(f.name), *(len(r[i]) for r in cut)]))
    out = []
    if header:
        out.append(" ".join(_align(f.name[:w], w, f.left) for (f, _), w in zip(cols, widths)).rstrip())
        out.append(" ".join("-" * w for w in widths))
    for r in cut:
        out.append(" ".join(_align(v, w, f.left) for (f, _), v, w in zip(cols, r, widths)).rstrip())
    return out


def _align(v: str, w: int, left: bool) -> str:
    return v.ljust(w) if left else v.rjust(w)
