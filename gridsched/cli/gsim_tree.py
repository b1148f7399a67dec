"""gsim tree: replay a parent-child tree workload with and without yielding (see gridsched.sim.tree)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from gridsched.cli.common import COUNT, ChoiceType, Command, ExitCode, fail
from gridsched.core.types import Params, Policy, YieldAffinity

POLICIES = tuple(p.value for p in Policy)
AFFINITIES = tuple(a.value for a in YieldAffinity)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "inf" if v == float("inf") else f"{v:.4g}"
    return str(v)


@click.command("tree", cls=Command, short_help="replay a parent-child tree workload")
@click.argument("workload", metavar="FILE")
@click.option("--cores", type=COUNT, required=True, help="Cores of the simulated machine.")
@click.option(
    "--policy", type=ChoiceType(POLICIES, "POLICY"), default="easy", show_default=True, help="Scheduling policy."
)
@click.option(
    "--affinity",
    type=ChoiceType(AFFINITIES, "AFFINITY"),
    default="descendant",
    show_default=True,
    help="Which waiting job may use a yielded core (scheduler.yield_affinity).",
)
@click.option(
    "--yield/--no-yield",
    "yielding",
    default=None,
    help="Parents lend their cores while they wait for their children (--yield) or keep them "
    "(--no-yield). Default: both, side by side.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def tree_cmd(workload: str, cores: int, policy: str, affinity: str, yielding: bool | None, as_json: bool) -> int:
    """Replay the tree workload FILE (CSV: id,parent,submit,ncpus,walltime,run; format in
    docs/trees.md) on a machine of --cores cores.  A parent computes for its run time, submitting
    its children meanwhile, then waits for them.  Reports, with and without yielding, whether the
    schedule deadlocks (jobs that can never start) and its makespan, utilization and mean wait.
    Exit status 0, or 1 if the file cannot be read.
    """
    from gridsched.sim.tree import TreeFormatError, parse, simulate

    try:
        with open(workload, encoding="utf-8") as f:
            jobs = parse(f.read(), workload)
    except OSError as e:
        fail("gsim", f"{workload}: {e.strerror}")
    except (TreeFormatError, UnicodeDecodeError) as e:
        fail("gsim", str(e))
    params = dataclasses.replace(Params(policy=Policy(policy)), yield_affinity=YieldAffinity(affinity))
    modes = [True, False] if yielding is None else [yielding]
    results = {("yield" if y else "no-yield"): simulate(jobs, cores, params, y).metrics() for y in modes}
    if as_json:  # an infinite makespan (deadlock) is null
        clean = {m: {k: (None if v == float("inf") else v) for k, v in r.items()} for m, r in results.items()}
        click.echo(
            json.dumps(
                {"workload": workload, "cores": cores, "policy": policy, "affinity": affinity, "results": clean},
                indent=2,
            )
        )
        return ExitCode.OK
    keys = ["jobs", "ended", "deadlock", "stuck", "makespan", "utilization", "mean_wait", "on_lent"]
    width = max(len(k) for k in keys)
    click.echo(f"{'':<{width}}  " + "  ".join(f"{m:>10}" for m in results))
    for k in keys:
        click.echo(f"{k:<{width}}  " + "  ".join(f"{_fmt(r[k]):>10}" for r in results.values()))
    return ExitCode.OK
