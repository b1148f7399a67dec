"""Slurm's REASON codes for pending and held jobs: the one table from the core's wait kinds to squeue's words.

The core says why a job waits as a :class:`~gridsched.core.types.WaitKind`;
the daemon words it (:mod:`gridsched.daemon.reasons`, the hold handler, the
core's eligibility texts) and keeps the words as the job's reason.  gstat's
REASON column shows the code of :data:`CODES` for the kind those words tell
(:func:`kind_of`); gstat -f and --json keep the words.  gstat(1) lists every
code with its meaning.
"""

from __future__ import annotations

from .core.types import WaitKind

# WaitKind -> (squeue's code, its meaning for gstat(1))
CODES: dict[WaitKind, tuple[str, str]] = {
    WaitKind.RESOURCES: ("Resources", "next to start, waiting for cores, memory or devices in use to come free"),
    WaitKind.PRIORITY: ("Priority", "jobs ahead of it in the queue start first"),
    WaitKind.DRAINED: ("ReqNodeNotAvail", "it needs cores that are drained (gctl drain)"),
    WaitKind.NEVER_FITS: ("BadConstraints", "the machine in service can never hold what it asks for"),
    WaitKind.BOUND_NEVER: ("BadConstraints", "it can never start in the reservation it is bound to"),
    WaitKind.RESERVATION: ("Reservation", "it is bound to a reservation that is not active yet"),
    WaitKind.HELD: ("JobHeldUser", "held by its owner (JobHeldAdmin: held by an admin); grls releases it"),
    WaitKind.BEGIN_TIME: ("BeginTime", "its begin time (gsub --begin) is still ahead"),
    WaitKind.DEPENDENCY: ("Dependency", "it waits for the jobs it depends on (gsub --dependency)"),
    WaitKind.DEPENDENCY_NEVER: ("DependencyNeverSatisfied", "its dependencies can never be met"),
    WaitKind.ARRAY_LIMIT: ("JobArrayTaskLimit", "its array already runs as many tasks as its %MAX allows"),
}
HELD_ADMIN = "JobHeldAdmin"


def kind_of(state: str, reason: str) -> WaitKind | None:
    """The kind of wait the reason a pending or held job carries tells; None when it tells none."""
    if state == "HELD":
        return WaitKind.HELD
    if state != "PENDING" or not reason:
        return None
    word, colon, _ = reason.partition(": ")
    if colon and word in ("Resources", "Priority", "Reservation"):
        return WaitKind(word)
    if reason.startswith(("can never start while cores", "waiting for cores, while")):
        return WaitKind.DRAINED
    if reason.startswith("can never start in reservation"):
        return WaitKind.BOUND_NEVER
    if reason.startswith("can never start"):
        return WaitKind.NEVER_FITS
    if reason.startswith(("begin time ", "not before ")):
        return WaitKind.BEGIN_TIME
    if reason.startswith("dependency never satisfied"):
        return WaitKind.DEPENDENCY_NEVER
    if reason.startswith("array "):
        return WaitKind.ARRAY_LIMIT
    if reason.startswith(("waiting for dependency", "singleton:")):
        return WaitKind.DEPENDENCY
    return None


def code(state: str, reason: str) -> str:
    """squeue's REASON for a job in ``state`` that carries ``reason``: ``None`` when nothing holds it back."""
    kind = kind_of(state, reason)
    if kind is None:
        return "None" if state in ("PENDING", "HELD") else ""
    if kind is WaitKind.HELD and "admin" in reason:
        return HELD_ADMIN
    return CODES[kind][0]
