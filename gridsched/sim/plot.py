"""PNG plots of gsim results (needs the optional matplotlib: ``pip install gridsched[plot]``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gridsched.core.units import format_duration

INF = float("inf")
BUCKETS = 400  # points on the time axis of a run plot


class PlotError(Exception):
    pass


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install gridsched[plot]") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def averages(
    series: Sequence[tuple[float, int, int]], t0: float, t1: float, buckets: int = BUCKETS
) -> tuple[list[float], list[float], list[float]]:
    """Time-weighted means of busy cores and queue length over ``buckets`` equal spans of [t0, t1].

    ``series`` holds (time, busy, queued) samples, each value holding until the next sample.
    """
    width = (t1 - t0) / buckets if t1 > t0 else 1.0
    edges = [t0 + j * width for j in range(buckets)] + [INF]
    busy = [0.0] * buckets
    queued = [0.0] * buckets
    j = 0
    for k, (t, b, q) in enumerate(series):
        u = series[k + 1][0] if k + 1 < len(series) else t1
        while j + 1 < buckets and edges[j + 1] <= t:
            j += 1
        while t < u:
            stop = min(u, edges[j + 1])
            busy[j] += b * (stop - t)
            queued[j] += q * (stop - t)
            t = stop
            if t >= edges[j + 1]:
                j += 1
    mids = [t0 + (j + 0.5) * width for j in range(buckets)]
    return mids, [b / width for b in busy], [q / width for q in queued]


def run_plot(path: str, rec: dict[str, Any], series: Sequence[tuple[float, int, int]], t0: float) -> None:
    """Utilization and queue length over time of one run."""
    plt = _pyplot()
    t1 = series[-1][0] if series else t0
    mids, busy, queued = averages(series, t0, t1)
    days = [(m - t0) / 86400 for m in mids]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    ax1.plot(days, [100.0 * b / rec["ncores"] for b in busy])
    ax1.set_ylabel("utilization (%)")
    ax1.set_ylim(0, 105)
    ax2.plot(days, queued, color="tab:orange")
    ax2.set_ylabel("jobs waiting")
    ax2.set_xlabel("days since the first submission")
    fig.suptitle(f"{rec['trace']}: {rec['policy']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def tune_plot(
    path: str, recs: Sequence[dict[str, Any]], ps: Sequence[float], thresholds: Sequence[float], key: str, metric: str
) -> None:
    """Heat map of ``key`` over the p x threshold grid."""
    plt = _pyplot()
    by = {(r["p"], r["threshold"]): r[key] for r in recs}
    grid = [[by[(p, th)] for th in thresholds] for p in ps]
    fig, ax = plt.subplots(figsize=(1.5 + 1.2 * len(thresholds), 1.5 + 0.6 * len(ps)))
    im = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(thresholds)), [format_duration(t) for t in thresholds])
    ax.set_yticks(range(len(ps)), [f"{p:g}" for p in ps])
    ax.set_xlabel("threshold")
    ax.set_ylabel("p")
    for a, row in enumerate(grid):
        for b, v in enumerate(row):
            ax.text(b, a, f"{v:.3g}", ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(im, ax=ax, label=metric)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def gantt_plot(path: str, res: Any, t_from: float, hours: float, max_jobs: int = 400) -> int:
    """The schedule of ``res`` as a Gantt chart: each job a row, its wait and its run segments.

    Shows the jobs submitted in ``[t_from, t_from + hours)`` (at most
    ``max_jobs``, the first ones), the same chart ``gstat --gantt`` draws for
    a live queue.  Returns the number of jobs drawn.
    """
    plt = _pyplot()
    tr = res.trace
    t_to = t_from + hours * 3600
    jobs = [i for i in range(len(tr)) if t_from <= tr.submit[i] < t_to and res.start[i] >= 0][:max_jobs]
    fig, ax = plt.subplots(figsize=(11, 2 + 0.025 * max(len(jobs), 40)))
    for row, i in enumerate(jobs):
        h = lambda t: (t - t_from) / 3600  # noqa: E731 - hours since t_from
        ax.plot([h(tr.submit[i]), h(res.start[i])], [row, row], color="0.8", linewidth=0.8)
        runs = res.runs(i)
        for k, (a, b) in enumerate(runs):
            color = "tab:orange" if k < len(runs) - 1 else "tab:blue"
            ax.barh(row, max(h(b) - h(a), 1e-3), left=h(a), height=0.8, color=color, linewidth=0)
    ax.set_ylim(len(jobs), -1)
    ax.set_xlim(0, hours)
    ax.set_xlabel(f"hours since {format_duration(t_from - min(tr.submit, default=0.0))} into the trace")
    ax.set_ylabel("jobs in submission order")
    ax.set_title(
        f"{tr.path.rsplit('/', 1)[-1]}: {res.params.policy.value} "
        "(grey: waiting; blue: running; orange: a run cut by a checkpoint)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return len(jobs)
