#!/usr/bin/env python3
"""Regenerate docs/results.md: every policy on every trace of ../shared/traces.

For each trace: fcfs, easy, conservative, and checkpoint-backfill with
threshold 30 min at p = 0.2 and at the best p of a small grid (by average
bounded slowdown), each with a checkpoint overhead of 120 s and of 0 s, plus
the naive cascading reading at p = 0.2 / 120 s; every metric with its change
against easy.  Then easy and checkpoint-backfill (p = 0.2, 120 s) again with
the jobs larger than a quarter of the machine splittable (``gsim
--split-jobs-above``).  ``--save FILE`` keeps the raw records, ``--load FILE`` renders
them again without simulating.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
OUT = ROOT / "docs" / "results.md"
GRID = (0.1, 0.2, 0.3, 0.5)
THRESHOLD = 1800.0
OVERHEADS = (120.0, 0.0)

sys.path.insert(0, str(ROOT))

from gridsched.core.types import BackfillOrder, Params, Policy, Predictor  # noqa: E402
from gridsched.core.units import format_duration  # noqa: E402
from gridsched.protocol.config import PACKAGED  # noqa: E402
from gridsched.protocol.config import load as load_config  # noqa: E402
from gridsched.sim import report, swf  # noqa: E402
from gridsched.sim.engine import simulate  # noqa: E402
from gridsched.sim.metrics import compute, quarters  # noqa: E402
from gridsched.sim.tune import grid_for, in_replay  # noqa: E402
from gridsched.sim.tune import label as setting_label  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tune_guard  # noqa: E402  (scripts/tune_guard.py: its section of docs/results.md)

DAY = 86400.0


# The shipped configuration's settings (the packaged gridsched.toml): what the auto row replays, its "auto"
# settings tuned and the others (the backfill order) as shipped.
SHIPPED_CONFIG = load_config(str(PACKAGED))
SHIPPED = dataclasses.replace(SHIPPED_CONFIG.params, policy=Policy.CHECKPOINT_BACKFILL)
TUNE_EVERY = float(SHIPPED_CONFIG.tuning.every)
TUNE_WINDOW = float(SHIPPED_CONFIG.tuning.window)
TUNE_WARMUP = float(SHIPPED_CONFIG.tuning.warmup)


def run(
    tr: swf.Trace,
    params: Params,
    overhead: float,
    name: str,
    split_above: int | None = None,
    auto: bool = False,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    tuner = None
    if auto:
        t = SHIPPED_CONFIG.tuning
        grid = grid_for(params, t.p, t.threshold, t.predictor, t.backfill_order)
        tuner = in_replay(
            tr, TUNE_EVERY, TUNE_WINDOW, grid, t.objective, t.margin, overhead=overhead, warmup=TUNE_WARMUP
        )
    res = simulate(tr, params, overhead=overhead, split_above=split_above, tuner=tuner)
    met = compute(res)
    rec = report.record(res, met, time.perf_counter() - t0)
    rec["name"] = name
    rec["quarters"] = quarters(res)
    days = met.makespan / DAY if met.makespan > 0 else 1.0
    rec["checkpointed_share"] = met.preempted_jobs / met.jobs if met.jobs else 0.0
    rec["checkpoints_per_core_day"] = met.checkpoints / (tr.ncores * days)
    if auto:
        rec["auto"] = True
        chosen: dict[str, int] = {}
        for _, prm in res.tunings:
            chosen[setting_label(prm)] = chosen.get(setting_label(prm), 0) + 1
        rec["tunings"] = len(res.tunings)
        rec["chosen"] = chosen
    if split_above is not None:
        rec["split_above"] = split_above
    said = f"wait {rec['wait_avg']:.0f} s, bsld {rec['bsld_avg']:.2f}, {rec['checkpoints']} checkpoints"
    print(f"  {name}: {rec['seconds']:.1f} s; {said}", file=sys.stderr, flush=True)
    return rec


def simulate_trace(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    print(path.name, file=sys.stderr, flush=True)
    tr = swf.read(str(path), limit=limit)
    recs = [run(tr, Params(policy=pol), 120.0, pol.value) for pol in (Policy.FCFS, Policy.EASY, Policy.CONSERVATIVE)]
    recs.append(
        run(
            tr,
            SHIPPED,
            120.0,
            f"checkpoint-backfill auto (tuned every {TUNE_EVERY / DAY:g} d), overhead 120 s",
            auto=True,
        )
    )
    for ov in OVERHEADS:
        grid = {
            p: run(
                tr,
                Params(policy=Policy.CHECKPOINT_BACKFILL, p=p, threshold=THRESHOLD),
                ov,
                f"checkpoint-backfill p={p:g}, overhead {ov:g} s",
            )
            for p in GRID
        }
        recs.append(grid[0.2])
        best = min(grid.values(), key=lambda r: r["bsld_avg"])
        if best is not grid[0.2]:
            best = dict(best, name=best["name"] + " (best p)")
            recs.append(best)
        else:
            recs[-1]["name"] += " (also the best p)"
    recs.append(
        run(
            tr,
            Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=THRESHOLD, cascade=True),
            120.0,
            "checkpoint-backfill p=0.2, overhead 120 s, naive cascade",
        )
    )
    recs.append(
        run(
            tr,
            Params(policy=Policy.CHECKPOINT_BACKFILL, threshold=THRESHOLD, predictor=Predictor.USER_HISTORY),
            120.0,
            "checkpoint-backfill user-history predictor, overhead 120 s",
        )
    )
    recs.append(
        run(
            tr,
            Params(policy=Policy.CHECKPOINT_BACKFILL, threshold=THRESHOLD, predictor=Predictor.USER_RATIO),
            120.0,
            "checkpoint-backfill user-ratio predictor, overhead 120 s",
        )
    )
    shortest = BackfillOrder.SHORTEST
    recs.append(run(tr, Params(policy=Policy.EASY, backfill_order=shortest), 120.0, "easy, shortest first"))
    recs.append(
        run(
            tr,
            Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=THRESHOLD, backfill_order=shortest),
            120.0,
            "checkpoint-backfill p=0.2, overhead 120 s, shortest first",
        )
    )
    recs.append(
        run(
            tr,
            Params(
                policy=Policy.CHECKPOINT_BACKFILL,
                threshold=THRESHOLD,
                predictor=Predictor.USER_RATIO,
                backfill_order=shortest,
            ),
            120.0,
            "checkpoint-backfill user-ratio predictor, overhead 120 s, shortest first",
        )
    )
    above = tr.ncores // 4
    recs.append(run(tr, Params(policy=Policy.EASY), 120.0, f"easy, jobs above {above} processors split", above))
    recs.append(
        run(
            tr,
            Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.2, threshold=THRESHOLD),
            120.0,
            f"checkpoint-backfill p=0.2, overhead 120 s, jobs above {above} processors split",
            above,
        )
    )
    return recs


COLS = (
    ("wait_avg", "avg wait", "dur"),
    ("wait_p95", "p95 wait", "dur"),
    ("bsld_avg", "avg bsld", "num"),
    ("response_avg", "avg response", "dur"),
    ("utilization", "util", "pct"),
    ("makespan", "makespan", "dur"),
)


def table(recs: list[dict[str, Any]]) -> list[str]:
    easy = next(r for r in recs if r["policy"] == "easy")
    head = (
        "| setting | "
        + " | ".join(t for _, t, _ in COLS)
        + " | checkpoints | jobs checkpointed | per core-day | overhead / rerun core-h |"
    )
    lines = [head, "|" + "---|" * (len(COLS) + 5)]
    for r in recs:
        cells = []
        for key, _, kind in COLS:
            cell = report.fmt(r[key], kind)
            if r is not easy:
                cell += f" ({report.relative(r[key], easy[key])})"
            cells.append(cell)
        lines.append(
            f"| {r['name']} | "
            + " | ".join(cells)
            + f" | {r['checkpoints']} | {100 * r.get('checkpointed_share', 0.0):.1f} % | "
            + f"{r.get('checkpoints_per_core_day', 0.0):.3f} | "
            + f"{r['overhead_core_hours']:.0f} / {r['rerun_core_hours']:.0f} |"
        )
    return lines


def change(r: dict[str, Any], easy: dict[str, Any], key: str) -> float:
    return 100.0 * (r[key] - easy[key]) / easy[key] if easy[key] else 0.0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def render(data: dict[str, list[dict[str, Any]]], meta: dict[str, str]) -> str:
    out = [
        "# gsim results: the policies on the Parallel Workloads Archive traces",
        "",
        "Generated by `scripts/results.py`; do not edit by hand.  Metrics as defined in gsim(1): waits",
        "from submission to first start, bounded slowdown with a 10 s bound, utilization as useful",
        "core-seconds over cores times makespan.  Every job is checkpointable (`--checkpoint checkpoint`);",
        f"checkpoint-backfill uses the scaled predictor with threshold {format_duration(THRESHOLD)}; the",
        f"best p is the one of {', '.join(f'{p:g}' for p in GRID)} with the lowest average bounded slowdown.",
        "Percentages are changes against easy (negative is better, except for utilization).  The rows",
        'marked "shortest first" try the jobs behind the head shortest walltime first',
        '(`backfill_order = "shortest"`); the other fixed rows, easy included, in queue order; the auto',
        "row replays the shipped configuration (shortest first, p, threshold and predictor tuned).",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['cpu']}, {meta['cpus']} CPUs; Python {meta['python']} ({meta['platform']})",
        "",
    ]
    split = {name: [r for r in recs if r.get("split_above") is not None] for name, recs in data.items()}
    data = {name: [r for r in recs if r.get("split_above") is None] for name, recs in data.items()}
    for name, recs in data.items():
        r0 = recs[0]
        skipped = ", ".join(f"{n} {why}" for why, n in r0["skipped_by"].items()) or "none"
        out += [
            f"## {name}",
            "",
            f"{r0['ncores']} processors, {r0['jobs']} jobs simulated (skipped: {skipped}; "
            f"{r0['cut_at_walltime']} run times cut at the requested time).",
            "",
        ]
        out += table(recs)
        out.append("")
    out += goal(data)
    out += comparison(data)
    if any(split.values()):
        out += splitting(data, split)
    return "\n".join(out) + "\n"


def splitting(data: dict[str, list[dict[str, Any]]], split: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The section on splittable jobs: each split run next to the same policy unsplit."""
    out = [
        "## Splittable jobs",
        "",
        "The same traces with every job of more than a quarter of the machine's processors made",
        "splittable (`gsim --split-jobs-above`, model in gsim(1): one 1-core sub-task per processor,",
        "each taking the job's run time and estimated at its requested time).  While such a job waits",
        "behind a blocked head, the backfill step takes sub-tasks out of it into the cores left free",
        "until the head's reservation, chained on the same cores.  Percentages are changes against the",
        "same policy with no job split.",
        "",
    ]
    for name, recs in split.items():
        out += [
            f"### {name}",
            "",
            "| setting | " + " | ".join(t for _, t, _ in COLS) + " | split jobs | pieces | sub-tasks |",
            "|" + "---|" * (len(COLS) + 4),
        ]
        for r in recs:
            base = next(
                b
                for b in data[name]
                if b["policy"] == r["policy"]
                and b["checkpoint_overhead"] == 120.0
                and abs(b["p"] - r["p"]) < 1e-9
                and not b.get("cascade")
                and not b.get("auto")
                and b["predictor"] == r["predictor"]
                and b.get("backfill_order") == r.get("backfill_order")
            )
            cells = [f"{report.fmt(r[k], kind)} ({report.relative(r[k], base[k])})" for k, _, kind in COLS]
            sp = r.get("split", {})
            out.append(
                f"| {r['name']} | "
                + " | ".join(cells)
                + f" | {sp.get('jobs', 0)} | {sp.get('pieces', 0)} | {sp.get('sub_tasks', 0)} |"
            )
        out.append("")
    return out + SPLIT_READING


# Written after reading the numbers above; regenerate and re-read when the core changes.
SPLIT_READING = [
    "Reading: utilization does not move (the load and the last arrival are fixed by the trace); waits",
    "do.  Under easy, splitting lowers average wait by 11 to 22 % and bounded slowdown by 12 to 18 %.",
    "Under checkpoint-backfill (p = 0.2, against the same setting unsplit) the gain is smaller: 2 to",
    "13 % in wait and 4 to 10 % in bounded slowdown, least on SDSC-BLUE.  A likely cause, not measured",
    "apart: the holes before the head's reservation are already filled by jobs started on shortened",
    "estimates, and pieces, which",
    "are never preempted, take cores those jobs would have used.  The model is generous to splitting",
    "(every large job is made of independent 1-core sub-tasks), so these are upper bounds for real",
    "workloads.",
]


def _days(seconds: float) -> str:
    n = seconds / DAY
    return "day" if n == 1 else f"{n:g} days"


def goal(data: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The shipped default (auto) against easy: each whole trace and each quarter of it, by submit time."""
    out = [
        "## The shipped default (auto) against easy",
        "",
        "Goal: never worse than easy in average wait or average bounded slowdown, on each whole trace",
        "and on each quarter of it (by submit time), and at least 20 % better than easy in both on each",
        "whole trace.  auto replays the shipped configuration (etc/gridsched.toml) and the daemon's tuner",
        f"with no look-ahead: every {_days(TUNE_EVERY)} it replays the jobs that ended in the last "
        f"{_days(TUNE_WINDOW)}",
        f"(after those of the {_days(TUNE_WARMUP)} before, replayed as the window's backlog and not scored) under",
        "EASY, EASY shortest-first and the settings it tunes, and puts one in force as the guard allows",
        "(below: the tuner's guard).  Changes against easy (negative is better):",
        "",
        "| trace | whole: wait | whole: bsld | Q1 wait / bsld | Q2 wait / bsld | Q3 wait / bsld | Q4 wait / bsld "
        "| goal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, recs in data.items():
        easy = next(r for r in recs if r["policy"] == "easy")
        auto = next((r for r in recs if r.get("auto")), None)
        if auto is None:
            continue
        w, b = change(auto, easy, "wait_avg"), change(auto, easy, "bsld_avg")
        ok = w <= -20.0 and b <= -20.0
        cells = []
        for qa, qe in zip(auto["quarters"], easy["quarters"]):
            qw, qb = change(qa, qe, "wait_avg"), change(qa, qe, "bsld_avg")
            ok = ok and qw <= 0.0 and qb <= 0.0
            cells.append(f"{qw:+.1f} % / {qb:+.1f} %")
        out.append(f"| {name} | {w:+.1f} % | {b:+.1f} % | " + " | ".join(cells) + f" | {'met' if ok else 'NOT met'} |")
    out.append("")
    for name, recs in data.items():
        auto = next((r for r in recs if r.get("auto")), None)
        if auto is not None:
            most = sorted(auto["chosen"].items(), key=lambda kv: -kv[1])[:4]
            said = ", ".join(f"{k} ({v})" for k, v in most)
            out.append(f"- {name}: the settings in force most often (days): {said}.")
    out.append("")
    return out + GOAL_READING


# Written after reading the numbers above and those of the variants below (each measured the same way: the
# auto row of this script with one change); regenerate and re-read when the core or the tuner changes.
GOAL_READING = [
    "Reading (written on 2026-11-23 with the tuner of then: p, threshold and predictor tuned every 7",
    "days over 14, against easy alone; its figures are of that tuner): what moved SDSC-SP2 past the",
    "goal is the backfill order.  The shipped configuration",
    'backfills shortest walltime first (`backfill_order = "shortest"`, EASY++\'s shortest job',
    "backfilled first); the tuner varies p, threshold and predictor within that order, against plain",
    "easy (queue order).  With the backfill in queue order, the same tuner gave -19.0 % / -10.8 %",
    "(wait / bsld) on SDSC-SP2, -23.1 % / -26.2 % on KTH-SP2 and -20.5 % / -21.5 % on SDSC-BLUE.",
    'The order alone (row "easy, shortest first") lowers easy\'s bounded slowdown by 6 % on SDSC-SP2,',
    "25 % on KTH-SP2 and 48 % on SDSC-BLUE (with its 95th percentile wait 11 % worse on SDSC-SP2);",
    "with checkpoint-backfill's shortened estimates it gains more than either alone on every trace:",
    "shortened long jobs open holes and the short jobs fill them first.  Tuning adds little over a",
    'fixed p = 0.2 in that order (compare the rows "p=0.2 ... shortest first"): it guards against',
    "a site where checkpoint-backfill loses to easy rather than finding large gains.  Tuning the order",
    'too (`backfill_order = "auto"`, twice the grid; `gsim run TRACE --config etc/gridsched.toml',
    "--backfill-order auto --tune-every 7d`) gave -28.0 % / -30.7 % on SDSC-SP2, against -27.2 % /",
    "-30.6 % with it fixed: not worth twice the tuning time here.",
    "",
]


def comparison(data: dict[str, list[dict[str, Any]]]) -> list[str]:
    out = [
        "## Against the published evaluation",
        "",
        'Niu, Zhai, Ma, Tang and Chen ("Employing checkpoint to improve job scheduling in large-scale',
        'systems", JSSPP 2012) report, against EASY, up to 40 % less average wait and about 20 % less',
        "average bounded slowdown with a realistic checkpoint overhead, and over 50 % less slowdown on",
        "two traces without overhead.  Our changes against easy, at p = 0.2 and at the best p:",
        "",
        "| trace | setting | avg wait | avg bsld |",
        "|---|---|---|---|",
    ]
    for name, recs in data.items():
        easy = next(r for r in recs if r["policy"] == "easy")
        for r in recs:
            if r["policy"] == "checkpoint-backfill":
                out.append(
                    f"| {name} | {r['name']} | {change(r, easy, 'wait_avg'):+.1f} % | "
                    f"{change(r, easy, 'bsld_avg'):+.1f} % |"
                )
    out += [""] + summary(data) + [""] + DISCUSSION
    return out


def summary(data: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The ranges of our changes against easy, next to the paper's figures."""
    ranges: dict[float, list[tuple[float, float]]] = {ov: [] for ov in OVERHEADS}
    for recs in data.values():
        easy = next(r for r in recs if r["policy"] == "easy")
        for r in recs:
            if (
                r["policy"] == "checkpoint-backfill"
                and not r.get("cascade")
                and not r.get("auto")
                and "predictor" not in r["name"]
                and r.get("backfill_order", "queue") == "queue"
            ):
                ranges[r["checkpoint_overhead"]].append((change(r, easy, "wait_avg"), change(r, easy, "bsld_avg")))

    def span(vals: list[float]) -> str:
        return f"{min(vals):+.0f} % to {max(vals):+.0f} %"

    out = []
    for ov, label in ((120.0, "With 120 s of overhead"), (0.0, "Without overhead")):
        if ranges[ov]:
            w = [a for a, _ in ranges[ov]]
            b = [c for _, c in ranges[ov]]
            out.append(
                f"- {label}: average wait {span(w)}, average bounded slowdown {span(b)} over the {len(data)} traces."
            )
    return out


# Written after reading the numbers above; regenerate and re-read when the core changes.
DISCUSSION = [
    "How this compares, plainly:",
    "",
    "- Direction: on every trace checkpoint-backfill beats easy on average wait, 95th percentile wait,",
    "  bounded slowdown and response, at unchanged utilization (the load is fixed by the trace), and",
    "  conservative is worse than easy, as in the literature.",
    '- Average wait: we see about half of the paper\'s best case ("up to 40 %").',
    '- Bounded slowdown with overhead: close to the paper\'s "about 20 %" on KTH-SP2 and SDSC-BLUE,',
    "  about half of it on SDSC-SP2.",
    '- Without overhead we do not reproduce the "over 50 %" slowdown reduction: removing the',
    "  overhead changes our results by a point or two.  In our model a preemption costs 2 x 120 s on",
    "  jobs that are longer than the 30 min threshold by construction and usually run for hours, so",
    "  the overhead is a small part of what a preemption costs the preempted job; the larger cost is",
    "  the time it spends requeued, which no overhead setting removes.",
    "",
    "Causes we can name for the differences (we did not re-run the paper's setup):",
    "",
    "- Traces: these are the cleaned archive versions (flurries removed), replayed in full, with run",
    "  times cut at the request and jobs without a run time left out.  Which logs, portions and",
    "  cleaning the paper used, and its machine sizes, are not reproduced here; gains from aggressive",
    "  backfilling depend strongly on load and on how much users overestimate run times.",
    "- Overhead model: every job is checkpointable, and the overhead is charged twice per preemption",
    "  (writing and reading the checkpoint) on the preempted job's cores, extending its walltime",
    "  (gsim(1)); other models (checkpoints that delay the head job, periodic checkpoints, overhead",
    "  growing with job size) change the numbers.",
    "- Policy reading: the head job keeps its reservation from pass to pass and preemption happens only",
    '  at that time, largest backfilled jobs first.  The naive reading (row "naive cascade"), in which',
    "  an overrunning backfilled job is counted as ending at once, preempts about twice as often and",
    "  gains clearly less; published numbers depend on which reading a simulator implements.",
    "- Metric details: bounded slowdown is averaged over all jobs with a 10 s bound; the many short",
    "  jobs of these logs dominate it.  Other bounds or per-class averages give other percentages.",
    "",
    "The reading gridsched ships: the head keeps its reservation (it may move earlier, never later),",
    "an overrunning backfilled job counts at its own walltime, and preemption happens only at the",
    'reservation time (`scheduler.policy = "checkpoint-backfill"`); the naive reading exists only in',
    "gsim (`--cascade`), to show its effect.",
    "",
    # written after gsim runs with and without --early-room (the commands and date in the text)
    "Making room earlier does not pay on these logs.  With `gsim --early-room` the head preempts the",
    "backfilled jobs that would have to give way at its reservation time anyway as soon as the jobs that",
    "cannot be preempted have freed the rest (a blocker that ends before its walltime), instead of at",
    "the reservation time.  Measured with `gsim run TRACE --policy checkpoint-backfill [--early-room]`",
    "(p 0.2, threshold 30 min, 2026-11-28):",
    "",
    "| log | average wait | bounded slowdown | checkpoints |",
    "|---|---|---|---|",
    "| KTH-SP2 | 1:29:52 -> 1:31:38 (+2 %) | 74.92 -> 77.93 (+4 %) | 830 -> 1,493 |",
    "| SDSC-SP2 | 4:32:10 -> 4:30:17 (-0.7 %) | 80.05 -> 80.30 (+0.3 %) | 1,792 -> 2,767 |",
    "| SDSC-BLUE | 1:45:18 -> 1:53:02 (+7 %) | 29.88 -> 34.34 (+15 %) | 4,012 -> 8,860 |",
    "",
    "The jobs preempted early are mostly ones that would have ended on their own before the reservation",
    "time (users' walltimes are generous), so their checkpoints are paid for nothing; gridsched keeps",
    "preemption at the reservation time.",
    "",
    "The `user-history` predictor (`scheduler.predictor`, after Tsafrir, Etsion and Feitelson's EASY++:",
    "the mean run time of the user's last two jobs, capped by the walltime) in place of `estimate * p`:",
    "on KTH-SP2 and SDSC-BLUE it lowers bounded slowdown further than the scaled rule (row",
    '"user-history predictor") with about half the checkpoints; on SDSC-SP2 it lowers slowdown a',
    "little more than p = 0.2 and wait a little less.  Where users' run times repeat, it shortens the right",
    "jobs; the scaled rule shortens every long job alike.",
    "",
    "The `user-ratio` predictor learns, for each user, how much of the walltime they ask for their",
    "jobs use: the lower quartile of run time over walltime of their last 16 finished jobs, times the",
    "job's walltime.  Unlike user-history it scales with the walltime asked for, so a user's long and",
    'short jobs are each shortened in proportion (row "user-ratio predictor").',
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", metavar="FILE", help="also write the raw records as JSON")
    ap.add_argument("--load", metavar="FILE", help="render records saved by --save instead of simulating")
    ap.add_argument("--limit", type=int, metavar="N", help="only the first N jobs of each trace (a quick check)")
    ap.add_argument("--out", metavar="FILE", default=str(OUT), help=f"where to write (default {OUT})")
    opts = ap.parse_args()
    if opts.load:
        saved = json.loads(Path(opts.load).read_text())
        data, meta = saved["data"], saved["meta"]
    else:
        traces = sorted(p for p in TRACES.iterdir() if p.name.endswith((".swf", ".swf.gz")))
        if not traces:
            sys.exit(f"results: no traces in {TRACES}")
        meta = {
            "date": datetime.date.today().isoformat(),
            "cpu": cpu_model(),
            "cpus": str(__import__("os").cpu_count()),
            "python": platform.python_version(),
            "platform": platform.platform(),
        }
        data = {p.name: simulate_trace(p, opts.limit) for p in traces}
        if opts.save:
            Path(opts.save).write_text(json.dumps({"meta": meta, "data": data}))
    out = Path(opts.out)
    out.parent.mkdir(exist_ok=True)
    text = render(data, meta)
    if out.exists():  # the section scripts/tune_guard.py writes is kept
        text = tune_guard.carried(out.read_text(), text)
    out.write_text(text)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
