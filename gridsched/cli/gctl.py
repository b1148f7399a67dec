"""gctl: administer the daemon of a spool (reload its configuration, show it)."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import click

from ..config import PACKAGED
from .common import ExitCode, Group, fail, setup, spool_options

PROG = "gctl"


def effective_values(path: str) -> dict[str, dict[str, Any]]:
    """The values in force: the packaged defaults overlaid with the file at ``path``."""
    with open(PACKAGED, "rb") as f:
        values: dict[str, dict[str, Any]] = tomllib.load(f)
    if path != str(PACKAGED):
        with open(path, "rb") as f:
            for table, kv in tomllib.load(f).items():
                values[table] = {**values.get(table, {}), **kv}
    return values


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


@click.group(PROG, cls=Group, context_settings={"help_option_names": ["-h", "--help"]},
             short_help="administer the daemon")
def cli() -> None:
    """Administer the gridsched daemon of a spool."""


@cli.command("reload")
@spool_options
def reload(spool_dir: str | None, config_file: str | None) -> int:
    """Check the configuration file and ask the daemon to reload it."""
    s = setup(PROG, spool_dir, config_file)  # refuses a bad file before the daemon sees it
    info = s.spool.daemon_info()
    if info is None:
        fail(PROG, f"no daemon runs on {s.spool.root}")
    s.spool.request("reload")
    click.echo(f"{PROG}: reload requested from pid {info.get('pid')} ({s.cfg.path})")
    return ExitCode.OK


@cli.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@spool_options
def config(as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Print the configuration file in force and its values (defaults filled in)."""
    s = setup(PROG, spool_dir, config_file)
    values = effective_values(s.cfg.path)
    if as_json:
        click.echo(json.dumps({"path": s.cfg.path, "spool": str(s.spool.root), "config": values}, indent=2))
        return ExitCode.OK
    click.echo(f"# config file: {s.cfg.path}")
    click.echo(f"# spool: {s.spool.root}")
    for table, kv in values.items():
        click.echo(f"\n[{table}]")
        for k, v in kv.items():
            click.echo(f"{k} = {toml_value(v)}")
    return ExitCode.OK


@cli.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@spool_options
def info(as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Show what this host offers: CPUs, pidfds, cgroup v2, NUMA nodes, CRIU."""
    from ..core import cpuset
    from ..host import facts
    from ..machine import from_config

    s = setup(PROG, spool_dir, config_file)
    f = facts()
    m = from_config(s.cfg)
    f["declared_cores"] = m.ncores
    if as_json:
        click.echo(json.dumps(f, indent=2))
        return ExitCode.OK
    click.echo(f"host CPUs:      {cpuset.format(f['host_cpus'])}")  # type: ignore[arg-type]
    click.echo(f"cores handed out: {m.ncores} (on host CPUs {cpuset.format(m.host_cpus)})")
    click.echo(f"NUMA nodes:     {', '.join(f['numa_nodes']) or 'none reported'}")  # type: ignore[arg-type]
    click.echo(f"pidfd:          {'yes' if f['pidfd'] else 'no'}")
    click.echo(f"cgroup v2:      {f['cgroup_v2'] or 'not available (jobs are tracked by their shepherd)'}")
    click.echo(f"checkpoint criu: not available: {f['criu']}")
    return ExitCode.OK


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
