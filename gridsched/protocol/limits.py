"""Per-user limits and who may reserve: the refusals the commands and the daemon share, in their words.

``[limits]`` of the configuration (as Slurm's QOS and association limits):
``max_submit_jobs_per_user`` (MaxSubmitJobsPerUser: a user's jobs queued, held
or running at once, each array task counting), ``max_array_tasks`` (the tasks of
one array, Slurm's ``max_array_tasks``) and ``max_cpus_per_user``
(MaxTRESPerUser=cpu: the cores a user's running jobs hold together; waiting for
it is decided in the core, :mod:`gridsched.core.eligible`; a job that asks for
more on its own is refused here).  ``[reservations]``: only the admins and the
users named in ``users`` create reservations, the latter within their caps.
0 is no limit.  Each function returns the one-line refusal, or None.
Standard library only: gsub and gresv import it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gridsched.core.units import format_duration

if TYPE_CHECKING:
    from gridsched.protocol.config import Settings


def array_refusal(ntasks: int, cfg: Settings) -> str | None:
    """Why an array of ``ntasks`` tasks is refused under ``limits.max_array_tasks``."""
    cap = cfg.max_array_tasks
    if cap and ntasks > cap:
        return f"array of {ntasks} tasks: at most {cap} tasks per array (limits.max_array_tasks)"
    return None


def cores_refusal(ncpus: int, cfg: Settings) -> str | None:
    """Why a job of ``ncpus`` cores is refused under ``limits.max_cpus_per_user`` (it could never run)."""
    cap = cfg.max_cpus_per_user
    if cap and ncpus > cap:
        return f"job of {ncpus} cores: a user's running jobs may hold at most {cap} (limits.max_cpus_per_user)"
    return None


def queued_refusal(user: str, have: int, adding: int, cfg: Settings) -> str | None:
    """Why ``adding`` more jobs of ``user``, who has ``have`` queued, held or running, are refused under
    ``limits.max_submit_jobs_per_user``."""
    cap = cfg.max_submit_jobs_per_user
    if cap and have + adding > cap:
        more = f"{adding} more" if adding > 1 else "one more"
        return f"{user} has {have} jobs queued or running: {more} would be over {cap} (limits.max_submit_jobs_per_user)"
    return None


def may_reserve(user: str, admin: bool, cfg: Settings) -> bool:
    """Whether ``user`` may create reservations: an admin, or named in ``reservations.users`` ("*": everyone)."""
    return admin or "*" in cfg.resv_users or user in cfg.resv_users


def resv_refusal(user: str, admin: bool, ncpus: int, duration: int, live: Iterable[int], cfg: Settings) -> str | None:
    """Why ``user`` may not create a reservation of ``ncpus`` cores for ``duration`` seconds, holding already
    the live (waiting or active) reservations of ``live`` cores each; None: they may."""
    if not may_reserve(user, admin, cfg):
        return f"{user} may not create reservations: only admins and the users of reservations.users may"
    if admin:
        return None
    held = list(live)
    if cfg.resv_max_per_user and len(held) + 1 > cfg.resv_max_per_user:
        return f"{user} has {len(held)} reservations: at most {cfg.resv_max_per_user} (reservations.max_per_user)"
    cores = cfg.resv_max_cores_per_user
    if cores and sum(held) + ncpus > cores:
        return (
            f"{ncpus} cores more than {user}'s {sum(held)} reserved would be over {cores} "
            "(reservations.max_cores_per_user)"
        )
    longest = cfg.resv_max_duration_per_user
    if longest and duration > longest:
        return (
            f"duration {format_duration(duration)} is longer than {format_duration(longest)} "
            "(reservations.max_duration_per_user)"
        )
    return None
