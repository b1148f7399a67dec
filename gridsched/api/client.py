"""The Python API: submit, inspect, wait for, change, requeue and cancel jobs without the commands.

    from gridsched.api.client import Client
    c = Client()
    job = c.submit(command="make -j4", ncpus=4, walltime="30m")
    print(c.wait(job.id).state)

It does what gsub, gstat, gdel, galter and grequeue do, through the same
functions (:mod:`gridsched.submission.submit`, :mod:`gridsched.protocol.view`, the commands'
checks) and the same requests, so it refuses the same requests with the same
messages (:class:`GridschedError`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gridsched.core.units import UnitError, parse_duration, parse_size
from gridsched.protocol.config import Config, ConfigError, load
from gridsched.protocol.jobs import TERMINAL, JobState
from gridsched.protocol.spool import Spool, default_root
from gridsched.protocol.view import QueueError, array_rows, control, load_jobs, private
from gridsched.protocol.view import unmade_tasks as view_unmade_tasks
from gridsched.submission.submit import Options, Script, SubmitError, WaitTimeout, decode, submit, wait_job

if TYPE_CHECKING:
    from gridsched.protocol.view import JobRow, ViewRow

__all__ = ["Client", "GridschedError", "Job", "WaitTimeout"]


class GridschedError(Exception):
    """A request that was refused; the message is the one the commands print."""


@dataclass(frozen=True, slots=True)
class Job:
    """One job as the state db (or a submit not yet taken in) shows it."""

    id: int
    name: str
    user: str
    state: JobState
    ncpus: int
    walltime: int
    cores: str
    exit_code: int | None
    exit_signal: int | None
    reason: str
    submit_time: float
    start_time: float | None
    end_time: float | None
    restarts: int
    stdout: str
    stderr: str
    devices: str = ""  # the devices it holds or last held: "gpu:0,1"
    max_rss: int | None = None  # peak memory in bytes, once it has ended (None: not measured)
    cpu_time: float | None = None  # CPU seconds (user and system) of its processes, once it has ended

    @property
    def done(self) -> bool:
        """True once the job has ended (completed, failed, cancelled, timed out, out of memory)."""
        return self.state in TERMINAL

    @classmethod
    def from_row(cls, row: JobRow) -> Job:
        spec = row["spec"]
        return cls(
            id=row["id"],
            name=row["name"],
            user=row["user"],
            state=row["state"],
            ncpus=row["ncpus"],
            walltime=row["walltime"],
            cores=row.get("cores") or "",
            exit_code=row.get("exit_code"),
            exit_signal=row.get("exit_signal"),
            reason=row.get("reason") or "",
            submit_time=row["submit_time"],
            start_time=row.get("start_time"),
            end_time=row.get("end_time"),
            restarts=row.get("restarts", 0),
            stdout=spec.stdout or "",
            stderr=spec.stderr or "",
            devices=row.get("devices") or "",
            max_rss=row.get("max_rss"),
            cpu_time=None
            if row.get("cpu_user") is None and row.get("cpu_sys") is None
            else float(row.get("cpu_user") or 0) + float(row.get("cpu_sys") or 0),
        )


def _signal_and_devices(keys: dict[str, Any]) -> Any:
    """The ``extra`` of :func:`submit` that adds the spec keys ``devices`` and ``signal`` (checked as gsub's
    ``--signal`` against the job's walltime)."""

    def extra(spec: dict[str, Any]) -> dict[str, Any]:
        out = dict(keys)
        if "signal" in out:
            from gridsched.protocol.requests import parse_signal

            try:
                out["signal"] = parse_signal(out["signal"], spec["walltime"]).text()
            except ValueError as e:
                raise SubmitError(f"signal {e}") from None
        return out

    return extra


# What a directive may fill in of a submission: gsub's parameter -> the field of Options
_FROM_DIRECTIVES = {
    "name": "name",
    "ncpus": "ncpus",
    "walltime": "walltime",
    "mem": "mem",
    "output": "output",
    "error": "error",
    "chdir": "chdir",
    "hold": "hold",
    "checkpoint": "checkpoint",
    "depend": "depend",
}


def _with_directives(sc: Script, opts: Options) -> Options:
    """``opts`` with the script's directives filled in where the call left a value out, and the
    shell that runs a script without ``#!`` chosen as gsub chooses it (:func:`.submit.choose_shell`).

    The directives are read as gsub reads them (:mod:`gridsched.submission.directives`), so they
    mean here what they mean to gsub; one gsub cannot take raises :class:`GridschedError` with gsub's
    words."""
    from gridsched.submission import directives
    from gridsched.submission.options import replace
    from gridsched.submission.submit import choose_shell

    found = directives.read(sc)
    p = directives.job_values(found)
    fill: dict[str, Any] = {}
    for param, field in _FROM_DIRECTIVES.items():
        value = p.get(param)
        if value not in (None, False) and getattr(opts, field) in (None, False):
            fill[field] = value
    if p.get("mem") is None and p.get("mem_per_cpu") is not None and opts.mem is None:
        fill["mem"] = p["mem_per_cpu"] * (fill.get("ncpus") or opts.ncpus or 1)
    shell, _notes = choose_shell(sc.text, sc.label, found.dialect, p.get("shell"), os.getuid())
    return replace(opts, **fill, shell=shell)


class Client:
    """A connection to the spool ``spool`` (default: as the commands choose it) with config ``config``."""

    def __init__(self, spool: str | os.PathLike[str] | None = None, config: str | None = None) -> None:
        root = os.fspath(spool) if spool is not None else os.environ.get("GRIDSCHED_SPOOL")
        try:
            self.config: Config = load(config, root)
        except ConfigError as e:
            raise GridschedError(f"config {e}") from None
        if root is None:
            root = os.path.expanduser(self.config.spool) if self.config.spool else str(default_root())
        self.spool = Spool(root)
        self._config_file = config

    # -- submitting ---------------------------------------------------------------
    def submit(
        self,
        script: str | os.PathLike[str] | None = None,
        *,
        command: str | None = None,
        args: list[str] | tuple[str, ...] = (),
        ncpus: int | None = None,
        walltime: str | int | None = None,
        name: str | None = None,
        mem: str | int | None = None,
        output: str | None = None,
        error: str | None = None,
        chdir: str | None = None,
        hold: bool = False,
        checkpoint: str | None = None,
        depend: str | None = None,
        env: dict[str, str] | None = None,
        gpus: int | str | None = None,
        array: str | None = None,
        signal: str | None = None,
    ) -> Job:
        """Submit the script file ``script``, or ``command`` run by /bin/sh; the job as submitted.

        Options are those of gsub (``walltime`` and ``mem`` as gsub takes them,
        or seconds and bytes: a bare number of ``walltime``, even as a string, is
        seconds here, not minutes as for ``gsub -t``; ``gpus`` as ``gsub --gpus``:
        ``2`` or ``"H100:2"``).  Left out (None), ``ncpus`` and ``walltime`` are
        the configuration's defaults, as for gsub.  A script's ``#GS`` (or
        ``#SBATCH``, ``#PBS``) directives are read as gsub reads them, for the
        options this call leaves out, and choose what runs a script without
        ``#!`` on its first line.  ``array`` is ``gsub --array`` (``"0-99%10"``:
        the job is an array, its id the array's; :meth:`array_tasks`), ``signal``
        is ``gsub --signal`` (``"USR1@60"``: that signal 60 seconds before the
        walltime ends).
        """
        if (script is None) == (command is None):
            raise GridschedError("give a script file or a command, not both or neither")
        try:
            if command is not None:
                sc = Script(f"#!/bin/sh\n{command}\n", "command", "wrap")
            else:
                path = Path(script)  # type: ignore[arg-type]
                try:
                    data = path.read_bytes()
                except OSError as e:
                    raise GridschedError(f"{script}: {e.strerror}") from None
                sc = Script(decode(data, str(script)), str(script), path.name)
            wt = walltime if isinstance(walltime, int) or walltime is None else parse_duration(walltime)
            mb = mem if isinstance(mem, int) or mem is None else parse_size(mem)
            if ncpus is not None and ncpus < 1:
                raise GridschedError(f"ncpus {ncpus}: must be at least 1")
            opts = Options(
                name=name,
                ncpus=ncpus,
                walltime=wt,
                mem=mb,
                output=output,
                error=error,
                chdir=chdir,
                hold=hold,
                checkpoint=checkpoint,
                depend=depend,
                array=array,
            )
            if script is not None:
                opts = _with_directives(sc, opts)
            devices: list[dict[str, Any]] = []
            if gpus is not None:
                from gridsched.host.topology import in_force
                from gridsched.submission.devopts import device_spec

                try:
                    devices = device_spec(self.config, in_force(self.spool, self.config), {"gpus": str(gpus)})
                except ValueError as e:
                    raise GridschedError(str(e)) from None
            keys: dict[str, Any] = {"devices": devices} if devices else {}
            if signal is not None:
                keys["signal"] = str(signal)
            extra = _signal_and_devices(keys) if keys else None
            spec = submit(self.spool, self.config, sc, opts, tuple(args), env=env, extra=extra)
        except (SubmitError, UnitError) as e:
            raise GridschedError(str(e)) from None
        self._ensure_daemon()
        return self.status(spec["id"])

    def array_tasks(self, array_id: int) -> dict[int, Job]:
        """The tasks of array ``array_id`` taken in so far, by index ({} while none is, or for no array)."""
        out = {}
        try:
            rows = array_rows(self.spool, array_id)
        except QueueError as e:
            raise GridschedError(str(e)) from None
        for row in rows:
            index = row["spec"].array_index
            if index is not None and row.get("id") is not None:
                out[int(index)] = Job.from_row(private(self.spool, row))
        return out

    def cancel_unmade(self, array_id: int, index: int) -> bool:
        """Cancel task ``index`` of array ``array_id`` if it has not been made yet; whether it was asked."""
        try:
            text, why = view_unmade_tasks(self.spool, array_id, [index], "cancel", os.getuid())
        except QueueError as e:
            raise GridschedError(str(e)) from None
        if not text or why:
            return False
        self._request("cancel", jobs=[], tasks=[[array_id, text]])
        return True

    def _ensure_daemon(self) -> None:
        if self.spool.daemon_info() is None and self.config.autostart:
            from gridsched.protocol.autostart import autostart

            autostart(self.spool, self._config_file)

    # -- reading ----------------------------------------------------------------------
    def _rows(self, ids: list[int] | None = None) -> list[ViewRow]:
        try:
            return [private(self.spool, j) for j in load_jobs(self.spool, ids)]
        except QueueError as e:
            raise GridschedError(str(e)) from None

    def status(self, job_id: int) -> Job:
        """Job ``job_id`` now; :class:`GridschedError` if there is no such job."""
        rows = self._rows([job_id])
        if not rows:
            raise GridschedError(f"job {job_id}: no such job")
        return Job.from_row(rows[0])

    def jobs(self, all: bool = False) -> list[Job]:
        """The jobs in the queue (with ``all``, finished ones too), by id."""
        return [Job.from_row(r) for r in self._rows() if all or r["state"] not in TERMINAL]

    def wait(self, job_id: int, timeout: float | None = None) -> Job:
        """Block until job ``job_id`` has ended; :class:`WaitTimeout` after ``timeout`` seconds."""
        self.status(job_id)
        try:
            row = cast("ViewRow", wait_job(self.spool, job_id, timeout))  # the state db's row: a JobRow
            return Job.from_row(private(self.spool, row))
        except SubmitError as e:
            raise GridschedError(str(e)) from None

    # -- acting -------------------------------------------------------------------------
    def _control(self, kind: str, job_id: int) -> None:
        try:
            _, bad = control(self.spool, kind, [job_id], os.getuid())
        except QueueError as e:
            raise GridschedError(str(e)) from None
        if bad:
            raise GridschedError(f"job {job_id}: {bad[0][1]}")

    def cancel(self, job_id: int) -> None:
        """Cancel job ``job_id`` (as gdel)."""
        self._control("cancel", job_id)

    def hold(self, job_id: int) -> None:
        """Hold the pending job ``job_id`` (as ghold)."""
        self._control("hold", job_id)

    def release(self, job_id: int) -> None:
        """Release the held job ``job_id`` (as grls)."""
        self._control("release", job_id)

    def alter(self, job_id: int, **changes: Any) -> None:
        """Change job ``job_id`` as galter does: the same checks, the same request.

        ``changes`` are keywords of :meth:`submit` and galter's options:
        ``name``, ``ncpus``, ``walltime`` (seconds, or a duration such as
        ``"2h"``), ``mem`` (bytes, or ``"4G"``), ``checkpoint``, ``depend``
        (``""`` clears it), ``reservation``, ``begin`` (seconds since the
        epoch, or one of gsub's forms such as ``"now+1hour"``), ``gpus``,
        ``nice`` and ``priority`` (a negative nice and a priority are an
        admin's).  A pending or held job takes any of them, a running job only
        ``walltime``; the id of an array changes its pending tasks.  The
        daemon applies the change at its next turn; :class:`GridschedError`
        with galter's words for what either would refuse.
        """
        from gridsched.host.topology import in_force
        from gridsched.protocol import requests as rq
        from gridsched.protocol.admin import is_admin
        from gridsched.submission.checks import alter_array_refused, alter_refused

        spec = self._alter_changes(changes)
        uid = os.getuid()
        sender = rq.Sender(uid, str(uid), frozenset(), is_admin(uid, self.spool.root))
        try:
            req = rq.parse({"type": "alter", "jobs": [job_id], "changes": spec}, "alter.json", sender)
            machine = in_force(self.spool, self.config)
        except (rq.Refused, ValueError) as e:
            raise GridschedError(str(e)) from None
        assert isinstance(req, rq.Alter)
        try:
            everyone = {j["id"]: j for j in load_jobs(self.spool)}
            tasks = array_rows(self.spool, job_id)
            if tasks:
                why = alter_array_refused(tasks, req.changes, everyone, sender, machine, self.config.max_walltime)
            else:
                why = alter_refused(
                    everyone.get(job_id), req.changes, everyone, sender, machine, self.config.max_walltime
                )
            if why:
                raise GridschedError(f"job {job_id}: {why}")
            arrays = [job_id] if tasks else []
            self._request("alter", jobs=[] if tasks else [job_id], arrays=arrays, changes=spec)
        except QueueError as e:
            raise GridschedError(str(e)) from None

    def requeue(self, job_id: int) -> None:
        """Send the running or finished job ``job_id`` back to the queue, as grequeue does (the same
        checks, the same request); :class:`GridschedError` with grequeue's words for a refusal."""
        from gridsched.protocol.admin import is_admin
        from gridsched.submission.checks import requeue_refused

        uid = os.getuid()
        rows = self._rows([job_id])
        why = requeue_refused(rows[0] if rows else None, uid, is_admin(uid, self.spool.root))
        if why:
            raise GridschedError(f"job {job_id}: {why}")
        self._request("requeue", jobs=[job_id])

    def _request(self, kind: str, **fields: Any) -> None:
        try:
            self.spool.request(kind, **fields)
        except OSError as e:  # a full or read-only spool
            raise GridschedError(f"cannot write the {kind} request to {self.spool.root}: {e.strerror or e}") from None

    def _alter_changes(self, changes: dict[str, Any]) -> dict[str, Any]:
        """The alter request's ``changes`` (spec keys) for :meth:`alter`'s keywords."""
        unknown = sorted(set(changes) - ALTER_KEYWORDS)
        if unknown:
            raise GridschedError(
                f"alter: cannot change {', '.join(unknown)} (only {', '.join(sorted(ALTER_KEYWORDS))})"
            )
        if not changes:
            raise GridschedError("alter: nothing to change")
        out = {k: v for k, v in changes.items() if k not in ("walltime", "mem", "begin", "reservation", "gpus")}
        try:
            if "walltime" in changes:
                w = changes["walltime"]
                out["walltime"] = w if isinstance(w, int) else parse_duration(str(w))
            if "mem" in changes:
                m = changes["mem"]
                out["mem"] = m if isinstance(m, int) else parse_size(str(m))
        except UnitError as e:
            raise GridschedError(str(e)) from None
        if "reservation" in changes:
            r = changes["reservation"]
            try:
                out["reservation"] = r if isinstance(r, int) else int(str(r).lstrip("R"))
            except ValueError:
                raise GridschedError(f"reservation {r!r}: not a reservation id") from None
        if "begin" in changes:
            b = changes["begin"]
            if isinstance(b, str):
                import time

                from gridsched.submission import compat

                try:
                    b = compat.parse_begin(b, time.time())
                except ValueError as e:
                    raise GridschedError(f"begin {b!r}: {e}") from None
            out["begin"] = b
        if "gpus" in changes:
            from gridsched.host.topology import in_force
            from gridsched.submission.devopts import device_spec

            try:
                out["devices"] = device_spec(
                    self.config, in_force(self.spool, self.config), {"gpus": str(changes["gpus"])}
                )
            except ValueError as e:
                raise GridschedError(str(e)) from None
        return out


# The keywords of Client.alter (galter's options; ``gpus`` as Client.submit's).
ALTER_KEYWORDS = frozenset(
    {"name", "ncpus", "walltime", "mem", "checkpoint", "depend", "reservation", "begin", "gpus", "nice", "priority"}
)
