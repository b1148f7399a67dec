"""gsim's entry point: the commonest call, a plain replay, without loading click.

``gsim [run] TRACE`` with at most ``--policy``, ``--limit``, ``--procs``, ``--jobs-out`` and ``--json``
(each once, the values as click would take them unchanged) is replayed here, as
:func:`gridsched.cli.gsim.run_cmd` replays it, through the same steps of
:mod:`gridsched.cli.gsim_inputs`; click, its types and the other commands' options are a good part of a
short replay's start-up.  Every other command line (another command, any other option, an option before
the trace without ``run``, ``--help``, a value click would refuse or change, shell completion) and a
replay on a terminal (its progress bar) go to the click group (:data:`gridsched.cli.gsim.main`).
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

from gridsched.cli.plain import fail, run
from gridsched.core.choices import Policy

PROG = "gsim"
POLICIES = tuple(p.value for p in Policy)
_VALUED = ("--policy", "--limit", "--procs", "--jobs-out")
COMMANDS = ("compare", "run", "tree", "tune")  # the click group's (a test compares them)


class Quick(NamedTuple):  # a named tuple: a dataclass costs a compile at start-up
    trace: str
    policy: str | None
    limit: int | None
    procs: int | None
    jobs_out: str | None
    as_json: bool


def parse(args: list[str]) -> Quick | None:
    """The replay ``args`` (gsim's arguments) ask for, if this module replays it; None: click reads them."""
    if not args or (args[0] != "run" and (args[0] in COMMANDS or args[0].startswith("-"))):
        return None
    seen: dict[str, str] = {}
    trace: str | None = None
    rest = iter(args[1:] if args[0] == "run" else args)  # gsim TRACE: the group's run
    for a in rest:
        if a in seen:
            return None  # given twice: click's rules (the last wins) are click's
        if a == "--json":
            seen[a] = ""
        elif a in _VALUED:
            v = next(rest, None)
            if v is None or v.startswith("-") or not v:
                return None
            seen[a] = v
        elif a.startswith("-") or trace is not None:
            return None
        else:
            trace = a
    if trace is None:
        return None
    policy = seen.get("--policy")
    if policy is not None and policy not in POLICIES:
        return None
    counts = [_count(seen.get(k)) for k in ("--limit", "--procs")]
    if -1 in counts:
        return None
    return Quick(trace, policy, counts[0], counts[1], seen.get("--jobs-out"), "--json" in seen)


def _count(v: str | None) -> int | None:
    """A whole number of at least 1, as written (-1: not one that click takes unchanged)."""
    if v is None:
        return None
    if not (v.isascii() and v.isdigit()) or int(v) < 1:
        return -1
    return int(v)


def replay(q: Quick) -> None:
    """``gsim run`` for ``q``: the steps of :func:`gridsched.cli.gsim.run_cmd` that such a call takes."""
    from gridsched.cli import gsim_inputs as inputs
    from gridsched.sim import report

    params = inputs.params(None, q.policy, None, None, None, False)
    tr = inputs.read_trace(q.trace, q.procs, False, False, q.limit, slurm=False)
    devs = inputs.devices(tr, None, None, None, None, None, False)
    gates = inputs.gates(tr, False, None)
    res, met, secs = inputs.simulate(tr, params, inputs.OVERHEAD, inputs.MODE, gates=gates, devices=devs)
    rec = report.record(res, met, secs)
    if q.jobs_out is not None:
        try:
            with open(q.jobs_out, "w", newline="") as f:
                report.write_jobs(f, res)
        except OSError as e:
            fail(PROG, f"--jobs-out {q.jobs_out}: {e.strerror or e}")
    if q.as_json:
        inputs.emit_json(rec)
    else:
        report.print_run(rec)


def main() -> None:
    q = None if "_GSIM_COMPLETE" in os.environ or sys.stderr.isatty() else parse(sys.argv[1:])
    if q is None:
        from gridsched.cli.gsim import main as cli

        cli.main(prog_name=PROG)
    run(PROG, lambda: replay(q))


if __name__ == "__main__":
    main()
