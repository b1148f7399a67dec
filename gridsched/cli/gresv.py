"""gresv: create, list, show and delete reservations.

Like gsub, gresv validates a request, writes it into the spool and returns; the
daemon decides when a flexible reservation becomes active.  See gresv(1) and
:mod:`gridsched.protocol.reservations`.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

import click

from gridsched.cli.common import (
    COUNT,
    DURATION,
    ExitCode,
    Group,
    fail,
    place_options,
    setup,
    spool_options,
    warn,
)
from gridsched.cli.gsub_types import WholeType
from gridsched.core.params import ADMIN_MAX, NICE_MAX, NICE_MIN
from gridsched.core.units import format_duration
from gridsched.protocol.reservations import (
    ALTER,
    CREATE,
    DELETE,
    LIVE,
    ResvError,
    check_request,
    end_of,
    load,
    parse_id,
    parse_resources,
    parse_start,
    place_text,
    resource_text,
)
from gridsched.protocol.spool import Spool

if TYPE_CHECKING:
    from gridsched.protocol.view import ViewRow

PROG = "gresv"

# The --json schema of one reservation: exactly these keys, in this order.
JSON_KEYS = (
    "id name user state flexible ncpus resources duration start create_time activate_time end_time "
    "predicted cores users kill reason jobs place threads_per_core exclusive_board nice priority"
).split()
STYLE = {"WAITING": "yellow", "ACTIVE": "green", "ENDED": "dim", "DELETED": "dim red"}


def record(r: dict[str, Any], jobs: list[ViewRow]) -> dict[str, Any]:
    """The --json record of reservation ``r`` (keys of :data:`JSON_KEYS`); ``jobs``: every job known."""
    out = {k: r.get(k) for k in JSON_KEYS}
    out["flexible"] = r.get("start") is None
    out["resources"] = dict(r.get("resources") or {})
    out["users"] = list(r.get("users") or [])
    out["kill"] = bool(r.get("kill", True))
    out["cores"] = r.get("cores") or ""
    out["reason"] = r.get("reason") or ""
    out["threads_per_core"] = int(r.get("threads_per_core") or 0)
    out["exclusive_board"] = bool(r.get("exclusive_board"))
    out["nice"] = int(r.get("nice") or 0)
    if r["state"] == "WAITING" and r.get("start") is not None and out["predicted"] is None:
        out["predicted"] = r["start"]
    out["jobs"] = [j["id"] for j in jobs if j["spec"].reservation == r["id"]]
    return out


def read(spool: Spool, ids: list[int] | None = None) -> tuple[list[dict[str, Any]], list[ViewRow]]:
    """The reservations (and every job, for the bound ones) the spool knows of."""
    from gridsched.protocol.view import QueueError, load_jobs

    try:
        return load(spool, ids), load_jobs(spool)
    except (QueueError, OSError, ValueError) as e:
        fail(PROG, f"cannot read {spool.db}: {e}")
    except Exception as e:  # noqa: BLE001 - sqlite3 errors, without importing sqlite3 up front
        fail(PROG, f"cannot read {spool.db}: {e}")


def when(t: float | None) -> str:
    return "" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def note(r: dict[str, Any], now: float) -> str:
    if r["state"] == "WAITING":
        p = r.get("predicted")
        if p is not None:
            return ("starts " if r.get("start") is not None else "predicted ") + when(p)
        return r.get("reason") or ""
    if r["state"] == "ACTIVE":
        end = end_of(r)
        return f"{format_duration(max(0.0, end - now))} left" if end is not None else ""
    return r.get("reason") or ""


def print_table(recs: list[dict[str, Any]], now: float) -> None:
    """The reservations as a table (also used by gstat -r).

    Every cell is a rich ``Text`` of an escaped string (:func:`gridsched.protocol.text.shown`): no control character
    reaches the terminal and no markup in a name or reason is interpreted.
    """
    import sys

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from gridsched.protocol.text import shown

    tty = sys.stdout.isatty()
    console = Console(highlight=False, width=None if tty else 4096, soft_wrap=not tty)
    table = Table(
        box=box.SIMPLE_HEAD if tty else None, pad_edge=False, show_edge=False, header_style="bold" if tty else ""
    )
    for col, just in (
        ("RESV", "right"),
        ("NAME", "left"),
        ("USER", "left"),
        ("STATE", "left"),
        ("CPUS", "right"),
        ("PLACE", "left"),
        ("RESOURCES", "left"),
        ("DURATION", "right"),
        ("CORES", "left"),
        ("JOBS", "left"),
        ("NOTE", "left"),
    ):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for r in recs:
        state = shown(r["state"])
        table.add_row(
            Text(shown(r["id"])),
            Text(shown(r["name"])),
            Text(shown(r["user"])),
            Text(state, style=STYLE.get(state, "")),
            Text(shown(r["ncpus"])),
            Text(shown(place_text(r))),
            Text(shown(resource_text(r["resources"]))),
            Text(format_duration(r["duration"])),
            Text(shown(r["cores"])),
            Text(shown(",".join(str(j) for j in r["jobs"]))),
            Text(shown(note(r, now))),
        )
    if tty:
        console.print(table)
        return
    with console.capture() as cap:
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in cap.get().splitlines()))


class ListType(click.ParamType):
    name = "U1,U2"

    def convert(self, value: Any, param: Any, ctx: Any) -> list[str]:
        if isinstance(value, list):
            return value
        parts = [x.strip() for x in str(value).split(",")]
        if not all(parts):
            self.fail(f"'{value}': empty name in the list", param, ctx)
        return parts


@click.group(
    PROG,
    cls=Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="create, list and delete reservations",
)
def cli() -> None:
    """Reserve cores and floating resources for a time, and run jobs in the reservation.

    A reservation without --start is flexible: it waits in the queue, in the
    order of submission like a job, and becomes ACTIVE when its turn comes and
    its cores and units are free for its whole duration; it ends (ENDED) when
    the duration has passed.  With --start it is fixed: the scheduler keeps its
    cores and units free from the start on, and it is active from the start to
    the start plus the duration.  With --place, --threads-per-core or
    --exclusive-board (as gsub's) it is activated only on cores laid out so.
    Jobs submitted with gsub --reservation R run on its cores, each placed
    there with its own --place options.  When a reservation ends, its jobs still running are stopped
    as at their walltime (state TIMEOUT, reason "reservation ended"), unless it
    was created with --no-kill: then they go on running as ordinary jobs.
    """


@cli.command("create", short_help="create a reservation")
@click.option("-n", "--ncpus", type=COUNT, required=True, help="Number of cores.")
@click.option(
    "-t",
    "--duration",
    type=DURATION,
    required=True,
    help="How long the reservation lasts once active (as gsub -t; at most reservations.max_duration).",
)
@click.option(
    "-l",
    "--resource",
    "resource",
    metavar="NAME=COUNT",
    multiple=True,
    help="Floating resources from [resources.floating], such as matlab=1, or memory the reservation holds for "
    "its jobs, such as mem=40G; repeatable.",
)
@click.option(
    "--gpus",
    metavar="[MODEL:]N",
    help="N GPUs (of MODEL) held by the reservation; jobs bound to it that ask for GPUs get them from inside it.",
)
@click.option("--name", metavar="NAME", help="A name for the reservation (default: R and its id).")
@click.option("--users", type=ListType(), help="Other users who may run jobs in it (the owner always may).")
@click.option(
    "--start",
    metavar="TIME",
    help="A fixed start: 2026-11-22T14:00 (local time), 14:00 (today) or +30m (from now). "
    "Without it the reservation is flexible.",
)
@click.option("--no-kill", is_flag=True, help="Jobs still running at the end go on as ordinary jobs.")
@click.option(
    "--nice",
    type=WholeType(NICE_MIN, NICE_MAX),
    default=0,
    metavar="N",
    help="A flexible reservation's place among the jobs, as gsub --nice: N lower (only an admin gives a negative N).",
)
@click.option(
    "--priority",
    type=WholeType(0, ADMIN_MAX),
    metavar="N",
    help="A flexible reservation's priority outright, as gsub --priority (an admin's).",
)
@place_options("reservation")
@click.option("--json", "as_json", is_flag=True, help="Print the reservation as JSON.")
@spool_options
def create_cmd(
    ncpus: int,
    duration: int,
    resource: tuple[str, ...],
    gpus: str | None,
    name: str | None,
    users: list[str] | None,
    start: str | None,
    no_kill: bool,
    nice: int,
    priority: int | None,
    place: str | None,
    threads_per_core: int | None,
    exclusive_board: bool,
    as_json: bool,
    spool_dir: str | None,
    config_file: str | None,
) -> int:
    """Create a reservation of NCPUS cores (and floating resources) for DURATION and print its id.

    Only admins and the users named in reservations.users may, these within their caps; see RESERVATIONS.
    """
    from gridsched.submission.submit import SubmitError, machine_cores, publish_new, user_name

    s = setup(PROG, spool_dir, config_file)
    now = time.time()
    if name is not None and (not name.strip() or any(ord(c) < 32 for c in name)):
        fail(PROG, f"name {name!r}: must be non-empty, without control characters", ExitCode.USAGE)
    req, machine = None, None
    if place is not None or threads_per_core or exclusive_board:
        from gridsched.core.placement import Request
        from gridsched.host.topology import in_force

        req = Request(ncpus, place or "pack", threads_per_core or 0, exclusive_board)
        try:
            machine = in_force(s.spool, s.cfg)
        except ValueError as e:  # the machine's topology file cannot be read
            fail(PROG, str(e))
    try:
        floating = _floating(s.spool, s.cfg)
        res = parse_resources(resource, floating)
        ncores = machine.ncores if machine is not None else machine_cores(s.spool, s.cfg)
        check_request(ncpus, duration, res, ncores, floating, s.cfg.resv_max_duration, machine, req)
        t0 = parse_start(start, now) if start is not None else None
    except (ResvError, SubmitError) as e:
        fail(PROG, str(e))
    if t0 is not None and (priority is not None or nice):
        what = "--priority" if priority is not None else "--nice"
        fail(
            PROG,
            f"{what}: places a flexible reservation among the jobs; one with --start has no place there",
            ExitCode.USAGE,
        )
    uid = os.getuid()
    may_create(s.spool, s.cfg, uid, user_name(uid), ncpus, duration)
    if priority is not None or nice < 0:
        _admin_only(s.spool, uid, "--priority" if priority is not None else f"--nice {nice}")
    devices: list[dict[str, Any]] = []
    if gpus is not None:
        from gridsched.core.devices import DeviceAsk
        from gridsched.host.topology import in_force
        from gridsched.protocol.device_asks import AskError, asks_to_spec, parse_gpus, refusal

        try:
            model, n = parse_gpus(gpus)
            asks = [DeviceAsk("gpu", n, model)]
            why = refusal(asks, in_force(s.spool, s.cfg).devices)
        except (AskError, ValueError) as e:
            fail(PROG, str(e))
        if why:
            fail(PROG, why)
        devices = asks_to_spec(asks)

    def build(rid: int) -> dict[str, Any]:
        return {
            "id": rid,
            "name": name or f"R{rid}",
            "user": user_name(uid),
            "uid": uid,
            "ncpus": ncpus,
            "resources": res,
            "duration": duration,
            "start": t0,
            "users": users or [],
            "kill": not no_kill,
            "create_time": now,
            **({"devices": devices} if devices else {}),
            **({"nice": nice} if nice else {}),
            **({"priority": priority} if priority is not None else {}),
            **(
                {"place": req.place, "threads_per_core": req.threads_per_core, "exclusive_board": req.exclusive_board}
                if req is not None
                else {}
            ),
        }

    try:
        resv = publish_new(s.spool, CREATE, build)
    except SubmitError as e:
        fail(PROG, str(e))
    rid = resv["id"]
    if as_json:
        click.echo(json.dumps({**resv, "state": "WAITING", "flexible": t0 is None, "spool": str(s.spool.root)}))
    else:
        click.echo(rid)
    if s.spool.daemon_info() is None:
        if s.cfg.autostart:
            from gridsched.protocol.autostart import autostart

            if autostart(s.spool, s.config_file):
                warn(PROG, f"note: started a personal daemon on {s.spool.root} (gschedd stop stops it)")
        else:
            warn(PROG, f"note: no daemon runs on {s.spool.root}; the reservation waits until one starts")
    return ExitCode.OK


def may_create(spool: Spool, cfg: Any, uid: int, user: str, ncpus: int, duration: int) -> None:
    """Refuse in one line (exit 1) what the daemon would refuse by the policy of ``[reservations]``: only admins
    and the users it names create reservations, the latter within their caps (counting their live ones)."""
    from gridsched.protocol.admin import is_admin
    from gridsched.protocol.limits import may_reserve, resv_refusal
    from gridsched.protocol.reservations import LIVE, load

    admin = is_admin(uid, spool.root)
    live: list[int] = []
    if not admin and may_reserve(user, admin, cfg) and (cfg.resv_max_per_user or cfg.resv_max_cores_per_user):
        try:
            live = [int(r["ncpus"]) for r in load(spool) if r.get("uid") == uid and r.get("state") in LIVE]
        except Exception as e:  # noqa: BLE001 - sqlite3 errors, without importing sqlite3 up front
            fail(PROG, f"cannot read {spool.db}: {e}")
    why = resv_refusal(user, admin, ncpus, duration, live, cfg)
    if why:
        fail(PROG, why)


@cli.command("list", short_help="list reservations")
@click.option("-a", "--all", "show_all", is_flag=True, help="Include ended and deleted reservations.")
@click.option("--json", "as_json", is_flag=True, help="Print the reservations as JSON.")
@spool_options
def list_cmd(show_all: bool, as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """List the reservations: waiting and active ones, all with --all.

    NOTE gives the predicted activation time of a waiting flexible
    reservation, the start of a fixed one, the time left of an active one.
    """
    s = setup(PROG, spool_dir, config_file)
    now = time.time()
    resvs, jobs = read(s.spool)
    recs = [record(r, jobs) for r in resvs if show_all or r["state"] in LIVE]
    if as_json:
        click.echo(json.dumps({"reservations": recs}, indent=2))
    else:
        print_table(recs, now)
    return ExitCode.OK


def _one(spool: Spool, text: str) -> tuple[dict[str, Any], list[ViewRow]]:
    try:
        rid = parse_id(text)
    except ResvError as e:
        fail(PROG, str(e), ExitCode.USAGE)
    resvs, jobs = read(spool, [rid])
    if not resvs:
        fail(PROG, f"reservation {rid}: no such reservation")
    return resvs[0], jobs


@cli.command("show", short_help="show one reservation")
@click.argument("resv", metavar="R")
@click.option("--json", "as_json", is_flag=True, help="Print the reservation as JSON.")
@spool_options
def show_cmd(resv: str, as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Show every field of reservation R."""
    s = setup(PROG, spool_dir, config_file)
    row, jobs = _one(s.spool, resv)
    rec = record(row, jobs)
    if as_json:
        click.echo(json.dumps(rec, indent=2))
        return ExitCode.OK
    shown = dict(rec)
    shown["resources"] = resource_text(rec["resources"])
    shown["duration"] = format_duration(rec["duration"])
    for k in ("start", "create_time", "activate_time", "end_time", "predicted"):
        shown[k] = when(rec[k])
    shown["users"] = ",".join(rec["users"])
    shown["jobs"] = ",".join(str(j) for j in rec["jobs"])
    shown["kill"] = "yes" if rec["kill"] else "no (jobs go on after the end)"
    shown["flexible"] = "yes" if rec["flexible"] else "no"
    shown["place"] = place_text(rec) or "pack (the fewest boards), any thread"
    del shown["threads_per_core"], shown["exclusive_board"]
    width = max(len(k) for k in shown)
    for k, v in shown.items():
        click.echo(f"{k:<{width}}  {'' if v is None else v}")
    return ExitCode.OK


@cli.command("delete", short_help="delete a reservation")
@click.argument("resv", metavar="R")
@click.option(
    "--release",
    is_flag=True,
    help="Jobs waiting for the reservation go to the normal queue instead of being cancelled.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was requested as JSON.")
@spool_options
def delete_cmd(resv: str, release: bool, as_json: bool, spool_dir: str | None, config_file: str | None) -> int:
    """Delete reservation R: its cores return at once.

    Its jobs waiting to start are cancelled (with --release they join the
    normal queue); its running jobs are treated as at the reservation's end.
    Only its owner (or root) may delete it.
    """
    s = setup(PROG, spool_dir, config_file)
    row, _ = _one(s.spool, resv)
    uid = os.getuid()
    if uid != 0 and row.get("uid") != uid:
        fail(PROG, f"reservation {row['id']}: owned by {row.get('user') or row.get('uid')}")
    if row["state"] not in LIVE:
        fail(PROG, f"reservation {row['id']}: already {row['state']}")
    s.spool.request(DELETE, id=row["id"], release=release)
    if as_json:
        click.echo(json.dumps({"id": row["id"], "delete": True, "release": release}))
    else:
        click.echo(f"reservation {row['id']}: deleting")
    return ExitCode.OK


@cli.command("update", short_help="change a waiting reservation's place among the jobs")
@click.argument("resv", metavar="R")
@click.option(
    "--nice",
    type=WholeType(NICE_MIN, NICE_MAX),
    metavar="N",
    help="Its nice value from now on, as galter --nice (only an admin gives a negative N).",
)
@click.option(
    "--priority",
    type=WholeType(0, ADMIN_MAX),
    metavar="N",
    help="Its priority outright from now on, as galter --priority (an admin's).",
)
@click.option("--no-priority", is_flag=True, help="Drop the priority given outright: it is ranked by its nice again.")
@click.option("--json", "as_json", is_flag=True, help="Print what was requested as JSON.")
@spool_options
def update_cmd(
    resv: str,
    nice: int | None,
    priority: int | None,
    no_priority: bool,
    as_json: bool,
    spool_dir: str | None,
    config_file: str | None,
) -> int:
    """Change the place of flexible reservation R among the jobs while it waits, as galter changes a job's.

    Only its owner (or root) may; only an admin may raise it (a negative --nice, --priority, --no-priority).
    The daemon ranks it so from its next pass.
    """
    if nice is None and priority is None and not no_priority:
        fail(PROG, "nothing to change: give --nice, --priority or --no-priority", ExitCode.USAGE)
    if priority is not None and no_priority:
        fail(PROG, "--priority and --no-priority: give one", ExitCode.USAGE)
    s = setup(PROG, spool_dir, config_file)
    row, _ = _one(s.spool, resv)
    uid = os.getuid()
    if uid != 0 and row.get("uid") != uid:
        fail(PROG, f"reservation {row['id']}: owned by {row.get('user') or row.get('uid')}")
    if row["state"] != "WAITING" or row.get("start") is not None:
        what = "has a fixed start" if row["state"] == "WAITING" else f"is {row['state']}"
        fail(PROG, f"reservation {row['id']}: {what}; only a waiting flexible reservation has a place among the jobs")
    if priority is not None or no_priority or (nice is not None and nice < 0):
        _admin_only(
            s.spool, uid, "--priority" if priority is not None else "--no-priority" if no_priority else f"--nice {nice}"
        )
    fields: dict[str, Any] = {"id": row["id"]}
    if nice is not None:
        fields["nice"] = nice
    if priority is not None:
        fields["priority"] = priority
    if no_priority:
        fields["unset_priority"] = True
    s.spool.request(ALTER, **fields)
    if as_json:
        click.echo(json.dumps({"update": True, **fields}))
    else:
        click.echo(f"reservation {row['id']}: updating")
    return ExitCode.OK


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()


def _admin_only(spool: Spool, uid: int, what: str) -> None:
    """Refuse ``what`` (a raise of a reservation above others) unless ``uid`` administers the spool."""
    from gridsched.protocol.admin import is_admin

    if not is_admin(uid, spool.root):
        fail(PROG, f"{what}: only an admin may raise a reservation above others", ExitCode.USAGE)


def _floating(spool: Any, cfg: Any) -> dict[str, int]:
    """The floating resources a reservation may hold: the configuration's and the memory pool (``mem``)."""
    from gridsched.core import memory
    from gridsched.submission.submit import machine_memory_of

    pool = memory.pool(machine_memory_of(spool, cfg), cfg.memory_reserved, cfg.default_mem_per_cpu)
    return memory.floating(cfg.floating, pool)
