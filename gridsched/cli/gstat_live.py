"""Live views of gstat: ``--watch`` (the table, refreshed) and ``--gantt`` (a text chart of the hours ahead)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from gridsched.core.units import format_duration
from gridsched.protocol.jobs import ACTIVE, JobState
from gridsched.protocol.text import shown

if TYPE_CHECKING:
    from gridsched.protocol.view import ViewRow as Row

GANTT_WIDTH = 60  # characters of the time axis
RUN_MARK, PLAN_MARK = "#", "."


def gantt(jobs: list[Row], now: float, hours: float, width: int = GANTT_WIDTH) -> str:
    """Running jobs (``#``, from now to their walltime end) and pending jobs with a predicted start
    (``.``, from that start for their walltime) on a time axis from now to ``hours`` ahead.

    Job names are escaped (:func:`gridsched.protocol.text.shown`): the chart is safe to print as it is."""
    span = hours * 3600.0
    rows: list[tuple[Row, float, float, str]] = []
    for j in jobs:
        wt = float(j.get("walltime") or 0)
        if j["state"] in ACTIVE and (began := j.get("start_time")) is not None:
            rows.append((j, now, float(began) + wt, RUN_MARK))
        elif j["state"] == JobState.PENDING and (planned := j.get("predicted_start")) is not None:
            start = max(now, float(planned))
            rows.append((j, start, start + wt, PLAN_MARK))
    labels = {id(j): shown(f"{j['id']} {j['name'] or ''}") for j, *_ in rows}
    label_w = max([len(v) for v in labels.values()] + [8])
    label_w = min(label_w, 24)
    step = span / width
    ticks = [" "] * width
    for h in range(int(hours) + 1):
        col = int(h * 3600 / step) if step else 0
        if col < width:
            ticks[col] = "|"
    axis = "".join(ticks).rstrip()
    lines = [f"{'':<{label_w}}  now{' ' * (width - 3 - len(f'+{hours:g}h'))}+{hours:g}h", f"{'':<{label_w}}  {axis}"]
    for j, a, b, mark in rows:
        first = int((a - now) / step) if step else 0
        last = int((b - now) / step) if step else 0
        cells = [" "] * width
        for c in range(max(0, first), min(width, max(last, first + 1))):
            cells[c] = mark
        tail = ">" if b > now + span else ""
        label = labels[id(j)][:label_w]
        info = f"{shown(j['state']).lower()} {shown(j['ncpus'])}c, ends +{format_duration(b - now)}"
        lines.append(f"{label:<{label_w}}  {''.join(cells)}{tail} {info}".rstrip())
    if not rows:
        lines.append("(no running jobs and no predicted starts)")
    lines.append(f"{RUN_MARK} running, until its walltime ends   {PLAN_MARK} pending, from its predicted start")
    return "\n".join(lines)


def watch(snapshot: Callable[[float], Any], show: Callable[[float], None], interval: float, count: int | None) -> int:
    """Show ``snapshot(now)`` every ``interval`` seconds, ``count`` times (None: until Ctrl-C).

    On a terminal the view is refreshed in place (rich Live); elsewhere
    ``show(now)`` prints a snapshot each time, after a line with the time.
    """
    n = 0
    try:
        if sys.stdout.isatty():
            from rich.live import Live

            with Live(snapshot(time.time()), auto_refresh=False, screen=False) as live:
                while count is None or n < count:
                    live.update(snapshot(time.time()), refresh=True)
                    n += 1
                    if count is not None and n >= count:
                        break
                    time.sleep(interval)
        else:
            while count is None or n < count:
                now = time.time()
                if n:
                    click.echo("")
                click.echo(f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}")
                show(now)
                sys.stdout.flush()
                n += 1
                if count is not None and n >= count:
                    break
                time.sleep(interval)
    except KeyboardInterrupt:
        return 0
    return 0
